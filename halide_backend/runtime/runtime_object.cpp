// Halide's runtime as an object file, compiled at build time (make_runtime_object.cpp) and kept
// in libhjit as bytes: every CPU pipeline hjit links gets its own copy, bound to itself
// (-Bsymbolic). Exporting one runtime from libhjit instead would interpose on other Halide code in
// the process: the Adams2019 plugin's cost model then ran its parallel loops through hjit's hooks.
#include "halide_backend/runtime/runtime_object.h"

__asm__(".section .rodata\n"
        ".balign 64\n"
        ".globl hjit_halide_runtime_begin\n"
        ".hidden hjit_halide_runtime_begin\n"
        "hjit_halide_runtime_begin:\n"
        ".incbin \"" HJIT_HALIDE_RUNTIME_OBJECT "\"\n"
        ".globl hjit_halide_runtime_end\n"
        ".hidden hjit_halide_runtime_end\n"
        "hjit_halide_runtime_end:\n"
        ".balign 64\n"
        ".globl hjit_halide_runtime_cuda_begin\n"
        ".hidden hjit_halide_runtime_cuda_begin\n"
        "hjit_halide_runtime_cuda_begin:\n"
        ".incbin \"" HJIT_HALIDE_RUNTIME_CUDA_OBJECT "\"\n"
        ".globl hjit_halide_runtime_cuda_end\n"
        ".hidden hjit_halide_runtime_cuda_end\n"
        "hjit_halide_runtime_cuda_end:\n"
        ".balign 64\n"
        ".globl hjit_halide_runtime_opencl_begin\n"
        ".hidden hjit_halide_runtime_opencl_begin\n"
        "hjit_halide_runtime_opencl_begin:\n"
        ".incbin \"" HJIT_HALIDE_RUNTIME_OPENCL_OBJECT "\"\n"
        ".globl hjit_halide_runtime_opencl_end\n"
        ".hidden hjit_halide_runtime_opencl_end\n"
        "hjit_halide_runtime_opencl_end:\n"
        ".previous\n");

extern "C" const char hjit_halide_runtime_begin[];
extern "C" const char hjit_halide_runtime_end[];
extern "C" const char hjit_halide_runtime_cuda_begin[];
extern "C" const char hjit_halide_runtime_cuda_end[];
extern "C" const char hjit_halide_runtime_opencl_begin[];
extern "C" const char hjit_halide_runtime_opencl_end[];

namespace hjit::backend {

namespace {
std::string_view bytes(const char* begin, const char* end) { return std::string_view(begin, size_t(end - begin)); }
}  // namespace

std::string_view cpu_runtime_object() { return bytes(hjit_halide_runtime_begin, hjit_halide_runtime_end); }
std::string_view cuda_runtime_object() { return bytes(hjit_halide_runtime_cuda_begin, hjit_halide_runtime_cuda_end); }
std::string_view opencl_runtime_object() { return bytes(hjit_halide_runtime_opencl_begin, hjit_halide_runtime_opencl_end); }

}  // namespace hjit::backend
