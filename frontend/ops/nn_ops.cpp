// Neural-network functions and layers, with torch.nn.functional's semantics. Most are
// compositions of the primitive ops; 16-bit floats are computed in f32 and rounded once, as
// PyTorch's kernels do (detail::in_f32).
#include <cmath>

#include <hjit/ops.h>

#include "frontend/ops/autocast_rules.h"
#include "frontend/ops/op_support.h"
#include "graph/shape_inference.h"

namespace hjit {

using detail::apply;
using detail::autocast_f32;
using detail::autocast_low;
using detail::cast_to;
using detail::floating;
using detail::in_f32;
using detail::norm_axis;
using detail::operand_of;
using detail::result_dtype;

namespace {

// softmax and log_softmax over a 0-d tensor (one element) or an empty axis (nothing to normalize).
template <class Fn>
Tensor over_axis(const Tensor& x, int axis, const char* op, Fn fn) {
  Tensor v = floating(autocast_f32(x));
  if (v.ndim() == 0) return over_axis(v.reshape({1}), 0, op, fn).reshape({});
  const int ax = norm_axis(axis, v.ndim(), op);
  if (v.shape()[size_t(ax)] == 0) return detail::same_value(v);
  return in_f32(v, [&](const Tensor& f) { return fn(f, ax); });
}

}  // namespace

Tensor gelu(const Tensor& x, bool tanh_approximation) {
  return in_f32(floating(x), [&](const Tensor& v) {
    if (tanh_approximation) {
      const double k = std::sqrt(2.0 / M_PI);
      return 0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v)));
    }
    return 0.5 * v * (1.0 + erf(v * M_SQRT1_2));
  });
}

Tensor silu(const Tensor& x) {
  return in_f32(floating(x), [](const Tensor& v) { return v * sigmoid(v); });
}

Tensor softmax(const Tensor& x, int axis) {
  return over_axis(x, axis, "softmax", [](const Tensor& v, int ax) {
    Tensor e = exp(v - max(v, {ax}, true));
    return e / sum(e, {ax}, true);
  });
}

// (x - max) - log(sum(exp(x - max))) in this order, as PyTorch: the compiled code keeps it
// (halide_backend/lowering/lower_ops.cpp, in_sum_chain).
Tensor log_softmax(const Tensor& x, int axis) {
  return over_axis(x, axis, "log_softmax", [](const Tensor& v, int ax) {
    Tensor shifted = v - max(v, {ax}, true);
    return shifted - log(sum(exp(shifted), {ax}, true));
  });
}

Tensor layer_norm(const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double eps) {
  if (x.ndim() == 0) throw ShapeError("layer_norm: needs at least one dimension");
  const int64_t n = x.shape().back();
  for (const auto* p : {&weight, &bias})
    if (*p && (*p)->shape() != Shape{n})
      throw ShapeError("layer_norm: weight and bias must have shape [" + std::to_string(n) + "] for input " +
                       shape_str(x.shape()) + ", got " + shape_str((*p)->shape()));
  // Centered after a shift by the row's first element: far from zero (a mean of 1000, an f32 ulp
  // of 6e-5) the mean itself cannot be stored exactly, but the shifted values and their mean can.
  return in_f32(floating(autocast_f32(x)), [&](const Tensor& v) {
    Tensor shifted = n > 1 ? v - slice(v, -1, 0, 1) : v;
    Tensor centered = shifted - mean(shifted, {-1}, true);
    Tensor y = centered * rsqrt(mean(centered * centered, {-1}, true) + eps);
    if (weight) y = y * *weight;
    if (bias) y = y + *bias;
    return y;
  });
}

Tensor rms_norm(const Tensor& x, const std::optional<Tensor>& weight, double eps) {
  if (x.ndim() == 0) throw ShapeError("rms_norm: needs at least one dimension");
  if (weight && weight->shape() != Shape{x.shape().back()})
    throw ShapeError("rms_norm: weight must have shape [" + std::to_string(x.shape().back()) + "] for input " +
                     shape_str(x.shape()) + ", got " + shape_str(weight->shape()));
  return in_f32(floating(autocast_f32(x)), [&](const Tensor& v) {
    Tensor y = v * rsqrt(mean(v * v, {-1}, true) + eps);
    return weight ? y * *weight : y;
  });
}

