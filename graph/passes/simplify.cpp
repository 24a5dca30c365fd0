#include "graph/passes/simplify.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "graph/op_def.h"
#include "graph/rewriter.h"
#include "graph/shape_inference.h"
#include "graph/value_range.h"

namespace hjit {
namespace {

bool is_full(const Graph& g, int id, double v) {
  const Node& n = g.node(id);
  return n.op == OpKind::Full && n.attrs.f("value") == v;
}

bool is_identity_perm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != int64_t(i)) return false;
  return true;
}

// The value the node reduces to, or -1 to keep it.
int rewrite(const Graph& out, const Node& n, const std::vector<int>& in) {
  auto same = [&](int id) { return out.type(id) == n.type; };
  auto operand_if = [&](int keep, int other, double unit) {
    return (is_full(out, other, unit) && same(keep)) ? keep : -1;
  };
  switch (n.op) {
    case OpKind::Add: {
      int r = operand_if(in[0], in[1], 0.0);
      return r >= 0 ? r : operand_if(in[1], in[0], 0.0);
    }
    case OpKind::Mul: {
      int r = operand_if(in[0], in[1], 1.0);
      return r >= 0 ? r : operand_if(in[1], in[0], 1.0);
    }
    case OpKind::Sub: return operand_if(in[0], in[1], 0.0);
    case OpKind::Div: return operand_if(in[0], in[1], 1.0);
    case OpKind::Neg: return out.node(in[0]).op == OpKind::Neg ? out.node(in[0]).inputs[0] : -1;
    case OpKind::Cast:
    case OpKind::Reshape:
    case OpKind::BroadcastTo:
    case OpKind::Slice:
    case OpKind::Pad:
    case OpKind::Concat:
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin:
      // Each of these is the identity exactly when its type equals its only operand's type
      // (a slice or pad that keeps the shape keeps every element; a reduction over size-1 or no axes).
      return in.size() == 1 && same(in[0]) ? in[0] : -1;
    case OpKind::Transpose: return is_identity_perm(n.attrs.ints("perm")) ? in[0] : -1;
    default: return -1;
  }
}

// x reshaped to `shape`: x itself when it has that shape, and a reshape of what x reshapes when x
// is one (so that chains of views stay one view).
int reshaped(Graph& out, int x, const Shape& shape) {
  if (out.type(x).shape == shape) return x;
  const Node& n = out.node(x);
  if (n.op == OpKind::Reshape) return reshaped(out, n.inputs[0], shape);
  return out.add_op(OpKind::Reshape, {x}, Attrs{{"shape", shape}});
}

// conv2d (or its weight gradient) of a zero-padded value is the convolution of the value with the
// padding added, where the pad is symmetric and only spatial (the convolution's own padding is):
// gradients of convolutions are written so, and a library convolution pads for free.
bool fold_pad_into_conv(Graph& out, const Node& n, const std::vector<int>& in, int* result) {
  if (n.op != OpKind::Conv2d && n.op != OpKind::Conv2dWeightGrad) return false;
  const Node& pad = out.node(in[0]);
  if (pad.op != OpKind::Pad || pad.attrs.f("value") != 0.0) return false;
  const auto &lo = pad.attrs.ints("lo"), &hi = pad.attrs.ints("hi");
  if (lo.size() != 4 || lo[0] || lo[1] || hi[0] || hi[1] || lo[2] != hi[2] || lo[3] != hi[3] || lo[2] < 0 || lo[3] < 0)
    return false;
  Attrs attrs = n.attrs;
  const auto& padding = n.attrs.ints("padding");
  attrs.set("padding", std::vector<int64_t>{padding[0] + lo[2], padding[1] + lo[3]});
  std::vector<int> inputs = in;
  inputs[0] = pad.inputs[0];
  *result = out.add_op(n.op, inputs, attrs);
  return true;
}

