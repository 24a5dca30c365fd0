// The C wrapper of an exported library: Halide buffers around the caller's pointers, the steps of
// the plan run in order with the values between them allocated just before the step that writes
// them and freed after the last that reads them (as a partitioned executable runs them), errors
// as return codes.
#include <cstring>
#include <sstream>

#include <HalideRuntime.h>

#include "halide_backend/export/library.h"
#include "halide_backend/lowering/lowered.h"

namespace hjit::backend {
namespace {

class Wrapper {
 public:
  Wrapper(const ExportPlan& plan, const std::vector<CArg>& args, const ExportRequest& r)
      : plan_(plan), args_(args), name_(r.name), n_inputs_(count_inputs(args)) {}

  std::string text() {
    prelude();
    main_entry();
    argv_entry();
    if (!plan_.target.kind().host() && plan_.steps.size() == 1) buffers_entry();
    return c_.str();
  }

 private:
  static size_t count_inputs(const std::vector<CArg>& args) {
    size_t n = 0;
    for (const CArg& a : args) n += !a.output;
    return n;
  }

  std::string constant(size_t pipeline, int index) const {
    return "hjit_" + plan_.pipelines[pipeline].function + "_c" + std::to_string(index);
  }

  // Temporaries and the values between steps come from a cache of freed blocks, as hjit's own
  // allocator serves its pipelines: a call's large temporaries are then memory the previous call
  // touched, not fresh pages (softmax of 4096 x 1024 took 4.6 times as long with each 16 MB
  // temporary from malloc). The pipelines are hjit's code, which does the work of a temporary only
  // where its allocation succeeded and leaves the report to the allocator: failures are counted.
  std::string allocator() const {
    std::string c = R"(#include <pthread.h>
#define HJIT_SLOTS 32
static pthread_mutex_t hjit_NAME_mutex = PTHREAD_MUTEX_INITIALIZER;
static void* hjit_NAME_blocks[HJIT_SLOTS];
static int hjit_NAME_failed_allocations;
/* A block: its size in the 128 bytes before what the caller gets (128-byte aligned). */
static void* hjit_NAME_alloc(size_t n) {
  n = (n + 127) / 128 * 128;
  pthread_mutex_lock(&hjit_NAME_mutex);
  for (int i = 0; i < HJIT_SLOTS; ++i) {
    char* b = (char*)hjit_NAME_blocks[i];
    if (b && *(size_t*)(b - 128) == n) {
      hjit_NAME_blocks[i] = NULL;
      pthread_mutex_unlock(&hjit_NAME_mutex);
      return b;
    }
  }
  pthread_mutex_unlock(&hjit_NAME_mutex);
  char* b = (char*)aligned_alloc(128, n + 128);
  if (!b) {
    __atomic_add_fetch(&hjit_NAME_failed_allocations, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  *(size_t*)b = n;
  return b + 128;
}
static void hjit_NAME_release(void* p) {
  if (!p) return;
  pthread_mutex_lock(&hjit_NAME_mutex);
  for (int i = 0; i < HJIT_SLOTS; ++i)
    if (!hjit_NAME_blocks[i]) {
      hjit_NAME_blocks[i] = p;
      pthread_mutex_unlock(&hjit_NAME_mutex);
      return;
    }
  pthread_mutex_unlock(&hjit_NAME_mutex);
  free((char*)p - 128);
}
/* Blocks kept for the next call go back to the system when the caller asks, and when the
   library is unloaded or the process ends, so that nothing it holds outlives it. */
void NAME_release_memory(void) {
  pthread_mutex_lock(&hjit_NAME_mutex);
  for (int i = 0; i < HJIT_SLOTS; ++i)
    if (hjit_NAME_blocks[i]) {
      free((char*)hjit_NAME_blocks[i] - 128);
      hjit_NAME_blocks[i] = NULL;
    }
  pthread_mutex_unlock(&hjit_NAME_mutex);
}
static void* hjit_NAME_malloc(void* ctx, size_t n) { (void)ctx; return hjit_NAME_alloc(n); }
static void hjit_NAME_free(void* ctx, void* p) { (void)ctx; hjit_NAME_release(p); }

)";
    // A CPU library's parallel loops run on hjit's pool, as hjit runs them (runtime/executable.cpp):
    // hjit's schedules, tuned on that runtime, ran softmax 4096 x 1024 4.5 times as long on
    // Halide's own thread pool with 2 threads as with one.
    const bool host = plan_.target.kind().host();
    if (host) c += c_thread_pool();
    c += R"(__attribute__((destructor)) static void hjit_NAME_unload(void) {
)";
    if (host) c += "  hjit_NAME_stop_pool();\n";
    c += "  NAME_release_memory();\n}\n\n";
    for (size_t at = 0; (at = c.find("NAME", at)) != std::string::npos; at += name_.size()) c.replace(at, 4, name_);
    return c;
  }