// Indices must lie in [0, num_embeddings): PyTorch's embedding does not wrap negative ones.
Tensor embedding(const Tensor& table, const Tensor& ids, IndexMode mode) {
  if (table.ndim() != 2) throw ShapeError("embedding: the table must be [num_embeddings, dim], got " + shape_str(table.shape()));
  if (!is_integral(ids.dtype()))
    throw DTypeError("embedding: ids must be integers (an int32 or int64 tensor), got " + TensorType{ids.dtype(), ids.shape()}.str() +
                     "; convert them with .astype(DType::I32)");
  if (mode == IndexMode::Clamp) return take(table, detail::clamped_indices(ids, table.shape()[0]), 0);
  return take(table, check_index(ids, 0, table.shape()[0], "embedding: id"), 0);
}

Tensor one_hot(const Tensor& indices, int64_t num_classes, DType dtype) {
  if (!is_integral(indices.dtype()))
    throw DTypeError("one_hot: indices must be integers, got " + TensorType{indices.dtype(), indices.shape()}.str());
  if (num_classes <= 0) throw ValueError("one_hot: needs num_classes > 0, got " + std::to_string(num_classes));
  const Tensor checked = check_index(indices, 0, num_classes, "one_hot: class").astype(DType::I64);
  Shape shape = indices.shape();
  shape.push_back(num_classes);
  return (unsqueeze(checked, -1) == iota(shape, -1, DType::I64)).astype(dtype);
}

namespace {
Tensor triangle(const Tensor& x, int64_t k, bool lower, const char* name) {
  if (x.ndim() < 2) throw ShapeError(std::string(name) + ": needs at least two dimensions, got " + shape_str(x.shape()));
  const int64_t rows = x.dim(-2), cols = x.dim(-1);
  Tensor diff = iota({rows, cols}, 1, DType::I64) - iota({rows, cols}, 0, DType::I64);  // column - row
  Tensor keep = lower ? diff <= k : diff >= k;
  return where(keep, x, Tensor::zeros({}, x.dtype()));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t k) { return triangle(x, k, true, "tril"); }
Tensor triu(const Tensor& x, int64_t k) { return triangle(x, k, false, "triu"); }

// ---- layers
namespace {

// A per-channel vector [C] shaped to broadcast against x's axis 1 ([1, C, 1, ...]).
Tensor per_channel(const Tensor& v, const Tensor& x, const char* what) {
  if (x.ndim() < 2) throw ShapeError(std::string("batch_norm: needs [N, C, ...], got ") + shape_str(x.shape()));
  if (v.shape() != Shape{x.shape()[1]})
    throw ShapeError(std::string("batch_norm: ") + what + " must have shape [" + std::to_string(x.shape()[1]) + "] for input " +
                     shape_str(x.shape()) + ", got " + shape_str(v.shape()));
  Shape s(size_t(x.ndim()), 1);
  s[1] = x.shape()[1];
  return v.reshape(s);
}

std::vector<int> all_but_channels(int rank) {
  std::vector<int> axes{0};
  for (int d = 2; d < rank; ++d) axes.push_back(d);
  return axes;
}

Tensor normalize(const Tensor& x, const Tensor& mean, const Tensor& var, const std::optional<Tensor>& weight,
                 const std::optional<Tensor>& bias, double eps) {
  Tensor y = (x - mean) * rsqrt(var + eps);
  if (weight) y = y * per_channel(*weight, x, "weight");
  if (bias) y = y + per_channel(*bias, x, "bias");
  return y;
}

Attrs window_attrs(Pair kernel, Pair stride, Pair padding) {
  if (stride[0] == 0 && stride[1] == 0) stride = kernel;
  return Attrs{{"kernel", std::vector<int64_t>(kernel.begin(), kernel.end())},
               {"stride", std::vector<int64_t>(stride.begin(), stride.end())},
               {"padding", std::vector<int64_t>(padding.begin(), padding.end())}};
}

}  // namespace

Tensor conv2d(const Tensor& x_in, const Tensor& weight_in, const std::optional<Tensor>& bias_in, Pair stride, Pair padding,
              Pair dilation, int64_t groups) {
  const Tensor x = autocast_low(x_in), weight = autocast_low(weight_in);
  const std::optional<Tensor> bias = autocast_low(bias_in);
  DType t = result_dtype(OpKind::Conv2d, {operand_of(x), operand_of(weight)});
  Attrs attrs{{"stride", std::vector<int64_t>(stride.begin(), stride.end())},
              {"padding", std::vector<int64_t>(padding.begin(), padding.end())},
              {"dilation", std::vector<int64_t>(dilation.begin(), dilation.end())},
              {"groups", groups}};
  Tensor y = apply(OpKind::Conv2d, {cast_to(x, t), cast_to(weight, t)}, std::move(attrs));
  if (!bias) return y;
  if (bias->shape() != Shape{y.shape()[1]})
    throw ShapeError("conv2d: bias must have shape [" + std::to_string(y.shape()[1]) + "], got " + shape_str(bias->shape()));
  return y + bias->reshape({1, y.shape()[1], 1, 1});
}

Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding) {
  return apply(OpKind::MaxPool2d, {x}, window_attrs(kernel, stride, padding));
}

Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding, bool count_include_pad) {
  Attrs attrs = window_attrs(kernel, stride, padding);
  attrs.set("count_include_pad", int64_t(count_include_pad));
  return apply(OpKind::AvgPool2d, {x}, std::move(attrs));  // integers: an integer average, as PyTorch
}