// A batch of matrices times one matrix ([B.., M, K] @ [K, N]) is one matmul of B..*M rows: the
// kernel's row blocks and the packed panels of the shared operand span the whole batch instead of
// starting again at every matrix (a transformer's projections, their input gradients). So is an
// int_matmul's (its shared operand packed [K/4, N, 4]) where each matrix has fewer rows than a
// register tile: a sequence-first encoder's projections ([64, 1, 256] @ [256, 768]) had run as 64
// products of one row each, a fifth of its int8 time. Matrices of more rows stay a batch: the
// requantizing epilogue then runs on the tiles, where the fold's reshape would store the product
// for a pass of its own.
bool fold_batch_into_rows(Graph& out, const Node& n, const std::vector<int>& in, int* result) {
  if (n.op != OpKind::Matmul && n.op != OpKind::IntMatmul) return false;
  // Copies: add_op grows the graph's node vector, which would leave references dangling.
  const Shape xs = out.type(in[0]).shape, ws = out.type(in[1]).shape;
  const size_t matrix = n.op == OpKind::IntMatmul ? 3 : 2;  // the shared operand's own dimensions
  if (xs.size() < 3 || ws.size() < matrix || !std::all_of(ws.begin(), ws.end() - matrix, [](int64_t d) { return d == 1; })) return false;
  const int64_t rows = shape_numel(Shape(xs.begin(), xs.end() - 1));
  if (n.op == OpKind::IntMatmul && (rows == xs[xs.size() - 2] || xs[xs.size() - 2] >= 8)) return false;
  const int x2 = reshaped(out, in[0], Shape{rows, xs.back()});
  const int w2 = reshaped(out, in[1], Shape(ws.end() - matrix, ws.end()));
  const int y2 = out.add_op(n.op, {x2, w2});
  *result = out.add_op(OpKind::Reshape, {y2}, Attrs{{"shape", n.type.shape}});
  return true;
}

// A 1x1 convolution without padding or groups (a ResNet's bottleneck and its strided shortcut, a
// MobileNet's pointwise layer) is a matrix product, the weight [O, C] times each image's [C, H*W]
// (every stride-th pixel of it): the built-in matmul schedule's packed panels and register tiles run
// it at 1.5-3x the convolution's speed at batch 1 (ResNet-50's 1x1 layers: 250-340 against 85-210
// GFLOP/s on a 2-core Sapphire Rapids), a strided one's subsampling copied into the panels.
bool pointwise_conv_as_matmul(Graph& out, const Node& n, const std::vector<int>& in, int* result) {
  if (n.op != OpKind::Conv2d || !is_floating(n.type.dtype)) return false;
  // Copies: add_op grows the graph's node vector, which would leave references dangling.
  const Shape xs = out.type(in[0]).shape, ws = out.type(in[1]).shape, o = n.type.shape;  // o: [N, O, Ho, Wo]
  const std::vector<int64_t> padding = n.attrs.ints("padding"), stride = n.attrs.ints("stride");
  if (n.attrs.i("groups") != 1 || ws[2] != 1 || ws[3] != 1 || padding[0] != 0 || padding[1] != 0) return false;
  int x = in[0];
  if (stride[0] != 1 || stride[1] != 1) {
    x = out.add_op(OpKind::Slice, {x}, Attrs{{"starts", Shape{0, 0, 0, 0}}, {"stops", xs}, {"steps", Shape{1, 1, stride[0], stride[1]}}});
  }
  // The graph's matmul takes operands of one rank: the weight one matrix that the batch broadcasts
  // (broadcast_to copied it for every image: ResNet-50 at batch 8 319 against 289 ms, MobileNet V2
  // 49 against 42.5); one image's, two matrices, as fold_batch_into_rows leaves the batched form.
  const int w2 = reshaped(out, in[1], xs[0] == 1 ? Shape{ws[0], ws[1]} : Shape{1, ws[0], ws[1]});
  const int x2 = reshaped(out, x, xs[0] == 1 ? Shape{xs[1], o[2] * o[3]} : Shape{xs[0], xs[1], o[2] * o[3]});
  const int y = out.add_op(OpKind::Matmul, {w2, x2});
  *result = out.add_op(OpKind::Reshape, {y}, Attrs{{"shape", o}});
  return true;
}

// A floating matmul, or an element-wise op of one within `depth` ops (an epilogue moved before
// its reshape by sink_reshape_into_product).
bool is_product_epilogue(const Graph& g, int id, int depth) {
  const Node& n = g.node(id);
  if (n.op == OpKind::Matmul) return is_floating(n.type.dtype);
  if (depth == 0 || !has_trait(n.op, Elementwise) || n.op == OpKind::CheckIndex) return false;
  return std::any_of(n.inputs.begin(), n.inputs.end(), [&](int in) { return is_product_epilogue(g, in, depth - 1); });
}

