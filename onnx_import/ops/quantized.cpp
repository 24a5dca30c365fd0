// ONNX's quantized ops, in exact integer arithmetic where ONNX's is integer: QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv.
#include <limits>
#include <optional>

#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

int64_t rank_of(const Tensor& t) { return int64_t(t.shape().size()); }
bool eight_bit(DType t) { return t == DType::U8 || t == DType::I8; }

// A per-axis parameter ([C]) shaped to broadcast along `axis` of a tensor of rank r; scalars as they are.
Tensor along(const NodeContext& n, const Tensor& p, int64_t axis, int64_t r) {
  if (rank_of(p) == 0 || p.numel() == 1) return reshape(p, {});
  Shape s(size_t(r), 1);
  s[size_t(n.axis(axis, r))] = p.numel();
  return reshape(p, s);
}

// Whole values clamped to the range of `to` and converted.
Tensor clamp_to(const Tensor& x, DType to) {
  const double lo = to == DType::U8 ? 0 : to == DType::I8 ? -128 : to == DType::I32 ? -2147483648.0 : 0;
  const double hi = to == DType::U8 ? 255 : to == DType::I8 ? 127 : to == DType::I32 ? 2147483647.0 : 65535;
  return astype(clamp(x, lo, hi), to);
}
// round half to even, then clamped to the range of `to` and converted.
Tensor saturate(const Tensor& x, DType to) { return clamp_to(round(x), to); }

// QuantizeLinear's x / scale; where x's converter noted its factors, the division taken by their
// scale alone (one multiplier: Factored).
Tensor divided_by(const NodeContext& n, const Tensor& x, const Tensor& scale) {
  const std::optional<Factored> f = n.factored_input(0);
  if (!f || x.dtype() != DType::F32 || scale.dtype() != DType::F32) return astype(x, DType::F32) / scale;
  if (f->divided) return f->value * (1.0 / (f->scale * scale));
  const Tensor y = f->value * (f->scale / scale);
  return f->offset ? y + *f->offset / scale : y;
}

V QuantizeLinear(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t axis = n.attr_int("axis", 1), r = rank_of(x);
  const Tensor scale = along(n, n.input(1), axis, r);
  const DType to = n.has_input(2) ? n.input(2).dtype() : DType::U8;
  if (to != DType::U8 && to != DType::I8) n.fail("quantizes to u8 or i8");
  Tensor y = round(divided_by(n, x, scale));
  if (n.has_input(2)) y = y + astype(along(n, n.input(2), axis, r), DType::F32);
  return {clamp_to(y, to)};
}

V DequantizeLinear(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t axis = n.attr_int("axis", 1), r = rank_of(x);
  Tensor v = astype(x, DType::F32);
  if (n.has_input(2)) v = v - astype(along(n, n.input(2), axis, r), DType::F32);
  return {v * along(n, n.input(1), axis, r)};
}

V DynamicQuantizeLinear(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const Tensor lo = minimum(min(x), 0.0), hi = maximum(max(x), 0.0);
  const Tensor scale = (hi - lo) / 255.0;
  const Tensor zp = saturate(-lo / scale, DType::U8);
  return {clamp_to(round(x / scale) + astype(zp, DType::F32), DType::U8), scale, zp};
}

// An operand less its zero point, in i32 (exact: the products of 8-bit values and their sums fit).
Tensor shifted(const NodeContext& n, size_t value, size_t zero_point, int zero_point_axis) {
  Tensor v = astype(n.input(value), DType::I32);
  if (!n.has_input(zero_point)) return v;
  Tensor zp = astype(n.input(zero_point), DType::I32);
  if (rank_of(zp) == 1 && zp.numel() > 1) {  // per row of A, per column of B
    Shape s(size_t(rank_of(v)), 1);
    s[size_t(n.axis(zero_point_axis, rank_of(v)))] = zp.numel();
    zp = reshape(zp, s);
  }
  return v - zp;
}