// Output cell (i, j) averages rows [floor(i H / OH), ceil((i + 1) H / OH)) and the same for
// columns (PyTorch's windows): a sum by two matmuls with 0/1 window matrices, divided by the
// cell's count. The global average (1, 1) is a mean.
Tensor adaptive_avg_pool2d(const Tensor& x, Pair output_size) {
  if (x.ndim() < 3) throw ShapeError("adaptive_avg_pool2d: takes [N, C, H, W] or [C, H, W], got " + shape_str(x.shape()));
  const int64_t H = x.dim(-2), W = x.dim(-1), OH = output_size[0], OW = output_size[1];
  if (OH < 1 || OW < 1)
    throw ValueError("adaptive_avg_pool2d: the output size must be positive, got (" + std::to_string(OH) + ", " +
                     std::to_string(OW) + ")");
  if (output_size == Pair{1, 1}) return mean(floating(x), {-2, -1}, true);
  return in_f32(floating(x), [&](const Tensor& v) {
    auto windows = [](int64_t n, int64_t out, std::vector<double>& lengths) {
      std::vector<double> m(size_t(out * n), 0.0);
      for (int64_t i = 0; i < out; ++i) {
        const int64_t lo = (i * n) / out, hi = ((i + 1) * n + out - 1) / out;
        for (int64_t j = lo; j < hi; ++j) m[size_t(i * n + j)] = 1.0;
        lengths.push_back(double(hi - lo));
      }
      return m;
    };
    std::vector<double> len_h, len_w;
    Tensor rows = Tensor::from_vector(windows(H, OH, len_h), {OH, H}).astype(v.dtype());
    Tensor cols = Tensor::from_vector(windows(W, OW, len_w), {OW, W}).astype(v.dtype()).transpose();
    std::vector<double> count;
    for (double a : len_h)
      for (double b : len_w) count.push_back(a * b);
    return matmul(matmul(rows, v), cols) / Tensor::from_vector(count, {OH, OW}).astype(v.dtype());
  });
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  return in_f32(floating(autocast_f32(x)), [&](const Tensor& v) {
    return normalize(v, per_channel(running_mean, v, "running_mean"), per_channel(running_var, v, "running_var"), weight,
                     bias, eps);
  });
}

Tensor batch_norm_training(const Tensor& x, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                           const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double momentum, double eps) {
  Tensor v = floating(autocast_f32(x));
  if (momentum < 0 || momentum > 1) throw ValueError("batch_norm_training: momentum must be in [0, 1], got " + std::to_string(momentum));
  BatchNormResult r = batch_norm_stats(v, weight, bias, eps);
  if (running_mean || running_var) {
    const int64_t n = v.numel() / std::max<int64_t>(1, v.shape()[1]);
    if (n < 2) throw ValueError("batch_norm_training: needs more than one value per channel, got " + shape_str(v.shape()));
    if (running_mean) {
      per_channel(*running_mean, v, "running_mean");
      Tensor rm = *running_mean;
      rm.assign((1 - momentum) * rm + momentum * r.mean);
    }
    if (running_var) {
      per_channel(*running_var, v, "running_var");
      Tensor rv = *running_var;
      // (n / (n - 1) from numel, not a number: a step over a dynamic batch stays dynamic.)
      const Tensor count = numel(v, all_but_channels(v.ndim()), r.var.dtype() == DType::F64 ? DType::F64 : DType::F32);
      rv.assign((1 - momentum) * rv + momentum * (r.var * (count / (count - 1.0)).astype(r.var.dtype())));
    }
  }
  return r.y;
}

