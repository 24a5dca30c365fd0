// The bytes of Halide's runtime compiled for this machine's architecture and OS (see
// runtime_object.cpp).
#pragma once
#include <string_view>

#include <hjit/dtype.h>

namespace hjit::backend {

// The runtime for code of `device`: the CPU runtime, or with Halide's CUDA or OpenCL device part.
std::string_view halide_runtime_object(Device device = Device::CPU);

}  // namespace hjit::backend