// A zero point of MatMulInteger's (QLinearMatMul's) operand `value`: a scalar, or one per row of a
// (shaped [M, 1]) or per column of b ([N]); 0 of the operand's type where absent.
Tensor zero_point_of(const NodeContext& n, size_t value, size_t zero_point, bool rows) {
  const Tensor& v = n.input(value);
  if (!n.has_input(zero_point)) return Tensor::zeros({}, v.dtype());
  const Tensor& zp = n.input(zero_point);
  if (zp.numel() == 1) return reshape(zp, {});
  if (rank_of(zp) != 1) n.fail("takes a zero point of one value or one per " + std::string(rows ? "row" : "column") + ", got " + shape_str(zp.shape()));
  return rows ? reshape(zp, {zp.numel(), 1}) : zp;
}

// The exact integer product of two 8-bit operands less their zero points (hjit::int_matmul: VNNI's
// dot products where the CPU has them); other integer types through i32 as before.
Tensor integer_product(const NodeContext& n, size_t a, size_t a_zp, size_t b, size_t b_zp) {
  if (eight_bit(n.input(a).dtype()) && eight_bit(n.input(b).dtype()))
    return int_matmul(n.input(a), n.input(b), zero_point_of(n, a, a_zp, true), zero_point_of(n, b, b_zp, false));
  return astype(matmul(shifted(n, a, a_zp, -2), shifted(n, b, b_zp, -1)), DType::I32);
}

V MatMulInteger(const NodeContext& n) { return {integer_product(n, 0, 2, 1, 3)}; }

// Integer convolution through f64 (exact below 2^53, far beyond 8-bit products' sums).
Tensor conv_exact(const NodeContext& n, const Tensor& x, const Tensor& w) {
  const std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0}), strides = n.attr_ints("strides", {1, 1}),
                             dil = n.attr_ints("dilations", {1, 1});
  if (rank_of(x) != 4 || pads.size() != 4 || strides.size() != 2 || dil.size() != 2) n.fail("hjit converts 2-d integer convolutions");
  Tensor xf = astype(x, DType::F64);
  if (pads[0] != pads[2] || pads[1] != pads[3]) xf = pad(xf, {{0, 0}, {0, 0}, {pads[0], pads[2]}, {pads[1], pads[3]}});
  const Pair padding = pads[0] == pads[2] && pads[1] == pads[3] ? Pair{pads[0], pads[1]} : Pair{0, 0};
  return conv2d(xf, astype(w, DType::F64), std::nullopt, {strides[0], strides[1]}, padding, {dil[0], dil[1]}, n.attr_int("group", 1));
}

V ConvInteger(const NodeContext& n) {
  const Tensor zx = n.has_input(2) ? n.input(2) : Tensor::zeros({}, n.input(0).dtype());
  if (std::optional<Tensor> y = integer_conv(n, n.input(0), zx, n.input(1), n.optional_input(3))) return {*y};
  Tensor w = astype(n.input(1), DType::I32);
  if (n.has_input(3)) w = w - along(n, astype(n.input(3), DType::I32), 0, rank_of(w));
  return {astype(round(conv_exact(n, shifted(n, 0, 2, 1), w)), DType::I32)};
}

// QLinear ops: the integer result requantized with the float multiplier a_scale * b_scale / y_scale
// (in f32, as ONNX's reference), rounded half to even, plus the output's zero point.
Tensor requantize(const NodeContext& n, const Tensor& acc, const Tensor& a_scale, const Tensor& b_scale, size_t y_scale, size_t y_zp) {
  const Tensor multiplier = astype(a_scale, DType::F32) * astype(b_scale, DType::F32) / astype(n.input(y_scale), DType::F32);
  const DType to = n.input(y_zp).dtype();
  return clamp_to(round(astype(acc, DType::F32) * multiplier) + astype(n.input(y_zp), DType::F32), to);
}

V QLinearMatMul(const NodeContext& n) { return {requantize(n, integer_product(n, 0, 2, 3, 5), n.input(1), n.input(4), 6, 7)}; }

