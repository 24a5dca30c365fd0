// One Halide device runtime per GPU device for the whole process. Every pipeline compiled for a
// device is linked against that device's runtime (a shared object hjit writes once per process),
// so they share one driver context, one device allocator and one kernel cache, and device memory
// one pipeline writes is memory the next one reads: what lets tensors stay on the device between
// calls. (Each CPU pipeline keeps its own copy of the CPU runtime: see runtime_object.cpp.)
#pragma once
#include <string>

#include <HalideRuntime.h>

#include <hjit/dtype.h>

namespace hjit::backend {

struct DeviceRuntime {
  Device device = Device::CPU;
  std::string path;    // the runtime's shared object, which GPU pipelines are linked against
  const halide_device_interface_t* interface = nullptr;
  int (*device_malloc)(void*, halide_buffer_t*, const halide_device_interface_t*) = nullptr;
  int (*device_free)(void*, halide_buffer_t*) = nullptr;
  int (*copy_to_host)(void*, halide_buffer_t*) = nullptr;
  int (*copy_to_device)(void*, halide_buffer_t*, const halide_device_interface_t*) = nullptr;
  int (*buffer_copy)(void*, halide_buffer_t*, const halide_device_interface_t*, halide_buffer_t*) = nullptr;
  int (*device_sync)(void*, halide_buffer_t*) = nullptr;
};

// The runtime for `device` (CUDA or OpenCL), linked and loaded on first use. Needs no driver:
// code for a device compiles and links without one. Throws CompileError when it cannot be linked
// or loaded (no linker). (Whether the device's driver is there: its kind's usable(), devices.h.)
const DeviceRuntime& device_runtime(Device device);

}  // namespace hjit::backend
