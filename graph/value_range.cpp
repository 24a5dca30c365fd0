#include "graph/value_range.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "graph/op_def.h"

namespace hjit {
namespace {

// Bounds past this are dropped: an f32 result near FLT_MAX may round to infinity.
constexpr double kFinite = 1e37;

std::optional<ValueRange> checked(double lo, double hi, bool whole) {
  if (!(std::fabs(lo) < kFinite) || !(std::fabs(hi) < kFinite) || lo > hi) return std::nullopt;
  return ValueRange{lo, hi, whole, std::max(std::fabs(lo), std::fabs(hi))};
}

// An f32 op's result rounded from [lo, hi] stays within the rounded bounds (rounding is
// monotonic); a slack of 2^-20 of the magnitude covers f32's 2^-24, except where the result is an
// exact whole number.
std::optional<ValueRange> rounded(double lo, double hi, bool whole) {
  if (!(whole && std::fabs(lo) < kWholeInF32 && std::fabs(hi) < kWholeInF32)) {  // (never across 0: rounding keeps signs)
    lo = lo >= 0 ? std::max(0.0, lo - lo * 0x1p-20 - 1e-44) : lo * (1 + 0x1p-20) - 1e-44;
    hi = hi <= 0 ? std::min(0.0, hi - hi * 0x1p-20 + 1e-44) : hi * (1 + 0x1p-20) + 1e-44;
  }
  return checked(lo, hi, whole);
}

std::optional<ValueRange> joined(const std::optional<ValueRange>& a, const std::optional<ValueRange>& b) {
  if (!a || !b) return std::nullopt;
  return checked(std::min(a->lo, b->lo), std::max(a->hi, b->hi), a->whole && b->whole);
}

// (Bounds as f32 holds them: 2^31 - 1 converts to 2^31, 0.1 to 0.100000001.)
double as_f32(double v) { return double(float(v)); }

// The lowest and highest values of an integer type of at most 32 bits (exact in double).
std::pair<double, double> integer_bounds(DType t) {
  const int bits = 8 * int(dtype_size(t));
  if (dtype_info(t).kind == DTypeKind::SignedInt) return {-std::ldexp(1.0, bits - 1), std::ldexp(1.0, bits - 1) - 1};
  return {0, std::ldexp(1.0, bits) - 1};
}

// The f32 values an integer type converts to.
std::optional<ValueRange> type_range(DType t) {
  if (t == DType::Bool) return checked(0, 1, true);
  if (is_floating(t) || dtype_size(t) > 4) return std::nullopt;
  const auto [lo, hi] = integer_bounds(t);
  return checked(as_f32(lo), as_f32(hi), true);
}

// A sum, difference, product, quotient, maximum or minimum of operands within a and b.
std::optional<ValueRange> arithmetic(OpKind op, const ValueRange& a, const ValueRange& b) {
  switch (op) {
    case OpKind::Add:
    case OpKind::Sub: {
      const bool add = op == OpKind::Add;
      std::optional<ValueRange> r = rounded(a.lo + (add ? b.lo : -b.hi), a.hi + (add ? b.hi : -b.lo), a.whole && b.whole);
      if (r) r->terms = std::max(r->terms, a.terms + b.terms);
      return r;
    }
    case OpKind::Mul:
    case OpKind::Div: {
      const bool div = op == OpKind::Div;
      if (div && b.lo <= 0 && b.hi >= 0) return std::nullopt;  // a divisor that may be 0
      double lo = INFINITY, hi = -INFINITY;
      for (double x : {a.lo, a.hi})
        for (double y : {b.lo, b.hi}) {
          const double v = div ? x / y : x * y;
          lo = std::min(lo, v), hi = std::max(hi, v);
        }
      std::optional<ValueRange> r = rounded(lo, hi, !div && a.whole && b.whole);
      // Whole factors' products, taken in any order, are at most the product of their magnitudes
      // (each at least 1, but for a factor always 0: 0 * (b * c) may be 0 * inf where (0 * b) * c is 0).
      if (r) r->terms = std::max(r->terms, std::max(1.0, a.terms) * std::max(1.0, b.terms));
      return r;
    }
    case OpKind::Max: return checked(std::max(a.lo, b.lo), std::max(a.hi, b.hi), a.whole && b.whole);
    case OpKind::Min: return checked(std::min(a.lo, b.lo), std::min(a.hi, b.hi), a.whole && b.whole);
    default: return std::nullopt;
  }
}

std::optional<ValueRange> literal(double v) {
  if (!(std::fabs(v) < kFinite)) return std::nullopt;  // (NaN, infinite, or infinite in f32)
  v = as_f32(v);
  return checked(v, v, v == std::floor(v));
}

}  // namespace

std::optional<ValueRange> ValueRanges::at(int id, int depth) {
  if (auto it = memo_.find(id); it != memo_.end()) return it->second;
  if (depth > 256) return std::nullopt;  // (not kept: a shallower path may still reach it)
  const std::optional<ValueRange> r = compute(id, depth);
  memo_[id] = r;
  return r;
}

std::optional<ValueRange> ValueRanges::compute(int id, int depth) {
  const Node& n = g_.node(id);
  if (n.type.dtype != DType::F32) return std::nullopt;
  auto in = [&](size_t k) { return at(n.inputs[k], depth + 1); };
  switch (n.op) {
    case OpKind::Cast: return type_range(g_.type(n.inputs[0]).dtype);  // (an integer's or a bool's: its type's range)
    case OpKind::Full: return literal(n.attrs.f("value"));
    case OpKind::Constant: return constant(n);
    case OpKind::Numel: return ValueRange{0.0, 2147483648.0, true, 2147483648.0};  // (at any size: it may be dynamic)
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Max:
    case OpKind::Min: {
      if (std::optional<ValueRange> r = softmax_part(n, depth)) return r;
      // (The second operand is not looked at where the first is unknown: a large constant is read
      // once, and only where it can matter.)
      const std::optional<ValueRange> a = in(0);
      if (!a) return std::nullopt;
      const std::optional<ValueRange> b = in(1);
      if (!b) return std::nullopt;
      return arithmetic(n.op, *a, *b);
    }
    case OpKind::Exp: {
      // (An approximation within a few ulp of e^x: inside rounded()'s slack.)
      const std::optional<ValueRange> a = in(0);
      if (!a || a->hi > 88.0) return std::nullopt;
      return rounded(std::exp(a->lo), std::exp(a->hi), false);
    }
    case OpKind::Neg: {
      const std::optional<ValueRange> a = in(0);
      if (!a) return std::nullopt;
      return ValueRange{-a->hi, -a->lo, a->whole, a->terms};
    }
    case OpKind::Round:
    case OpKind::Floor:
    case OpKind::Ceil: {
      const std::optional<ValueRange> a = in(0);
      if (!a) return std::nullopt;
      return checked(std::floor(a->lo), std::ceil(a->hi), true);
    }
    case OpKind::Relu: {
      const std::optional<ValueRange> a = in(0);
      if (!a) return std::nullopt;
      return checked(std::max(a->lo, 0.0), std::max(a->hi, 0.0), a->whole);
    }
    case OpKind::ReduceSum: return softmax_part(n, depth);
    case OpKind::Where: return selected(n, depth);
    case OpKind::Reshape:
    case OpKind::BroadcastTo:
    case OpKind::Slice:
    case OpKind::Transpose:
    case OpKind::Flip: return in(0);
    case OpKind::Pad: return joined(in(0), literal(n.attrs.f("value")));
    case OpKind::Concat: {
      std::optional<ValueRange> r = in(0);
      for (size_t k = 1; k < n.inputs.size() && r; ++k) r = joined(r, in(k));
      return r;
    }
    default: return std::nullopt;
  }
}

// where(c, a, b): either branch, and where c compares one branch with a bound (a clamp:
// where(x < k, k, x)), that branch only on the side of the bound it keeps. (x is finite, so the
// comparison decides: no NaN passes a clamp untested.)
std::optional<ValueRange> ValueRanges::selected(const Node& where, int depth) {
  std::optional<ValueRange> a = at(where.inputs[1], depth + 1), b = at(where.inputs[2], depth + 1);
  if (!a || !b) return std::nullopt;
  const Node& c = g_.node(where.inputs[0]);
  const bool below = c.op == OpKind::Lt || c.op == OpKind::Le, above = c.op == OpKind::Gt || c.op == OpKind::Ge;
  if ((below || above) && c.inputs.size() == 2) {
    const std::optional<ValueRange> x = at(c.inputs[0], depth + 1), bound = at(c.inputs[1], depth + 1);
    if (x && bound) {
      // A comparison that cannot hold (or cannot fail) for any element takes one branch.
      const bool can_hold = below ? x->lo <= bound->hi : x->hi >= bound->lo;
      const bool can_fail = below ? x->hi >= bound->lo : x->lo <= bound->hi;
      if (!can_hold) return b;
      if (!can_fail) return a;
      // Where the comparison holds, x is below (above) the bound; elsewhere above (below) it.
      auto narrow = [&](std::optional<ValueRange>& branch, bool holds) {
        if (holds == below) branch->hi = std::min(branch->hi, bound->hi);
        else branch->lo = std::max(branch->lo, bound->lo);
      };
      if (where.inputs[1] == c.inputs[0]) narrow(a, true);
      if (where.inputs[2] == c.inputs[0]) narrow(b, false);
      a = checked(a->lo, a->hi, a->whole), b = checked(b->lo, b->hi, b->whole);
      if (!a || !b) return std::nullopt;
    }
  }
  return joined(a, b);
}

// x - max(x) over some axes (kept, and broadcast back) is at most 0 for a finite x; and
// e / sum(e) over those axes, e = exp(x - max(x)), is a softmax: within [0, 1], since each row's
// sum holds its largest term, e^0 = 1. The general rules see neither: they bound x - max(x) by
// x's whole range on both sides, and a sum of exponentials may be near 0 for them. (A row with no
// elements has no quotients to bound.) The sum itself is within [1, the row's length]: a
// quantized softmax multiplies by its reciprocal (onnx_import's Factored), whose quotient the
// general rules then bound.
bool ValueRanges::less_its_row_maximum(const Node& n) const {
  if (n.op != OpKind::Sub) return false;
  const Node& m = g_.node(n.inputs[1]);
  return m.op == OpKind::ReduceMax && m.attrs.i("keepdims") == 1 && m.inputs[0] == n.inputs[0] &&
         g_.type(n.inputs[0]).shape == n.type.shape;
}

std::optional<ValueRange> ValueRanges::softmax_part(const Node& n, int depth) {
  if (less_its_row_maximum(n)) {
    const std::optional<ValueRange> x = at(n.inputs[0], depth + 1);
    if (!x) return std::nullopt;
    return rounded(std::min(0.0, x->lo - x->hi), 0.0, false);
  }
  if (n.op == OpKind::ReduceSum) {
    const Node& e = g_.node(n.inputs[0]);
    if (e.op != OpKind::Exp || !less_its_row_maximum(g_.node(e.inputs[0])) ||
        g_.node(g_.node(e.inputs[0]).inputs[1]).attrs.ints("axes") != n.attrs.ints("axes") || !at(n.inputs[0], depth + 1))
      return std::nullopt;
    double count = 1;
    const int64_t rank = int64_t(e.type.shape.size());
    for (int64_t a : n.attrs.ints("axes")) {
      if (a < -rank || a >= rank) return std::nullopt;
      count *= double(e.type.shape[size_t(a < 0 ? a + rank : a)]);
    }
    return count >= 1 ? rounded(1.0, count, false) : std::nullopt;
  }
  if (n.op != OpKind::Div) return std::nullopt;
  const Node& e = g_.node(n.inputs[0]);
  const Node& sum = g_.node(n.inputs[1]);
  if (e.op != OpKind::Exp || sum.op != OpKind::ReduceSum || sum.inputs[0] != n.inputs[0] || sum.attrs.i("keepdims") != 1)
    return std::nullopt;
  const Node& shifted = g_.node(e.inputs[0]);
  if (!less_its_row_maximum(shifted) || g_.node(shifted.inputs[1]).attrs.ints("axes") != sum.attrs.ints("axes") ||
      !at(n.inputs[0], depth + 1))
    return std::nullopt;
  return rounded(0.0, 1.0, false);
}

std::optional<ValueRange> ValueRanges::constant(const Node& n) const {
  if (n.constant < 0 || size_t(n.constant) >= g_.constants.size()) return std::nullopt;
  const ConstData& c = g_.constants[size_t(n.constant)];
  const size_t count = size_t(n.type.numel());
  if (count == 0 || !c.data || c.nbytes < count * sizeof(float)) return std::nullopt;
  std::optional<ValueRange> r;
  for (size_t i = 0; i < count; ++i) {
    float v;
    std::memcpy(&v, static_cast<const char*>(c.data) + i * sizeof(float), sizeof(float));
    const std::optional<ValueRange> one = literal(v);
    if (!one) return std::nullopt;
    r = r ? joined(r, one) : one;
  }
  return r;
}

std::optional<RoundedWithZeroPoint> rounded_with_zero_point(const Graph& g, ValueRanges& ranges, int id) {
  const Node& n = g.node(id);
  if (n.op == OpKind::Round) return RoundedWithZeroPoint{id, -1};
  if (n.op != OpKind::Add) return std::nullopt;
  for (size_t k = 0; k < 2; ++k) {
    const int z = n.inputs[1 - k];
    if (g.node(n.inputs[k]).op != OpKind::Round || !g.type(z).shape.empty()) continue;
    const std::optional<ValueRange> r = ranges(z);
    if (r && r->whole && r->lo >= -65536.0 && r->hi <= 65536.0) return RoundedWithZeroPoint{n.inputs[k], z};
  }
  return std::nullopt;
}

bool converts_within(const ValueRange& r, DType to) {
  if (is_floating(to) || to == DType::Bool || dtype_size(to) > 4) return false;
  const auto [lowest, highest] = integer_bounds(to);
  return r.lo > lowest - 1 && r.hi < highest + 1;
}

}  // namespace hjit
