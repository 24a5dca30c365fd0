#include "halide_backend/devices.h"

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include <hjit/error.h>

#include "halide_backend/runtime/device_memory.h"
#include "halide_backend/runtime/device_runtime.h"
#include "halide_backend/runtime/runtime_object.h"
#include "support/log.h"

namespace hjit::backend {
namespace {

// The driver library, loaded for the whole process with its symbols visible: Halide's runtimes
// look the driver's functions up by name in the process before trying to load it themselves (by a
// name, libcuda.so or libOpenCL.so, that only development packages install).
bool probe_cuda(std::string* why) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return *why = "libcuda.so.1 (NVIDIA's driver) does not load", false;
  auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<int (*)(int*)>(dlsym(lib, "cuDeviceGetCount"));
  int devices = 0;
  if (!init || !count || init(0) != 0 || count(&devices) != 0 || devices == 0)
    return *why = "NVIDIA's driver (libcuda.so.1) loads but finds no GPU", false;
  return true;
}

// OpenCL drivers (ICDs, named in /etc/OpenCL/vendors) that compile kernels with an LLVM of their
// own, as pocl does, must bind to it and not to Halide's LLVM, loaded first: pocl's clang ran LLVM
// 14's verifier from inside LLVM 15 and crashed. Loaded first, with their own symbols first
// (RTLD_DEEPBIND), before the ICD loader asks for them by the same name.
void load_opencl_drivers_deep() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/etc/OpenCL/vendors", ec)) {
    if (e.path().extension() != ".icd") continue;
    std::ifstream in(e.path());
    std::string lib;
    std::getline(in, lib);
    while (!lib.empty() && (lib.back() == ' ' || lib.back() == '\r')) lib.pop_back();
    if (!lib.empty() && !dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND))
      log().debug("device: OpenCL driver {} does not load: {}", lib, dlerror());
  }
}

bool probe_opencl(std::string* why) {
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer ends the process at a dlopen with RTLD_DEEPBIND (its interceptors must come first).
  return *why = "OpenCL drivers are loaded with RTLD_DEEPBIND, which AddressSanitizer does not support: a build with "
                "-DHJIT_SANITIZE=address has no OpenCL", false;
#endif
  load_opencl_drivers_deep();
  void* lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return *why = "libOpenCL.so.1 (an OpenCL ICD loader, e.g. Debian's ocl-icd-libopencl1) does not load", false;
  auto platforms = reinterpret_cast<int32_t (*)(uint32_t, void**, uint32_t*)>(dlsym(lib, "clGetPlatformIDs"));
  auto devices = reinterpret_cast<int32_t (*)(void*, uint64_t, uint32_t, void**, uint32_t*)>(dlsym(lib, "clGetDeviceIDs"));
  void* platform = nullptr;
  uint32_t n_platforms = 0, n_devices = 0;
  constexpr uint64_t kAllDevices = 0xFFFFFFFF;
  if (!platforms || !devices || platforms(1, &platform, &n_platforms) != 0 || n_platforms == 0 ||
      devices(platform, kAllDevices, 0, nullptr, &n_devices) != 0 || n_devices == 0)
    return *why = "libOpenCL.so.1 loads but finds no OpenCL platform with a device (install a driver: a GPU vendor's, "
                  "or Debian's pocl-opencl-icd for the CPU)", false;
  return true;
}

class Cpu final : public DeviceKind {
 public:
  Device id() const override { return Device::CPU; }
  bool host() const override { return true; }
  std::string target_features(int) const override { return ""; }
  std::string_view runtime_object() const override { return cpu_runtime_object(); }
  const char* runtime_interface() const override { return ""; }
  const char* device_code() const override { return ""; }
  const char* device_code_extension() const override { return ""; }
  const char* export_note() const override { return ""; }
  bool partitions() const override { return true; }
  bool computes_in_place() const override { return true; }
  bool fitted_params() const override { return true; }
  bool dynamic_sizes() const override { return true; }
  const char* only_autoscheduler() const override { return nullptr; }

 protected:
  bool probe(std::string*) const override { return true; }
};

