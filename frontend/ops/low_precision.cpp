// Integer contractions: exact sums of 8-bit products in i32, lowered so that x86's VNNI dot
// products (vpdpbusd) compute them where the CPU has them.
#include "frontend/ops/op_support.h"

namespace hjit {

using detail::apply;

namespace {

bool is_8_bit(DType t) { return t == DType::U8 || t == DType::I8; }

// The sums of an 8-bit operand along axis, kept, in i32 (exact: sum() would give i64).
Tensor sum_i32(const Tensor& v, int axis) { return astype(sum(astype(v, DType::I32), {axis}, true), DType::I32); }

// x padded with zeros along axis to a multiple of 4.
Tensor pad_to_4(const Tensor& x, int axis) {
  const int64_t k = x.shape()[size_t(axis)];
  if (k % 4 == 0) return x;
  std::vector<std::pair<int64_t, int64_t>> widths(size_t(x.ndim()), {0, 0});
  widths[size_t(axis)] = {0, 4 - k % 4};
  return pad(x, widths);
}

// x [N, C, H, W] padded with the value z (a scalar of its type).
Tensor padded_with(const Tensor& x, const Tensor& z, Pair padding) {
  if (padding[0] == 0 && padding[1] == 0) return x;
  const std::vector<std::pair<int64_t, int64_t>> widths{{0, 0}, {0, 0}, {padding[0], padding[0]}, {padding[1], padding[1]}};
  if (!z.is_traced()) return pad(x, widths, z.item<double>());  // a known zero point (a model's constant): one pad
  const Tensor inside = pad(Tensor::ones({1, 1, x.shape()[2], x.shape()[3]}, DType::U8), widths) > 0;
  return where(inside, pad(x, widths), z);
}

// A depthwise convolution (one input channel an output channel) as the sum of its window's taps,
// each a strided view of the input padded with its zero point (in 8 bits), widened, less the
// zero point and scaled by the tap's weights: element-wise work that the schedule fuses into one
// pass, vectorized along the channels where the input is stored channels innermost (a quantized
// MobileNet's activations), and into the pass that packs the result for the next convolution.
// Convolved as a grouped f32 convolution, each one first copied its input widened to f32 and
// padded, the largest single cost of int8 MobileNet V2. Exact in f32: |sum| <= taps x 255 x 128.
Tensor depthwise_sum(const Tensor& x, const Tensor& w, const Tensor& zp, Pair stride, Pair padding, Pair dilation) {
  const int64_t C = x.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  const Tensor xp = padded_with(x, zp, padding);
  const int64_t H = xp.shape()[2], W = xp.shape()[3];
  const int64_t OH = (H - dilation[0] * (KH - 1) - 1) / stride[0] + 1, OW = (W - dilation[1] * (KW - 1) - 1) / stride[1] + 1;
  if (OH <= 0 || OW <= 0)
    throw ShapeError("int_conv2d: the window " + std::to_string(KH) + "x" + std::to_string(KW) + " is larger than the padded input " +
                     shape_str(xp.shape()));
  const Tensor wf = astype(w, DType::F32), z = astype(zp, DType::F32);
  std::optional<Tensor> acc;
  for (int64_t ky = 0; ky < KH; ++ky)
    for (int64_t kx = 0; kx < KW; ++kx) {
      const int64_t y0 = ky * dilation[0], x0 = kx * dilation[1];
      Tensor tap = slice(slice(xp, 2, y0, y0 + (OH - 1) * stride[0] + 1, stride[0]), 3, x0, x0 + (OW - 1) * stride[1] + 1, stride[1]);
      const Tensor term = (astype(tap, DType::F32) - z) * reshape(slice(slice(wf, 2, ky, ky + 1), 3, kx, kx + 1), {1, C, 1, 1});
      acc = acc ? *acc + term : term;
    }
  return astype(*acc, DType::I32);
}

// The largest of 16 (a vector of i32 sums with AVX-512), 8, 4, 2, 1 that divides n: the block of
// output channels a packed weight keeps together.
int64_t channel_block(int64_t n) {
  int64_t block = 16;
  while (n % block != 0) block /= 2;
  return block;
}

// A depthwise convolution (one input channel an output channel) with i8 weights: int_depthwise2d,
// VNNI dot products of four rows of a window column, on the input padded with its zero point
// (shifted to u8 where it is i8, as int_conv2d's). sum((x - z) w) is the padded sum of x w less z
// times each channel's weight sum, which simplify folds into the op's offsets.
Tensor depthwise_dot(const Tensor& x, const Tensor& w, const Tensor& zp, Pair stride, Pair padding, Pair dilation) {
  const int64_t C = x.shape()[1], KH = w.shape()[2], KW = w.shape()[3], R = (KH + 3) / 4, block = channel_block(C);
  const bool x_signed = x.dtype() == DType::I8;
  const Tensor xu = x_signed ? astype(x, DType::U8) + 128 : x, zu = x_signed ? astype(zp, DType::U8) + 128 : zp;
  const Tensor xp = padded_with(xu, zu, padding);
  // [C, 1, KH, KW] -> rows padded to 4R -> [C/B, 1, R, KW, B, 4]
  Tensor wp = pad(w, {{0, 0}, {0, 0}, {0, 4 * R - KH}, {0, 0}});
  wp = transpose(reshape(wp, {C / block, block, 1, R, 4, KW}), {0, 2, 3, 5, 1, 4});
  const Tensor sums = reshape(astype(sum(astype(w, DType::I32), {1, 2, 3}), DType::I32), {1, C, 1, 1});
  const Tensor out = apply(OpKind::IntDepthwise2d, {xp, wp},
                           Attrs{{"stride", std::vector<int64_t>{stride[0], stride[1]}},
                                 {"dilation", std::vector<int64_t>{dilation[0], dilation[1]}},
                                 {"kernel", std::vector<int64_t>{KH, KW}}});
  return out - astype(zu, DType::I32) * sums;
}

}  // namespace

Tensor int_matmul(const Tensor& a, const Tensor& b) {
  if (!is_8_bit(a.dtype()) || !is_8_bit(b.dtype()))
    throw DTypeError(std::string("int_matmul: takes u8 or i8 operands, got ") + dtype_name(a.dtype()) + shape_str(a.shape()) +
                     " @ " + dtype_name(b.dtype()) + shape_str(b.shape()) + "; for other types use hjit::matmul");
  if (a.ndim() == 0 || b.ndim() == 0)
    throw ShapeError("int_matmul: both operands need at least one dimension, got " + shape_str(a.shape()) + " @ " + shape_str(b.shape()));
  Tensor x = a, y = b;
  const bool squeeze_rows = x.ndim() == 1, squeeze_cols = y.ndim() == 1;
  if (squeeze_rows) x = unsqueeze(x, 0);
  if (squeeze_cols) y = unsqueeze(y, 1);
  while (x.ndim() < y.ndim()) x = unsqueeze(x, 0);
  while (y.ndim() < x.ndim()) y = unsqueeze(y, 0);
  const int r = x.ndim();
  const int64_t K = x.shape()[size_t(r - 1)];
  if (K != y.shape()[size_t(r - 2)])
    throw ShapeError("int_matmul: contraction sizes differ: " + shape_str(a.shape()) + " @ " + shape_str(b.shape()) + " (" +
                     std::to_string(K) + " vs " + std::to_string(y.shape()[size_t(r - 2)]) + ")");
  // vpdpbusd multiplies u8 by i8: a signed left operand is shifted up by 128, an unsigned right
  // one down by 128, and the shifts' products taken back out of the sum exactly:
  // sum(a b) = sum(a' b') + 128 [b unsigned] sum(a') - 128 [a signed] sum(b') - 128^2 [both] K.
  const bool a_signed = a.dtype() == DType::I8, b_unsigned = b.dtype() == DType::U8;
  // (8-bit conversions and sums wrap: i8 -> u8 then + 128 is v + 128; u8 -> i8 then - 128 is v - 128.)
  Tensor xu = a_signed ? astype(x, DType::U8) + 128 : x;
  Tensor ys = b_unsigned ? astype(y, DType::I8) - 128 : y;
  // The right operand packed four rows at a time: [.., K, N] -> [.., K/4, N, 4].
  Tensor packed = pad_to_4(ys, r - 2);
  Shape grouped(packed.shape().begin(), packed.shape().end() - 2);
  grouped.insert(grouped.end(), {packed.shape()[size_t(r - 2)] / 4, 4, packed.shape()[size_t(r - 1)]});
  std::vector<int> perm;
  for (int d = 0; d < r - 2; ++d) perm.push_back(d);
  perm.insert(perm.end(), {r - 2, r, r - 1});
  packed = transpose(reshape(packed, grouped), perm);
  Tensor out = apply(OpKind::IntMatmul, {pad_to_4(xu, r - 1), packed});
  if (b_unsigned) out = out + 128 * sum_i32(xu, -1);
  if (a_signed) out = out - 128 * sum_i32(ys, -2);
  if (a_signed && b_unsigned) out = out - int64_t(128 * 128) * K;
  if (squeeze_cols) out = squeeze(out, {-1});
  if (squeeze_rows) out = squeeze(out, {-2 + int(squeeze_cols)});
  return out;
}

Tensor int_matmul(const Tensor& a, const Tensor& b, const Tensor& a_zero_point, const Tensor& b_zero_point) {
  if (a.ndim() < 2 || b.ndim() < 2) {  // as matmul: a vector is a matrix of one row or column
    const Tensor y = int_matmul(a.ndim() < 2 ? unsqueeze(a, 0) : a, b.ndim() < 2 ? unsqueeze(b, 1) : b, a_zero_point, b_zero_point);
    return b.ndim() < 2 ? squeeze(a.ndim() < 2 ? squeeze(y, {-2}) : y, {-1}) : squeeze(y, {-2});
  }
  for (const Tensor* z : {&a_zero_point, &b_zero_point})
    if (!is_8_bit(z->dtype()))
      throw DTypeError(std::string("int_matmul: zero points are u8 or i8, got ") + dtype_name(z->dtype()) + shape_str(z->shape()));
  // A zero point is constant along the sum: a's along its last axis, b's along its second to last.
  auto along_sum = [](const Tensor& z, const Tensor& x, int axis, const char* which) {
    Shape want = x.shape();
    want[size_t(x.ndim() + axis)] = 1;
    Shape got = z.shape();
    bool fits = got.size() <= want.size();
    for (size_t i = 0; fits && i < got.size(); ++i) {
      const int64_t w = want[want.size() - got.size() + i];
      fits = got[i] == 1 || got[i] == w;
    }
    if (!fits)
      throw ShapeError(std::string("int_matmul: ") + which + "'s zero point " + shape_str(got) + " must broadcast to " + shape_str(want) +
                       " (one value, or one per " + (axis == -1 ? "row" : "column") + ")");
    return astype(z, DType::I32);
  };
  const Tensor za = along_sum(a_zero_point, a, -1, "a"), zb = along_sum(b_zero_point, b, -2, "b");
  const int64_t K = a.shape().back();
  // sum((a - za)(b - zb)) = sum(a b) - za sum(b) - zb sum(a) + K za zb, each term exact in i32.
  return int_matmul(a, b) - za * sum_i32(b, -2) - zb * sum_i32(a, -1) + K * za * zb;
}

Tensor int_conv2d(const Tensor& x, const Tensor& w, const Tensor& x_zero_point, Pair stride, Pair padding, Pair dilation,
                  int64_t groups) {
  if (!is_8_bit(x.dtype()) || !is_8_bit(w.dtype()) || !is_8_bit(x_zero_point.dtype()))
    throw DTypeError(std::string("int_conv2d: takes u8 or i8 input, weight and zero point, got ") + dtype_name(x.dtype()) +
                     shape_str(x.shape()) + ", " + dtype_name(w.dtype()) + shape_str(w.shape()) + " and " + dtype_name(x_zero_point.dtype()));
  if (x_zero_point.numel() != 1)
    throw ShapeError("int_conv2d: the input's zero point is one value (per tensor), got " + shape_str(x_zero_point.shape()));
  if (x.ndim() != 4 || w.ndim() != 4)
    throw ShapeError("int_conv2d: takes an NCHW input and an OIHW weight, got " + shape_str(x.shape()) + " and " + shape_str(w.shape()));
  const Tensor zp = reshape(x_zero_point, {});
  if (groups > 1 && groups == x.shape()[1] && groups == w.shape()[0] && w.shape()[1] == 1)
    return w.dtype() == DType::I8 ? depthwise_dot(x, w, zp, stride, padding, dilation) : depthwise_sum(x, w, zp, stride, padding, dilation);
  if (groups != 1 || w.dtype() != DType::I8) {
    // Grouped (depthwise) convolutions and unsigned weights: no dot products. In f32 where every
    // sum is exact there (at most 2^24: a depthwise 3x3 sums 9 products of at most 255 x 255),
    // on the float convolution's fused multiply-adds; else in i32.
    const int64_t terms = w.shape()[1] * w.shape()[2] * w.shape()[3];
    const bool exact_in_f32 = terms <= (int64_t(1) << 24) / (255 * 255);
    const DType acc = exact_in_f32 ? DType::F32 : DType::I32;
    const Tensor y = conv2d(astype(x, acc) - astype(zp, acc), astype(w, acc), std::nullopt, stride, padding, dilation, groups);
    return exact_in_f32 ? astype(y, DType::I32) : y;
  }
  const int64_t C = x.shape()[1], O = w.shape()[0], KH = w.shape()[2], KW = w.shape()[3];
  if (w.shape()[1] != C)
    throw ShapeError("int_conv2d: weight " + shape_str(w.shape()) + " needs " + std::to_string(C) + " input channels for input " +
                     shape_str(x.shape()));
  const bool x_signed = x.dtype() == DType::I8;
  const Tensor xu = x_signed ? astype(x, DType::U8) + 128 : x, zu = x_signed ? astype(zp, DType::U8) + 128 : zp;
  // The window reads the input padded with its zero point (the real value 0): sum((x - z) w) is
  // then the padded sum of x w less z times the sum of the weights, the same at every position.
  Tensor xp = padded_with(xu, zu, padding);
  // Both packed channels in fours (zeros past the last channel): [N, C/4, H, W, 4]; the weights'
  // outputs in blocks of 16 (a vector of i32 sums with AVX-512) or the most of 8, 4, 2 that divide
  // them, [O/B, C/4, KH, KW, B, 4]: a tile of output channels reads its weights contiguous step
  // after step. (Outputs innermost, [C/4, KH, KW, O, 4], a step was O * 4 bytes from the last, and
  // the schedule copied each tile's weights at every call.)
  xp = pad_to_4(xp, 1);
  const int64_t C4 = xp.shape()[1] / 4;
  xp = transpose(reshape(xp, {xp.shape()[0], C4, 4, xp.shape()[2], xp.shape()[3]}), {0, 1, 3, 4, 2});
  const int64_t block = channel_block(O);
  const Tensor wp = transpose(reshape(pad_to_4(w, 1), {O / block, block, C4, 4, KH, KW}), {0, 2, 4, 5, 1, 3});
  // (One contiguous row per output channel: the reduction's schedule fuses the three axes.)
  const Tensor sums = reshape(astype(sum(astype(w, DType::I32), {1, 2, 3}), DType::I32), {1, O, 1, 1});
  const Tensor out = apply(OpKind::IntConv2d, {xp, wp},
                           Attrs{{"stride", std::vector<int64_t>{stride[0], stride[1]}}, {"dilation", std::vector<int64_t>{dilation[0], dilation[1]}}});
  return out - astype(zu, DType::I32) * sums;
}

}  // namespace hjit
