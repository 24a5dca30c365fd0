#include <cmath>
#include <string>

#include <hjit/ops.h>
#include <hjit/optim.h>

#include "frontend/tracing/trace.h"

namespace hjit::optim {
namespace {

std::vector<Tensor> zeros_like(const std::vector<Tensor>& ts) {
  std::vector<Tensor> z;
  for (const Tensor& t : ts) z.push_back(Tensor::zeros(t.shape(), t.dtype()));
  return z;
}

void check_lr(const char* name, double lr) {
  if (!(lr >= 0) || !std::isfinite(lr))
    throw ValueError(std::string(name) + ": the learning rate must be finite and >= 0, got " + std::to_string(lr));
}

bool tracing() { return detail::current_trace() != nullptr; }

}  // namespace

Optimizer::Optimizer(const char* name, std::vector<Tensor> params, double lr)
    : name_(name), params_(std::move(params)), lr_(Tensor::scalar(lr, DType::F64)) {
  check_lr(name, lr);
  for (const Tensor& p : params_)
    if (!is_floating(p.dtype()))
      throw DTypeError(std::string(name) + ": parameters must be floating point, got " + std::string(dtype_name(p.dtype())));
}

double Optimizer::lr() const { return lr_.item<double>(); }

void Optimizer::set_lr(double lr) {
  check_lr(name_, lr);
  lr_.assign(Tensor::scalar(lr, DType::F64));
}

void Optimizer::check_grads(const std::vector<Tensor>& grads) const {
  if (grads.size() != params_.size())
    throw ValueError(std::string(name_) + ".step: " + std::to_string(grads.size()) + " gradients for " +
                     std::to_string(params_.size()) + " parameters");
  for (size_t i = 0; i < params_.size(); ++i)
    if (grads[i].shape() != params_[i].shape())
      throw ShapeError(std::string(name_) + ".step: gradient " + std::to_string(i) + " has shape " + shape_str(grads[i].shape()) +
                       ", its parameter " + shape_str(params_[i].shape()));
}

void Optimizer::state_slots(std::vector<std::pair<std::string, Tensor*>>& out) { out.push_back({"lr", &lr_}); }

NamedTensors Optimizer::state_dict() const {
  std::vector<std::pair<std::string, Tensor*>> slots;
  const_cast<Optimizer*>(this)->state_slots(slots);  // read only
  NamedTensors out;
  for (auto& [name, t] : slots) out.push_back({name, *t});
  return out;
}

void Optimizer::load_state_dict(const NamedTensors& state) {
  std::vector<std::pair<std::string, Tensor*>> slots;
  state_slots(slots);
  assign_by_name(slots, state, true, std::string(name_) + ".load_state_dict");
}

namespace {
void indexed_slots(const char* name, std::vector<Tensor>& ts, std::vector<std::pair<std::string, Tensor*>>& out) {
  for (size_t i = 0; i < ts.size(); ++i) out.push_back({std::string(name) + "." + std::to_string(i), &ts[i]});
}
}  // namespace

void SGD::state_slots(std::vector<std::pair<std::string, Tensor*>>& out) {
  Optimizer::state_slots(out);
  indexed_slots("momentum_buffer", velocity_, out);
}

void Adam::state_slots(std::vector<std::pair<std::string, Tensor*>>& out) {
  Optimizer::state_slots(out);
  out.push_back({"step", &t_});
  indexed_slots("exp_avg", m_, out);
  indexed_slots("exp_avg_sq", v_, out);
}

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay)
    : Optimizer("SGD", std::move(params), lr), momentum_(momentum), weight_decay_(weight_decay) {
  if (momentum < 0 || weight_decay < 0) throw ValueError("SGD: needs momentum >= 0 and weight_decay >= 0");
  if (momentum_ > 0) velocity_ = zeros_like(params_);
}

void SGD::step(const std::vector<Tensor>& grads) {
  check_grads(grads);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = weight_decay_ > 0 ? grads[i] + weight_decay_ * params_[i] : grads[i];
    if (momentum_ > 0) {
      velocity_[i].assign(momentum_ * velocity_[i] + g);
      g = velocity_[i];
    }
    params_[i].assign(params_[i] - lr_as(params_[i].dtype()) * g);
  }
}

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps, double weight_decay)
    : Adam("Adam", std::move(params), lr, beta1, beta2, eps, weight_decay, false) {}

Adam::Adam(const char* name, std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
           double weight_decay, bool decoupled)
    : Optimizer(name, std::move(params), lr), t_(Tensor::zeros({}, DType::F64)), beta1_(beta1), beta2_(beta2), eps_(eps),
      weight_decay_(weight_decay), decoupled_(decoupled) {
  if (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1 || eps <= 0 || weight_decay < 0)
    throw ValueError(std::string(name) + ": needs 0 <= beta1, beta2 < 1, eps > 0 and weight_decay >= 0");
  m_ = zeros_like(params_);
  v_ = zeros_like(params_);
}

int64_t Adam::steps() const { return int64_t(t_.item<double>()); }