// What the GPUs have in common: the host drives them, so values of parts, loop bodies and graph
// breaks would meet in host memory; their pipelines are not partitioned, compute nothing in place,
// and have fixed sizes. Halide 14's GPU autoscheduler is Li2018.
class Gpu : public DeviceKind {
 public:
  bool host() const override { return false; }
  bool partitions() const override { return false; }
  bool computes_in_place() const override { return false; }
  bool fitted_params() const override { return false; }
  bool dynamic_sizes() const override { return false; }
  const char* only_autoscheduler() const override { return "Li2018"; }
};

class Cuda final : public Gpu {
 public:
  Device id() const override { return Device::CUDA; }
  // Halide 14 knows 30, 32, 35, 50, 61, 70, 75, 80 and 86; PTX for 80 and 86 runs on newer GPUs
  // through the driver.
  std::string target_features(int capability) const override {
    for (int known : {30, 32, 35, 50, 61, 70, 75, 80, 86})
      if (capability == known) return "-cuda-cuda_capability_" + std::to_string(capability);
    throw ValueError("hjit: CUDA compute capability " + std::to_string(capability) +
                     " is not one Halide 14 generates code for (30, 32, 35, 50, 61, 70, 75, 80, 86; 80 and 86 run on newer "
                     "GPUs too)");
  }
  std::string_view runtime_object() const override { return cuda_runtime_object(); }
  const char* runtime_interface() const override { return "halide_cuda_device_interface"; }
  const char* device_code() const override { return "PTX"; }
  const char* device_code_extension() const override { return ".ptx"; }
  const char* export_note() const override {
    return "Runs on a CUDA GPU (NVIDIA's driver, libcuda.so.1): pointers are host memory, copied to\n"
           "the device and back by each call.";
  }

 protected:
  bool probe(std::string* why) const override { return probe_cuda(why); }
};

class OpenCL final : public Gpu {
 public:
  Device id() const override { return Device::OpenCL; }
  // cl_doubles: f64 tensors compute in double on the device, as on the CPU.
  std::string target_features(int) const override { return "-opencl-cl_doubles"; }
  std::string_view runtime_object() const override { return opencl_runtime_object(); }
  const char* runtime_interface() const override { return "halide_opencl_device_interface"; }
  const char* device_code() const override { return "OpenCL C"; }
  const char* device_code_extension() const override { return ".cl"; }
  const char* export_note() const override {
    return "Runs on an OpenCL device (an ICD loader, libOpenCL.so.1, and a driver): pointers are\n"
           "host memory, copied to the device and back by each call.";
  }

 protected:
  bool probe(std::string* why) const override { return probe_opencl(why); }
};

const Cpu kCpu;
const Cuda kCuda;
const OpenCL kOpenCL;
const DeviceKind* const kKinds[] = {&kCpu, &kCuda, &kOpenCL};

}  // namespace

const DeviceKind& device_kind(Device device) {
  for (const DeviceKind* k : kKinds)
    if (k->id() == device) return *k;
  throw InternalError("hjit: no device kind for device " + std::to_string(int(device)));
}

const DeviceKind* device_kind_named(std::string_view name) {
  for (const DeviceKind* k : kKinds)
    if (name == k->name()) return k;
  return nullptr;
}

// The driver library is loaded for the whole process, its symbols visible (probe_cuda), once per
// device.
bool DeviceKind::usable(std::string* why) const {
  struct Probe {
    bool ok = false;
    std::string why;
  };
  static std::mutex mu;
  static std::map<Device, Probe> probes;
  std::lock_guard lock(mu);
  auto it = probes.find(id());
  if (it == probes.end()) {
    Probe p;
    p.ok = probe(&p.why);
    it = probes.emplace(id(), p).first;
  }
  if (why) *why = it->second.why;
  return it->second.ok;
}

std::unique_ptr<DeviceBuffer> DeviceKind::allocate(size_t bytes) const {
  if (host()) throw InternalError("hjit: device memory asked of the CPU");
  std::string why;
  if (!usable(&why)) throw DeviceError(std::string("hjit: cannot put a tensor on ") + name() + ": " + why);
  return std::make_unique<HalideDeviceBuffer>(device_runtime(id()), bytes);
}

}  // namespace hjit::backend
