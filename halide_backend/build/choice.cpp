#include "halide_backend/build/choice.h"

#include "halide_backend/build/trials.h"
#include "halide_backend/lowering/lower.h"
#include "halide_backend/scheduling/apply_schedule.h"
#include "halide_backend/scheduling/scheduler.h"
#include "support/binary_io.h"
#include "support/overloaded.h"

namespace hjit::backend {
namespace {

// Lowered with no extern stage, then scheduled by `decide`.
template <class Decide>
std::optional<Schedule> lowered_then(const Graph& g, const Target& target, LoweredPipeline& p, const SymbolicSizes* dynamic,
                                     Decide decide) {
  p = lower(g, target.halide(false, &g), {}, dynamic);
  return decide(p);
}

class UnfusedChoice final : public ChoiceHandler {
 public:
  std::string identity() const override { return scheduler().unfused_identity(); }
  Partitioning partitioning() const override { return Partitioning::Bounded; }
  bool tunable() const override { return true; }
  std::optional<Schedule> lower_and_schedule(const Graph& g, const Target& target, LoweredPipeline& p, std::string*,
                                             const SymbolicSizes* dynamic) const override {
    return lowered_then(g, target, p, dynamic, [](const LoweredPipeline& p) { return scheduler().unfused(p); });
  }
  Built build(const Graph& g, const Options& o, const Target& target) const override { return make(g, o, target, *this); }
  ScheduleChoice for_graph(const Graph&, const Target&, bool) const override { return Unfused{}; }
  std::string summary(const Schedule&) const override { return ScheduleRequest{Unfused{}}.str(); }
};

class BuiltInChoice final : public ChoiceHandler {
 public:
  explicit BuiltInChoice(BuiltinParams params) : params_(std::move(params)) {}
  std::string identity() const override { return scheduler().builtin_identity(params_); }
  Partitioning partitioning() const override { return Partitioning::Halves; }
  bool tunable() const override { return true; }
  std::optional<Schedule> lower_and_schedule(const Graph& g, const Target& target, LoweredPipeline& p, std::string*,
                                             const SymbolicSizes* dynamic) const override {
    const Halide::Target halide = target.halide(false, &g);
    BuiltinParams params = params_;
    // AMX is the host's: a GPU pipeline's products stay on the GPU, and a pipeline for a CPU without
    // AVX-512 (another machine's, or a test's) keeps hjit's own code, as there.
    if (halide.has_gpu_feature() || !halide.has_feature(Halide::Target::AVX512_Skylake))
      params.extern_int_gemm = params.extern_bf16_gemm = params.extern_int_conv = false;
    p = lower(g, halide, scheduler().extern_stages(g, params, dynamic == nullptr), dynamic);
    Schedule s = scheduler().builtin(p, params_);
    add_extern_directives(p, s);
    return s;
  }
  Built build(const Graph& g, const Options& o, const Target& target) const override {
    const BuiltinParams chosen = params_for(g, target, true);
    if (!(chosen == params_)) return build_fitted(g, o, target, chosen);
    return make(g, o, target, *this);
  }
  ScheduleChoice for_graph(const Graph& g, const Target& target, bool extern_stages) const override {
    return BuiltIn{params_for(g, target, extern_stages)};
  }
  std::string summary(const Schedule&) const override { return ScheduleRequest{BuiltIn{params_}}.str(); }

 private:
  BuiltinParams params_for(const Graph& g, const Target& target, bool extern_stages) const {
    BuiltinParams p = params_;
    if (p.is_default() && target.kind().fitted_params()) p = scheduler().fitted_params(g, target.halide(false));
    if (!extern_stages) p.extern_gemm = p.extern_conv = p.extern_int_gemm = p.extern_bf16_gemm = p.extern_int_conv = false;
    return p;
  }
  BuiltinParams params_;
};

class AutoChoice final : public ChoiceHandler {
 public:
  explicit AutoChoice(Auto how) : how_(std::move(how)) {}
  std::string identity() const override { return scheduler().autoscheduled_identity(how_); }
  Partitioning partitioning() const override { return Partitioning::None; }
  bool tunable() const override { return true; }
  std::optional<Schedule> lower_and_schedule(const Graph& g, const Target& target, LoweredPipeline& p, std::string* why,
                                             const SymbolicSizes* dynamic) const override {
    return lowered_then(g, target, p, dynamic, [&](const LoweredPipeline& p) { return scheduler().autoscheduled(p, how_, why); });
  }
  Built build(const Graph& g, const Options& o, const Target& target) const override {
    if (computes_nothing(g)) return make(g, o, target, *handler_for(BuiltIn{}));  // nothing for it to schedule
    return build_guarded(g, o, target, how_, *this);
  }
  ScheduleChoice for_graph(const Graph&, const Target&, bool) const override { return how_; }
  std::string summary(const Schedule&) const override { return ScheduleRequest{how_}.str(); }

 private:
  Auto how_;
};

class GivenChoice final : public ChoiceHandler {
 public:
  explicit GivenChoice(Given given) : given_(std::move(given)) {}
  std::string identity() const override { return "given " + hash_hex(given_.text); }
  Partitioning partitioning() const override { return Partitioning::None; }
  bool tunable() const override { return false; }
  std::optional<Schedule> lower_and_schedule(const Graph& g, const Target& target, LoweredPipeline& p, std::string*,
                                             const SymbolicSizes* dynamic) const override {
    Schedule s = Schedule::parse(given_.text);
    p = lower(g, target.halide(false, &g), extern_stages_of(s), dynamic);
    return s;
  }
  Built build(const Graph& g, const Options& o, const Target& target) const override {
    // A file's schedule may have been changed on disk or written by another version.
    if (given_.origin == ScheduleOrigin::File) check_schedule_in_child(g, target, given_.text);
    return make(g, o, target, *this);
  }
  ScheduleChoice for_graph(const Graph&, const Target&, bool) const override { return given_; }
  std::string summary(const Schedule& s) const override { return "tuned (" + s.source + ")"; }

 private:
  Given given_;
};

}  // namespace

std::unique_ptr<const ChoiceHandler> handler_for(const ScheduleChoice& choice) {
  return std::visit(Overloaded{
                        [](const Unfused&) -> std::unique_ptr<const ChoiceHandler> { return std::make_unique<UnfusedChoice>(); },
                        [](const BuiltIn& b) -> std::unique_ptr<const ChoiceHandler> { return std::make_unique<BuiltInChoice>(b.params); },
                        [](const Auto& a) -> std::unique_ptr<const ChoiceHandler> { return std::make_unique<AutoChoice>(a); },
                        [](const Given& g) -> std::unique_ptr<const ChoiceHandler> { return std::make_unique<GivenChoice>(g); },
                    },
                    choice);
}

}  // namespace hjit::backend