// The shape of an operand broadcast to `to` (the reshape's result) as an operand of the same op on
// `from` (its source), or false when the broadcast does not follow the reshape's groups.
bool broadcast_through_reshape(const Shape& operand, const Shape& from, const Shape& to, Shape* result) {
  if (operand.size() > to.size()) return false;
  Shape b(to.size() - operand.size(), 1);
  b.insert(b.end(), operand.begin(), operand.end());
  Shape r(from.size(), 1);
  for (const auto& [i0, i, j0, j] : reshape_groups(from, to)) {
    if (i0 < 0 || j0 < 0) continue;  // size 1 on both sides
    bool ones = true, whole = true;
    for (int d = j0; d <= j; ++d) ones &= b[size_t(d)] == 1, whole &= b[size_t(d)] == to[size_t(d)];
    if (whole)
      for (int d = i0; d <= i; ++d) r[size_t(d)] = from[size_t(d)];
    else if (!ones) return false;
  }
  *result = r;
  return true;
}

// Whether a reshape only unfolds its operand's rows, its innermost dimension kept whole ([B*S, D]
// to [B, S, D]).
bool unfolds_rows(const Graph& g, const Node& reshape) {
  const Shape& from = g.type(reshape.inputs[0]).shape;
  if (from.size() < 2 || reshape.type.shape.size() <= from.size()) return false;
  for (const auto& [i0, i, j0, j] : reshape_groups(from, reshape.type.shape))
    if (i == int(from.size()) - 1) return i0 == i && j0 == j && j == int(reshape.type.shape.size()) - 1;
  return false;
}

// Whether a reshape splits its operand's innermost dimension (a 1x1 convolution's H*W columns
// into rows and columns). A batch folded into a product's rows and unfolded after (a
// transformer's projections) keeps its epilogue after the reshape: moved, the first block of a
// training step, whose input is no product, became unlike the others, and their alike blocks
// compiled apart (test_compile_scaling).
bool splits_columns(const Graph& g, const Node& reshape) {
  const Shape& from = g.type(reshape.inputs[0]).shape;
  if (from.empty()) return false;
  for (const auto& [i0, i, j0, j] : reshape_groups(from, reshape.type.shape))
    if (i == int(from.size()) - 1) return i0 == i && j > j0;
  return false;
}

// An element-wise op of a reshaped matrix product (a 1x1 convolution's [O, H*W] product viewed as
// [N, O, H, W], then its bias, residual add and activation) is the op of the product itself,
// reshaped after: the other operands are reshaped to the product's shape (a bias [1, O, 1, 1] to
// [O, 1]) and the op then runs on the product's register tiles while they are in registers. Read
// through the reshape, the product was stored whole and read back by a pass of its own. Applied to
// each op in turn, the reshape moves past the whole epilogue, to the next op that is not
// element-wise (the next convolution reads the view).
//
// A product's rows unfolded into a batch (a transformer's or ConvNeXt's MLP, [B*S, 4D] as
// [B, S, 4D]) take their epilogue along only where the op's other operands are a row (a bias) or a
// scalar, or epilogue values moved so themselves: its GELU then runs on the product's tiles and
// the next product reads it as it lies (ConvNeXt-T: a pass over the hidden activation, the largest
// value of each block, copying it into the next product's operand). A full value of the batched
// shape (a residual) keeps the op after the reshape: a first block's input is no product, and
// moved, its block became unlike the others (test_compile_scaling).
bool sink_reshape_into_product(Graph& out, const Node& n, const std::vector<int>& in, int* result) {
  if (!has_trait(n.op, Elementwise) || n.op == OpKind::CheckIndex) return false;
  int view = -1;
  bool rows = false;
  for (int x : in) {
    const Node& v = out.node(x);
    if (v.op != OpKind::Reshape || v.type.shape != n.type.shape || !is_product_epilogue(out, v.inputs[0], 8)) continue;
    rows = !splits_columns(out, v);
    if (!rows || unfolds_rows(out, v)) {
      view = x;
      break;
    }
  }
  if (view < 0) return false;
  // Copies: add_op grows the graph's node vector, which would leave references dangling.
  const int source = out.node(view).inputs[0];
  const Shape from = out.type(source).shape, to = n.type.shape;
  // (By rank, not size: a bias of one row is a value at a size of 1, which a pipeline for every
  // size must not tell from another.)
  if (rows)
    for (int x : in) {
      const bool moved_too = out.node(x).op == OpKind::Reshape && out.type(out.node(x).inputs[0]).shape == from;
      if (x != view && !moved_too && out.type(x).rank() > 1) return false;
    }
  std::vector<Shape> shapes(in.size());
  for (size_t k = 0; k < in.size(); ++k)
    if (in[k] != view && !broadcast_through_reshape(out.type(in[k]).shape, from, to, &shapes[k])) return false;
  std::vector<int> inputs(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    const Shape& have = out.type(in[k]).shape;  // kept where it broadcasts so already (a scalar)
    const bool broadcasts = have.size() <= shapes[k].size() && std::equal(have.begin(), have.end(), shapes[k].end() - have.size()) &&
                            std::all_of(shapes[k].begin(), shapes[k].end() - have.size(), [](int64_t d) { return d == 1; });
    inputs[k] = in[k] == view ? source : broadcasts ? in[k] : reshaped(out, in[k], shapes[k]);
  }
  const int y = out.add_op(n.op, inputs, n.attrs);
  *result = out.add_op(OpKind::Reshape, {y}, Attrs{{"shape", to}});
  return true;
}