  void prelude() {
    c_ << "#define _GNU_SOURCE\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <HalideRuntime.h>\n#include \"" << name_
       << ".h\"\n\n"
       // Halide's default error handler aborts the process: the header promises an error code.
       << "/* An index out of range reads as eager's IndexError; other errors as Halide's runtime words them. */\n"
       << "static void hjit_print_error(void* ctx, const char* msg) {\n  (void)ctx;\n"
       << "  const char* index = strstr(msg, \"" << kIndexErrorMarker << "\");\n"
       << "  if (index) fprintf(stderr, \"IndexError: %s\\n\", index + " << std::strlen(kIndexErrorMarker) << ");\n"
       << "  else fprintf(stderr, \"%s\\n\", msg);\n}\n\n"
       << allocator();
    for (size_t k = 0; k < plan_.pipelines.size(); ++k) {
      const ExportedPipeline& p = plan_.pipelines[k];
      for (size_t i = 0; i < p.info.constants.size(); ++i) c_ << "extern const uint8_t " << constant(k, int(i)) << "[];\n";
      if (p.info.computes_nothing()) continue;
      c_ << "int " << p.function << "(void*";
      for (size_t i = 0; i < p.info.args.size(); ++i) c_ << ", struct halide_buffer_t*";
      c_ << ");\n";
    }
    c_ << "\n";
  }

  // Declares buffer `buf<step>_<i>` (and its dimensions) of argument i of a step's pipeline around `host`.
  void declare_buffer(const std::string& id, const ArgSpec& a, const std::string& host, int flags) {
    c_ << "    halide_dimension_t dim" << id << "[" << std::max<size_t>(1, a.dims.size()) << "] = {";
    for (size_t d = 0; d < a.dims.size(); ++d)
      c_ << (d ? ", " : "") << "{" << a.dims[d].min << ", " << a.dims[d].extent << ", " << a.dims[d].stride << ", 0}";
    if (a.dims.empty()) c_ << "{0, 1, 1, 0}";
    c_ << "};\n    halide_buffer_t buf" << id << " = {0, 0, (uint8_t*)" << host << ", " << flags << ", {" << int(a.type.code)
       << ", " << int(a.type.bits) << ", " << a.type.lanes << "}, " << a.dims.size() << ", dim" << id << ", 0};\n";
  }

  // Where argument a of step s's pipeline lives.
  std::string host_of(const ExportStep& s, const ArgSpec& a) const {
    if (a.from == ArgSpec::From::Constant) return constant(s.pipeline, a.index);
    if (a.from == ArgSpec::From::Input) {
      const size_t i = size_t(a.index);
      return i < s.caller_inputs.size() ? args_[size_t(s.caller_inputs[i])].name
                                        : "b[" + std::to_string(s.boundary_inputs[i - s.caller_inputs.size()]) + "]";
    }
    const int slot = s.output_slot[size_t(a.index)];
    return slot >= 0 ? args_[n_inputs_ + size_t(slot)].name : "b[" + std::to_string(-1 - slot) + "]";
  }

  void step(size_t k) {
    const ExportStep& s = plan_.steps[k];
    const ExportedPipeline& p = plan_.pipelines[s.pipeline];
    c_ << "  {  // step " << k + 1 << ": " << p.function << "\n";
    for (int slot : s.output_slot)
      if (slot < 0)
        c_ << "    b[" << -1 - slot << "] = hjit_" << name_ << "_alloc(" << plan_.boundary_bytes[size_t(-1 - slot)] << ");\n"
           << "    if (!b[" << -1 - slot << "]) { r = halide_error_code_out_of_memory; goto done; }\n";
    if (!p.info.computes_nothing()) {
      for (size_t i = 0; i < p.info.args.size(); ++i) {
        const ArgSpec& a = p.info.args[i];
        // Inputs are marked host-dirty: a GPU pipeline copies to the device only what is marked so.
        declare_buffer(std::to_string(k) + "_" + std::to_string(i), a, host_of(s, a),
                       a.from == ArgSpec::From::Output ? 0 : int(halide_buffer_flag_host_dirty));
      }
      c_ << "    r = " << p.function << "(NULL";
      for (size_t i = 0; i < p.info.args.size(); ++i) c_ << ", &buf" << k << "_" << i;
      c_ << ");\n";
      // GPU targets: outputs back to the caller's memory, device allocations released.
      if (!plan_.target.kind().host()) {
        for (size_t i = 0; i < p.info.args.size(); ++i)
          if (p.info.args[i].from == ArgSpec::From::Output)
            c_ << "    if (r == 0 && buf" << k << "_" << i << ".device) r = halide_copy_to_host(NULL, &buf" << k << "_" << i << ");\n";
        for (size_t i = 0; i < p.info.args.size(); ++i)
          c_ << "    if (buf" << k << "_" << i << ".device) halide_device_free(NULL, &buf" << k << "_" << i << ");\n";
      }
    }
    c_ << "  }\n  if (r != 0) goto done;\n";
    for (int id : plan_.frees_after[k]) c_ << "  hjit_" << name_ << "_release(b[" << id << "]);\n  b[" << id << "] = NULL;\n";
  }

