// schedules/ as the backend's scheduler (halide_backend/scheduling/scheduler.h).
#include "halide_backend/providers/extern_stages.h"
#include "halide_backend/scheduling/scheduler.h"
#include "schedules/param_model.h"
#include "schedules/schedule.h"

namespace hjit::schedules {
namespace {

class Schedules final : public backend::Scheduler {
 public:
  std::optional<backend::Schedule> schedule(const backend::LoweredPipeline& p, const backend::ScheduleChoice& how,
                                            std::string* why) const override {
    const backend::BuiltIn* builtin = std::get_if<backend::BuiltIn>(&how);
    const backend::Auto* autoscheduled = std::get_if<backend::Auto>(&how);
    if (std::holds_alternative<backend::Given>(how))
      throw InternalError("hjit: a given schedule is applied as it is, not decided");
    if (p.target.has_gpu_feature() && !(autoscheduled && autoscheduled->scheduler == backend::Autoscheduler::Li2018)) {
      if (!autoscheduled) return schedule_gpu(p, builtin != nullptr);
      if (why) *why = std::string(backend::autoscheduler_name(autoscheduled->scheduler)) + " schedules CPUs only (Li2018 schedules GPUs)";
      return std::nullopt;
    }
    if (builtin) return schedule_builtin(p, builtin->params);
    if (autoscheduled) return schedule_auto(p, *autoscheduled, why);
    return schedule_unfused(p);
  }
  std::string identity(const backend::ScheduleChoice& how) const override {
    if (std::holds_alternative<backend::Unfused>(how)) return unfused_identity() + "; " + gpu_identity();
    if (const backend::BuiltIn* b = std::get_if<backend::BuiltIn>(&how)) {
      const std::string params = b->params.str();
      std::string fitted;
      if (params.empty())
        if (std::shared_ptr<const ParamModel> model = active_param_model()) fitted = " param model " + model->identity();
      return builtin_identity() + (params.empty() ? "" : " " + params) + fitted + "; " + gpu_identity();
    }
    if (const backend::Auto* a = std::get_if<backend::Auto>(&how)) return autoscheduler_identity(*a);
    throw InternalError("hjit: a given schedule's identity is its text");
  }
  std::set<int> extern_stages(const Graph& g, const backend::ScheduleChoice& how) const override {
    const backend::BuiltIn* b = std::get_if<backend::BuiltIn>(&how);
    if (!b) return {};
    std::set<int> out;
    if (b->params.extern_gemm) out = backend::extern_gemm_nodes(g);
    if (b->params.extern_conv) out.merge(backend::extern_conv_nodes(g));
    return out;
  }
  backend::BuiltinParams fitted_params(const Graph& g, const Halide::Target& target) const override {
    std::shared_ptr<const ParamModel> model = active_param_model();
    return model ? model->choose(features_of(g, vector_bits_of(target.to_string()))) : backend::BuiltinParams{};
  }
  bool stores_elementwise(OpKind op, size_t readers) const override { return builtin_stores_elementwise(op, readers); }
};

const bool registered = [] {
  static const Schedules instance;
  backend::register_scheduler(instance);
  return true;
}();

}  // namespace
}  // namespace hjit::schedules