V QLinearConv(const NodeContext& n) {
  if (std::optional<Tensor> acc = integer_conv(n, n.input(0), n.input(2), n.input(3), n.input(5))) {
    Tensor sum = *acc;
    if (n.has_input(8)) sum = sum + reshape(astype(n.input(8), DType::I32), {n.input(8).numel(), 1, 1});
    const Tensor w_scale = along(n, n.input(4), 1, rank_of(sum));
    return {requantize(n, sum, n.input(1), w_scale, 6, 7)};
  }
  const Tensor x = astype(n.input(0), DType::I32) - astype(n.input(2), DType::I32);
  Tensor w = astype(n.input(3), DType::I32);
  w = w - along(n, astype(n.input(5), DType::I32), 0, rank_of(w));
  Tensor acc = round(conv_exact(n, x, w));
  if (n.has_input(8)) acc = acc + reshape(astype(n.input(8), DType::F64), {n.input(8).numel(), 1, 1});
  const Tensor w_scale = along(n, n.input(4), 1, rank_of(acc));
  return {requantize(n, acc, n.input(1), w_scale, 6, 7)};
}

}  // namespace

namespace {
// Whether t's values are known and all 0 (a weight's zero points, an initializer): false when they
// are computed from the model's inputs.
bool known_zeros(const Tensor& t) {
  try {
    for (int64_t v : t.to_vector<int64_t>())
      if (v != 0) return false;
    return true;
  } catch (const ConcretizationError&) {
    return false;
  }
}
}  // namespace

std::optional<Tensor> integer_conv(const NodeContext& n, const Tensor& x, const Tensor& x_zero_point, const Tensor& w,
                                   const std::optional<Tensor>& w_zero_point) {
  if (rank_of(x) != 4 || rank_of(w) != 4 || !eight_bit(x.dtype()) || !eight_bit(w.dtype()) || x_zero_point.numel() != 1) return std::nullopt;
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  const std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0}), strides = n.attr_ints("strides", {1, 1}),
                             dil = n.attr_ints("dilations", {1, 1});
  if ((auto_pad != "NOTSET" && auto_pad != "VALID") || pads.size() != 4 || strides.size() != 2 || dil.size() != 2 || pads[0] != pads[2] ||
      pads[1] != pads[3])
    return std::nullopt;
  const int64_t groups = n.attr_int("group", 1);
  const Pair stride{strides[0], strides[1]}, padding{pads[0], pads[1]}, dilation{dil[0], dil[1]};
  Tensor acc = int_conv2d(x, w, x_zero_point, stride, padding, dilation, groups);
  if (w_zero_point && !known_zeros(*w_zero_point)) {
    // sum((x - zx)(w - zw)) = sum((x - zx) w) - zw sum(x - zx) over the window: that sum is the
    // convolution with a weight of ones (per group).
    const int64_t per_group = w.shape()[1];
    const Tensor ones = Tensor::ones({groups, per_group, w.shape()[2], w.shape()[3]}, DType::I8);
    Tensor window = int_conv2d(x, ones, x_zero_point, stride, padding, dilation, groups);  // [N, groups, OH, OW]
    const int64_t O = w.shape()[0];
    if (groups > 1) window = reshape(broadcast_to(unsqueeze(window, 2), {window.shape()[0], groups, O / groups, window.shape()[2], window.shape()[3]}),
                                     {window.shape()[0], O, window.shape()[2], window.shape()[3]});
    const Tensor zw = w_zero_point->numel() == 1 ? reshape(astype(*w_zero_point, DType::I32), {}) : reshape(astype(*w_zero_point, DType::I32), {1, O, 1, 1});
    acc = acc - zw * window;
  }
  return acc;
}