std::vector<Tensor> Adam::state() const {
  std::vector<Tensor> s = m_;
  s.insert(s.end(), v_.begin(), v_.end());
  s.push_back(t_);
  return s;
}

// PyTorch's Adam and AdamW, operation for operation: the bias corrections 1 - beta^t in f64
// (PyTorch computes them in Python floats), then as scalars of the parameter's dtype:
//   AdamW: p = p * (1 - lr * weight_decay);  Adam: g = g + weight_decay * p
//   m = m * beta1 + g * (1 - beta1);  v = v * beta2 + ((1 - beta2) * g) * g
//   p = p + (-lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
void Adam::step(const std::vector<Tensor>& grads) {
  check_grads(grads);
  t_.assign(t_ + 1);
  Tensor step_size = -lr_ / (1.0 - pow(beta1_, t_)), correction2_sqrt = sqrt(1.0 - pow(beta2_, t_));
  for (size_t i = 0; i < params_.size(); ++i) {
    const DType t = params_[i].dtype();
    Tensor g = grads[i];
    if (weight_decay_ > 0 && decoupled_) params_[i].assign(params_[i] * (1.0 - lr_ * weight_decay_).astype(t));
    if (weight_decay_ > 0 && !decoupled_) g = g + weight_decay_ * params_[i];
    m_[i].assign(m_[i] * beta1_ + g * (1 - beta1_));
    v_[i].assign(v_[i] * beta2_ + ((1 - beta2_) * g) * g);
    Tensor denom = sqrt(v_[i]) / correction2_sqrt.astype(t) + eps_;
    params_[i].assign(params_[i] + step_size.astype(t) * m_[i] / denom);
  }
}

AdamW::AdamW(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps, double weight_decay)
    : Adam("AdamW", std::move(params), lr, beta1, beta2, eps, weight_decay, true) {}

// torch.nn.utils.clip_grad_norm_: the norm of the gradients' norms, in f32 at least (a norm of
// f16 gradients overflows at 65504).
Tensor clip_grad_norm(std::vector<Tensor>& grads, double max_norm, double norm_type) {
  if (!(max_norm >= 0) || std::isnan(max_norm)) throw ValueError("clip_grad_norm: max_norm must be >= 0, got " + std::to_string(max_norm));
  if (!(norm_type > 0)) throw ValueError("clip_grad_norm: norm_type must be positive (2, 1, or infinity), got " + std::to_string(norm_type));
  if (grads.empty()) return Tensor::scalar(0.0);
  const bool infinite = std::isinf(norm_type);
  Tensor total;
  for (const Tensor& g : grads) {
    if (!is_floating(g.dtype())) throw DTypeError("clip_grad_norm: gradients must be floating point, got " + std::string(dtype_name(g.dtype())));
    const Tensor a = abs(g.dtype() == DType::F64 ? g : g.astype(DType::F32));
    const Tensor part = infinite ? max(a) : norm_type == 2 ? sum(a * a) : norm_type == 1 ? sum(a) : sum(pow(a, norm_type));
    total = total.defined() ? (infinite ? maximum(total, part) : total + part.astype(total.dtype())) : part;
  }
  if (!infinite) total = norm_type == 2 ? sqrt(total) : norm_type == 1 ? total : pow(total, 1.0 / norm_type);
  const Tensor scale = minimum(max_norm / (total + 1e-6), 1.0);
  for (Tensor& g : grads) g = g * scale.astype(g.dtype());
  return total;
}

GradientAccumulator::GradientAccumulator(const std::vector<Tensor>& params)
    : sums_(zeros_like(params)), count_(Tensor::zeros({}, DType::F64)) {}

void GradientAccumulator::add(const std::vector<Tensor>& grads) {
  if (grads.size() != sums_.size())
    throw ValueError("GradientAccumulator.add: " + std::to_string(grads.size()) + " gradients for " + std::to_string(sums_.size()) + " sums");
  for (size_t i = 0; i < sums_.size(); ++i) {
    if (grads[i].shape() != sums_[i].shape())
      throw ShapeError("GradientAccumulator.add: gradient " + std::to_string(i) + " has shape " + shape_str(grads[i].shape()) +
                       ", its sum " + shape_str(sums_[i].shape()));
    sums_[i].assign(sums_[i] + grads[i].astype(sums_[i].dtype()));
  }
  count_.assign(count_ + 1);
}

std::vector<Tensor> GradientAccumulator::mean() const {
  // (Eagerly only: while tracing, the count is the step's input, not known yet.)
  if (!tracing() && count_.item<double>() == 0)
    throw ValueError("GradientAccumulator.mean: nothing was added since the last reset()");
  std::vector<Tensor> out;
  for (const Tensor& s : sums_) out.push_back(s / count_.astype(s.dtype()));
  return out;
}

void GradientAccumulator::reset() {
  for (Tensor& s : sums_) s.assign(Tensor::zeros(s.shape(), s.dtype()));
  count_.assign(Tensor::zeros({}, DType::F64));
}

}  // namespace hjit::optim
