// A pipeline's Halide module written as an object file, for this machine's CPU.
#pragma once
#include <string>

namespace Halide {
class Module;
}

namespace hjit::backend {

// module.compile() to an object file, except that code for Halide 14's avx512_sapphirerapids on a
// CPU without AVX512-FP16 (AMD Zen 4, Zen 5) is generated without the instructions that CPU lacks
// (see object_file.cpp). Throws Halide::Error as module.compile() does.
void write_object(const Halide::Module& module, const std::string& path);

// Whether this CPU executes AVX512-FP16 (CPUID leaf 7, EDX bit 23).
bool cpu_has_avx512_fp16();

}  // namespace hjit::backend