std::optional<Factored> dequantized_conv(const NodeContext& n) {
  const std::optional<Dequantized> qx = n.dequantized_input(0), qw = n.dequantized_input(1);
  if (!qx || !qw || qx->scale.dtype() != DType::F32 || qw->scale.dtype() != DType::F32 || qx->scale.numel() != 1) return std::nullopt;
  if (rank_of(qw->x) != 4) return std::nullopt;
  const int64_t O = qw->x.shape()[0], axis = qw->axis < 0 ? qw->axis + 4 : qw->axis;
  const bool per_channel = qw->scale.numel() != 1;
  if (per_channel && (rank_of(qw->scale) != 1 || axis != 0 || qw->scale.numel() != O)) return std::nullopt;
  if (qw->zero_point && qw->zero_point->numel() != 1 && qw->zero_point->shape() != qw->scale.shape()) return std::nullopt;
  const Tensor zx = qx->zero_point ? reshape(*qx->zero_point, {}) : Tensor::zeros({}, qx->x.dtype());
  const std::optional<Tensor> acc = integer_conv(n, qx->x, zx, qw->x, qw->zero_point);
  if (!acc) return std::nullopt;
  const Tensor scale = reshape(qx->scale, {}) * (per_channel ? reshape(qw->scale, {1, O, 1, 1}) : reshape(qw->scale, {}));
  Factored y{astype(*acc, DType::F32), scale, std::nullopt};
  if (std::optional<Tensor> bias = n.optional_input(2)) y.offset = reshape(astype(*bias, DType::F32), {1, O, 1, 1});
  return y;
}

std::optional<Factored> dequantized_product(const NodeContext& n, bool trans_a, bool trans_b) {
  const std::optional<Dequantized> qa = n.dequantized_input(0), qb = n.dequantized_input(1);
  if (!qa || !qb) return std::nullopt;
  if (!eight_bit(qa->x.dtype()) || !eight_bit(qb->x.dtype()) || qa->scale.dtype() != DType::F32 || qb->scale.dtype() != DType::F32) return std::nullopt;
  if (rank_of(qa->x) < 2 || rank_of(qb->x) < 2) return std::nullopt;
  auto one = [](const std::optional<Tensor>& t) { return !t || t->numel() == 1; };
  // a: one scale (a row's values share the sum); b: one, or one per column (the axis of the
  // product's columns: the last, the first of a transposed Gemm operand).
  if (qa->scale.numel() != 1 || !one(qa->zero_point)) return std::nullopt;
  const int64_t rb = rank_of(qb->x), columns = trans_b ? rb - 2 : rb - 1, axis = qb->axis < 0 ? qb->axis + rb : qb->axis;
  const bool per_column = qb->scale.numel() != 1;
  if (per_column && (rank_of(qb->scale) != 1 || axis != columns || qb->scale.numel() != qb->x.shape()[size_t(columns)])) return std::nullopt;
  if (qb->zero_point && qb->zero_point->numel() != 1 && (!per_column || qb->zero_point->shape() != qb->scale.shape())) return std::nullopt;
  const Tensor a = trans_a ? transpose(qa->x) : qa->x, b = trans_b ? transpose(qb->x) : qb->x;
  const Tensor za = qa->zero_point ? reshape(*qa->zero_point, {}) : Tensor::zeros({}, a.dtype());
  Tensor zb = Tensor::zeros({}, b.dtype());
  if (qb->zero_point) zb = qb->zero_point->numel() == 1 ? reshape(*qb->zero_point, {}) : *qb->zero_point;
  const Tensor scale = reshape(qa->scale, {}) * (per_column ? qb->scale : reshape(qb->scale, {}));
  return Factored{astype(int_matmul(a, b, za, zb), DType::F32), scale, std::nullopt};
}

void add_quantized_ops(ConverterTable& t) {
#define HJIT_ONNX_OP(name) t[#name] = name;
  HJIT_ONNX_OP(QuantizeLinear) HJIT_ONNX_OP(DequantizeLinear) HJIT_ONNX_OP(DynamicQuantizeLinear)
  HJIT_ONNX_OP(MatMulInteger) HJIT_ONNX_OP(ConvInteger) HJIT_ONNX_OP(QLinearMatMul) HJIT_ONNX_OP(QLinearConv)
#undef HJIT_ONNX_OP
}

}  // namespace hjit::onnx_import
