// The C wrapper of an exported library: Halide buffers around the caller's pointers, the steps of
// the plan run in order with the values between them allocated just before the step that writes
// them and freed after the last that reads them (as a partitioned executable runs them), errors
// as return codes.
#include <sstream>

#include <HalideRuntime.h>

#include "halide_backend/export/library.h"

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

  void prelude() {
    c_ << "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <HalideRuntime.h>\n#include \"" << name_
       << ".h\"\n\n"
       // Halide's default error handler aborts the process: the header promises an error code.
       << "static void hjit_print_error(void* ctx, const char* msg) { (void)ctx; fprintf(stderr, \"%s\\n\", msg); }\n\n"
       // The pipelines are hjit's own code, which does the work of a temporary only where its
       // allocation succeeded and leaves the report to the allocator: failures are counted here.
       << "static int hjit_" << name_ << "_failed_allocations;\n"
       << "static void* hjit_" << name_ << "_malloc(void* ctx, size_t n) {\n  (void)ctx;\n"
       << "  void* p = aligned_alloc(128, (n + 127) / 128 * 128);\n"
       << "  if (!p) __atomic_add_fetch(&hjit_" << name_ << "_failed_allocations, 1, __ATOMIC_RELAXED);\n  return p;\n}\n"
       << "static void hjit_" << name_ << "_free(void* ctx, void* p) { (void)ctx; free(p); }\n\n";
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
        c_ << "    b[" << -1 - slot << "] = aligned_alloc(64, " << plan_.boundary_bytes[size_t(-1 - slot)] << ");\n"
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
    for (int id : plan_.frees_after[k]) c_ << "  free(b[" << id << "]);\n  b[" << id << "] = NULL;\n";
  }

  void main_entry() {
    const size_t boundaries = plan_.boundary_bytes.size();
    c_ << "int " << name_ << "(" << c_parameters(args_) << ") {\n  halide_set_error_handler(hjit_print_error);\n"
       << "  halide_set_custom_malloc(hjit_" << name_ << "_malloc);\n  halide_set_custom_free(hjit_" << name_ << "_free);\n";
    for (const CArg& a : args_)
      if (a.type.numel() > 0) c_ << "  if ((uintptr_t)" << a.name << " % 64 != 0) return -1;\n";
    c_ << "  const int failed_before = __atomic_load_n(&hjit_" << name_ << "_failed_allocations, __ATOMIC_RELAXED);\n"
       << "  void* b[" << std::max<size_t>(1, boundaries) << "] = {0};\n  int r = 0;\n";
    for (size_t k = 0; k < plan_.steps.size(); ++k) step(k);
    c_ << "done:\n  for (int i = 0; i < " << boundaries << "; ++i) free(b[i]);\n"
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
