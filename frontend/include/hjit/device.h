// Devices: whether one can be used here, and how many bytes went between host and device.
// Tensors move with Tensor::to(Device); hjit::jit(fn, {.device = ...}) compiles for a device.
#pragma once
#include <cstdint>
#include <string>

#include <hjit/dtype.h>

namespace hjit {

// Whether this process can run code on `device` (the CPU always; a GPU when its driver loads and
// finds a device). When not, *why names what is missing.
bool device_available(Device device, std::string* why = nullptr);

struct DeviceStats {
  int64_t uploads = 0, downloads = 0;             // copies host -> device, device -> host
  int64_t upload_bytes = 0, download_bytes = 0;
  int64_t allocations = 0;                        // device buffers allocated
};
// Since the process started: a program whose tensors stay on the device sees these stand still.
DeviceStats device_stats();

}  // namespace hjit
