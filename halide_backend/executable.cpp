#include "halide_backend/executable.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "halide_backend/lower.h"
#include "support/allocator.h"

namespace hjit::backend {
namespace {

// Per call: the user context Halide's runtime hands to our handlers.
struct CallContext : Halide::JITUserContext {
  std::string error;
};

void on_error(Halide::JITUserContext* ctx, const char* msg) { static_cast<CallContext*>(ctx)->error += msg; }
// Halide's temporaries come from hjit's caching allocator: a call that needs the same buffers as
// the previous one gets them back without page faults.
void* on_malloc(Halide::JITUserContext*, size_t bytes) { return cached_alloc(bytes); }
void on_free(Halide::JITUserContext*, void* p) { cached_free(p); }

// Halide's parallel loops run on OpenMP's threads, the ones the eager kernels use: one pool for
// the whole process. (With two pools, the threads one leaves spinning after its work hold cores
// the other needs: alternating eager ops and compiled calls ran up to twice as slow.)
int on_par_for(Halide::JITUserContext* ctx, int (*f)(Halide::JITUserContext*, int, uint8_t*), int min, int extent,
               uint8_t* closure) {
  int status = 0;
#pragma omp parallel for schedule(static) reduction(| : status) if (extent > 1)
  for (int i = min; i < min + extent; ++i) status |= f(ctx, i, closure);
  return status;
}

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

HalideExecutable::HalideExecutable(const Graph& g, LoweredPipeline p, std::string fn_name, std::string summary,
                                   std::string schedule)
    : name_(std::move(fn_name)), summary_(std::move(summary)), schedule_(std::move(schedule)), constants_(p.const_data),
      target_(p.target) {
  std::vector<std::pair<From, int>> sources;
  std::vector<TensorType> types;
  for (size_t i = 0; i < p.params.size(); ++i)
    if (p.params[i].defined()) {
      pipeline_args_.push_back(p.params[i]);
      sources.emplace_back(From::Input, int(i));
      types.push_back(g.type(g.inputs[i]));
    }
  for (size_t i = 0; i < p.const_params.size(); ++i) {
    pipeline_args_.push_back(p.const_params[i]);
    sources.emplace_back(From::Constant, int(i));
    types.push_back(p.const_types[i]);
  }
  std::vector<Halide::Func> outputs;
  for (size_t k = 0; k < p.outputs.size(); ++k)
    if (p.outputs[k].defined()) {
      outputs.push_back(p.outputs[k]);
      sources.emplace_back(From::Output, int(k));
      types.push_back(g.type(p.output_node[k]));
    }
  dims_.reserve(sources.size());
  for (size_t a = 0; a < sources.size(); ++a) {
    dims_.push_back(dense_dims(types[a].shape));
    Arg arg{sources[a].first, sources[a].second, {}};
    arg.buffer.type = storage_type(types[a].dtype);
    arg.buffer.dimensions = types[a].rank();
    arg.buffer.dim = dims_.back().data();
    args_.push_back(arg);
  }
  Halide::JITHandlers handlers;
  handlers.custom_error = on_error;
  handlers.custom_malloc = on_malloc;
  handlers.custom_free = on_free;
  handlers.custom_do_par_for = on_par_for;
  Halide::Internal::JITSharedRuntime::populate_jit_handlers(&context_, handlers);
  if (outputs.empty()) return;  // every output is empty: nothing to run
  pipeline_ = Halide::Pipeline(outputs);
  Halide::Module module = pipeline_.compile_to_module(pipeline_args_, name_, target_);
  module_ = Halide::Internal::JITModule(module, module.get_function_by_name(name_));
  fn_ = module_.argv_function();
}

void HalideExecutable::run(const void* const* inputs, void* const* outputs) const {
  if (!fn_) return;
  constexpr size_t kInline = 16;
  const size_t n = args_.size();
  halide_buffer_t inline_bufs[kInline];
  const void* inline_argv[kInline + 1];
  std::vector<halide_buffer_t> heap_bufs;
  std::vector<const void*> heap_argv;
  halide_buffer_t* bufs = inline_bufs;
  const void** argv = inline_argv;
  if (n > kInline) heap_bufs.resize(n), heap_argv.resize(n + 1), bufs = heap_bufs.data(), argv = heap_argv.data();
  CallContext ctx;
  static_cast<Halide::JITUserContext&>(ctx) = context_;
  Halide::JITUserContext* ctx_ptr = &ctx;
  argv[0] = &ctx_ptr;
  for (size_t a = 0; a < n; ++a) {
    const Arg& arg = args_[a];
    bufs[a] = arg.buffer;
    const void* host = arg.from == From::Input      ? inputs[arg.index]
                       : arg.from == From::Constant ? constants_[size_t(arg.index)].data
                                                    : outputs[arg.index];
    bufs[a].host = static_cast<uint8_t*>(const_cast<void*>(host));
    argv[a + 1] = &bufs[a];
  }
  int r = fn_(argv);
  if (r == halide_error_code_requirement_failed) {
    const size_t at = ctx.error.find(kIndexErrorMarker);
    if (at != std::string::npos) {
      std::string msg = ctx.error.substr(at + std::strlen(kIndexErrorMarker));
      while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
      throw IndexError(msg.substr(msg.find_first_not_of(' ')));
    }
  }
  if (r != 0)
    throw InternalError("hjit: compiled pipeline " + name_ + " failed (Halide error " + std::to_string(r) + "): " + ctx.error);
}

std::string HalideExecutable::explain() const {
  std::ostringstream os;
  os << "pipeline " << name_ << "\nschedule: " << summary_ << "\n" << schedule_ << "\n";
  if (!fn_) return os.str() + "(no outputs with elements: nothing is computed)\n";
  char path[] = "/tmp/hjit_stmt_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return os.str();
  close(fd);
  {
    std::lock_guard lock(compile_mutex());
    const_cast<Halide::Pipeline&>(pipeline_).compile_to_lowered_stmt(path, pipeline_args_, Halide::Text, target_);
  }
  std::ifstream f(path);
  os << "lowered statement:\n" << f.rdbuf();
  std::remove(path);
  return os.str();
}

}  // namespace hjit::backend