BatchNormResult batch_norm_stats(const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                                 double eps) {
  Tensor v = floating(x);
  if (v.ndim() < 2) throw ShapeError("batch_norm: needs [N, C, ...], got " + shape_str(v.shape()));
  const DType t = v.dtype();
  Tensor f = cast_to(v, t == DType::F16 || t == DType::BF16 ? DType::F32 : t);
  std::vector<int> axes = all_but_channels(f.ndim());
  Tensor m = mean(f, axes, true);
  Tensor centered = f - m;
  Tensor var = mean(centered * centered, axes, true);
  Tensor y = centered * rsqrt(var + eps);
  if (weight) y = y * per_channel(*weight, f, "weight");
  if (bias) y = y + per_channel(*bias, f, "bias");
  const int64_t c = f.shape()[1];
  return BatchNormResult{cast_to(y, t), cast_to(m.reshape({c}), t), cast_to(var.reshape({c}), t)};
}

// Mean over the rows whose label is not ignore_index of -log_softmax(logits)[row, label]. A label
// outside [0, C) (other than ignore_index) is an IndexError, eagerly and from compiled code.
Tensor cross_entropy(const Tensor& logits_in, const Tensor& labels, int64_t ignore_index) {
  const Tensor logits = autocast_f32(logits_in);
  if (logits.ndim() != 2 || labels.ndim() != 1 || labels.shape()[0] != logits.shape()[0])
    throw ShapeError("cross_entropy: takes logits [N, C] and labels [N], got " + shape_str(logits.shape()) + " and " +
                     shape_str(labels.shape()));
  if (labels.dtype() != DType::I32 && labels.dtype() != DType::I64)
    throw DTypeError(std::string("cross_entropy: labels must be i32 or i64, got ") + dtype_name(labels.dtype()));
  const int64_t n = logits.shape()[0], c = logits.shape()[1];
  Tensor counted = labels != ignore_index;
  Tensor checked = check_index(where(counted, labels, 0), 0, c, "cross_entropy: label");
  // The label's log-probability, picked by comparing each class index with the row's label.
  Tensor hit = logical_and(iota({n, c}, 1, labels.dtype()) == unsqueeze(checked, 1), unsqueeze(counted, 1));
  Tensor picked = where(hit, log_softmax(logits, -1), 0.0);
  Tensor total = sum(picked);
  return -(total / sum(counted).astype(total.dtype()));
}

// Batch dimensions broadcast (as PyTorch's scaled_dot_product_attention).
Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, bool causal,
                                    std::optional<double> scale) {
  const Tensor q = autocast_low(q_in), k = autocast_low(k_in), v = autocast_low(v_in);
  const DType t = result_dtype(OpKind::Attention, {operand_of(q), operand_of(k), operand_of(v)});
  for (const Tensor* x : {&q, &k, &v})
    if (x->ndim() < 2)
      throw ShapeError("scaled_dot_product_attention: q, k and v must be [..., S, D], [..., T, D] and [..., T, Dv], got " +
                       shape_str(q.shape()) + ", " + shape_str(k.shape()) + ", " + shape_str(v.shape()));
  auto batch_of = [](const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 2); };
  Shape batch;
  if (!broadcast_shapes(batch_of(q), batch_of(k), &batch) || !broadcast_shapes(batch, batch_of(v), &batch))
    throw ShapeError("scaled_dot_product_attention: the batch dimensions of q " + shape_str(q.shape()) + ", k " +
                     shape_str(k.shape()) + " and v " + shape_str(v.shape()) + " cannot be broadcast together");
  auto full = [&](const Tensor& x) {
    Shape s = batch;
    s.insert(s.end(), x.shape().end() - 2, x.shape().end());
    return broadcast_to(cast_to(x, t), s);
  };
  const double s = scale ? *scale : 1.0 / std::sqrt(double(q.shape().back()));
  return apply(OpKind::Attention, {full(q), full(k), full(v)}, Attrs{{"causal", int64_t(causal)}, {"scale", s}});
}

}  // namespace hjit
