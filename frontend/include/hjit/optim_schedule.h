// Learning-rate schedules, as torch.optim.lr_scheduler's: made on an optimizer, whose learning
// rate they set to the schedule's value at step 0; each step() moves one step (an epoch or a
// batch, as the caller counts) and sets the next value. The rate is a tensor the jitted training
// step reads (optim.h): a schedule never re-traces it.
//
//   hjit::optim::AdamW opt(params, 1e-3);
//   hjit::optim::LinearLR warmup(opt, 0.01, 1.0, 100);   // 1e-5 rising to 1e-3 over 100 steps
//   for (...) { step(x, y); warmup.step(); }
#pragma once
#include <cstdint>
#include <functional>

#include <hjit/optim.h>

namespace hjit::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  void step();                                 // one step on: sets the optimizer's rate
  int64_t steps() const { return steps_; }     // steps taken (PyTorch's last_epoch)
  double last_lr() const { return last_lr_; }  // the rate set last
  double base_lr() const { return base_lr_; }  // the optimizer's rate when the schedule was made

  // Its position, for checkpoints: "steps" (i64) and "base_lr" (f64) as scalars. load_state_dict
  // moves the schedule there and sets the optimizer's rate to the schedule's value at that step
  // (ValueError for a missing entry or a negative step count, DTypeError for another type).
  NamedTensors state_dict() const;
  void load_state_dict(const NamedTensors& state);

 protected:
  explicit LRScheduler(Optimizer& opt);
  void start();  // sets the rate of step 0: called by each schedule's constructor
  // The rate after `step` steps.
  virtual double lr_at(int64_t step) const = 0;

 private:
  Optimizer& opt_;
  double base_lr_, last_lr_ = 0;
  int64_t steps_ = 0;
};

// base_lr * gamma^floor(step / step_size) (StepLR).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);

 private:
  double lr_at(int64_t step) const override;
  int64_t step_size_;
  double gamma_;
};

// eta_min + (base_lr - eta_min) * (1 + cos(pi * step / t_max)) / 2 (CosineAnnealingLR's closed form).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min = 0);

 private:
  double lr_at(int64_t step) const override;
  int64_t t_max_;
  double eta_min_;
};

// base_lr times a factor going linearly from start_factor to end_factor over total_steps, then
// staying there (LinearLR): a warmup.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& opt, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_steps = 5);

 private:
  double lr_at(int64_t step) const override;
  double start_, end_;
  int64_t total_;
};

// base_lr times factor(step), any function (LambdaLR): a warmup then a cosine, say.
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& opt, std::function<double(int64_t)> factor);

 private:
  double lr_at(int64_t step) const override;
  std::function<double(int64_t)> factor_;
};

}  // namespace hjit::optim
