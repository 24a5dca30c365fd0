// schedules/ as the backend's scheduler (halide_backend/scheduling/scheduler.h).
#include "halide_backend/providers/extern_stages.h"
#include "halide_backend/scheduling/scheduler.h"
#include "schedules/param_model.h"
#include "schedules/schedule.h"

namespace hjit::schedules {
namespace {

class Schedules final : public backend::Scheduler {
 public:
  // A GPU target's pipelines take the GPU schedule (fused or not); only Li2018 autoschedules them.
  backend::Schedule unfused(const backend::LoweredPipeline& p) const override {
    return p.target.has_gpu_feature() ? schedule_gpu(p, false) : schedule_unfused(p);
  }
  backend::Schedule builtin(const backend::LoweredPipeline& p, const backend::BuiltinParams& params) const override {
    return p.target.has_gpu_feature() ? schedule_gpu(p, true) : schedule_builtin(p, params);
  }
  std::optional<backend::Schedule> autoscheduled(const backend::LoweredPipeline& p, const backend::Auto& how,
                                                 std::string* why) const override {
    if (p.target.has_gpu_feature() && how.scheduler != backend::Autoscheduler::Li2018) {
      if (why) *why = std::string(backend::autoscheduler_name(how.scheduler)) + " schedules CPUs only (Li2018 schedules GPUs)";
      return std::nullopt;
    }
    return schedule_auto(p, how, why);
  }
  std::string unfused_identity() const override { return schedules::unfused_identity() + "; " + gpu_identity(); }
  std::string builtin_identity(const backend::BuiltinParams& params) const override {
    const std::string text = params.str();
    std::string fitted;
    if (text.empty())
      if (std::shared_ptr<const ParamModel> model = active_param_model()) fitted = " param model " + model->identity();
    // Where int_matmul and bf16 matmuls call oneDNN on AMX is a fact of this CPU and this build.
    using backend::ExternKind;
    const std::string amx = std::string(params.extern_int_gemm && backend::gemm_on_amx(ExternKind::IntGemm) ? " int8 on AMX" : "") +
                            (params.extern_bf16_gemm && backend::gemm_on_amx(ExternKind::Bf16Gemm) ? " bf16 on AMX" : "") +
                            (params.extern_int_conv && backend::gemm_on_amx(ExternKind::IntGemm) ? " int8 convolutions on AMX" : "");
    return schedules::builtin_identity() + (text.empty() ? "" : " " + text) + fitted + amx + "; " + gpu_identity();
  }
  std::string autoscheduled_identity(const backend::Auto& how) const override { return autoscheduler_identity(how); }
  std::set<int> extern_stages(const Graph& g, const backend::BuiltinParams& params, bool fixed_sizes) const override {
    std::set<int> out;
    if (params.extern_gemm) out = backend::extern_gemm_nodes(g);
    if (params.extern_conv) out.merge(backend::extern_conv_nodes(g));
    // Chosen by the built-in schedule itself, so only where it can be: library calls take fixed sizes.
    if (params.extern_int_gemm && fixed_sizes) out.merge(backend::extern_int_gemm_nodes(g));
    if (params.extern_bf16_gemm && fixed_sizes) out.merge(backend::extern_bf16_gemm_nodes(g));
    if (params.extern_int_conv && fixed_sizes) out.merge(backend::extern_int_conv_nodes(g));
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