// Whether g's value `id` reaches, through element-wise ops alone, one that moves data (a transpose,
// a reshape, a slice) before a reduction, a contraction or a conversion to an integer type reads it.
// (memo: -1 not known yet; a walk past 16 steps says yes.)
bool moved_before_read(const Graph& g, const std::vector<std::vector<int>>& readers, std::vector<int8_t>& memo, int id, int depth = 0) {
  if (memo[size_t(id)] >= 0) return memo[size_t(id)] != 0;
  bool moved = depth > 16;
  for (size_t k = 0; k < readers[size_t(id)].size() && !moved; ++k) {
    const int r = readers[size_t(id)][k];
    const Node& n = g.node(r);
    if (has_trait(n.op, Movement)) moved = true;
    else if (has_trait(n.op, Elementwise) && !(n.op == OpKind::Cast && !is_floating(n.type.dtype)))
      moved = moved_before_read(g, readers, memo, r, depth + 1);
  }
  memo[size_t(id)] = moved ? 1 : 0;
  return moved;
}

// An f32 value converted to an integer type and back is itself where it is a whole number that type
// and f32 both hold: a quantized depthwise convolution's sum of taps, summed exactly in f32 and
// returned as i32, which its dequantization then converts back (a truncation with NaN and range
// tests, then a conversion, for every element, in the int8 MobileNets' hottest loops); and a
// requantized value that only its dequantization reads (ONNX's QuantizeLinear then
// DequantizeLinear: an encoder's attention scores before their softmax, a linear layer's output
// before its bias and activation), whose 8-bit narrowing and widening back were a third of the
// requantization. A narrower value is kept where it is also read elsewhere (its other readers would
// need the f32 value beside it), and where its dequantization is moved before it is read: stored
// narrow, a transpose moves a quarter of the bytes (an encoder's attention output, requantized in
// the tiles of its product, stored as i32 and moved as f32 where the narrowing was dropped).
// `narrow_ok`: whether the narrowing is read only by this conversion, which no movement follows.
template <class NarrowOk>
bool drop_whole_round_trip(const Graph& out, ValueRanges& ranges, const Node& n, const std::vector<int>& in, NarrowOk narrow_ok, int* result) {
  if (n.op != OpKind::Cast || n.type.dtype != DType::F32) return false;
  const Node& to_int = out.node(in[0]);
  const DType t = to_int.type.dtype;
  if (to_int.op != OpKind::Cast || is_floating(t) || t == DType::Bool || dtype_size(t) > 4 || out.type(to_int.inputs[0]) != n.type) return false;
  if (t != DType::I32 && !narrow_ok()) return false;
  const std::optional<ValueRange> r = ranges(to_int.inputs[0]);
  if (!r || !r->whole_in_f32() || !converts_within(*r, t)) return false;
  *result = to_int.inputs[0];
  return true;
}

