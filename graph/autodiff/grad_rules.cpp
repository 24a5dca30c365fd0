// The gradient rules. Each reads its forward node from the context and writes the gradients of
// its operands; rules of elementwise ops with broadcasting un-broadcast (sum over the broadcast axes).
#include "graph/autodiff/grad_rules.h"

#include <cmath>
#include <limits>

#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace hjit {

GradRule grad_rule_for(OpKind op) {
  using namespace grad_rules;
  return HJIT_PER_OP_LOOKUP(GradRule, op);
}

namespace grad_rules {
namespace {

// A copy: adding nodes moves the graph's storage, so no reference into it survives a rule.
Shape shape_of(GradCtx& c, size_t i) { return c.b.type(c.in[i]).shape; }
int zero_like(GradCtx& c, int v) { return c.b.like(v, 0); }
int one_like(GradCtx& c, int v) { return c.b.like(v, 1); }
int cmp(GradCtx& c, OpKind k, int a, int b) { return c.b.op(k, {a, b}); }
// where(cond, v, 0)
int keep(GradCtx& c, int cond, int v) { return c.b.where(cond, v, zero_like(c, v)); }

// The most negative finite value of v's dtype (a mask value that never makes an inf or a nan).
int lowest_like(GradCtx& c, int v) {
  return c.b.like(v, c.b.type(v).dtype == DType::F64 ? -std::numeric_limits<double>::max()
                                                     : -double(std::numeric_limits<float>::max()));
}

// The shape of a reduction's output with its reduced axes kept (as size 1).
Shape kept_shape(const Shape& in, const std::vector<int64_t>& axes) {
  Shape s = in;
  for (int64_t a : axes) s[size_t(a)] = 1;
  return s;
}

// The gradient of a node's output, shaped to broadcast against its input.
int grad_keepdims(GradCtx& c, int v, const std::vector<int64_t>& axes) {
  return c.b.reshape(v, kept_shape(shape_of(c, 0), axes));
}

// Gradient of conv2d with respect to its input: a convolution of the output gradient (spread by
// the stride, padded) with the weights flipped and transposed per group.
int conv_input_grad(Builder& b, int g, int w, const Shape& x_shape, const Attrs& attrs) {
  const auto &stride = attrs.ints("stride"), &pad = attrs.ints("padding"), &dil = attrs.ints("dilation");
  const int64_t groups = attrs.i("groups");
  const Shape ws = b.type(w).shape, gs = b.type(g).shape;
  int gsp = b.spread(b.spread(g, 2, stride[0]), 3, stride[1]);
  std::vector<int64_t> starts(4, 0), stops = b.type(gsp).shape, steps(4, 1);
  std::vector<int64_t> lo(4, 0), hi(4, 0);
  for (int d = 0; d < 2; ++d) {
    const size_t a = size_t(2 + d);
    const int64_t len = (gs[a] - 1) * stride[size_t(d)] + 1;  // without the zeros after the last element
    int64_t before = dil[size_t(d)] * (ws[a] - 1) - pad[size_t(d)];
    int64_t after = x_shape[a] + pad[size_t(d)] - 1 - (gs[a] - 1) * stride[size_t(d)];
    starts[a] = before < 0 ? -before : 0;
    stops[a] = len + (after < 0 ? after : 0);
    lo[a] = std::max<int64_t>(before, 0);
    hi[a] = std::max<int64_t>(after, 0);
  }
  int gp = b.pad(b.slice(gsp, starts, stops, steps), lo, hi);
  // [groups * cout_g, cin_g, kh, kw] -> [groups * cin_g, cout_g, kh, kw], spatially flipped.
  const int64_t cout_g = ws[0] / groups, cin_g = ws[1];
  int wt = b.reshape(w, {groups, cout_g, cin_g, ws[2], ws[3]});
  wt = b.reshape(b.transpose(wt, {0, 2, 1, 3, 4}), {groups * cin_g, cout_g, ws[2], ws[3]});
  wt = b.flip(wt, {2, 3});
  return b.op(OpKind::Conv2d, {gp, wt},
              Attrs{{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{0, 0}},
                    {"dilation", dil}, {"groups", groups}});
}

void none(GradCtx&) {}  // no gradient flows through this op

}  // namespace

// ---- sources and non-differentiable ops: no gradient, by definition
void Parameter(GradCtx& c) { none(c); }
void Constant(GradCtx& c) { none(c); }
void Full(GradCtx& c) { none(c); }
void Iota(GradCtx& c) { none(c); }
void Not(GradCtx& c) { none(c); }
void Eq(GradCtx& c) { none(c); }
void Ne(GradCtx& c) { none(c); }
void Lt(GradCtx& c) { none(c); }
void Le(GradCtx& c) { none(c); }
void Gt(GradCtx& c) { none(c); }
void Ge(GradCtx& c) { none(c); }
void And(GradCtx& c) { none(c); }
void Or(GradCtx& c) { none(c); }
void ArgMax(GradCtx& c) { none(c); }
void ArgMin(GradCtx& c) { none(c); }
void Numel(GradCtx& c) { none(c); }
void ArgSort(GradCtx& c) { none(c); }  // sort's values are differentiated through their gather
// Piecewise constant: the gradient is zero wherever it exists (PyTorch's convention).
void Sign(GradCtx& c) { none(c); }
void Floor(GradCtx& c) { none(c); }
void Ceil(GradCtx& c) { none(c); }
void Round(GradCtx& c) { none(c); }
// Gradients of gradients are not supported: these ops only appear in gradient graphs.
void Conv2dWeightGrad(GradCtx& c) { none(c); }
void MaxPool2dGrad(GradCtx& c) { none(c); }
void CheckIndex(GradCtx& c) { none(c); }  // integers
void RandomBits(GradCtx& c) { none(c); }  // integers

// ---- elementwise, one operand
void Neg(GradCtx& c) { c.dx[0] = c.b.neg(c.g); }
void Abs(GradCtx& c) { c.dx[0] = c.b.mul(c.g, c.b.op(OpKind::Sign, {c.in[0]})); }
void Relu(GradCtx& c) { c.dx[0] = keep(c, cmp(c, OpKind::Gt, c.in[0], zero_like(c, c.in[0])), c.g); }
void Exp(GradCtx& c) { c.dx[0] = c.b.mul(c.g, c.out); }
void Log(GradCtx& c) { c.dx[0] = c.b.div(c.g, c.in[0]); }
void Log1p(GradCtx& c) { c.dx[0] = c.b.div(c.g, c.b.add(c.in[0], one_like(c, c.in[0]))); }
void Sqrt(GradCtx& c) { c.dx[0] = c.b.div(c.g, c.b.mul(c.out, 2.0)); }
void Rsqrt(GradCtx& c) { c.dx[0] = c.b.mul(c.b.div(c.b.mul(c.g, c.out), c.in[0]), -0.5); }
void Sin(GradCtx& c) { c.dx[0] = c.b.mul(c.g, c.b.op(OpKind::Cos, {c.in[0]})); }
void Cos(GradCtx& c) { c.dx[0] = c.b.neg(c.b.mul(c.g, c.b.op(OpKind::Sin, {c.in[0]}))); }
void Tanh(GradCtx& c) { c.dx[0] = c.b.mul(c.g, c.b.sub(one_like(c, c.out), c.b.mul(c.out, c.out))); }
void Sigmoid(GradCtx& c) {
  c.dx[0] = c.b.mul(c.b.mul(c.g, c.out), c.b.sub(one_like(c, c.out), c.out));
}
void Erf(GradCtx& c) {
  const int x = c.in[0];
  int e = c.b.op(OpKind::Exp, {c.b.neg(c.b.mul(x, x))});
  c.dx[0] = c.b.mul(c.b.mul(c.g, e), 2.0 / std::sqrt(M_PI));
}
// PyTorch's hardswish_backward: 0 below -3, x / 3 + 1/2 up to 3, 1 above (and for NaN).
void Hardswish(GradCtx& c) {
  const int x = c.in[0];
  const int slope = c.b.add(c.b.div(x, c.b.like(x, 3)), c.b.like(x, 0.5));
  const int upper = c.b.where(cmp(c, OpKind::Le, x, c.b.like(x, 3)), slope, one_like(c, x));
  c.dx[0] = c.b.mul(c.g, c.b.where(cmp(c, OpKind::Lt, x, c.b.like(x, -3)), zero_like(c, x), upper));
}
// d atan = 1 / (1 + x^2); d asin = 1 / sqrt(1 - x^2); d acos = -1 / sqrt(1 - x^2).
void Atan(GradCtx& c) {
  const int x = c.in[0];
  c.dx[0] = c.b.div(c.g, c.b.add(c.b.mul(x, x), c.b.like(x, 1)));
}
void Asin(GradCtx& c) {
  const int x = c.in[0];
  c.dx[0] = c.b.div(c.g, c.b.op(OpKind::Sqrt, {c.b.sub(c.b.like(x, 1), c.b.mul(x, x))}));
}
void Acos(GradCtx& c) {
  const int x = c.in[0];
  c.dx[0] = c.b.neg(c.b.div(c.g, c.b.op(OpKind::Sqrt, {c.b.sub(c.b.like(x, 1), c.b.mul(x, x))})));
}
void Cast(GradCtx& c) {
  // Between floating point types the gradient converts back; to or from integers none flows.
  DType from = c.b.type(c.in[0]).dtype, to = c.node.type.dtype;
  if (is_floating(from) && is_floating(to)) c.dx[0] = c.b.cast(c.g, from);
}

// ---- elementwise, two operands (un-broadcast to each operand's shape)
void Add(GradCtx& c) {
  c.dx[0] = c.b.unbroadcast(c.g, shape_of(c, 0));
  c.dx[1] = c.b.unbroadcast(c.g, shape_of(c, 1));
}
void Sub(GradCtx& c) {
  c.dx[0] = c.b.unbroadcast(c.g, shape_of(c, 0));
  c.dx[1] = c.b.unbroadcast(c.b.neg(c.g), shape_of(c, 1));
}
void Mul(GradCtx& c) {
  c.dx[0] = c.b.unbroadcast(c.b.mul(c.g, c.in[1]), shape_of(c, 0));
  c.dx[1] = c.b.unbroadcast(c.b.mul(c.g, c.in[0]), shape_of(c, 1));
}
void Div(GradCtx& c) {
  c.dx[0] = c.b.unbroadcast(c.b.div(c.g, c.in[1]), shape_of(c, 0));
  c.dx[1] = c.b.unbroadcast(c.b.neg(c.b.div(c.b.mul(c.g, c.out), c.in[1])), shape_of(c, 1));
}
void Pow(GradCtx& c) {
  const int x = c.in[0], y = c.in[1];
  int dxv = c.b.mul(c.b.mul(c.g, y), c.b.op(OpKind::Pow, {x, c.b.sub(y, one_like(c, y))}));
  c.dx[0] = c.b.unbroadcast(dxv, shape_of(c, 0));
  c.dx[1] = c.b.unbroadcast(c.b.mul(c.b.mul(c.g, c.out), c.b.op(OpKind::Log, {x})), shape_of(c, 1));
}
namespace {
// max / min: the operand that wins gets the gradient; a tie splits it evenly (PyTorch's rule).
void extremum(GradCtx& c, OpKind wins) {
  const int a = c.in[0], b = c.in[1];
  int share = c.b.where(cmp(c, wins, a, b), one_like(c, c.g),
                        c.b.where(cmp(c, OpKind::Eq, a, b), c.b.like(c.g, 0.5), zero_like(c, c.g)));
  c.dx[0] = c.b.unbroadcast(c.b.mul(c.g, share), shape_of(c, 0));
  c.dx[1] = c.b.unbroadcast(c.b.mul(c.g, c.b.sub(one_like(c, c.g), share)), shape_of(c, 1));
}
}  // namespace
void Max(GradCtx& c) { extremum(c, OpKind::Gt); }
void Min(GradCtx& c) { extremum(c, OpKind::Lt); }
void Where(GradCtx& c) {
  c.dx[1] = c.b.unbroadcast(keep(c, c.in[0], c.g), shape_of(c, 1));
  c.dx[2] = c.b.unbroadcast(c.b.where(c.in[0], zero_like(c, c.g), c.g), shape_of(c, 2));
}

// ---- reductions
void ReduceSum(GradCtx& c) {
  if (!is_floating(c.b.type(c.in[0]).dtype)) return;
  c.dx[0] = c.b.broadcast_to(grad_keepdims(c, c.g, c.node.attrs.ints("axes")), shape_of(c, 0));
}
namespace {
// The gradient goes to the elements equal to the extreme, split evenly among ties.
void extreme_reduction(GradCtx& c) {
  const auto& axes = c.node.attrs.ints("axes");
  int at = c.b.cast(cmp(c, OpKind::Eq, c.in[0], grad_keepdims(c, c.out, axes)), c.b.type(c.g).dtype);
  int count = c.b.sum(at, axes, true);
  c.dx[0] = c.b.mul(at, c.b.div(grad_keepdims(c, c.g, axes), count));
}
}  // namespace
void ReduceMax(GradCtx& c) { extreme_reduction(c); }
void ReduceMin(GradCtx& c) { extreme_reduction(c); }
void CumSum(GradCtx& c) {
  // d x_i = sum over j >= i of g_j = total - (inclusive prefix sum) + g_i
  if (!is_floating(c.b.type(c.in[0]).dtype)) return;
  const int64_t axis = c.node.attrs.i("axis");
  int total = c.b.sum(c.g, {axis}, true);
  int prefix = c.b.op(OpKind::CumSum, {c.g}, c.node.attrs);
  c.dx[0] = c.b.add(c.b.sub(c.b.broadcast_to(total, c.b.type(c.g).shape), prefix), c.g);
}

// ---- contractions
void Matmul(GradCtx& c) {
  c.dx[0] = c.b.unbroadcast(c.b.matmul(c.g, c.b.transpose_last2(c.in[1])), shape_of(c, 0));
  const Shape xs = shape_of(c, 0), ws = shape_of(c, 1);
  if (xs.size() > 2 && shared_matrix(ws)) {
    // A weight shared by every matrix of a batch ([B.., M, K] @ [K, N]): its gradient is one
    // matmul over the B..*M rows, not a batch of B.. products summed afterwards (16 times the
    // temporary, and a contraction as short as M).
    const int64_t rows = shape_numel(Shape(xs.begin(), xs.end() - 1));
    const int x2 = c.b.reshape(c.in[0], {rows, xs.back()});
    const int g2 = c.b.reshape(c.g, {rows, c.b.type(c.g).shape.back()});
    c.dx[1] = c.b.reshape(c.b.matmul(c.b.transpose_last2(x2), g2), ws);
    return;
  }
  c.dx[1] = c.b.unbroadcast(c.b.matmul(c.b.transpose_last2(c.in[0]), c.g), shape_of(c, 1));
}
void IntMatmul(GradCtx& c) { none(c); }  // integer results
void IntConv2d(GradCtx& c) { none(c); }
void IntDepthwise2d(GradCtx& c) { none(c); }
void Conv2d(GradCtx& c) {
  const Shape ws = shape_of(c, 1);
  c.dx[0] = conv_input_grad(c.b, c.g, c.in[1], shape_of(c, 0), c.node.attrs);
  Attrs a = c.node.attrs;
  a.set("kernel", std::vector<int64_t>{ws[2], ws[3]});
  c.dx[1] = c.b.op(OpKind::Conv2dWeightGrad, {c.in[0], c.g}, a);
}
void Attention(GradCtx& c) {
  // Recomputes the probabilities and differentiates softmax(q k^T * scale) v.
  Builder& b = c.b;
  const int q = c.in[0], k = c.in[1], v = c.in[2];
  const Shape qs = shape_of(c, 0);
  const int64_t S = qs[qs.size() - 2], T = shape_of(c, 1)[qs.size() - 2];
  const bool causal = c.node.attrs.i("causal") != 0;
  const double scale = c.node.attrs.f("scale");
  int s = b.mul(b.matmul(q, b.transpose_last2(k)), scale);
  int mask = -1;
  if (causal) {
    mask = cmp(c, OpKind::Le, b.iota({S, T}, 1, DType::I64), b.iota({S, T}, 0, DType::I64));
    s = b.where(mask, s, lowest_like(c, s));
  }
  const int64_t last = int64_t(qs.size()) - 1;
  int m = b.op(OpKind::ReduceMax, {s}, Attrs{{"axes", std::vector<int64_t>{last}}, {"keepdims", int64_t(1)}});
  int e = b.op(OpKind::Exp, {b.sub(s, m)});
  if (causal) e = keep(c, mask, e);
  int p = b.div(e, b.sum(e, {last}, true));
  c.dx[2] = b.matmul(b.transpose_last2(p), c.g);
  int dp = b.matmul(c.g, b.transpose_last2(v));
  int ds = b.mul(p, b.sub(dp, b.sum(b.mul(dp, p), {last}, true)));
  c.dx[0] = b.mul(b.matmul(ds, k), scale);
  c.dx[1] = b.mul(b.matmul(b.transpose_last2(ds), q), scale);
}

// ---- pooling
void MaxPool2d(GradCtx& c) {
  if (!is_floating(c.b.type(c.in[0]).dtype)) return;
  c.dx[0] = c.b.op(OpKind::MaxPool2dGrad, {c.in[0], c.g}, c.node.attrs);
}
void AvgPool2d(GradCtx& c) {
  // Each window spreads its gradient over its elements: a transposed convolution with a kernel of
  // ones, each image and channel on its own, after dividing by the window's count.
  if (!is_floating(c.b.type(c.in[0]).dtype)) return;
  Builder& b = c.b;
  const Shape xs = shape_of(c, 0);
  const Shape gs = b.type(c.g).shape;
  const auto& k = c.node.attrs.ints("kernel");
  const size_t r = xs.size();
  const int64_t planes = shape_numel(xs) / (xs[r - 2] * xs[r - 1]);
  int g = c.g;
  if (c.node.attrs.i("count_include_pad")) {
    g = b.mul(g, 1.0 / double(k[0] * k[1]));
  } else {
    // The number of real elements in each window: the windowed sum of ones.
    Attrs count_attrs = c.node.attrs;
    count_attrs.set("count_include_pad", int64_t(1));
    int ones = b.graph().add_full(TensorType{b.type(c.g).dtype, xs}, 1.0);
    int frac = b.op(OpKind::AvgPool2d, {ones}, count_attrs);  // count / (kh * kw)
    g = b.div(g, b.mul(frac, double(k[0] * k[1])));
  }
  Shape x4{planes, 1, xs[r - 2], xs[r - 1]};
  int g4 = b.reshape(g, {planes, 1, gs[r - 2], gs[r - 1]});
  int kernel = b.graph().add_full(TensorType{b.type(c.g).dtype, {1, 1, k[0], k[1]}}, 1.0);
  Attrs conv{{"stride", c.node.attrs.ints("stride")}, {"padding", c.node.attrs.ints("padding")},
             {"dilation", std::vector<int64_t>{1, 1}}, {"groups", int64_t(1)}};
  c.dx[0] = b.reshape(conv_input_grad(b, g4, kernel, x4, conv), xs);
}

// ---- data movement
void Reshape(GradCtx& c) { c.dx[0] = c.b.reshape(c.g, shape_of(c, 0)); }
void Transpose(GradCtx& c) {
  const auto& perm = c.node.attrs.ints("perm");
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[size_t(perm[i])] = int64_t(i);
  c.dx[0] = c.b.transpose(c.g, inverse);
}
void BroadcastTo(GradCtx& c) { c.dx[0] = c.b.unbroadcast(c.g, shape_of(c, 0)); }
void Slice(GradCtx& c) {
  const auto &starts = c.node.attrs.ints("starts"), &stops = c.node.attrs.ints("stops"), &steps = c.node.attrs.ints("steps");
  const Shape xs = shape_of(c, 0);
  int g = c.g;
  std::vector<int64_t> lo(xs.size()), hi(xs.size());
  for (size_t d = 0; d < xs.size(); ++d) {
    g = c.b.spread(g, int(d), steps[d]);  // back to one element per input position
    Shape s = c.b.type(g).shape;
    const int64_t span = stops[d] - starts[d];
    if (s[d] > span) {
      std::vector<int64_t> z(xs.size(), 0), e = s, one(xs.size(), 1);
      e[d] = span;
      g = c.b.slice(g, z, e, one);
    }
    lo[d] = starts[d];
    hi[d] = xs[d] - starts[d] - std::min(span, c.b.type(g).shape[d]);
  }
  c.dx[0] = c.b.pad(g, lo, hi);
}
void Concat(GradCtx& c) {
  const size_t axis = size_t(c.node.attrs.i("axis"));
  const Shape gs = c.b.type(c.g).shape;
  int64_t offset = 0;
  for (size_t i = 0; i < c.in.size(); ++i) {
    std::vector<int64_t> starts(gs.size(), 0), stops = gs, steps(gs.size(), 1);
    starts[axis] = offset;
    offset += shape_of(c, i)[axis];
    stops[axis] = offset;
    c.dx[i] = c.b.slice(c.g, starts, stops, steps);
  }
}
void Pad(GradCtx& c) {
  const auto& lo = c.node.attrs.ints("lo");
  const Shape xs = shape_of(c, 0);
  std::vector<int64_t> stops(xs.size()), steps(xs.size(), 1);
  for (size_t d = 0; d < xs.size(); ++d) stops[d] = lo[d] + xs[d];
  c.dx[0] = c.b.slice(c.g, lo, stops, steps);
}
void Flip(GradCtx& c) { c.dx[0] = c.b.flip(c.g, c.node.attrs.ints("axes")); }
void SliceUpdate(GradCtx& c) {
  // The slice of x was overwritten: its gradient is zero there; v gets the slice of the gradient.
  const Attrs& a = c.node.attrs;
  int zeros = c.b.graph().add_full(TensorType{c.b.type(c.g).dtype, shape_of(c, 1)}, 0.0);
  c.dx[0] = c.b.op(OpKind::SliceUpdate, {c.g, zeros}, a);
  c.dx[1] = c.b.slice(c.g, a.ints("starts"), a.ints("stops"), a.ints("steps"));
}
void Take(GradCtx& c) {
  // x[.., idx, ..] gathers; its gradient scatters back, added where indices repeat: a one-hot
  // matrix [indices, n] transposed times the gradient, with the gathered axis moved in front.
  Builder& b = c.b;
  const Shape xs = shape_of(c, 0), is = shape_of(c, 1), gs = b.type(c.g).shape;
  const int64_t axis = c.node.attrs.i("axis"), n = xs[size_t(axis)], m = shape_numel(is);
  const DType dt = b.type(c.g).dtype;
  int idx = b.cast(b.reshape(c.in[1], {m}), DType::I64);
  idx = b.where(cmp(c, OpKind::Lt, idx, b.like(idx, 0)), b.add(idx, b.like(idx, double(n))), idx);
  int onehot = b.cast(cmp(c, OpKind::Eq, b.reshape(idx, {m, 1}), b.iota({m, n}, 1, DType::I64)), dt);
  // g: [before..., idx..., after...] -> [idx..., before..., after...] -> [m, rest]
  const size_t before = size_t(axis), idx_rank = is.size();
  std::vector<int64_t> perm;
  for (size_t d = 0; d < idx_rank; ++d) perm.push_back(int64_t(before + d));
  for (size_t d = 0; d < before; ++d) perm.push_back(int64_t(d));
  for (size_t d = before + idx_rank; d < gs.size(); ++d) perm.push_back(int64_t(d));
  int g2 = b.reshape(b.transpose(c.g, perm), {m, m == 0 ? 0 : shape_numel(gs) / std::max<int64_t>(m, 1)});
  int dxt = b.matmul(b.transpose_last2(onehot), g2);  // [n, rest]
  // [n, before..., after...] -> x's layout
  Shape moved{n};
  for (size_t d = 0; d < xs.size(); ++d)
    if (d != before) moved.push_back(xs[d]);
  std::vector<int64_t> back;
  for (size_t d = 0; d < xs.size(); ++d) back.push_back(d < before ? int64_t(d + 1) : d == before ? 0 : int64_t(d));
  c.dx[0] = b.transpose(b.reshape(dxt, moved), back);
}

}  // namespace grad_rules
}  // namespace hjit
