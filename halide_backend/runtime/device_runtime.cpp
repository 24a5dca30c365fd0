#include "halide_backend/runtime/device_runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include <hjit/error.h>

#include "halide_backend/codegen/codegen.h"
#include "halide_backend/runtime/executable.h"
#include "halide_backend/runtime/runtime_object.h"
#include "support/binary_io.h"
#include "support/child_process.h"
#include "support/log.h"

namespace hjit::backend {
namespace {

// The runtimes' files live in a directory of this process's, removed at exit. Pipelines find their
// runtime by its soname (the dynamic loader matches an object already loaded under that name), so
// the directory is only read while linking.
struct RuntimeDir {
  std::string path;
  RuntimeDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/hjit_runtime_XXXXXX";
    if (mkdtemp(templ.data())) path = templ;
  }
  ~RuntimeDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

template <class F>
void find(void* handle, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  if (!fn) throw CompileError(std::string("hjit: Halide's device runtime has no ") + name);
}

DeviceRuntime load(Device device) {
  static RuntimeDir dir;
  if (dir.path.empty()) throw CompileError("hjit: cannot create a directory for Halide's device runtime under TMPDIR");
  if (!can_link()) throw CompileError("hjit: code for a GPU is linked into shared objects, and this machine has no linker (ld)");
  Timer t;
  const std::string_view object = halide_runtime_object(device);
  // The soname names the runtime's bytes: a pipeline from the disk cache, linked by another build,
  // finds no runtime of that name loaded and fails to load (and is compiled again), never binds
  // to a different runtime.
  const std::string soname = std::string("libhjit_halide_runtime_") + device_name(device) + "_" +
                             hash_hex(object).substr(0, 16) + ".so";
  const std::string o = dir.path + "/" + device_name(device) + ".o";
  DeviceRuntime rt;
  rt.device = device;
  rt.path = dir.path + "/" + soname;
  {
    std::ofstream out(o, std::ios::binary);
    out.write(object.data(), std::streamsize(object.size()));
  }
  std::string output;
  const int status = run_program({linker_path(), "-shared", "-Bsymbolic", "-soname", soname, "-o", rt.path, o}, &output);
  if (status != 0) throw CompileError("hjit: linking Halide's " + std::string(device_name(device)) + " runtime failed: " + output);
  // Never unloaded: device memory and the compiled pipelines of the device depend on it.
  void* handle = dlopen(rt.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) throw CompileError(std::string("hjit: loading Halide's device runtime failed: ") + dlerror());
  install_runtime_hooks([&](const char* symbol) { return dlsym(handle, symbol); });
  const halide_device_interface_t* (*get_interface)() = nullptr;
  find(handle, device == Device::CUDA ? "halide_cuda_device_interface" : "halide_opencl_device_interface", get_interface);
  rt.interface = get_interface();
  find(handle, "halide_device_malloc", rt.device_malloc);
  find(handle, "halide_device_free", rt.device_free);
  find(handle, "halide_copy_to_host", rt.copy_to_host);
  find(handle, "halide_copy_to_device", rt.copy_to_device);
  find(handle, "halide_buffer_copy", rt.buffer_copy);
  find(handle, "halide_device_sync", rt.device_sync);
  // Freed device memory goes back to a pool of the runtime's: eager ops on device tensors allocate
  // and free at every op, which the driver would otherwise do at a millisecond's cost each.
  int (*reuse)(void*, bool) = nullptr;
  find(handle, "halide_reuse_device_allocations", reuse);
  reuse(nullptr, true);
  log().debug("backend: Halide's {} runtime linked and loaded in {:.1f} ms", device_name(device), t.ms());
  return rt;
}

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

}  // namespace

const DeviceRuntime& device_runtime(Device device) {
  if (device == Device::CPU) throw InternalError("hjit: device_runtime asked for the CPU");
  static std::mutex mu;
  // Never destroyed: device memory of tensors that outlive main (globals) is freed through it.
  static auto* runtimes = new std::map<Device, DeviceRuntime>;
  std::lock_guard lock(mu);
  auto it = runtimes->find(device);
  if (it == runtimes->end()) it = runtimes->emplace(device, load(device)).first;
  return it->second;
}

// The driver library is loaded for the whole process, its symbols visible (probe_cuda), once per
// device.
bool device_usable(Device device, std::string* why) {
  struct Probe {
    bool ok = false;
    std::string why;
  };
  static std::mutex mu;
  static std::map<Device, Probe> probes;
  std::lock_guard lock(mu);
  auto it = probes.find(device);
  if (it == probes.end()) {
    Probe p;
    p.ok = device == Device::CPU || (device == Device::CUDA ? probe_cuda(&p.why) : probe_opencl(&p.why));
    it = probes.emplace(device, p).first;
  }
  if (why) *why = it->second.why;
  return it->second.ok;
}

}  // namespace hjit::backend
