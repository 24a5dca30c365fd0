// schedules/ as the backend's scheduler (halide_backend/scheduler.h).
#include "halide_backend/scheduler.h"
#include "schedules/schedule.h"

namespace hjit::schedules {
namespace {

class Schedules final : public backend::Scheduler {
 public:
  std::optional<backend::Schedule> schedule(const backend::LoweredPipeline& p, const std::string& how,
                                            std::string* why) const override {
    if (how == "unfused") return schedule_unfused(p);
    if (how == "built-in") return schedule_builtin(p);
    return schedule_auto(p, how, why);
  }
  std::string identity(const std::string& how) const override {
    if (how == "unfused") return unfused_identity();
    if (how == "built-in") return builtin_identity();
    return autoscheduler_identity(how);
  }
  bool is_autoscheduler(const std::string& name) const override { return schedules::is_autoscheduler(name); }
};

const bool registered = [] {
  static const Schedules instance;
  backend::register_scheduler(instance);
  return true;
}();

}  // namespace
}  // namespace hjit::schedules
