// A compiled pipeline: the JIT module, and halide_buffer_t templates for its arguments, so that a
// call only fills in host pointers (no allocation, no Halide::Buffer, no global ImageParam state).
#pragma once
#include <mutex>
#include <string>
#include <vector>

#include "halide_backend/backend.h"
#include "halide_backend/lowered.h"

namespace hjit::backend {

// Held while Halide compiles or lowers anything: its compiler keeps process-global state.
std::mutex& compile_mutex();

class HalideExecutable final : public Executable {
 public:
  // summary: one line naming the schedule; schedule: what it decided, stage by stage.
  HalideExecutable(const Graph& g, LoweredPipeline lowered, std::string fn_name, std::string summary, std::string schedule);
  void run(const void* const* inputs, void* const* outputs) const override;
  std::string explain() const override;
  std::string summary() const override { return summary_; }
  void set_summary(std::string s) { summary_ = std::move(s); }

 private:
  // An argument of the compiled function: where its host pointer comes from.
  enum class From { Input, Constant, Output };
  struct Arg {
    From from;
    int index;  // into inputs, constants_ or outputs
    halide_buffer_t buffer{};
  };

  std::string name_;
  std::string summary_;
  std::string schedule_;
  std::vector<ConstData> constants_;
  std::vector<std::vector<halide_dimension_t>> dims_;  // storage the templates point into
  std::vector<Arg> args_;
  Halide::Pipeline pipeline_;
  std::vector<Halide::Argument> pipeline_args_;
  Halide::Target target_;
  Halide::Internal::JITModule module_;
  int (*fn_)(const void**) = nullptr;
  Halide::JITUserContext context_{};
};

}  // namespace hjit::backend
