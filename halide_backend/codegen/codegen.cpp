#include "halide_backend/codegen/codegen.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "halide_backend/lowering/lower.h"
#include "halide_backend/codegen/device_pipeline.h"
#include "halide_backend/runtime/device_runtime.h"
#include "halide_backend/devices.h"
#include "halide_backend/runtime/linker.h"
#include "halide_backend/codegen/object_file.h"
#include "halide_backend/runtime/runtime_object.h"
#include "support/child_process.h"
#include "support/log.h"
#include "support/settings.h"


namespace hjit::backend {

std::shared_ptr<void> make_jit_context();  // executable.cpp

namespace {

std::vector<halide_dimension_t> dense_dims(const Shape& shape) {
  std::vector<halide_dimension_t> dims;
  int32_t stride = 1;
  for (int64_t extent : to_halide_order(shape)) {
    dims.push_back(halide_dimension_t{0, int32_t(extent), stride, 0});
    stride *= int32_t(extent);
  }
  return dims;
}

}  // namespace

std::vector<Halide::Argument> halide_arguments(const LoweredPipeline& p) {
  std::vector<Halide::Argument> args;
  for (const Halide::ImageParam& param : p.params)
    if (param.defined()) args.push_back(param);
  for (const Halide::ImageParam& param : p.const_params) args.push_back(param);
  return args;
}

// Halide realizes a pipeline's stages depth first from each output in turn, so the outputs' order
// is the order of the work: in the graph's order (the order eager execution computes them), a
// training step's gradients come as the backward pass reaches them, and each stored value is freed
// at its last reader early, instead of every forward value living until the last gradient (W9 at
// batch 32: 196 MB of temporaries in the caller's order of gradients, see memory_order_outputs in
// tests/test_memory.cpp).
std::vector<size_t> realization_order_of_outputs(const LoweredPipeline& p) {
  std::vector<size_t> order;
  for (size_t k = 0; k < p.outputs.size(); ++k)
    if (p.outputs[k].defined()) order.push_back(k);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p.output_node[a] < p.output_node[b]; });
  return order;
}

std::vector<Halide::Func> defined_outputs(const LoweredPipeline& p) {
  std::vector<Halide::Func> outs;
  for (size_t k : realization_order_of_outputs(p)) outs.push_back(p.outputs[k]);
  return outs;
}

std::string device_code_of(const Halide::Module& module) {
  std::string code;
  for (const Halide::Buffer<>& b : module.buffers()) {
    const std::string& name = b.name();
    const std::string suffix = "_gpu_source_kernels";
    if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const char* bytes = static_cast<const char*>(b.data());
    code.append(bytes, strnlen(bytes, b.size_in_bytes()));
  }
  return code;
}

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A directory of its own under TMPDIR, removed when this goes.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/hjit_build_XXXXXX";
    if (!mkdtemp(templ.data())) throw CompileError("hjit: cannot create a scratch directory under " + templ);
    path = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

PipelineInfo describe(const Graph& g, const LoweredPipeline& p, std::string function, std::string summary,
                      std::string schedule) {
  PipelineInfo info;
  info.function = std::move(function);
  info.summary = std::move(summary);
  info.schedule = std::move(schedule);
  info.min_dynamic_size = p.min_dynamic_size;
  auto add = [&](ArgSpec::From from, int index, const TensorType& t, int node = -1) {
    ArgSpec a;
    a.from = from;
    a.index = index;
    a.type = storage_type(t.dtype);
    a.dims = dense_dims(t.shape);
    if (p.dynamic && node >= 0 && p.dynamic->extent_varies(node)) a.sizes = p.dynamic->extents[size_t(node)];
    info.args.push_back(std::move(a));
  };
  for (size_t i = 0; i < p.params.size(); ++i)
    if (p.params[i].defined()) add(ArgSpec::From::Input, int(i), g.type(g.inputs[i]), g.inputs[i]);
  for (size_t i = 0; i < p.const_params.size(); ++i) {
    add(ArgSpec::From::Constant, int(i), p.const_types[i]);
    const auto* bytes = static_cast<const uint8_t*>(p.const_data[i].data);
    info.constants.push_back(std::make_shared<const std::vector<uint8_t>>(bytes, bytes + p.const_data[i].nbytes));
  }
  for (size_t k : realization_order_of_outputs(p)) add(ArgSpec::From::Output, int(k), g.type(p.output_node[k]), p.output_node[k]);
  return info;
}

Halide::Target code_target(const LoweredPipeline& p, const Target& target, bool jit) {
  Halide::Target t = target.halide(jit, p.graph);
  if (!jit) t = t.with_feature(Halide::Target::NoRuntime);  // the runtime comes from runtime_object.h
  const bool calls_library = std::any_of(p.stages.begin(), p.stages.end(), [](const Stage& s) { return s.is_extern; });
  if (device_kind(target.device()).host() && !p.checks_indices && !calls_library && !p.dynamic)
    t = t.with_feature(Halide::Target::NoAsserts);
  return t;
}

Halide::Target lowering_target(const LoweredPipeline& p, const Target& target, bool jit) {
  const Halide::Target code = code_target(p, target, jit);
  return device_kind(target.device()).host() ? code.with_feature(Halide::Target::NoAsserts) : code;
}

