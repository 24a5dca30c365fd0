// Optimizers. step(grads) updates the parameters (and the optimizer's state) in place with
// Tensor::assign, so that inside a jitted training step one call does forward, backward and
// update, and parameters and state keep their tensors from step to step (a jitted step trades the
// bytes of each with a buffer its new value was computed into: no copy).
#pragma once
#include <vector>

#include <hjit/tensor.h>

namespace hjit::optim {

// p -= lr * v, with v = momentum * v + (g + weight_decay * p) (PyTorch's SGD, no dampening).
class SGD {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0, double weight_decay = 0);
  void step(const std::vector<Tensor>& grads);
  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<Tensor>& state() const { return velocity_; }

 private:
  std::vector<Tensor> params_, velocity_;
  double lr_, momentum_, weight_decay_;
};

// Adam (Kingma & Ba) as PyTorch computes it, bias corrections in f64; the step count is an f64
// tensor, so a jitted step counts too.
class Adam {
 public:
  Adam(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8);
  void step(const std::vector<Tensor>& grads);
  const std::vector<Tensor>& params() const { return params_; }
  std::vector<Tensor> state() const;  // first moments, second moments, step count

 private:
  std::vector<Tensor> params_, m_, v_;
  Tensor t_;
  double lr_, beta1_, beta2_, eps_;
};

}  // namespace hjit::optim
