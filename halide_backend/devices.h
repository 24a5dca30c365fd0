// What differs between the devices hjit compiles for, one object per device (tinygrad's Compiled
// is the model): its code generation target, its Halide runtime and driver, its device code, its
// memory, and what the backend does for it (partitioning, in-place outputs, fitted parameters,
// dynamic sizes, autoschedulers). Found by hjit::Device or by name; the rest of the library asks
// these objects instead of comparing devices. Halide-free: the frontend asks them too.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <hjit/dtype.h>

#include "halide_backend/backend.h"

namespace hjit::backend {

class DeviceKind {
 public:
  virtual ~DeviceKind() = default;
  virtual Device id() const = 0;
  const char* name() const { return device_name(id()); }  // "cpu", "cuda", "opencl"
  // Whether its code runs on the host CPU and its buffers are host memory.
  virtual bool host() const = 0;

  // Code generation: the Halide target features that follow this machine's CPU target ("" for the
  // CPU; CUDA's names the compute capability, a ValueError for one Halide 14 does not know).
  virtual std::string target_features(int cuda_capability) const = 0;
  // Halide's runtime for its pipelines, compiled at build time. A GPU's is linked and loaded once
  // per process and shared by every pipeline of the device (device memory one writes is memory the
  // next reads); each CPU pipeline links a copy of the CPU's, with hjit's hooks installed.
  virtual std::string_view runtime_object() const = 0;
  bool shares_runtime() const { return !host(); }
  // The runtime's device interface (a symbol of it); "" for the CPU.
  virtual const char* runtime_interface() const = 0;
  // What its kernels' code is and how a file of it ends ("PTX", ".ptx"); "" for the CPU.
  virtual const char* device_code() const = 0;
  virtual const char* device_code_extension() const = 0;
  // For an exported library's header: where its code runs and what it needs there ("" for the CPU).
  virtual const char* export_note() const = 0;

  // Whether this process can run code on it (its driver loads and finds a device, probed once);
  // when not, *why names what is missing.
  bool usable(std::string* why = nullptr) const;
  // Device memory of `bytes` bytes (uninitialized): DeviceError when its driver is missing,
  // OutOfMemoryError when it has no room, InternalError for the CPU (host memory is hjit's).
  std::unique_ptr<DeviceBuffer> allocate(size_t bytes) const;

  // What the backend does for its pipelines:
  // big graphs compile in parts, which meet in host memory (build/partition.h);
  virtual bool partitions() const = 0;
  // an output may be computed into a donated input's buffer (JitOptions::donate);
  virtual bool computes_in_place() const = 0;
  // the built-in schedule takes the fitted model's parameters (fitted on CPU timings);
  virtual bool fitted_params() const = 0;
  // one pipeline serves every size of dynamic dimensions, and graph breaks run their segments;
  virtual bool dynamic_sizes() const = 0;
  // the autoschedulers that schedule it: any (nullptr), or the one named (Halide 14's GPU one).
  virtual const char* only_autoscheduler() const = 0;

 protected:
  // The driver's probe, run once: whether it loads and finds a device.
  virtual bool probe(std::string* why) const = 0;
};

const DeviceKind& device_kind(Device device);
// By name ("cpu", "cuda", "opencl"); null for another.
const DeviceKind* device_kind_named(std::string_view name);

}  // namespace hjit::backend