Halide::Module pipeline_module(const LoweredPipeline& p, const Target& target, const std::string& function, bool jit,
                               Buffers buffers) {
  const Halide::Target code = code_target(p, target, jit), lowering = lowering_target(p, target, jit);
  Halide::Module lowered = device_ready_pipeline(defined_outputs(p), lowering, buffers)
                               .compile_to_module(halide_arguments(p), function, lowering);
  if (lowering == code) return lowered;
  Halide::Module m(lowered.name(), code);
  for (const Halide::Buffer<void>& b : lowered.buffers()) m.append(b);
  for (const Halide::Internal::LoweredFunc& f : lowered.functions()) m.append(f);
  for (const Halide::Module& sub : lowered.submodules()) m.append(sub);
  for (const Halide::ExternalCode& e : lowered.external_code()) m.append(e);
  for (const auto& [from, to] : lowered.get_metadata_name_map()) m.remap_metadata_name(from, to);
  m.set_any_strict_float(lowered.any_strict_float());
  return m;
}

std::optional<std::string> compile_shared_object(LoweredPipeline& p, const Target& target, PipelineInfo& info) {
  if (info.computes_nothing()) return std::string();
  if (linker_path().empty()) {
    static std::once_flag warned;
    std::call_once(warned, [] {
      log().warn("hjit: no linker (ld) on PATH: compiling in process, and nothing is kept in the disk cache");
    });
    return std::nullopt;
  }
  Timer t;
  // The runtime: CPU pipelines get a copy of the one compiled at build time; GPU pipelines use
  // their device's runtime, shared by every pipeline of the device (device_runtime.h).
  const Device device = target.device();
  info.device = device;
  Halide::Module module = pipeline_module(p, target, info.function, false);
  info.device_code = device_code_of(module);
  const double lowered_ms = t.ms();
  ScratchDir dir;
  const std::string object = dir.path + "/pipeline.o", so = dir.path + "/pipeline.so";
  std::string runtime = dir.path + "/runtime.o";
  const DeviceKind& kind = device_kind(device);
  if (kind.shares_runtime()) {
    runtime = device_runtime(device).path;  // becomes a DT_NEEDED of the pipeline, found by its soname
  } else {
    std::ofstream out(runtime, std::ios::binary);
    const std::string_view rt = kind.runtime_object();
    out.write(rt.data(), std::streamsize(rt.size()));
  }
  write_object(module, object);
  const double codegen_ms = t.ms();
  std::string output;
  // -Bsymbolic: the pipeline calls its own runtime, whatever other Halide code the process holds.
  const int status = run_program({linker_path(), "-shared", "-Bsymbolic", "-o", so, object, runtime}, &output);
  if (status != 0)
    throw CompileError("hjit: linking " + info.function + " failed (" + linker_path() + " exited with status " +
                       std::to_string(status) + "): " + output);
  std::string bytes = read_file(so);
  log().debug("backend: {} lowered in {:.1f} ms, code generated in {:.1f} ms, linked in {:.1f} ms ({} KiB)", info.function,
              lowered_ms, codegen_ms - lowered_ms, t.ms() - codegen_ms, bytes.size() / 1024);
  return bytes;
}

std::shared_ptr<HalideExecutable> load_shared_object(std::string_view bytes, PipelineInfo info) {
  if (info.computes_nothing()) return std::make_shared<HalideExecutable>(std::move(info), nullptr, nullptr, nullptr);
  // From a private copy of the checked bytes, not from the cache file, which could change under us.
  // (Each copy is a file of its own: the dynamic loader takes a path it has loaded before, such as
  // a reused /proc/self/fd/N, for the object it already has.)
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/hjit_code_XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) throw CompileError("hjit: cannot create a file for compiled code in " + path + ": " + std::strerror(errno));
  bool written = true;
  for (size_t done = 0; written && done < bytes.size();) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    written = n > 0;
    if (written) done += size_t(n);
  }
  close(fd);
  const DeviceKind& kind = device_kind(info.device);
  if (kind.shares_runtime()) device_runtime(info.device);  // loaded first: the pipeline needs it
  void* handle = written ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  std::remove(path.c_str());
  if (!written) throw CompileError("hjit: writing compiled code to " + path + " failed: " + std::strerror(errno));
  if (!handle) throw CompileError(std::string("hjit: loading compiled code failed: ") + dlerror());
  std::shared_ptr<void> code(handle, [](void* h) { dlclose(h); });
  auto fn = reinterpret_cast<ArgvFunction>(dlsym(handle, (info.function + "_argv").c_str()));
  if (!fn) throw CompileError("hjit: compiled code has no function " + info.function + "_argv");
  // (A GPU pipeline's runtime is its device's, whose hooks are set once.)
  if (!kind.shares_runtime()) install_runtime_hooks([&](const char* symbol) { return dlsym(handle, symbol); });
  return std::make_shared<HalideExecutable>(std::move(info), fn, std::move(code), nullptr);
}

std::shared_ptr<HalideExecutable> jit_compile(LoweredPipeline& p, const Target& target, PipelineInfo info) {
  if (info.computes_nothing()) return std::make_shared<HalideExecutable>(std::move(info), nullptr, nullptr, nullptr);
  Halide::Module module = pipeline_module(p, target, info.function, true);
  auto jit = std::make_shared<Halide::Internal::JITModule>(module, module.get_function_by_name(info.function));
  ArgvFunction fn = reinterpret_cast<ArgvFunction>(jit->argv_function());
  return std::make_shared<HalideExecutable>(std::move(info), fn, std::move(jit), make_jit_context());
}

}  // namespace hjit::backend
