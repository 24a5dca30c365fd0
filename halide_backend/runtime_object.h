// The bytes of Halide's runtime compiled for this machine's architecture and OS (see
// runtime_object.cpp).
#pragma once
#include <string_view>

namespace hjit::backend {

// cuda: the runtime with Halide's CUDA device part, for pipelines of Device::CUDA.
std::string_view halide_runtime_object(bool cuda = false);

}  // namespace hjit::backend
