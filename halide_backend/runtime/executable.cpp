#include "halide_backend/runtime/executable.h"

#include <Halide.h>

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <sstream>

#include "halide_backend/runtime/device_memory.h"
#include "halide_backend/runtime/device_runtime.h"
#include "halide_backend/lowering/lowered.h"
#include "support/thread_pool.h"
#include "halide_backend/devices.h"
#include "support/allocator.h"

namespace hjit::backend {
namespace {

// Per call: the user context Halide's runtime hands to our handlers. A JITUserContext, so that
// the same context serves JIT code (which reads the handlers in it) and shared objects (whose
// runtime calls the global hooks below with it).
struct CallContext : Halide::JITUserContext {
  // The first error of the call. Every parallel task that fails reports, at once and from its
  // own thread (a bad index in each of many rows); the first says what went wrong.
  std::mutex error_mutex;
  std::string error;
  // The temporaries Halide allocates for this call (its parallel tasks allocate at once).
  std::atomic<int64_t> temporaries{0}, peak_temporaries{0};
  // An allocation failed. Code compiled without assertions skips what needed it and goes on
  // (device_pipeline.h): the call reports it afterwards.
  std::atomic<bool> out_of_memory{false};
};

void on_error(void* ctx, const char* msg) {
  if (!ctx) return;
  auto* c = static_cast<CallContext*>(ctx);
  std::lock_guard<std::mutex> lock(c->error_mutex);
  if (c->error.empty()) c->error = msg;
}
// Halide's temporaries come from hjit's caching allocator: a call that needs the same buffers as
// the previous one gets them back without page faults.
void* on_malloc(void* ctx, size_t bytes) {
  void* p = nullptr;
  try {
    p = cached_alloc(bytes);
  } catch (...) {
    if (ctx) static_cast<CallContext*>(ctx)->out_of_memory = true;
    return nullptr;  // code with assertions fails the call at once
  }
  if (auto* c = static_cast<CallContext*>(ctx)) {
    const int64_t now = c->temporaries.fetch_add(int64_t(cached_size(p))) + int64_t(cached_size(p));
    int64_t peak = c->peak_temporaries.load();
    while (now > peak && !c->peak_temporaries.compare_exchange_weak(peak, now)) {
    }
  }
  return p;
}
void on_free(void* ctx, void* p) {
  if (auto* c = static_cast<CallContext*>(ctx); c && p) c->temporaries.fetch_sub(int64_t(cached_size(p)));
  cached_free(p);
}

// Halide's parallel loops run on hjit's pool (support/thread_pool.h), the one the eager kernels
// use: one pool for the whole process. (With two pools, the threads one leaves spinning after its
// work hold cores the other needs: alternating eager ops and compiled calls ran up to twice as
// slow.) Neither OpenMP's team nor Halide's own pool serves a machine another process shares: see
// docs/threads.md.
int on_par_for(void* ctx, halide_task_t f, int min, int extent, uint8_t* closure) {
  return parallel_for(f, ctx, min, extent, closure);
}

}  // namespace

int call_runtime(const std::function<int(void* user_context)>& f, std::string* error) {
  CallContext ctx;
  const int status = f(&ctx);
  if (error) *error = ctx.error;
  return status;
}

void install_runtime_hooks(const std::function<void*(const char*)>& find) {
  auto set = [&](const char* name, auto hook) {
    using Setter = decltype(hook) (*)(decltype(hook));
    auto setter = reinterpret_cast<Setter>(find(name));
    if (!setter) throw CompileError(std::string("hjit: compiled code has no Halide runtime (") + name + " is missing)");
    setter(hook);
  };
  set("halide_set_error_handler", &on_error);
  set("halide_set_custom_malloc", &on_malloc);
  set("halide_set_custom_free", &on_free);
  set("halide_set_custom_do_par_for", &on_par_for);
}

std::shared_ptr<void> make_jit_context() {
  auto ctx = std::make_shared<Halide::JITUserContext>();
  Halide::JITHandlers handlers;
  handlers.custom_error = [](Halide::JITUserContext* c, const char* m) { on_error(c, m); };
  handlers.custom_malloc = [](Halide::JITUserContext* c, size_t n) { return on_malloc(c, n); };
  handlers.custom_free = [](Halide::JITUserContext* c, void* p) { on_free(c, p); };
  handlers.custom_do_par_for = [](Halide::JITUserContext* c, int (*f)(Halide::JITUserContext*, int, uint8_t*), int min,
                                  int extent, uint8_t* closure) {
    return on_par_for(c, reinterpret_cast<halide_task_t>(f), min, extent, closure);
  };
  Halide::Internal::JITSharedRuntime::populate_jit_handlers(ctx.get(), handlers);
  return ctx;
}

bool PipelineInfo::computes_nothing() const {
  for (const ArgSpec& a : args)
    if (a.from == ArgSpec::From::Output) return false;
  return true;
}

HalideExecutable::HalideExecutable(PipelineInfo info, ArgvFunction fn, std::shared_ptr<void> code,
                                   std::shared_ptr<void> jit_context)
    : info_(std::move(info)), fn_(fn), code_(std::move(code)), jit_context_(std::move(jit_context)) {}

void Executable::run_on_device(const DeviceBuffer* const*, DeviceBuffer* const*) const {
  throw InternalError("hjit: run_on_device called on code compiled for the CPU");
}

// One call: the argument buffers from `fill` (which sets host or device memory of each), the
// function, and Halide's status turned into hjit's errors.
template <class Fill, class After>
void HalideExecutable::call(Fill fill, After after, const std::vector<int64_t>* symbols) const {
  if (!fn_) return;
  std::string why;
  if (!device_kind(info_.device).usable(&why))
    throw DeviceError("hjit: " + info_.function + " is compiled for " + device_name(info_.device) + ", and this process " +
                      "cannot run it: " + why + "; run it where the device is, or compile for Device::CPU");
  constexpr size_t kInline = 16;
  const size_t n = info_.args.size();
  halide_buffer_t inline_bufs[kInline];
  void* inline_argv[kInline + 1];
  std::vector<halide_buffer_t> heap_bufs;
  std::vector<void*> heap_argv;
  halide_buffer_t* bufs = inline_bufs;
  void** argv = inline_argv;
  if (n > kInline) heap_bufs.resize(n), heap_argv.resize(n + 1), bufs = heap_bufs.data(), argv = heap_argv.data();
  CallContext ctx;
  if (jit_context_) static_cast<Halide::JITUserContext&>(ctx) = *static_cast<const Halide::JITUserContext*>(jit_context_.get());
  void* ctx_ptr = &ctx;
  argv[0] = &ctx_ptr;
  std::vector<std::vector<halide_dimension_t>> sized;  // dynamic sizes: this call's dims
  if (symbols) sized.resize(n);
  for (size_t a = 0; a < n; ++a) {
    const ArgSpec& arg = info_.args[a];
    halide_buffer_t& b = bufs[a];
    b = halide_buffer_t{};
    b.type = arg.type;
    b.dimensions = int32_t(arg.dims.size());
    b.dim = const_cast<halide_dimension_t*>(arg.dims.data());
    if (symbols && !arg.sizes.empty()) {
      int32_t stride = 1;
      for (auto it = arg.sizes.rbegin(); it != arg.sizes.rend(); ++it) {
        const int32_t extent = int32_t(it->at(*symbols));
        sized[a].push_back(halide_dimension_t{0, extent, stride, 0});
        stride *= extent;
      }
      b.dim = sized[a].data();
    }
    if (arg.from == ArgSpec::From::Constant) {
      // Hidden inputs are host memory: a GPU pipeline copies them over when marked newer there.
      b.host = const_cast<uint8_t*>(info_.constants[size_t(arg.index)]->data());
      b.flags = halide_buffer_flag_host_dirty;
    } else {
      fill(arg, b);
    }
    argv[a + 1] = &b;
  }
  // Which buffers came with device memory: the call frees only what it allocated.
  uint64_t given_inline[kInline];
  std::vector<uint64_t> given_heap;
  uint64_t* given = n > kInline ? (given_heap.resize(n), given_heap.data()) : given_inline;
  for (size_t a = 0; a < n; ++a) given[a] = bufs[a].device;
  int r = fn_(argv);
  const int64_t temporaries = ctx.peak_temporaries.load();
  int64_t most = peak_temporaries_.load();
  while (temporaries > most && !peak_temporaries_.compare_exchange_weak(most, temporaries)) {
  }
  if (info_.on_gpu()) {
    const DeviceRuntime& rt = device_runtime(info_.device);
    if (r == 0) r = after(rt, ctx_ptr, bufs);
    // Device memory the call allocated (for hidden inputs, host operands) is released.
    for (size_t a = 0; a < n; ++a)
      if (bufs[a].device && bufs[a].device != given[a]) rt.device_free(ctx_ptr, &bufs[a]);
  }
  if (r == halide_error_code_requirement_failed) {
    const size_t at = ctx.error.find(kIndexErrorMarker);
    if (at != std::string::npos) {
      std::string msg = ctx.error.substr(at + std::strlen(kIndexErrorMarker));
      while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
      throw IndexError(msg.substr(msg.find_first_not_of(' ')));
    }
  }
  if (r == halide_error_code_out_of_memory || ctx.out_of_memory) throw OutOfMemoryError("hjit: compiled pipeline " + info_.function + " ran out of memory");
  if (r != 0 && info_.on_gpu())
    throw DeviceError("hjit: compiled pipeline " + info_.function + " failed on " + device_name(info_.device) +
                      " (Halide error " + std::to_string(r) + "): " + ctx.error);
  if (r != 0)
    throw InternalError("hjit: compiled pipeline " + info_.function + " failed (Halide error " + std::to_string(r) +
                        "): " + ctx.error);
}

void HalideExecutable::run(const void* const* inputs, void* const* outputs) const { run_sized(inputs, outputs, {}); }

void HalideExecutable::run_sized(const void* const* inputs, void* const* outputs, const std::vector<int64_t>& symbols) const {
  call(
      [&](const ArgSpec& arg, halide_buffer_t& b) {
        const void* host = arg.from == ArgSpec::From::Input ? inputs[arg.index] : outputs[arg.index];
        b.host = static_cast<uint8_t*>(const_cast<void*>(host));
        // A GPU pipeline copies an operand to the device only when its host copy is marked newer.
        if (arg.from == ArgSpec::From::Input) b.flags = halide_buffer_flag_host_dirty;
      },
      [&](const DeviceRuntime& rt, void* ctx, halide_buffer_t* bufs) {
        // GPU pipelines: outputs come back to the host.
        for (size_t a = 0; a < info_.args.size(); ++a)
          if (info_.args[a].from == ArgSpec::From::Output && bufs[a].device)
            if (int r = rt.copy_to_host(ctx, &bufs[a])) return r;
        return 0;
      },
      symbols.empty() ? nullptr : &symbols);
}

void HalideExecutable::run_on_device(const DeviceBuffer* const* inputs, DeviceBuffer* const* outputs) const {
  if (!info_.on_gpu()) Executable::run_on_device(inputs, outputs);
  constexpr size_t kSmallInput = 256;
  // Host memory for each buffer too, from the caching allocator, used only where a stage reads or
  // writes on the host (the index checks of gather read indices there): Halide copies into it on
  // demand, and what a host stage wrote goes up again after the call.
  CachedBlocks host_copies(info_.args.size());
  std::vector<void*>& scratch = host_copies.slots;
  call(
      [&](const ArgSpec& arg, halide_buffer_t& b) {
        const DeviceBuffer* d = arg.from == ArgSpec::From::Input ? inputs[arg.index] : outputs[arg.index];
        if (!d || d->bytes() == 0) return;  // no elements: the pipeline touches none
        const HalideDeviceBuffer& mem = on_device(*d, info_.device);
        b.device = mem.handle();
        b.device_interface = mem.interface();
        void*& host = scratch[size_t(&arg - info_.args.data())];
        host = cached_alloc(d->bytes());
        b.host = static_cast<uint8_t*>(host);
        if (arg.from != ArgSpec::From::Input) return;
        b.flags = halide_buffer_flag_device_dirty;
        // Halide 14 evaluates bounds that depend on a loop-invariant index (a 0-d take) from the
        // index's host memory before it copies the index down: small integer inputs come down first.
        if (arg.type.code != halide_type_float && d->bytes() <= kSmallInput) d->download(host), b.flags = 0;
      },
      [&](const DeviceRuntime& rt, void* ctx, halide_buffer_t* bufs) {
        for (size_t a = 0; a < info_.args.size(); ++a)
          if (info_.args[a].from == ArgSpec::From::Output && (bufs[a].flags & halide_buffer_flag_host_dirty))
            if (int r = rt.copy_to_device(ctx, &bufs[a], rt.interface)) return r;
        return 0;
      });
}

std::string HalideExecutable::explain() const {
  std::ostringstream os;
  os << "pipeline " << info_.function << "\nschedule: " << info_.summary << "\n" << info_.schedule << "\n";
  if (!fn_) return os.str() + "(no outputs with elements: nothing is computed)\n";
  if (const DeviceKind& kind = device_kind(info_.device); !kind.host())
    os << "device code (" << kind.device_code() << ", " << info_.device_code.size() << " bytes):\n" << info_.device_code << "\n";
  os << "lowered statement:\n" << (statement_ && source_ ? statement_(*source_) : std::string("(not available)\n"));
  return os.str();
}

}  // namespace hjit::backend