  void main_entry() {
    const size_t boundaries = plan_.boundary_bytes.size();
    c_ << "int " << name_ << "(" << c_parameters(args_) << ") {\n  halide_set_error_handler(hjit_print_error);\n"
       << "  halide_set_custom_malloc(hjit_" << name_ << "_malloc);\n  halide_set_custom_free(hjit_" << name_ << "_free);\n";
    if (plan_.target.kind().host()) c_ << "  halide_set_custom_do_par_for(hjit_" << name_ << "_par_for);\n";
    for (const CArg& a : args_)
      if (a.type.numel() > 0) c_ << "  if ((uintptr_t)" << a.name << " % 64 != 0) return -1;\n";
    c_ << "  const int failed_before = __atomic_load_n(&hjit_" << name_ << "_failed_allocations, __ATOMIC_RELAXED);\n"
       << "  void* b[" << std::max<size_t>(1, boundaries) << "] = {0};\n  int r = 0;\n";
    for (size_t k = 0; k < plan_.steps.size(); ++k) step(k);
    c_ << "done:\n  for (int i = 0; i < " << boundaries << "; ++i) hjit_" << name_ << "_release(b[i]);\n"
       << "  if (r == 0 && __atomic_load_n(&hjit_" << name_ << "_failed_allocations, __ATOMIC_RELAXED) != failed_before)\n"
       << "    r = halide_error_code_out_of_memory;\n  return r;\n}\n\n";
  }

  void argv_entry() {
    c_ << "int " << name_ << "_argv(void* const* args) {\n  return " << name_ << "(";
    for (size_t i = 0; i < args_.size(); ++i)
      c_ << (i ? ", " : "") << "(" << (args_[i].output ? "" : "const ") << c_type(args_[i].type.dtype) << "*)args[" << i << "]";
    c_ << ");\n}\n\n";
  }

  // GPU targets' buffers entry: the caller's buffers, the constants' from the library.
  void buffers_entry() {
    const ExportStep& s = plan_.steps[0];
    const ExportedPipeline& p = plan_.pipelines[s.pipeline];
    c_ << "int " << name_ << "_buffers(struct halide_buffer_t** args) {\n  halide_set_error_handler(hjit_print_error);\n";
    if (p.info.computes_nothing()) {
      c_ << "  (void)args;\n  return 0;\n}\n";
      return;
    }
    c_ << "  {\n";
    for (size_t i = 0; i < p.info.args.size(); ++i)
      if (p.info.args[i].from == ArgSpec::From::Constant)
        declare_buffer("c" + std::to_string(i), p.info.args[i], constant(s.pipeline, p.info.args[i].index), int(halide_buffer_flag_host_dirty));
    c_ << "    int r = " << p.function << "(NULL";
    for (size_t i = 0; i < p.info.args.size(); ++i) {
      const ArgSpec& a = p.info.args[i];
      if (a.from == ArgSpec::From::Input) c_ << ", args[" << a.index << "]";
      else if (a.from == ArgSpec::From::Output) c_ << ", args[" << n_inputs_ + size_t(a.index) << "]";
      else c_ << ", &bufc" << i;
    }
    c_ << ");\n";
    for (size_t i = 0; i < p.info.args.size(); ++i)
      if (p.info.args[i].from == ArgSpec::From::Constant) c_ << "    if (bufc" << i << ".device) halide_device_free(NULL, &bufc" << i << ");\n";
    c_ << "    return r;\n  }\n}\n";
  }

  const ExportPlan& plan_;
  const std::vector<CArg>& args_;
  const std::string name_;
  const size_t n_inputs_;
  std::ostringstream c_;
};

}  // namespace

std::string c_wrapper(const ExportPlan& plan, const std::vector<CArg>& args, const ExportRequest& r) {
  return Wrapper(plan, args, r).text();
}

}  // namespace hjit::backend
