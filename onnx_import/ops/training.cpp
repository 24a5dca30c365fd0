// ONNX's preview training optimizers (ai.onnx.preview.training): Adagrad, Momentum and Adam, one
// update of any number of tensors, as element-wise hjit ops. Inputs: the learning rate R and the
// step count T, then the tensors, their gradients and their optimizer states, grouped by kind.
#include <cmath>

#include <hjit/grad.h>

#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

// How many tensors the node updates: (inputs - 2) / groups, where a group is X, G and the states.
size_t tensors_updated(const NodeContext& n, size_t groups) {
  if (n.num_inputs() < 2 || (n.num_inputs() - 2) % groups != 0)
    n.fail("takes R, T and " + std::to_string(groups) + " inputs per tensor updated");
  return (n.num_inputs() - 2) / groups;
}

V Adagrad(const NodeContext& n) {
  const size_t k = tensors_updated(n, 3);
  const double decay = n.attr_float("decay_factor", 0.0), eps = n.attr_float("epsilon", 1e-6), norm = n.attr_float("norm_coefficient", 0.0);
  const Tensor r = n.input(0) / (astype(n.input(1), n.input(0).dtype()) * decay + 1.0);
  V xs, hs;
  for (size_t i = 0; i < k; ++i) {
    const Tensor &x = n.input(2 + i), &g = n.input(2 + k + i), &h = n.input(2 + 2 * k + i);
    const Tensor g_reg = x * norm + g;
    const Tensor h_new = h + g_reg * g_reg;
    xs.push_back(as_dtype(x - r * g_reg / (sqrt(h_new) + eps), x.dtype()));
    hs.push_back(h_new);
  }
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

V Momentum(const NodeContext& n) {
  const size_t k = tensors_updated(n, 3);
  const double alpha = n.attr_float("alpha", 0.0), beta = n.attr_float("beta", 0.0), norm = n.attr_float("norm_coefficient", 0.0);
  const std::string mode = n.attr_string("mode", "standard");
  if (mode != "standard" && mode != "nesterov") n.fail("has mode '" + mode + "' (standard or nesterov)");
  const Tensor& r = n.input(0);
  const Tensor beta_now = where(n.input(1) > int64_t(0), beta, 1.0);  // the first step takes the whole gradient
  V xs, vs;
  for (size_t i = 0; i < k; ++i) {
    const Tensor &x = n.input(2 + i), &g = n.input(2 + k + i), &v = n.input(2 + 2 * k + i);
    const Tensor g_reg = x * norm + g;
    const Tensor v_new = v * alpha + astype(beta_now, x.dtype()) * g_reg;
    xs.push_back(as_dtype(mode == "standard" ? x - r * v_new : x - r * (g_reg + v_new * alpha), x.dtype()));
    vs.push_back(as_dtype(v_new, v.dtype()));
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  return xs;
}

V Adam(const NodeContext& n) {
  const size_t k = tensors_updated(n, 4);
  const double alpha = n.attr_float("alpha", 0.9), beta = n.attr_float("beta", 0.999), eps = n.attr_float("epsilon", 1e-6),
               norm = n.attr_float("norm_coefficient", 0.0), post = n.attr_float("norm_coefficient_post", 0.0);
  const Tensor& r = n.input(0);
  const Tensor t = astype(n.input(1), DType::F64);
  const Tensor bias_corrected = r * astype(sqrt(1.0 - pow(Tensor::scalar(beta, DType::F64), t)) / (1.0 - pow(Tensor::scalar(alpha, DType::F64), t)), r.dtype());
  const Tensor r_now = where(t > 0.0, bias_corrected, r);
  V xs, vs, hs;
  for (size_t i = 0; i < k; ++i) {
    const Tensor &x = n.input(2 + i), &g = n.input(2 + k + i), &v = n.input(2 + 2 * k + i), &h = n.input(2 + 3 * k + i);
    const Tensor g_reg = x * norm + g;
    const Tensor v_new = v * alpha + g_reg * (1.0 - alpha);
    const Tensor h_new = h * beta + g_reg * g_reg * (1.0 - beta);
    const Tensor x_new = x - r_now * (v_new / (sqrt(h_new) + eps));
    xs.push_back(as_dtype(x_new * (1.0 - post), x.dtype()));
    vs.push_back(v_new), hs.push_back(h_new);
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

}  // namespace

// Gradient: the gradients of y (summed, as ONNX's reference seeds it with ones) with respect to
// xs, by hjit::grad over the nodes before this one recomputed from the xs given.
V Gradient(const NodeContext& n) {
  std::vector<std::string> xs;
  for (const auto& a : n.proto().attribute())
    if (a.name() == "xs") xs.assign(a.strings().begin(), a.strings().end());
  const std::string y = n.attr_string("y", "");
  if (xs.empty() || y.empty()) n.fail("needs the attributes xs and y");
  if (n.num_inputs() < xs.size()) n.fail("takes the xs as its first inputs");
  V at;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!is_float(n.input(i).dtype())) n.fail<DTypeError>("differentiates with respect to '" + xs[i] + "', which is not floating point");
    at.push_back(n.input(i));
  }
  auto loss = [&](const std::vector<Tensor>& x) {
    std::map<std::string, Value> replaced;
    for (size_t i = 0; i < xs.size(); ++i) replaced[xs[i]] = x[i];
    const Value v = n.recompute(y, replaced);
    if (!v.is_tensor() || !is_float(v.tensor().dtype())) n.fail("differentiates '" + y + "', which is not a floating point tensor");
    return sum(v.tensor());
  };
  return hjit::grad(loss)(at);
}

void add_training_ops(ConverterTable& t) {
  t["Gradient"] = Gradient;
  t["Adagrad"] = Adagrad;
  t["Momentum"] = Momentum;
  t["Adam"] = Adam;
}

}  // namespace hjit::onnx_import
