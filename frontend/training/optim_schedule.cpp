#include <cmath>
#include <numbers>
#include <string>

#include <hjit/error.h>
#include <hjit/optim_schedule.h>

namespace hjit::optim {

LRScheduler::LRScheduler(Optimizer& opt) : opt_(opt), base_lr_(opt.lr()) {}

void LRScheduler::start() {
  last_lr_ = lr_at(0);
  opt_.set_lr(last_lr_);
}

void LRScheduler::step() {
  const double lr = lr_at(steps_ + 1);
  opt_.set_lr(lr);  // (throws, leaving the schedule where it was, on a negative rate)
  ++steps_;
  last_lr_ = lr;
}

NamedTensors LRScheduler::state_dict() const {
  return {{"steps", Tensor::scalar(double(steps_), DType::I64)}, {"base_lr", Tensor::scalar(base_lr_, DType::F64)}};
}

void LRScheduler::load_state_dict(const NamedTensors& state) {
  auto entry = [&](const char* name, DType dtype) {
    for (const auto& [n, t] : state)
      if (n == name) {
        if (t.dtype() != dtype || t.numel() != 1)
          throw DTypeError(std::string("LRScheduler::load_state_dict: '") + name + "' must be one " + dtype_name(dtype) + " value");
        return t;
      }
    throw ValueError(std::string("LRScheduler::load_state_dict: the state holds no '") + name + "'");
  };
  const int64_t steps = entry("steps", DType::I64).item<int64_t>();
  const double base = entry("base_lr", DType::F64).item<double>();
  if (steps < 0 || !std::isfinite(base)) throw ValueError("LRScheduler::load_state_dict: a negative step count or a rate that is not finite");
  const double saved_base = base_lr_;
  base_lr_ = base;
  try {
    const double lr = lr_at(steps);
    opt_.set_lr(lr);
    steps_ = steps, last_lr_ = lr;
  } catch (...) {
    base_lr_ = saved_base;
    throw;
  }
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma) : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0 || !(gamma > 0)) throw ValueError("StepLR: needs step_size > 0 and gamma > 0");
  start();
}
double StepLR::lr_at(int64_t step) const { return base_lr() * std::pow(gamma_, double(step / step_size_)); }

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min)
    : LRScheduler(opt), t_max_(t_max), eta_min_(eta_min) {
  if (t_max <= 0 || !(eta_min > 0 || eta_min == 0) || eta_min >= base_lr())
    throw ValueError("CosineAnnealingLR: needs t_max > 0 and 0 <= eta_min < the optimizer's rate");
  start();
}
double CosineAnnealingLR::lr_at(int64_t step) const {
  return eta_min_ + (base_lr() - eta_min_) * (1 + std::cos(std::numbers::pi * double(step) / double(t_max_))) / 2;
}

LinearLR::LinearLR(Optimizer& opt, double start_factor, double end_factor, int64_t total_steps)
    : LRScheduler(opt), start_(start_factor), end_(end_factor), total_(total_steps) {
  if (!(start_factor > 0 && start_factor <= 1) || !(end_factor >= 0 && end_factor <= 1) || total_steps <= 0)
    throw ValueError("LinearLR: needs start_factor in (0, 1], end_factor in [0, 1] and total_steps > 0");
  start();
}
double LinearLR::lr_at(int64_t step) const {
  return base_lr() * (start_ + (end_ - start_) * double(std::min(step, total_)) / double(total_));
}

LambdaLR::LambdaLR(Optimizer& opt, std::function<double(int64_t)> factor) : LRScheduler(opt), factor_(std::move(factor)) {
  if (!factor_) throw ValueError("LambdaLR: no factor function");
  start();
}
double LambdaLR::lr_at(int64_t step) const { return base_lr() * factor_(step); }

}  // namespace hjit::optim
