// The target as data: the Halide target string code is compiled for. It is part of every cache
// key; the features hjit adds for its own calling convention (user_context, JIT) are not in it.
#pragma once
#include <string>

#include <hjit/graph.h>

#include "halide_backend/devices.h"

namespace Halide {
struct Target;
}

namespace hjit::backend {

class Target {
 public:
  // This machine's CPU as Halide detects it, less what it cannot run (see target.cpp); for
  // Device::CUDA, with Halide's CUDA backend at the given compute capability (Halide 14 knows 30,
  // 32, 35, 50, 61, 70, 75, 80 and 86; PTX for 80 and 86 runs on newer GPUs through the driver);
  // for Device::OpenCL, with Halide's OpenCL backend and doubles.
  // Throws ValueError for a capability Halide does not know.
  static Target host(Device device, int cuda_capability = kDefaultCudaCapability);
  static constexpr int kDefaultCudaCapability = 80;

  // The device its code runs on: CUDA or OpenCL when it has that GPU feature, else the CPU; and
  // what differs for that device (runtime/devices.h).
  Device device() const;
  const DeviceKind& kind() const { return device_kind(device()); }
  // Any Halide target string ("host", "x86-64-linux-avx2", "host-cuda-cuda_capability_80"). Throws
  // ValueError naming the string when Halide does not know it.
  static Target parse(const std::string& s);

  const std::string& str() const { return str_; }
  bool operator==(const Target& o) const { return str_ == o.str_; }
  // For Halide: with user_context (hjit's calls pass one), and JIT when compiling in process; for
  // the code of graph g where given (its features depend on what g computes: see target.cpp).
  Halide::Target halide(bool jit, const Graph* g = nullptr) const;

 private:
  std::string str_;
};

}  // namespace hjit::backend
