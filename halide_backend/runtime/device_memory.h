// DeviceBuffer as Halide's device runtime holds it: one allocation of the device's runtime
// (device_runtime.h), handed to pipelines as the device side of their halide_buffer_ts.
#pragma once
#include <HalideRuntime.h>

#include "halide_backend/backend.h"
#include "halide_backend/runtime/device_runtime.h"

namespace hjit::backend {

class HalideDeviceBuffer final : public DeviceBuffer {
 public:
  HalideDeviceBuffer(const DeviceRuntime& runtime, size_t bytes);
  ~HalideDeviceBuffer() override;
  HalideDeviceBuffer(const HalideDeviceBuffer&) = delete;
  HalideDeviceBuffer& operator=(const HalideDeviceBuffer&) = delete;

  Device device() const override { return runtime_.device; }
  size_t bytes() const override { return bytes_; }
  void upload(const void* host) override;
  void download(void* host) const override;
  void copy_from(const DeviceBuffer& src) override;
  void sync() const override;

  // What a pipeline's buffer for these bytes carries.
  uint64_t handle() const { return buf_.device; }
  const halide_device_interface_t* interface() const { return runtime_.interface; }

 private:
  const DeviceRuntime& runtime_;
  size_t bytes_;
  halide_dimension_t dim_{};
  halide_buffer_t buf_{};  // the whole allocation, as one dimension of equal-sized elements
};

// The buffer `b` must be, for a pipeline of `device`: a DeviceError when it lives elsewhere.
const HalideDeviceBuffer& on_device(const DeviceBuffer& b, Device device);

}  // namespace hjit::backend