// A fill's value where `id` is one.
std::optional<double> fill_of(const Graph& g, int id) {
  const Node& n = g.node(id);
  if (n.op != OpKind::Full) return std::nullopt;
  return n.attrs.f("value");
}

// where(x < k, k, x) (a lower clamp) or where(x > k, k, x) (an upper one), as hjit::clamp writes
// them, from the where's three operands: x, k and which, or false.
bool clamp_parts(const Graph& g, const std::vector<int>& where, int* x, double* bound, bool* lower) {
  const Node& c = g.node(where[0]);
  const bool lt = c.op == OpKind::Lt || c.op == OpKind::Le, gt = c.op == OpKind::Gt || c.op == OpKind::Ge;
  if ((!lt && !gt) || c.inputs[0] != where[2]) return false;
  const std::optional<double> k = fill_of(g, c.inputs[1]), taken = fill_of(g, where[1]);
  if (!k || !taken || *k != *taken) return false;
  *x = where[2], *bound = *k, *lower = lt;
  return true;
}
bool clamp_step(const Graph& g, int id, int* x, double* bound, bool* lower) {
  return g.node(id).op == OpKind::Where && clamp_parts(g, g.node(id).inputs, x, bound, lower);
}

// Whether a value within x can pass a clamp's side at `bound` (strict: x equal to the bound is kept
// either way, as it is where the comparison is < or >). Unknown: yes.
bool can_pass(const std::optional<ValueRange>& x, double bound, bool lower, bool strict) {
  if (!x) return true;
  return lower ? (strict ? x->lo < bound : x->lo <= bound) : (strict ? x->hi > bound : x->hi >= bound);
}

bool whole_f32(double v) { return v == std::floor(v) && std::fabs(v) < kWholeInF32; }

// A quantization, an integer conversion of clamp(round(v) + z, lo, hi) for whole lo and hi and a
// whole scalar z (ONNX's QuantizeLinear, nn::quantize's, every requantizing epilogue of an integer
// contraction), is the conversion of round(clamp(v, lo - z, hi - z)) + z: rounding is monotonic and
// keeps whole numbers, so clamping before it or after gives the same values, NaN and the
// infinities included. The rounding's operand is then within a few hundred, which the conversion
// rounds with one add (lower_ops.cpp, Cast), where a general round is AVX-512's two 256-bit halves
// a vector and the clamps' compares and blends come after it.
bool clamp_before_round(Graph& out, ValueRanges& ranges, const Node& n, const std::vector<int>& in, int* result) {
  if (n.op != OpKind::Cast || is_floating(n.type.dtype) || n.type.dtype == DType::Bool || out.type(in[0]).dtype != DType::F32) return false;
  double lo = -INFINITY, hi = INFINITY;
  int x = in[0];
  for (int step = 0; step < 2; ++step) {
    int inner;
    double k;
    bool lower;
    if (!clamp_step(out, x, &inner, &k, &lower) || (lower ? lo : hi) != (lower ? -INFINITY : INFINITY)) break;
    (lower ? lo : hi) = k;
    x = inner;
  }
  if (!whole_f32(lo) || !whole_f32(hi) || lo > hi) return false;
  const std::optional<RoundedWithZeroPoint> rounded = rounded_with_zero_point(out, ranges, x);
  if (!rounded) return false;
  const int zero_point = rounded->zero_point, v = out.node(rounded->round).inputs[0];
  if (out.type(v) != out.type(in[0])) return false;
  // The bounds less z: literals where z is one.
  const TensorType scalar{DType::F32, {}};
  const std::optional<double> z = zero_point < 0 ? 0.0 : fill_of(out, zero_point);
  auto shifted = [&](double bound) {
    return z ? out.add_full(scalar, bound - *z) : out.add_op(OpKind::Sub, {out.add_full(scalar, bound), zero_point});
  };
  const int lo_z = shifted(lo), hi_z = shifted(hi);
  // A side the value cannot pass is left out (a softmax's probabilities times a positive scale are
  // never below 0): two instructions a vector.
  const std::optional<ValueRange> vr = z ? ranges(v) : std::nullopt;  // (a runtime zero point: bounds unknown)
  int c = v;
  if (can_pass(vr, lo - z.value_or(0), true, true)) c = out.add_op(OpKind::Where, {out.add_op(OpKind::Lt, {c, lo_z}), lo_z, c});
  if (can_pass(vr, hi - z.value_or(0), false, true)) c = out.add_op(OpKind::Where, {out.add_op(OpKind::Gt, {c, hi_z}), hi_z, c});
  int q = out.add_op(OpKind::Round, {c});
  if (zero_point >= 0) q = out.add_op(OpKind::Add, {q, zero_point});
  *result = out.add_op(OpKind::Cast, {q}, n.attrs);
  return true;
}

