// The convolutions beside conv2d: 1-d (a 2-d one of height 1), 3-d (a sum over the kernel's depth
// of 2-d ones, the output depth folded into the batch) and transposed (the input padded and
// convolved with the kernel flipped and its channel axes swapped per group; strided ones one
// phase of the output at a time, dilated ones on the input spread by the strides).
// Compositions of differentiable ops, so their gradients and compiled forms come with them.
#include <string>

#include <hjit/ops.h>

#include "frontend/ops/autocast_rules.h"
#include "frontend/ops/op_support.h"

namespace hjit {

namespace {

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// x [N, C, spatial...] and weight [O, C / groups, kernel...] (forward) or [C, O / groups,
// kernel...] (transposed) of `dims` spatial dimensions, with their channels agreeing.
void check_operands(const char* op, const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias, size_t dims,
                    int64_t groups, bool transposed) {
  const size_t rank = dims + 2;
  if (x.ndim() != int(rank))
    throw ShapeError(std::string(op) + ": takes an input of rank " + std::to_string(rank) + " ([N, C" + (dims > 1 ? ", spatial..." : ", L") +
                     "]), given " + shape_str(x.shape()));
  if (w.ndim() != int(rank))
    throw ShapeError(std::string(op) + ": takes a weight of rank " + std::to_string(rank) + ", given " + shape_str(w.shape()));
  if (groups < 1) throw ValueError(std::string(op) + ": groups must be at least 1, given " + std::to_string(groups));
  const int64_t C = x.shape()[1];
  if (C % groups != 0) throw ShapeError(std::string(op) + ": " + std::to_string(C) + " input channels do not split in " + std::to_string(groups) + " groups");
  const bool fits = transposed ? w.shape()[0] == C : w.shape()[1] * groups == C && w.shape()[0] % groups == 0;
  if (!fits)
    throw ShapeError(std::string(op) + ": weight " + shape_str(w.shape()) + " does not fit input " + shape_str(x.shape()) + " with groups = " +
                     std::to_string(groups) + (transposed ? " (a transposed weight is [C_in, C_out / groups, kernel...])" : " (the weight is [C_out, C_in / groups, kernel...])"));
  for (size_t d = 2; d < rank; ++d)
    if (w.shape()[d] < 1) throw ShapeError(std::string(op) + ": weight " + shape_str(w.shape()) + " has an empty kernel");
  const int64_t out_channels = transposed ? w.shape()[1] * groups : w.shape()[0];
  if (bias && (bias->ndim() != 1 || bias->shape()[0] != out_channels))
    throw ShapeError(std::string(op) + ": bias must have shape [" + std::to_string(out_channels) + "], got " + shape_str(bias->shape()));
}

void check_positive(const char* op, const char* what, const std::vector<int64_t>& v) {
  for (int64_t e : v)
    if (e < 1) throw ValueError(std::string(op) + ": " + what + " must be positive, given " + ints_str(v));
}

Tensor add_bias(const Tensor& y, const std::optional<Tensor>& bias) {
  if (!bias) return y;
  Shape s(size_t(y.ndim()), 1);
  s[1] = bias->shape()[0];
  return y + detail::autocast_low(*bias).reshape(s);
}

// stride - 1 zeros between neighbours along `axis`.
Tensor spread(const Tensor& x, int axis, int64_t stride) {
  const int64_t e = x.shape()[size_t(axis)];
  if (stride == 1 || e == 0) return x;
  Shape split = x.shape();
  split.insert(split.begin() + axis + 1, 1);
  std::vector<std::pair<int64_t, int64_t>> widths(split.size(), {0, 0});
  widths[size_t(axis) + 1] = {0, stride - 1};
  Shape merged = x.shape();
  merged[size_t(axis)] = e * stride;
  return slice(reshape(pad(reshape(x, split), widths, 0), merged), axis, 0, (e - 1) * stride + 1);
}

// conv3d on an input padded already.
Tensor conv3d_valid(const Tensor& x, const Tensor& w, const Triple& stride, const Triple& dilation, int64_t groups) {
  const int64_t N = x.shape()[0], C = x.shape()[1], O = w.shape()[0], kd = w.shape()[2];
  const int64_t span = (kd - 1) * dilation[0] + 1;
  if (x.shape()[2] < span)
    throw ShapeError("conv3d: the (padded) input " + shape_str(x.shape()) + " is shallower than the kernel " + shape_str(w.shape()));
  const int64_t depth = (x.shape()[2] - span) / stride[0] + 1;
  Tensor acc;
  for (int64_t t = 0; t < kd; ++t) {
    const int64_t start = t * dilation[0];
    Tensor xs = slice(x, 2, start, start + (depth - 1) * stride[0] + 1, stride[0]);  // [N, C, depth, H, W]
    xs = reshape(transpose(xs, {0, 2, 1, 3, 4}), {N * depth, C, x.shape()[3], x.shape()[4]});
    const Tensor wk = squeeze(slice(w, 2, t, t + 1), {2});
    const Tensor y = conv2d(xs, wk, std::nullopt, {stride[1], stride[2]}, {0, 0}, {dilation[1], dilation[2]}, groups);
    acc = acc.defined() ? acc + y : y;
  }
  const Shape& ys = acc.shape();
  return transpose(reshape(acc, {N, depth, O, ys[2], ys[3]}), {0, 2, 1, 3, 4});
}

// A transposed convolution of strides s, dilation 1, as prod(s) stride-1 ones, one per phase of
// the output (its positions modulo the strides), each with the kernel taps of its phase: the
// spread input's zeros are never multiplied (prod(s) times fewer multiply-adds than convolving the
// spread input), and the phases' outputs interleave into the output. in and w of rank 4 or 5.
Tensor conv_transpose_by_phases(const Tensor& in, const Tensor& w, const std::vector<int64_t>& s, const std::vector<int64_t>& pb,
                                const std::vector<int64_t>& pe, int64_t groups) {
  const size_t sd = s.size();
  const std::vector<int64_t> ones(sd, 1), zeros(sd, 0);
  Shape q(sd), full(sd);  // per phase: q positions; uncropped: full
  for (size_t d = 0; d < sd; ++d) {
    const int64_t n = in.shape()[2 + d], k = w.shape()[2 + d];
    full[d] = (n - 1) * s[d] + k;
    q[d] = (full[d] + s[d] - 1) / s[d];
  }
  Shape phase_shape{in.shape()[0], w.shape()[1] * groups};
  phase_shape.insert(phase_shape.end(), q.begin(), q.end());
  std::vector<Tensor> phases;
  std::vector<int64_t> r(sd, 0);
  for (bool more = true; more;) {
    Tensor taps = w;
    bool empty = false;
    for (size_t d = 0; d < sd; ++d) {
      empty |= r[d] >= w.shape()[2 + d];
      if (!empty) taps = slice(taps, int(2 + d), r[d], std::nullopt, s[d]);
    }
    if (empty) {
      phases.push_back(Tensor::zeros(phase_shape, in.dtype()));
    } else {
      Tensor y = conv_transpose(in, taps, std::nullopt, ones, zeros, zeros, ones, groups);
      std::vector<std::pair<int64_t, int64_t>> widths{{0, 0}, {0, 0}};
      bool short_ = false;
      for (size_t d = 0; d < sd; ++d) widths.push_back({0, q[d] - y.shape()[2 + d]}), short_ |= q[d] != y.shape()[2 + d];
      phases.push_back(short_ ? pad(y, widths, 0) : y);
    }
    more = false;
    for (size_t d = sd; d-- > 0;) {  // the next phase, the last dimension's fastest
      if (++r[d] < s[d]) {
        more = true;
        break;
      }
      r[d] = 0;
    }
  }
  // [N, O, q..., phases] -> [N, O, q0, s0, q1, s1, ...] -> [N, O, q0 * s0, ...]
  Tensor y = stack(phases, -1);
  Shape split(phase_shape), merged{phase_shape[0], phase_shape[1]};
  split.insert(split.end(), s.begin(), s.end());
  std::vector<int> perm{0, 1};
  for (size_t d = 0; d < sd; ++d) perm.push_back(int(2 + d)), perm.push_back(int(2 + sd + d)), merged.push_back(q[d] * s[d]);
  y = reshape(transpose(reshape(y, split), perm), merged);
  // Cropped by the paddings (a negative end padding keeps zeros past the end).
  std::vector<std::pair<int64_t, int64_t>> widths{{0, 0}, {0, 0}};
  bool padded = false;
  for (size_t d = 0; d < sd; ++d) {
    const int64_t lo = std::max<int64_t>(0, -pb[d]), hi = std::max<int64_t>(0, full[d] - pe[d] - q[d] * s[d]);
    widths.push_back({lo, hi});
    padded |= lo || hi;
  }
  if (padded) y = pad(y, widths, 0);
  for (size_t d = 0; d < sd; ++d) {
    const int64_t lo = std::max<int64_t>(0, -pb[d]);
    const int64_t begin = pb[d] + lo, end = full[d] - pe[d] + lo;
    if (begin != 0 || end != y.shape()[2 + d]) y = slice(y, int(2 + d), begin, end);
  }
  return y;
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  check_operands("conv1d", x, weight, bias, 1, groups, false);
  check_positive("conv1d", "stride and dilation", {stride, dilation});
  if (padding < 0) throw ValueError("conv1d: padding must not be negative, given " + std::to_string(padding));
  return squeeze(conv2d(unsqueeze(x, 2), unsqueeze(weight, 2), bias, {1, stride}, {0, padding}, {1, dilation}, groups), {2});
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, Triple stride, Triple padding,
              Triple dilation, int64_t groups) {
  check_operands("conv3d", x, weight, bias, 3, groups, false);
  check_positive("conv3d", "strides and dilations", {stride[0], stride[1], stride[2], dilation[0], dilation[1], dilation[2]});
  std::vector<std::pair<int64_t, int64_t>> widths{{0, 0}, {0, 0}};
  bool padded = false;
  for (int64_t p : padding) {
    if (p < 0) throw ValueError("conv3d: padding must not be negative, given " + ints_str({padding[0], padding[1], padding[2]}));
    widths.push_back({p, p});
    padded |= p != 0;
  }
  return add_bias(conv3d_valid(padded ? pad(x, widths, 0) : x, weight, stride, dilation, groups), bias);
}

Tensor conv_transpose(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, const std::vector<int64_t>& stride,
                      const std::vector<int64_t>& pad_begin, const std::vector<int64_t>& pad_end,
                      const std::vector<int64_t>& dilation, int64_t groups) {
  const int rank = x.ndim();
  if (rank < 3 || rank > 5) throw ShapeError("conv_transpose: takes 1-, 2- and 3-d inputs ([N, C, spatial...]), given " + shape_str(x.shape()));
  const size_t dims = size_t(rank) - 2;
  check_operands("conv_transpose", x, weight, bias, dims, groups, true);
  if (stride.size() != dims || pad_begin.size() != dims || pad_end.size() != dims || dilation.size() != dims)
    throw ValueError("conv_transpose: strides " + ints_str(stride) + ", paddings " + ints_str(pad_begin) + " and " + ints_str(pad_end) +
                     " and dilations " + ints_str(dilation) + " must each have one entry per spatial dimension (" + std::to_string(dims) + ")");
  check_positive("conv_transpose", "strides and dilations", stride);
  check_positive("conv_transpose", "strides and dilations", dilation);
  const bool one_d = dims == 1;
  Tensor in = one_d ? unsqueeze(x, 2) : x, w = one_d ? unsqueeze(weight, 2) : weight;
  auto lifted = [&](std::vector<int64_t> v, int64_t fill) {
    if (one_d) v.insert(v.begin(), fill);
    return v;
  };
  const std::vector<int64_t> s = lifted(stride, 1), pb = lifted(pad_begin, 0), pe = lifted(pad_end, 0), dil = lifted(dilation, 1);
  const size_t sd = s.size();
  bool strided = false, dilated = false;
  for (size_t d = 0; d < sd; ++d) strided |= s[d] > 1, dilated |= dil[d] > 1;
  const bool by_phases = strided && !dilated && x.numel() > 0;
  std::vector<std::pair<int64_t, int64_t>> widths{{0, 0}, {0, 0}};
  for (size_t d = 0; d < sd; ++d) {
    const int64_t reach = (w.shape()[2 + d] - 1) * dil[d];
    const int64_t out = (in.shape()[2 + d] - 1) * s[d] + reach + 1 - pb[d] - pe[d];
    if (out < 1)
      throw ShapeError("conv_transpose: input " + shape_str(x.shape()) + " with weight " + shape_str(weight.shape()) + " and paddings " +
                       ints_str(pad_begin) + ", " + ints_str(pad_end) + " leaves no output along spatial dimension " + std::to_string(d));
    if (!by_phases) in = spread(in, int(2 + d), s[d]);
    widths.push_back({reach - pb[d], reach - pe[d]});
  }
  if (by_phases) {
    Tensor y = conv_transpose_by_phases(in, w, s, pb, pe, groups);
    return add_bias(one_d ? squeeze(y, {2}) : y, bias);
  }
  in = pad(in, widths, 0);
  // [C_in, C_out / g, k...] -> [C_out, C_in / g, k...] per group, each kernel axis reversed.
  const int64_t cin = w.shape()[0], cout_g = w.shape()[1];
  Shape grouped{groups, cin / groups, cout_g}, regrouped{groups * cout_g, cin / groups};
  std::vector<int> perm{0, 2, 1};
  for (size_t d = 0; d < sd; ++d) {
    grouped.push_back(w.shape()[2 + d]), regrouped.push_back(w.shape()[2 + d]), perm.push_back(int(3 + d));
  }
  Tensor wt = reshape(transpose(reshape(w, grouped), perm), regrouped);
  for (size_t d = 0; d < sd; ++d) {
    const int64_t k = w.shape()[2 + d];
    if (k == 1) continue;
    std::vector<int64_t> back(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) back[size_t(i)] = k - 1 - i;
    wt = take(wt, Tensor::from_vector<int64_t>(back, Shape{k}), int(2 + d));
  }
  Tensor y = sd == 3 ? conv3d_valid(in, wt, {1, 1, 1}, {dil[0], dil[1], dil[2]}, groups)
                     : conv2d(in, wt, std::nullopt, {1, 1}, {0, 0}, {dil[0], dil[1]}, groups);
  if (one_d) y = squeeze(y, {2});
  return add_bias(y, bias);
}

namespace {

// PyTorch's padding and output_padding: the output cropped by `padding` at both ends, and
// output_padding more kept at the end (each below its stride or dilation, which leaves the size
// a forward convolution maps back).
Tensor conv_transpose_torch(const char* op, const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                            const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                            const std::vector<int64_t>& output_padding, int64_t groups, const std::vector<int64_t>& dilation) {
  std::vector<int64_t> end(padding.size());
  for (size_t d = 0; d < padding.size(); ++d) {
    if (padding[d] < 0 || output_padding[d] < 0)
      throw ValueError(std::string(op) + ": padding " + ints_str(padding) + " and output_padding " + ints_str(output_padding) + " must not be negative");
    if (output_padding[d] >= stride[d] && output_padding[d] >= dilation[d])
      throw ValueError(std::string(op) + ": output_padding " + ints_str(output_padding) + " must be smaller than the stride " + ints_str(stride) +
                       " or the dilation " + ints_str(dilation));
    end[d] = padding[d] - output_padding[d];
  }
  if (x.ndim() != int(padding.size()) + 2)
    throw ShapeError(std::string(op) + ": takes an input of rank " + std::to_string(padding.size() + 2) + ", given " + shape_str(x.shape()));
  return conv_transpose(x, w, bias, stride, padding, end, dilation, groups);
}

}  // namespace

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, int64_t stride, int64_t padding,
                        int64_t output_padding, int64_t groups, int64_t dilation) {
  return conv_transpose_torch("conv_transpose1d", x, weight, bias, {stride}, {padding}, {output_padding}, groups, {dilation});
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, Pair stride, Pair padding,
                        Pair output_padding, int64_t groups, Pair dilation) {
  return conv_transpose_torch("conv_transpose2d", x, weight, bias, {stride[0], stride[1]}, {padding[0], padding[1]},
                              {output_padding[0], output_padding[1]}, groups, {dilation[0], dilation[1]});
}

Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, Triple stride, Triple padding,
                        Triple output_padding, int64_t groups, Triple dilation) {
  return conv_transpose_torch("conv_transpose3d", x, weight, bias, {stride[0], stride[1], stride[2]}, {padding[0], padding[1], padding[2]},
                              {output_padding[0], output_padding[1], output_padding[2]}, groups,
                              {dilation[0], dilation[1], dilation[2]});
}

}  // namespace hjit
