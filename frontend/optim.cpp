#include <hjit/ops.h>
#include <hjit/optim.h>

namespace hjit::optim {
namespace {

void check_grads(const char* name, const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  if (grads.size() != params.size())
    throw ValueError(std::string(name) + ".step: " + std::to_string(grads.size()) + " gradients for " +
                     std::to_string(params.size()) + " parameters");
  for (size_t i = 0; i < params.size(); ++i)
    if (grads[i].shape() != params[i].shape())
      throw ShapeError(std::string(name) + ".step: gradient " + std::to_string(i) + " has shape " + shape_str(grads[i].shape()) +
                       ", its parameter " + shape_str(params[i].shape()));
}

std::vector<Tensor> zeros_like(const std::vector<Tensor>& ts) {
  std::vector<Tensor> z;
  for (const Tensor& t : ts) z.push_back(Tensor::zeros(t.shape(), t.dtype()));
  return z;
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay)
    : params_(std::move(params)), lr_(lr), momentum_(momentum), weight_decay_(weight_decay) {
  if (lr <= 0 || momentum < 0 || weight_decay < 0)
    throw ValueError("SGD: needs lr > 0, momentum >= 0 and weight_decay >= 0");
  for (const Tensor& p : params_)
    if (!is_floating(p.dtype())) throw DTypeError("SGD: parameters must be floating point, got " + std::string(dtype_name(p.dtype())));
  if (momentum_ > 0) velocity_ = zeros_like(params_);
}

void SGD::step(const std::vector<Tensor>& grads) {
  check_grads("SGD", params_, grads);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = weight_decay_ > 0 ? grads[i] + weight_decay_ * params_[i] : grads[i];
    if (momentum_ > 0) {
      velocity_[i].assign(momentum_ * velocity_[i] + g);
      g = velocity_[i];
    }
    params_[i].assign(params_[i] - lr_ * g);
  }
}

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps)
    : params_(std::move(params)), t_(Tensor::zeros({}, DType::F64)), lr_(lr), beta1_(beta1), beta2_(beta2), eps_(eps) {
  if (lr <= 0 || beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1 || eps <= 0)
    throw ValueError("Adam: needs lr > 0, 0 <= beta1, beta2 < 1 and eps > 0");
  for (const Tensor& p : params_)
    if (!is_floating(p.dtype())) throw DTypeError("Adam: parameters must be floating point, got " + std::string(dtype_name(p.dtype())));
  m_ = zeros_like(params_);
  v_ = zeros_like(params_);
}

std::vector<Tensor> Adam::state() const {
  std::vector<Tensor> s = m_;
  s.insert(s.end(), v_.begin(), v_.end());
  s.push_back(t_);
  return s;
}

// PyTorch's Adam, operation for operation: the bias corrections 1 - beta^t in f64 (PyTorch computes
// them in Python floats), then as scalars of the parameter's dtype:
//   m = m * beta1 + g * (1 - beta1);  v = v * beta2 + ((1 - beta2) * g) * g
//   p = p + (-lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
void Adam::step(const std::vector<Tensor>& grads) {
  check_grads("Adam", params_, grads);
  t_.assign(t_ + 1);
  Tensor step_size = -lr_ / (1.0 - pow(beta1_, t_)), correction2_sqrt = sqrt(1.0 - pow(beta2_, t_));
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& g = grads[i];
    const DType t = params_[i].dtype();
    m_[i].assign(m_[i] * beta1_ + g * (1 - beta1_));
    v_[i].assign(v_[i] * beta2_ + ((1 - beta2_) * g) * g);
    Tensor denom = sqrt(v_[i]) / correction2_sqrt.astype(t) + eps_;
    params_[i].assign(params_[i] + step_size.astype(t) * m_[i] / denom);
  }
}

}  // namespace hjit::optim