// A clamp's side the value cannot pass, where(x < k, k, x) (or >) with x always at least (at
// most) k, is x: the graph's clamps come from its quantizations (clamp_before_round leaves out
// such a side where it sees it; a weight frozen afterwards shows it later), where a softmax's
// probabilities times a positive scale are never below 0. Two instructions a vector.
bool drop_idle_clamp(const Graph& out, ValueRanges& ranges, const Node& n, const std::vector<int>& in, int* result) {
  int x;
  double bound;
  bool lower;
  if (n.op != OpKind::Where || !clamp_parts(out, in, &x, &bound, &lower) || out.type(x) != n.type) return false;
  const OpKind cmp = out.node(in[0]).op;
  if (can_pass(ranges(x), bound, lower, cmp == OpKind::Lt || cmp == OpKind::Gt)) return false;
  *result = x;
  return true;
}

// An integer convolution (int_conv2d, int_depthwise2d) less per-channel offsets (the zero point's
// correction, z times each output channel's weight sum: hjit::int_conv2d) is the convolution with
// the offsets as its third operand, where its sums start (the ops' lowerings): the epilogue's
// subtraction, one instruction of about
// ten a vector, was a tenth of int8 MobileNet V2's expanding 1x1 convolutions, whose few input
// channels leave the epilogue most of their time. Only where the subtraction is the convolution's
// one use: another use would compute it twice.
bool offsets_into_int_conv(Graph& out, const Node& n, const std::vector<int>& in, int uses, int* result) {
  if (n.op != OpKind::Sub || uses != 1) return false;
  const OpKind op = out.node(in[0]).op;
  if ((op != OpKind::IntConv2d && op != OpKind::IntDepthwise2d) || out.node(in[0]).inputs.size() != 2 || out.type(in[1]).dtype != DType::I32)
    return false;
  // Copies: add_op grows the graph's node vector, which would leave references dangling.
  const Node conv = out.node(in[0]);
  const Shape k = out.type(in[1]).shape, o = conv.type.shape;  // o: [N, O, OH, OW]
  // (Per channel: [O, 1, 1] or [1, O, 1, 1] after numpy's alignment, or one value for all.)
  Shape aligned(o.size() - std::min(o.size(), k.size()), 1);
  aligned.insert(aligned.end(), k.begin(), k.end());
  if (aligned.size() != 4 || aligned[0] != 1 || aligned[2] != 1 || aligned[3] != 1 || (aligned[1] != o[1] && aligned[1] != 1)) return false;
  const int per_channel = aligned[1] == o[1] ? reshaped(out, in[1], Shape{o[1]})
                                             : out.add_op(OpKind::BroadcastTo, {reshaped(out, in[1], Shape{})}, Attrs{{"shape", Shape{o[1]}}});
  const std::vector<int> inputs{conv.inputs[0], conv.inputs[1], per_channel};
  *result = out.add_op(op, inputs, conv.attrs);
  return true;
}

}  // namespace

