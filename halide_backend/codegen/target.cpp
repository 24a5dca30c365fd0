#include "halide_backend/codegen/target.h"

#include <Halide.h>

#include <string>

#include <hjit/error.h>

#include "halide_backend/codegen/object_file.h"
#include "halide_backend/devices.h"
#include "support/settings.h"

namespace hjit::backend {
namespace {

// Whether g's code computes dot products of 8-bit integers or of bf16 values, which VNNI's vpdpbusd
// and AVX512_BF16's vdpbf16ps compute: Halide 14 emits them only with avx512_sapphirerapids.
bool wants_dot_products(const Graph& g) {
  for (const Node& n : g.nodes)
    if (n.op == OpKind::IntMatmul || n.op == OpKind::IntConv2d || n.op == OpKind::IntDepthwise2d || ((n.op == OpKind::Matmul || n.op == OpKind::Conv2d) && n.type.dtype == DType::BF16)) return true;
  return false;
}

}  // namespace

Target Target::host(Device device, int cuda_capability) {
  Halide::Target t = Halide::get_host_target();
  // Halide 14 reports avx512_sapphirerapids on AMD Zen 4 and Zen 5, whose AVX-512 has BF16 and VNNI
  // but no FP16. The feature stays in the target's name (the cache keys tell such a CPU from one
  // without VNNI) and is taken out of the code of every pipeline that does not want it (halide()).
  // hjit never calls a pipeline in bounds-query mode (its buffers are always dense and allocated):
  // without that code path, W9 lowers in 1.08 s instead of 1.2 s. (DisableLLVMLoopOpt saved as
  // much again, but made W6 50% slower; NoAsserts saved 0.7 s of W9's 2 s, but also drops the
  // checks behind IndexError and the null checks of heap allocations.)
  t = t.with_feature(Halide::Target::NoBoundsQuery);
  // (In the target's name, so in the cache keys: profiled code is never served unasked.)
  if (device == Device::CPU && setting::flag(setting::Id::Profile)) t = t.with_feature(Halide::Target::Profile);
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

Halide::Target Target::halide(bool jit, const Graph* g) const {
  Halide::Target t(str_);
  // Where the CPU lacks AVX512-FP16 (Zen 4, Zen 5), LLVM's sapphirerapids would use it (and other
  // instructions such CPUs lack): only the code of pipelines that compute dot products keeps the
  // feature, written as an object file without those instructions (object_file.cpp); Halide's JIT
  // cannot be told, and never gets it.
  // (A GPU pipeline's dot products run on the GPU: its host code keeps the plain target.)
  if (t.has_feature(Halide::Target::AVX512_SapphireRapids) && !cpu_has_avx512_fp16() &&
      (jit || !g || !wants_dot_products(*g) || t.has_gpu_feature()))
    t = t.without_feature(Halide::Target::AVX512_SapphireRapids);
  t = t.with_feature(Halide::Target::UserContext);
  return jit ? t.with_feature(Halide::Target::JIT) : t;
}

}  // namespace hjit::backend
