// schedules/ as the backend's scheduler (halide_backend/scheduler.h).
#include "halide_backend/extern_stages.h"
#include "halide_backend/scheduler.h"
#include "schedules/schedule.h"

namespace hjit::schedules {
namespace {

// A request is a scheduler's name, then its parameters: "built-in cols=3", "Adams2019 seed=4".
std::pair<std::string, std::string> split_request(const std::string& how) {
  const size_t space = how.find(' ');
  if (space == std::string::npos) return {how, ""};
  return {how.substr(0, space), how.substr(space + 1)};
}

class Schedules final : public backend::Scheduler {
 public:
  std::optional<backend::Schedule> schedule(const backend::LoweredPipeline& p, const std::string& how,
                                            std::string* why) const override {
    const auto [name, params] = split_request(how);
    if (p.target.has_gpu_feature()) {
      if (name == "unfused" || name == "built-in") return schedule_gpu(p, name == "built-in");
      if (name != "Li2018") {
        if (why) *why = name + " schedules CPUs only (Li2018 schedules GPUs)";
        return std::nullopt;
      }
    }
    if (name == "unfused") return schedule_unfused(p);
    if (name == "built-in") return schedule_builtin(p, BuiltinParams::parse(params));
    return schedule_auto(p, name, why, params);
  }
  std::string identity(const std::string& how) const override {
    if (how == "unfused") return unfused_identity() + "; " + gpu_identity();
    if (how == "built-in") return builtin_identity() + "; " + gpu_identity();
    return autoscheduler_identity(how);
  }
  bool is_autoscheduler(const std::string& name) const override { return schedules::is_autoscheduler(name); }
  std::set<int> extern_stages(const Graph& g, const std::string& how) const override {
    const auto [name, params] = split_request(how);
    if (name != "built-in") return {};
    const BuiltinParams b = BuiltinParams::parse(params);
    std::set<int> out;
    if (b.extern_gemm) out = backend::extern_gemm_nodes(g);
    if (b.extern_conv) out.merge(backend::extern_conv_nodes(g));
    return out;
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
