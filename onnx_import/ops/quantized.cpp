// ONNX's quantized ops, in exact integer arithmetic where ONNX's is integer: QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv.
#include <limits>

#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

int64_t rank_of(const Tensor& t) { return int64_t(t.shape().size()); }

// A per-axis parameter ([C]) shaped to broadcast along `axis` of a tensor of rank r; scalars as they are.
Tensor along(const NodeContext& n, const Tensor& p, int64_t axis, int64_t r) {
  if (rank_of(p) == 0 || p.numel() == 1) return reshape(p, {});
  Shape s(size_t(r), 1);
  s[size_t(n.axis(axis, r))] = p.numel();
  return reshape(p, s);
}

// round half to even, then clamped to the range of `to` and converted.
Tensor saturate(const Tensor& x, DType to) {
  const double lo = to == DType::U8 ? 0 : to == DType::I8 ? -128 : to == DType::I32 ? -2147483648.0 : 0;
  const double hi = to == DType::U8 ? 255 : to == DType::I8 ? 127 : to == DType::I32 ? 2147483647.0 : 65535;
  return astype(clamp(round(x), lo, hi), to);
}

V QuantizeLinear(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t axis = n.attr_int("axis", 1), r = rank_of(x);
  const Tensor scale = along(n, n.input(1), axis, r);
  const DType to = n.has_input(2) ? n.input(2).dtype() : DType::U8;
  if (to != DType::U8 && to != DType::I8) n.fail("quantizes to u8 or i8");
  Tensor y = astype(x, DType::F32) / scale;
  if (n.has_input(2)) y = round(y) + astype(along(n, n.input(2), axis, r), DType::F32);
  return {saturate(y, to)};
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
  return {saturate(round(x / scale) + astype(zp, DType::F32), DType::U8), scale, zp};
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

V MatMulInteger(const NodeContext& n) { return {astype(matmul(shifted(n, 0, 2, -2), shifted(n, 1, 3, -1)), DType::I32)}; }

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
  Tensor w = astype(n.input(1), DType::I32);
  if (n.has_input(3)) w = w - along(n, astype(n.input(3), DType::I32), 0, rank_of(w));
  return {astype(round(conv_exact(n, shifted(n, 0, 2, 1), w)), DType::I32)};
}

// QLinear ops: the integer result requantized with the float multiplier a_scale * b_scale / y_scale
// (in f32, as ONNX's reference), rounded half to even, plus the output's zero point.
Tensor requantize(const NodeContext& n, const Tensor& acc, const Tensor& a_scale, const Tensor& b_scale, size_t y_scale, size_t y_zp) {
  const Tensor multiplier = astype(a_scale, DType::F32) * astype(b_scale, DType::F32) / astype(n.input(y_scale), DType::F32);
  const DType to = n.input(y_zp).dtype();
  return saturate(round(astype(acc, DType::F32) * multiplier) + astype(n.input(y_zp), DType::F32), to);
}

V QLinearMatMul(const NodeContext& n) {
  const Tensor a = astype(n.input(0), DType::I32) - astype(n.input(2), DType::I32);
  const Tensor b = astype(n.input(3), DType::I32) - astype(n.input(5), DType::I32);
  return {requantize(n, matmul(a, b), n.input(1), n.input(4), 6, 7)};
}

V QLinearConv(const NodeContext& n) {
  const Tensor x = astype(n.input(0), DType::I32) - astype(n.input(2), DType::I32);
  Tensor w = astype(n.input(3), DType::I32);
  w = w - along(n, astype(n.input(5), DType::I32), 0, rank_of(w));
  Tensor acc = round(conv_exact(n, x, w));
  if (n.has_input(8)) acc = acc + reshape(astype(n.input(8), DType::F64), {n.input(8).numel(), 1, 1});
  const Tensor w_scale = along(n, n.input(4), 1, rank_of(acc));
  return {requantize(n, acc, n.input(1), w_scale, 6, 7)};
}

}  // namespace

void add_quantized_ops(ConverterTable& t) {
#define HJIT_ONNX_OP(name) t[#name] = name;
  HJIT_ONNX_OP(QuantizeLinear) HJIT_ONNX_OP(DequantizeLinear) HJIT_ONNX_OP(DynamicQuantizeLinear)
  HJIT_ONNX_OP(MatMulInteger) HJIT_ONNX_OP(ConvInteger) HJIT_ONNX_OP(QLinearMatMul) HJIT_ONNX_OP(QLinearConv)
#undef HJIT_ONNX_OP
}

}  // namespace hjit::onnx_import