Graph simplify(const Graph& g) {
  Rewriter rw(g);
  Graph& out = rw.out();
  ValueRanges ranges(out);
  std::vector<int> uses(g.nodes.size(), 0);
  std::vector<std::vector<int>> readers(g.nodes.size());
  for (size_t id = 0; id < g.nodes.size(); ++id)
    for (int in : g.nodes[id].inputs) ++uses[size_t(in)], readers[size_t(in)].push_back(int(id));
  for (int o : g.outputs) ++uses[size_t(o)];
  std::vector<int8_t> moved(g.nodes.size(), -1);
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    if (n.op == OpKind::Parameter) continue;
    // A collective is an exchange every rank makes, even of nothing (send's result is always empty).
    if (has_trait(n.op, Source) || has_trait(n.op, Collective)) {
      rw.copy(int(id));
      continue;
    }
    std::vector<int> in = rw.mapped_inputs(int(id));
    // Values with no elements, and ops whose result does not depend on an operand that has none.
    const bool empty_operand = std::any_of(in.begin(), in.end(), [&](int i) { return out.type(i).numel() == 0; });
    if (empty_operand && (n.op == OpKind::IntConv2d || n.op == OpKind::IntDepthwise2d) && in.size() == 3 && n.type.numel() > 0) {  // (no sums: the offsets' negations)
      const int offsets = out.add_op(OpKind::Reshape, {in[2]}, Attrs{{"shape", Shape{1, n.type.shape[1], 1, 1}}});
      rw.map(int(id), out.add_op(OpKind::Sub, {out.add_full(n.type, 0.0), offsets}));
      continue;
    }
    if (n.type.numel() == 0 || (empty_operand && (n.op == OpKind::ReduceSum || n.op == OpKind::Matmul || n.op == OpKind::IntMatmul || n.op == OpKind::IntConv2d))) {
      rw.map(int(id), out.add_full(n.type, 0.0));  // an empty sum (or a contraction over K = 0) is 0
      continue;
    }
    if (empty_operand && n.op == OpKind::Pad) {
      rw.map(int(id), out.add_full(n.type, n.attrs.f("value")));
      continue;
    }
    if (empty_operand && n.op == OpKind::Concat) {
      std::vector<int> kept;
      for (int i : in)
        if (out.type(i).numel() > 0) kept.push_back(i);
      rw.map(int(id), kept.size() == 1 ? kept[0] : out.add_op(OpKind::Concat, kept, n.attrs));
      continue;
    }
    // An integer product with 0 is 0 (a float one is not: 0 * inf is NaN). It is the zero point's
    // term of an integer matmul whose other operand has zero point 0 (weights quantized
    // symmetrically), whose row sums then need not be computed.
    if (n.op == OpKind::Mul && !is_floating(n.type.dtype) && (is_full(out, in[0], 0.0) || is_full(out, in[1], 0.0))) {
      rw.map(int(id), out.add_full(n.type, 0.0));
      continue;
    }
    const auto narrow_ok = [&] { return uses[size_t(n.inputs[0])] == 1 && !moved_before_read(g, readers, moved, int(id)); };
    int r = rewrite(out, n, in);
    if (r >= 0) {
      rw.map(int(id), r);
      continue;
    }
    // (A folded pad leaves padding: a pad of none is gone already, the identity above.)
    if (fold_pad_into_conv(out, n, in, &r) || pointwise_conv_as_matmul(out, n, in, &r) || fold_batch_into_rows(out, n, in, &r) ||
        sink_reshape_into_product(out, n, in, &r) || drop_whole_round_trip(out, ranges, n, in, narrow_ok, &r) ||
        clamp_before_round(out, ranges, n, in, &r) || drop_idle_clamp(out, ranges, n, in, &r) || offsets_into_int_conv(out, n, in, n.op == OpKind::Sub ? uses[size_t(n.inputs[0])] : 0, &r)) {
      rw.map(int(id), r);
      continue;
    }
    const Node& producer = out.node(in[0]);
    if (n.op == OpKind::Reshape && producer.op == OpKind::Reshape) {
      rw.map(int(id), out.type(producer.inputs[0]) == n.type
                          ? producer.inputs[0]
                          : out.add_op(OpKind::Reshape, {producer.inputs[0]}, n.attrs));
      continue;
    }
    if (n.op == OpKind::Transpose && producer.op == OpKind::Transpose) {
      const auto &outer = n.attrs.ints("perm"), &inner = producer.attrs.ints("perm");
      std::vector<int64_t> composed(outer.size());
      for (size_t i = 0; i < outer.size(); ++i) composed[i] = inner[size_t(outer[i])];
      rw.map(int(id), is_identity_perm(composed)
                          ? producer.inputs[0]
                          : out.add_op(OpKind::Transpose, {producer.inputs[0]}, Attrs{{"perm", composed}}));
      continue;
    }
    rw.copy(int(id));
  }
  return rw.finish();
}

}  // namespace hjit
