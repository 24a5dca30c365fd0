#include "halide_backend/runtime/device_memory.h"

#include <atomic>
#include <climits>
#include <string>

#include <hjit/error.h>

#include "halide_backend/runtime/executable.h"

namespace hjit::backend {
namespace {

std::atomic<int64_t> g_uploads{0}, g_downloads{0}, g_upload_bytes{0}, g_download_bytes{0}, g_allocations{0};

void check(int status, const std::string& error, const char* what, Device device) {
  if (status == halide_error_code_out_of_memory || status == halide_error_code_device_malloc_failed)
    throw OutOfMemoryError(std::string("hjit: ") + what + " on " + device_name(device) + " failed: out of device memory (" +
                           error + ")");
  if (status != 0)
    throw DeviceError(std::string("hjit: ") + what + " on " + device_name(device) + " failed (Halide error " +
                      std::to_string(status) + "): " + error);
}

}  // namespace

HalideDeviceBuffer::HalideDeviceBuffer(const DeviceRuntime& runtime, size_t bytes) : runtime_(runtime), bytes_(bytes) {
  if (bytes == 0) return;  // nothing to allocate: every transfer is empty
  // Halide describes memory in int32 extents: the widest element that divides the size.
  int elem = 8;
  while (elem > 1 && bytes % size_t(elem) != 0) elem /= 2;
  if (bytes / size_t(elem) > size_t(INT32_MAX))
    throw DeviceError("hjit: " + std::to_string(bytes) + " bytes are more than one buffer on " + device_name(device()) +
                      " can hold here (2^31 elements of up to 8 bytes)");
  dim_ = halide_dimension_t{0, int32_t(bytes / size_t(elem)), 1, 0};
  buf_.type = halide_type_t(halide_type_uint, uint8_t(elem * 8), 1);
  buf_.dimensions = 1;
  buf_.dim = &dim_;
  std::string error;
  const int status = call_runtime([&](void* ctx) { return runtime_.device_malloc(ctx, &buf_, runtime_.interface); }, &error);
  check(status, error, ("allocating " + std::to_string(bytes) + " bytes").c_str(), device());
  ++g_allocations;
}

HalideDeviceBuffer::~HalideDeviceBuffer() {
  if (buf_.device) runtime_.device_free(nullptr, &buf_);
}

void HalideDeviceBuffer::upload(const void* host) {
  if (bytes_ == 0) return;
  halide_buffer_t b = buf_;
  b.host = static_cast<uint8_t*>(const_cast<void*>(host));
  b.flags = halide_buffer_flag_host_dirty;
  std::string error;
  check(call_runtime([&](void* ctx) { return runtime_.copy_to_device(ctx, &b, runtime_.interface); }, &error), error,
        "copying to the device", device());
  ++g_uploads;
  g_upload_bytes += int64_t(bytes_);
}

void HalideDeviceBuffer::download(void* host) const {
  if (bytes_ == 0) return;
  halide_buffer_t b = buf_;
  b.host = static_cast<uint8_t*>(host);
  b.flags = halide_buffer_flag_device_dirty;
  std::string error;
  check(call_runtime([&](void* ctx) { return runtime_.copy_to_host(ctx, &b); }, &error), error, "copying from the device",
        device());
  ++g_downloads;
  g_download_bytes += int64_t(bytes_);
}

void HalideDeviceBuffer::copy_from(const DeviceBuffer& src_buffer) {
  const HalideDeviceBuffer& src = on_device(src_buffer, device());
  if (src.bytes_ != bytes_)
    throw InternalError("hjit: device copy of " + std::to_string(src.bytes_) + " bytes into " + std::to_string(bytes_));
  if (bytes_ == 0 || &src == this) return;
  halide_buffer_t from = src.buf_, to = buf_;
  std::string error;
  check(call_runtime([&](void* ctx) { return runtime_.buffer_copy(ctx, &from, runtime_.interface, &to); }, &error), error,
        "copying on the device", device());
}

void HalideDeviceBuffer::sync() const {
  if (bytes_ == 0) return;
  halide_buffer_t b = buf_;
  std::string error;
  check(call_runtime([&](void* ctx) { return runtime_.device_sync(ctx, &b); }, &error), error, "waiting for the device",
        device());
}

const HalideDeviceBuffer& on_device(const DeviceBuffer& b, Device device) {
  if (b.device() != device)
    throw DeviceError(std::string("hjit: memory on ") + device_name(b.device()) + " used by code for " + device_name(device) +
                      "; move the tensor with .to(Device) first");
  return static_cast<const HalideDeviceBuffer&>(b);
}

TransferCounts transfer_counts() {
  TransferCounts c;
  c.uploads = g_uploads, c.downloads = g_downloads, c.upload_bytes = g_upload_bytes, c.download_bytes = g_download_bytes;
  c.allocations = g_allocations;
  return c;
}

}  // namespace hjit::backend
