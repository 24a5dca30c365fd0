// Optimizers. step(grads) updates the parameters (and the optimizer's state) in place with
// Tensor::assign, so that inside a jitted training step one call does forward, backward and
// update, and parameters and state keep their tensors from step to step (a jitted step trades the
// bytes of each with a buffer its new value was computed into: no copy).
//
// The learning rate is a tensor too (an f64 scalar): a jitted step reads it as an input, so a
// schedule (optim_schedule.h) or set_lr() changes it without tracing the step again.
//
//   hjit::optim::AdamW opt(model.parameters(), 3e-4);
//   hjit::optim::CosineAnnealingLR schedule(opt, 1000);
//   auto step = hjit::jit([&](const Tensor& x, const Tensor& y) {
//     auto [loss, grads] = hjit::value_and_grad(loss_fn, params)(x, y);
//     hjit::optim::clip_grad_norm(grads, 1.0);
//     opt.step(grads);
//     return loss;
//   });
//   for (...) { step(x, y); schedule.step(); }
#pragma once
#include <cstdint>
#include <vector>

#include <hjit/io.h>
#include <hjit/tensor.h>

namespace hjit::optim {

// What every optimizer has: the parameters it updates and its learning rate.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step(const std::vector<Tensor>& grads) = 0;
  const std::vector<Tensor>& params() const { return params_; }
  double lr() const;                          // the learning rate now
  void set_lr(double lr);                     // finite and >= 0 (ValueError otherwise)
  const Tensor& lr_tensor() const { return lr_; }  // the f64 scalar the steps read

  // The optimizer's state by name, for checkpoints: "lr", and per kind PyTorch's names with the
  // parameter's index ("momentum_buffer.0"; "step", "exp_avg.0", "exp_avg_sq.0"). load_state_dict
  // sets it back by assign (checked in full first, as hjit::assign_by_name: a jitted step holding
  // the tensors sees the loaded values).
  NamedTensors state_dict() const;
  void load_state_dict(const NamedTensors& state);

 protected:
  // Each tensor of the state with its name; the base's: the learning rate.
  virtual void state_slots(std::vector<std::pair<std::string, Tensor*>>& out);
  Optimizer(const char* name, std::vector<Tensor> params, double lr);
  // grads fit params_ (ValueError, ShapeError naming the optimizer otherwise).
  void check_grads(const std::vector<Tensor>& grads) const;
  // The learning rate as a scalar of dtype t (the parameter's: PyTorch multiplies in its dtype).
  Tensor lr_as(DType t) const { return lr_.astype(t); }

  const char* name_;
  std::vector<Tensor> params_;
  Tensor lr_;
};

// p -= lr * v, with v = momentum * v + (g + weight_decay * p) (PyTorch's SGD, no dampening).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0, double weight_decay = 0);
  void step(const std::vector<Tensor>& grads) override;
  const std::vector<Tensor>& state() const { return velocity_; }

 protected:
  void state_slots(std::vector<std::pair<std::string, Tensor*>>& out) override;

 private:
  std::vector<Tensor> velocity_;
  double momentum_, weight_decay_;
};

// Adam (Kingma & Ba) as PyTorch computes it, bias corrections in f64; the step count is an f64
// tensor, so a jitted step counts too. weight_decay adds weight_decay * p to the gradient (L2, as
// torch.optim.Adam); AdamW below decays the parameter itself.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
       double weight_decay = 0);
  void step(const std::vector<Tensor>& grads) override;
  std::vector<Tensor> state() const;  // first moments, second moments, step count
  int64_t steps() const;              // steps taken (eagerly read): where a resumed run goes on

 protected:
  void state_slots(std::vector<std::pair<std::string, Tensor*>>& out) override;
  Adam(const char* name, std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
       double weight_decay, bool decoupled);

 private:
  std::vector<Tensor> m_, v_;
  Tensor t_;
  double beta1_, beta2_, eps_, weight_decay_;
  bool decoupled_;
};

// AdamW (Loshchilov & Hutter; torch.optim.AdamW): p *= 1 - lr * weight_decay, then Adam's step.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
        double weight_decay = 1e-2);
};

// Scales grads in place so that their joint norm (of order norm_type: 2, 1, or infinity) is at
// most max_norm, and returns the norm before scaling, as torch.nn.utils.clip_grad_norm_: each is
// multiplied by min(1, max_norm / (norm + 1e-6)). Traced like any ops (no host round trip).
Tensor clip_grad_norm(std::vector<Tensor>& grads, double max_norm, double norm_type = 2.0);

// Gradients summed over several batches before one step (a batch too big for memory, taken in
// pieces). Sums and count are tensors updated in place, so add() may run inside a jitted step.
//   acc.add(grads);  ...  if (last) opt.step(acc.mean()), acc.reset();
class GradientAccumulator {
 public:
  explicit GradientAccumulator(const std::vector<Tensor>& params);  // sums shaped like these
  void add(const std::vector<Tensor>& grads);
  const std::vector<Tensor>& sums() const { return sums_; }
  std::vector<Tensor> mean() const;  // sums / count (eagerly, ValueError before any add())
  const Tensor& count() const { return count_; }  // f64 scalar: batches added since reset()
  void reset();

 private:
  std::vector<Tensor> sums_;
  Tensor count_;
};

}  // namespace hjit::optim
