// The bytes of Halide's runtime compiled for this machine's architecture and OS (see
// runtime_object.cpp): the CPU's, and with Halide's CUDA or OpenCL device part (each device's
// kind hands its own out: runtime/devices.h).
#pragma once
#include <string_view>

namespace hjit::backend {

std::string_view cpu_runtime_object();
std::string_view cuda_runtime_object();
std::string_view opencl_runtime_object();

}  // namespace hjit::backend
