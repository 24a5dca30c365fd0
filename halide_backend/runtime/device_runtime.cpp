#include "halide_backend/runtime/device_runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include <hjit/error.h>

#include "halide_backend/devices.h"
#include "halide_backend/runtime/linker.h"
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
  const std::string_view object = device_kind(device).runtime_object();
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
  find(handle, device_kind(device).runtime_interface(), get_interface);
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

}  // namespace

const DeviceRuntime& device_runtime(Device device) {
  if (device_kind(device).host()) throw InternalError("hjit: device_runtime asked for the CPU");
  static std::mutex mu;
  // Never destroyed: device memory of tensors that outlive main (globals) is freed through it.
  static auto* runtimes = new std::map<Device, DeviceRuntime>;
  std::lock_guard lock(mu);
  auto it = runtimes->find(device);
  if (it == runtimes->end()) it = runtimes->emplace(device, load(device)).first;
  return it->second;
}


}  // namespace hjit::backend
