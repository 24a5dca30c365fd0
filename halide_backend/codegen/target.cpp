#include "halide_backend/codegen/target.h"

#include <Halide.h>
#include <cpuid.h>

#include <string>

#include <hjit/error.h>

#include "halide_backend/devices.h"

namespace hjit::backend {
namespace {

// Whether the CPU executes AVX512-FP16 (CPUID leaf 7, EDX bit 23).
bool cpu_has_avx512_fp16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 23));
}


}  // namespace

Target Target::host(Device device, int cuda_capability) {
  Halide::Target t = Halide::get_host_target();
  // Halide 14 reports avx512_sapphirerapids on AMD Zen 4, whose AVX-512 has BF16 and VNNI but no
  // FP16: code for it uses AVX512-FP16 instructions on f16 values and dies with SIGILL there.
  if (t.has_feature(Halide::Target::AVX512_SapphireRapids) && !cpu_has_avx512_fp16())
    t = t.without_feature(Halide::Target::AVX512_SapphireRapids);
  // hjit never calls a pipeline in bounds-query mode (its buffers are always dense and allocated):
  // without that code path, W9 lowers in 1.08 s instead of 1.2 s. (DisableLLVMLoopOpt saved as
  // much again, but made W6 50% slower; NoAsserts saved 0.7 s of W9's 2 s, but also drops the
  // checks behind IndexError and the null checks of heap allocations.)
  t = t.with_feature(Halide::Target::NoBoundsQuery);
  Target out;
  out.str_ = Halide::Target(t.to_string() + device_kind(device).target_features(cuda_capability)).to_string();
  return out;
}

Target Target::parse(const std::string& s) {
  if (!Halide::Target::validate_target_string(s))
    throw ValueError("hjit: '" + s + "' is not a Halide target string (e.g. host, x86-64-linux-avx2, host-cuda)");
  Target out;
  out.str_ = Halide::Target(s).to_string();
  return out;
}

Device Target::device() const {
  const Halide::Target t(str_);
  return t.has_feature(Halide::Target::CUDA) ? Device::CUDA : t.has_feature(Halide::Target::OpenCL) ? Device::OpenCL : Device::CPU;
}

Halide::Target Target::halide(bool jit) const {
  Halide::Target t(str_);
  t = t.with_feature(Halide::Target::UserContext);
  return jit ? t.with_feature(Halide::Target::JIT) : t;
}

}  // namespace hjit::backend
