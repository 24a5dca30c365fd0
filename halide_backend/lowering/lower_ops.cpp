// One Halide lowering per op. Arithmetic happens in the compute type (16-bit floats in f32);
// coordinates are row-major here and reversed only by halide_args().
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "halide_backend/lowering/lower.h"
#include "graph/threefry.h"
#include "graph/rewriter.h"
#include "graph/shape_inference.h"
#include "halide_backend/lowering/ieee_math.h"
#include "halide_backend/lowering/lower_ctx.h"
#include "halide_backend/lowering/names.h"
#include "support/cpu_caches.h"
#include "support/cpu_vendor.h"
#include "support/thread_pool.h"

namespace hjit::backend {

using namespace Halide;

Lowering lowering_for(OpKind op) {
  using namespace lowering;
  return HJIT_PER_OP_LOOKUP(Lowering, op);
}

std::string helper_name(const Stage& s, const char* role) { return canonical_name(s.func.name()) + role; }

namespace lowering {
namespace {

Type ct(const Node& n) { return compute_type(n.type.dtype); }

// Operand i of n at the stage's coordinates (broadcast).
Expr operand(LowerCtx& ctx, const Stage& s, const Node& n, size_t i) {
  int in = n.inputs[i];
  return ctx.at(in, LowerCtx::broadcast(LowerCtx::coords(s), ctx.g.type(in).shape));
}

// A literal. Must be finite: Halide compiles with LLVM's fast-math flags, under which an inf or
// nan literal is poison (non-finite fills are bound as hidden inputs instead, see Full).
Expr constant(Type t, double v) {
  if (t.is_bool()) return v != 0 ? Internal::const_true() : Internal::const_false();
  if (!std::isfinite(v)) throw InternalError("a non-finite literal would be poison to LLVM's fast-math flags");
  return cast(t, Expr(v));
}

// A value of a fill or a pad: a literal when finite and nonzero; inf, nan and the zeros are read
// from a hidden input, where neither Halide's simplifier nor LLVM's fast-math flags can see them
// (they fold x * 0, 0 / x and x / 0 as if there were no NaN or inf, and x * -0.0 to +0.0).
Expr value_of(LowerCtx& ctx, DType dtype, double v) {
  const Type t = compute_type(dtype);
  const bool literal = !t.is_float() || (std::isfinite(v) && v != 0);
  if (literal) return constant(t, std::isfinite(v) ? v : 0);
  const TensorType scalar{dtype, {}};
  return bind_constant(ctx.p, scalar, fill_bytes(scalar, v), {});
}

// The most negative finite value: attention's masked scores (they never reach an exp or a max
// that decides anything, see Attention).
Expr lowest(Type t) {
  if (!t.is_float()) return t.min();
  return Internal::make_const(t, t.bits() == 64 ? -std::numeric_limits<double>::max() : -double(std::numeric_limits<float>::max()));
}

template <class F>
void unary(LowerCtx& ctx, Stage& s, const Node& n, F f) {
  LowerCtx::define(s, f(operand(ctx, s, n, 0), ct(n)));
}

template <class F>
void binary(LowerCtx& ctx, Stage& s, const Node& n, F f) {
  LowerCtx::define(s, f(operand(ctx, s, n, 0), operand(ctx, s, n, 1)));
}

// index, or a failed call when it is outside [lo, hi): Halide's require(), which hjit turns into
// an IndexError whose message is `message` with {} replaced by the index.
Expr index_in_range(LowerCtx& ctx, const Expr& index, const Expr& lo, const Expr& hi, const std::string& message) {
  ctx.p.checks_indices = true;
  const size_t at = message.find(" {} ");  // Halide's message puts a space between its parts
  if (at == std::string::npos) throw InternalError("index_in_range: the message has no ' {} '");
  Expr i64 = cast<int64_t>(index);
  return require(i64 >= cast<int64_t>(lo) && i64 < cast<int64_t>(hi), index, std::string(kIndexErrorMarker) + message.substr(0, at), i64,
                 message.substr(at + 4));
}

// The input coordinates a reduction over `axes` reads, from its output coordinates and domain.
Coords reduced_coords(const Coords& out, const RDom& r, const std::vector<int64_t>& axes, int rank, bool keepdims) {
  Coords in(static_cast<size_t>(rank));
  size_t k = 0;
  for (int d = 0; d < rank; ++d) {
    auto it = std::find(axes.begin(), axes.end(), d);
    if (it != axes.end()) {
      in[size_t(d)] = r[int(axes.end() - it) - 1];  // the domain runs innermost (last axis) first
      if (keepdims) ++k;
    } else {
      in[size_t(d)] = out[k++];
    }
  }
  return in;
}

// Reduction domains are named after their stage: Halide names unnamed ones from a process-wide
// counter, and a schedule value names loops, so that names must be the same in every lowering.
std::string rdom_name(const Stage& s, const char* role) { return "n" + std::to_string(s.node) + "_" + role; }

RDom reduction_domain(const LowerCtx& ctx, int in, const std::vector<int64_t>& axes, const std::string& name) {
  Region ranges;
  for (int64_t axis : to_halide_order(axes)) ranges.emplace_back(0, ctx.extent(in, int(axis)));
  return RDom(ranges, name);
}

enum class Fold { Sum, Max, Min };

// The type a sum accumulates in: i32 for an i64 sum of values converted from 16 bits or fewer whose
// every partial sum fits in i32 (a quantized product's zero-point corrections: sums of u8 values,
// which PyTorch's rules make i64), else its own.
Type sum_type(const LowerCtx& ctx, const Node& n, const RDom& r) {
  const Type t = ct(n);
  const Node& x = ctx.g.node(n.inputs[0]);
  if (t != Int(64) || x.op != OpKind::Cast || dtype_size(ctx.g.type(x.inputs[0]).dtype) > 2 || !is_integral(ctx.g.type(x.inputs[0]).dtype))
    return t;
  int64_t terms = 1;
  for (int i = 0; i < r.dimensions(); ++i) {
    const int64_t* e = Internal::as_const_int(r[i].extent());
    if (!e) return t;
    terms *= std::max<int64_t>(1, *e);
  }
  return terms <= (int64_t(1) << 15) ? Int(32) : t;  // |sum| <= 2^15 x 2^16
}

void reduce(LowerCtx& ctx, Stage& s, const Node& n, Fold fold) {
  const TensorType& in = ctx.g.type(n.inputs[0]);
  const auto& axes = n.attrs.ints("axes");
  const Type t = ct(n);
  if (axes.empty()) {
    LowerCtx::define(s, cast(t, ctx.at(n.inputs[0], LowerCtx::coords(s))));
    return;
  }
  std::vector<Expr> v(s.vars.begin(), s.vars.end());
  Func acc(helper_name(s, "_acc"));
  RDom r = reduction_domain(ctx, n.inputs[0], axes, rdom_name(s, "r"));
  Expr x = cast(t, ctx.at(n.inputs[0], reduced_coords(LowerCtx::coords(s), r, axes, in.rank(), n.attrs.i("keepdims"))));
  switch (fold) {
    case Fold::Sum: {
      // (Widened once, at the end, where it accumulates narrower: a vector holds twice the lanes.)
      const Type at = sum_type(ctx, n, r);
      acc(v) = constant(at, 0);
      acc(v) += cast(at, x);
      break;
    }
    case Fold::Max:
    case Fold::Min: {
      const bool is_max = fold == Fold::Max;
      // A value the graph shows finite has no NaN to carry: Halide's max alone.
      const bool finite = t.is_float() && ctx.range(n.inputs[0]).has_value();
      if (t.is_float() && !finite) {
        // Halide's max (exact on numbers, vectorized) beside the largest magnitude bits seen: both
        // plain associative folds, so rfactor still applies; a NaN among the inputs shows in the
        // second and makes the result NaN (see ieee::nan_seen).
        acc(v) = Tuple(is_max ? ieee::max_identity(t) : ieee::min_identity(t), ieee::nan_seen_identity(t));
        acc(v) = Tuple(is_max ? max(acc(v)[0], x) : min(acc(v)[0], x), ieee::nan_seen(acc(v)[1], x));
        LowerCtx::define(s, ieee::nan_if_seen(acc(v)[1], acc(v)[0]));
        s.reduction = acc;
        for (int i = 0; i < r.dimensions(); ++i) s.rvars.push_back(r[i]);
        return;
      }
      acc(v) = is_max ? ieee::max_identity(t) : ieee::min_identity(t);
      if (finite) acc(v) = is_max ? Halide::max(acc(v), x) : Halide::min(acc(v), x);
      else acc(v) = is_max ? ieee::max(acc(v), x) : ieee::min(acc(v), x);
      break;
    }
  }
  LowerCtx::define(s, cast(t, acc(v)));
  s.reduction = acc;
  for (int i = 0; i < r.dimensions(); ++i) s.rvars.push_back(r[i]);
}

// A long row's extreme (its first: the smallest index among equal values, NaN above all) is
// searched in kArgLanes interleaved lanes, element i in lane i % kArgLanes, each lane keeping its
// first extreme; then the lanes' are compared, equal values by index. The lanes' searches are
// independent, so a vector of them runs at once, where one running best made every element wait
// for the comparison before it (argmax over GPT-2's 50,257 logits: 211 us, a max over them 2.2).
// Rows along memory only (the last axis), of a fixed length of at least kArgLanesFrom: a reduction
// over another axis vectorizes across the rows instead (schedules/reduction.cpp).
constexpr int kArgLanes = 16;
constexpr int64_t kArgLanesFrom = 4 * kArgLanes;

// Whether `x` (at index `i`) beats the running `best` (at `at`): larger (smaller for a minimum), a
// NaN over any number, and where `by_index`, an equal value (or a second NaN) at a smaller index.
Expr beats(const Expr& x, const Expr& i, const Expr& best, const Expr& at, bool is_max, bool by_index) {
  Expr better = is_max ? x > best : x < best;
  if (by_index) better = better || (x == best && i < at);
  if (!x.type().is_float()) return better;
  const Expr nan = ieee::is_nan(x), best_nan = ieee::is_nan(best);
  if (!by_index) return !best_nan && (nan || better);
  return select(best_nan, nan && i < at, nan || better);
}

// Index of the first extreme along the axis; the first NaN counts as the extreme (as PyTorch).
void arg_reduce(LowerCtx& ctx, Stage& s, const Node& n, bool is_max) {
  const TensorType& in = ctx.g.type(n.inputs[0]);
  if (in.rank() == 0) {  // a 0-d tensor is its own extreme
    LowerCtx::define(s, cast<int64_t>(0));
    return;
  }
  const int64_t axis = n.attrs.i("axis");
  const std::vector<int64_t> axes{axis};
  const Type vt = compute_type(in.dtype);
  const Expr identity = is_max ? ieee::max_identity(vt) : ieee::min_identity(vt);
  std::vector<Expr> v(s.vars.begin(), s.vars.end());
  Func acc(helper_name(s, "_acc"));
  // Strict: the simplifier would otherwise move what x subtracts onto the running best
  // (x - c > best into x > best + c), which rounds differently from eager execution, and at the
  // first element adds to an infinite best, which LLVM's no-infinities fast math makes poison.
  auto value = [&](const Expr& x) { return vt.is_float() ? strict_float(x) : x; };
  const Expr length = ctx.extent(n.inputs[0], int(axis));
  const int64_t* row = Internal::as_const_int(length);
  bool fixed = true;
  for (int d = 0; d < in.rank(); ++d) fixed = fixed && Internal::is_const(ctx.extent(n.inputs[0], d));
  if (axis == in.rank() - 1 && fixed && row && *row >= kArgLanesFrom && *row < (int64_t(1) << 31)) {
    // The lanes search the row's whole vectors; the last few elements join the lanes' results.
    const int whole = int(*row - *row % kArgLanes), tail = int(*row % kArgLanes);
    Coords at = LowerCtx::coords(s);
    if (!n.attrs.i("keepdims")) at.push_back(Expr());
    auto element = [&](const Expr& i) {
      at.back() = i;
      return value(ctx.at(n.inputs[0], at));
    };
    const Var lane("lane");
    RDom steps(0, whole / kArgLanes, rdom_name(s, "steps"));
    Func lanes(helper_name(s, "_lanes"));
    std::vector<Expr> lv{lane};
    lv.insert(lv.end(), v.begin(), v.end());
    lanes(lv) = Tuple(lane, identity);
    const Expr i = steps.x * kArgLanes + lane, x = element(i);
    const Expr lane_better = beats(x, i, lanes(lv)[1], lanes(lv)[0], is_max, false);
    lanes(lv) = Tuple(select(lane_better, i, lanes(lv)[0]), select(lane_better, x, lanes(lv)[1]));
    std::vector<Var> helper_vars{lane};
    helper_vars.insert(helper_vars.end(), s.vars.begin(), s.vars.end());
    Shape helper_extents{kArgLanes};
    helper_extents.insert(helper_extents.end(), s.extents.begin(), s.extents.end());
    s.helpers.push_back(Helper{"lane extremes", lanes, helper_vars, helper_extents, {steps.x}, {}});
    RDom r(0, kArgLanes + tail, rdom_name(s, "r"));
    std::vector<Expr> rv{min(r.x, kArgLanes - 1)};
    rv.insert(rv.end(), v.begin(), v.end());
    Expr li = lanes(rv)[0], lx = lanes(rv)[1];
    if (tail > 0) {
      const Expr past = r.x >= kArgLanes, t = clamp(whole + r.x - kArgLanes, whole, int(*row) - 1);
      li = select(past, t, li), lx = select(past, element(t), lx);
    }
    acc(v) = Tuple(int(*row), identity);
    const Expr better = beats(lx, li, acc(v)[1], acc(v)[0], is_max, true);
    acc(v) = Tuple(select(better, li, acc(v)[0]), select(better, lx, acc(v)[1]));
    LowerCtx::define(s, cast<int64_t>(acc(v)[0]));
    s.reduction = acc;
    s.rvars.push_back(r.x);
    return;
  }
  RDom r = reduction_domain(ctx, n.inputs[0], axes, rdom_name(s, "r"));
  const Expr x = value(ctx.at(n.inputs[0], reduced_coords(LowerCtx::coords(s), r, axes, in.rank(), n.attrs.i("keepdims"))));
  acc(v) = Tuple(cast<int64_t>(0), identity);
  const Expr best = acc(v)[1];
  const Expr better = beats(x, r.x, best, acc(v)[0], is_max, false);
  acc(v) = Tuple(select(better, cast<int64_t>(r.x), acc(v)[0]), select(better, x, best));
  LowerCtx::define(s, acc(v)[0]);
  s.reduction = acc;
  s.rvars.push_back(r.x);
}

// A float converted to an integer type as PyTorch does on x86: truncated to i32 (to i64 for the
// 64-bit and u32 targets), with the lowest value for NaN and out of range, then wrapped to the
// narrower type. (C++ and LLVM leave out-of-range conversions undefined.)
Expr float_to_int(const Expr& x_in, Type t) {
  // NaN and infinities are tested on the bits and replaced by 0 before any float comparison: with
  // LLVM's no-NaNs and no-infinities flags a comparison of one is poison, and `special || poison`
  // is poison too (AVX2 code came out wrong where AVX-512 code happened not to).
  const Expr special = ieee::is_nan(x_in) || ieee::is_inf(x_in);
  const Expr x = select(special, Internal::make_zero(x_in.type()), x_in);
  auto truncated = [&](Type wide) {
    const Expr f = x.type().bits() < 32 ? cast(Float(32), x) : x;
    const double limit = std::ldexp(1.0, wide.bits() - 1);
    Expr in_range = f > Internal::make_const(f.type(), -limit - 1) && f < Internal::make_const(f.type(), limit);
    const Expr out = special || !in_range;
    // For signed results the lowest value is chosen on the float side (-2^(bits-1) converts
    // exactly): Halide 14's simplifier folds a comparison of select(c, INT64_MIN, y) wrongly
    // (select(c, INT64_MIN, cast<int64>(x)) < 1 became false for every x). Unsigned results keep
    // the select on the integer side, without which it folds cast<u64>(cast<i64>(x)) into one
    // conversion that is undefined for negative x.
    if (t.is_int()) return cast(wide, select(out, Internal::make_const(f.type(), -limit), f));
    return select(out, wide.min(), cast(wide, f));
  };
  if (t.bits() == 64 && t.is_uint()) {  // beyond i64: subtract 2^63 first
    Expr two63 = Internal::make_const(x.type(), std::ldexp(1.0, 63));
    Expr high = cast(t, cast(Int(64), x - two63)) + Internal::make_const(t, uint64_t(1) << 63);
    return select(!special && x >= two63 && x < two63 * 2, high, cast(t, truncated(Int(64))));
  }
  const Type wide = t.bits() == 64 || (t.is_uint() && t.bits() == 32) ? Int(64) : Int(32);
  const Expr v = truncated(wide);
  if (t.bits() >= 32) return cast(t, v);
  // Wrapped into t's range in the wide type first: x86 narrows vectors with saturating packs where
  // it may (AVX2 made -128 of INT32_MIN for i8, where the wrap gives 0); a value already in range
  // comes out the same either way.
  const Expr mask = Internal::make_const(wide, (int64_t(1) << t.bits()) - 1);
  if (t.is_uint()) return cast(t, v & mask);
  const Expr sign = Internal::make_const(wide, int64_t(1) << (t.bits() - 1));
  return cast(t, ((v & mask) ^ sign) - sign);
}

}  // namespace

void Parameter(LowerCtx&, Stage&, const Node&) { throw InternalError("parameters are bound in lower()"); }
void Constant(LowerCtx&, Stage&, const Node&) { throw InternalError("constants are bound in lower()"); }
// Control flow runs on the host, between compiled pipelines of its operands and of its graphs
// (halide_backend/build/control_flow.h): compile() splits a graph at these before lowering.
void Cond(LowerCtx&, Stage&, const Node&) { throw InternalError("cond runs on the host; compile() splits it out"); }
void While(LowerCtx&, Stage&, const Node&) { throw InternalError("while_loop runs on the host; compile() splits it out"); }
void Scan(LowerCtx&, Stage&, const Node&) { throw InternalError("scan runs on the host; compile() splits it out"); }
void Checkpoint(LowerCtx&, Stage&, const Node&) { throw InternalError("checkpoint runs on the host; compile() splits it out"); }
// So does communication with the other ranks (distributed/collectives.h).
void AllReduce(LowerCtx&, Stage&, const Node&) { throw InternalError("all_reduce runs on the host; compile() splits it out"); }
void AllGather(LowerCtx&, Stage&, const Node&) { throw InternalError("all_gather runs on the host; compile() splits it out"); }
void ReduceScatter(LowerCtx&, Stage&, const Node&) { throw InternalError("reduce_scatter runs on the host; compile() splits it out"); }
void DistBroadcast(LowerCtx&, Stage&, const Node&) { throw InternalError("dist_broadcast runs on the host; compile() splits it out"); }
void Send(LowerCtx&, Stage&, const Node&) { throw InternalError("send runs on the host; compile() splits it out"); }
void Recv(LowerCtx&, Stage&, const Node&) { throw InternalError("recv runs on the host; compile() splits it out"); }
void Full(LowerCtx& ctx, Stage& s, const Node& n) { LowerCtx::define(s, value_of(ctx, n.type.dtype, n.attrs.f("value"))); }
void Iota(LowerCtx&, Stage& s, const Node& n) {
  LowerCtx::define(s, cast(ct(n), LowerCtx::coords(s)[size_t(n.attrs.i("axis"))]));
}

void Neg(LowerCtx& c, Stage& s, const Node& n) { unary(c, s, n, [](Expr x, Type) { return -x; }); }
void Abs(LowerCtx& c, Stage& s, const Node& n) {
  unary(c, s, n, [](Expr x, Type t) { return t.is_uint() ? x : cast(t, abs(x)); });
}
void Sign(LowerCtx& c, Stage& s, const Node& n) { unary(c, s, n, [](Expr x, Type) { return ieee::sign(x); }); }
// x < 0 ? 0 : x, as PyTorch's: NaN and -0.0 pass through.
void Relu(LowerCtx& c, Stage& s, const Node& n) {
  unary(c, s, n, [](Expr x, Type t) {
    return select(t.is_float() ? ieee::is_negative(x) : x < constant(t, 0), constant(t, 0), x);
  });
}
namespace {
// CUDA kernels: libdevice's functions and .ftz rounding, which ieee:: works around where asked.
bool for_cuda(const LowerCtx& c) { return c.p.target.has_feature(Halide::Target::CUDA); }
}  // namespace
void Floor(LowerCtx& c, Stage& s, const Node& n) {
  unary(c, s, n, [cuda = for_cuda(c)](Expr x, Type) { return ieee::floor(x, cuda); });
}
void Ceil(LowerCtx& c, Stage& s, const Node& n) {
  unary(c, s, n, [cuda = for_cuda(c)](Expr x, Type) { return ieee::ceil(x, cuda); });
}
// A value the graph bounds within 2^22 (a requantization whose 8-bit narrowing simplify dropped,
// drop_whole_round_trip) rounds as rounded_as_bits below does: x + 1.5 * 2^23 rounds x half to
// even, and that sum's bits less 0x4b400000 are the whole number, converted back: three
// instructions a vector where AVX-512's round is two 256-bit halves and the moves between them.
// A zero comes out +0; x's sign bit is put back (one vpternlogd: round(-0.25) is -0) unless only
// sums with a nonzero constant read it (a zero point), where the sign of a zero is lost anyway.
void Round(LowerCtx& c, Stage& s, const Node& n) {
  const std::optional<ValueRange> r = n.type.dtype == DType::F32 ? c.range(n.inputs[0]) : std::nullopt;
  const bool small = r && std::max(-r->lo, r->hi) < 4194304.0;
  const std::vector<int>& readers = c.p.stages[size_t(s.node)].consumers;
  const bool zero_sign_read = readers.empty() || std::any_of(readers.begin(), readers.end(), [&](int id) {
    const Node& reader = c.g.node(id);
    if (reader.op != OpKind::Add) return true;
    const int other = reader.inputs[0] == s.node ? reader.inputs[1] : reader.inputs[0];
    const std::optional<double> v = c.g.node(other).op == OpKind::Full ? std::optional<double>(c.g.node(other).attrs.f("value")) : std::nullopt;
    return !v || *v == 0 || reader.inputs[0] == reader.inputs[1];
  });
  unary(c, s, n, [small, zero_sign_read](Expr x, Type t) {
    if (!small) return round(x);
    const Expr whole = cast(t, reinterpret(Int(32), strict_float(x + 12582912.0f)) - 0x4b400000);
    if (!zero_sign_read) return whole;
    return reinterpret(t, reinterpret(Int(32), whole) | (reinterpret(Int(32), x) & int32_t(0x80000000u)));
  });
}
void Exp(LowerCtx& c, Stage& s, const Node& n) {
  const bool finite = c.range(n.inputs[0]).has_value();
  unary(c, s, n, [finite](Expr x, Type) { return ieee::exp(x, finite); });
}
void Log(LowerCtx& c, Stage& s, const Node& n) { unary(c, s, n, [](Expr x, Type) { return ieee::log(x); }); }
void Log1p(LowerCtx& c, Stage& s, const Node& n) { unary(c, s, n, [](Expr x, Type) { return ieee::log1p(x); }); }
void Sqrt(LowerCtx& c, Stage& s, const Node& n) { unary(c, s, n, [](Expr x, Type) { return sqrt(x); }); }
void Rsqrt(LowerCtx& c, Stage& s, const Node& n) { unary(c, s, n, [](Expr x, Type t) { return constant(t, 1) / sqrt(x); }); }
// GPUs have vectorized sin and cos of their own; the CPU's are libm's, one element at a time.
void Sin(LowerCtx& c, Stage& s, const Node& n) {
  const bool gpu = c.p.target.has_gpu_feature();
  unary(c, s, n, [gpu](Expr x, Type) { return gpu ? sin(x) : ieee::sin(x); });
}
void Cos(LowerCtx& c, Stage& s, const Node& n) {
  const bool gpu = c.p.target.has_gpu_feature();
  unary(c, s, n, [gpu](Expr x, Type) { return gpu ? cos(x) : ieee::cos(x); });
}
void Tanh(LowerCtx& c, Stage& s, const Node& n) {
  // GPU drivers' tanh may miss +-1 by an ulp where it saturates (pocl's gives -0.99999994 at -inf,
  // within OpenCL's allowance, and then gelu(-inf) is -inf, not NaN): past the point where the
  // rounded value is +-1 (|x| > 9.02 in f32, 19.1 in f64), it is +-1 exactly.
  const bool gpu = c.p.target.has_gpu_feature();
  unary(c, s, n, [gpu](Expr x, Type t) {
    if (!gpu) return ieee::tanh(x);
    return select(abs(x) > constant(t, t.bits() == 64 ? 19.1 : 9.02), select(x > constant(t, 0), constant(t, 1), constant(t, -1)), tanh(x));
  });
}
void Sigmoid(LowerCtx& c, Stage& s, const Node& n) {
  unary(c, s, n, [](Expr x, Type t) { return constant(t, 1) / (constant(t, 1) + ieee::exp(-x)); });
}
void Erf(LowerCtx& c, Stage& s, const Node& n) {
  unary(c, s, n, [cuda = for_cuda(c)](Expr x, Type) { return ieee::erf(x, cuda); });
}
// x * min(max(x + 3, 0), 6) / 6 as the eager kernel computes it: the clamps compare the bits
// (Halide's max and min, and fast-math's compares, drop NaN), so NaN passes through; the product is
// divided in that order (reassociated, x * (r / 6) keeps the largest floats finite where PyTorch's
// overflow to inf).
void Hardswish(LowerCtx& c, Stage& s, const Node& n) {
  unary(c, s, n, [](Expr x, Type t) {
    Expr r = x + constant(t, 3);
    r = select(ieee::compare_with_literal(r, ieee::Cmp::Lt, 0), constant(t, 0), r);
    r = select(ieee::compare_with_literal(r, ieee::Cmp::Gt, 6), constant(t, 6), r);
    return strict_float(x * r / constant(t, 6));
  });
}
// Halide's atan, asin and acos call libm's (not approximations), so special values are libm's:
// +-pi/2 at +-inf, NaN outside [-1, 1].
void Atan(LowerCtx& c, Stage& s, const Node& n) { unary(c, s, n, [](Expr x, Type) { return Halide::atan(x); }); }
void Asin(LowerCtx& c, Stage& s, const Node& n) { unary(c, s, n, [](Expr x, Type) { return Halide::asin(x); }); }
void Acos(LowerCtx& c, Stage& s, const Node& n) { unary(c, s, n, [](Expr x, Type) { return Halide::acos(x); }); }
void Not(LowerCtx& c, Stage& s, const Node& n) { unary(c, s, n, [](Expr x, Type) { return !x; }); }
namespace {
// An integer conversion of round(x) + z (z a whole scalar, or none) where x is within 2^22 and the
// result within the integer type: a requantization, clamped before it rounds (simplify's
// clamp_before_round). x + 1.5 * 2^23 is a sum in [2^23, 2^24), whose unit is 1: the addition
// rounds x to a whole number (half to even, as round) and that number is the sum's bits less
// 0x4b400000. So the result is those bits less that, plus z, in integer arithmetic, then narrowed
// (an 8-bit result's low bits: one vpmovdb): three instructions a vector after the clamp, where
// round (AVX-512's is two 256-bit halves and the moves between them), adding z and converting took
// six. Defines the stage; false where the operand is not of that form.
bool rounded_as_bits(LowerCtx& c, Stage& s, const Node& n) {
  const std::optional<RoundedWithZeroPoint> rounded = rounded_with_zero_point(c.g, c.value_ranges(), n.inputs[0]);
  if (!rounded) return false;
  const Node& round = c.g.node(rounded->round);
  const int z = rounded->zero_point;
  if (c.g.type(round.inputs[0]) != c.g.type(n.inputs[0])) return false;
  const std::optional<ValueRange> r = c.range(round.inputs[0]);
  if (!r || std::max(-r->lo, r->hi) >= 4194304.0) return false;
  // Strict: under fast-math LLVM would reassociate a sum x is made of with the constant (see
  // ieee::exp). (Taken back as floats, (x + c) - c, Halide 14's simplifier cancels the two even
  // under strict_float.)
  Expr bits = reinterpret(Int(32), strict_float(c.at(round.inputs[0], LowerCtx::coords(s)) + 12582912.0f));
  Expr v = bits - 0x4b400000;
  if (z >= 0) v += cast(Int(32), c.at(z, {}));
  LowerCtx::define(s, cast(ct(n), v));
  return true;
}
}  // namespace
void Cast(LowerCtx& c, Stage& s, const Node& n) {
  // A float the graph shows finite and within the integer type's range (a requantized value after
  // its clamp to [0, 255]) converts as it is: float_to_int's NaN, infinity and range tests and its
  // wrap were a third of int8 MobileNet V2's convolution epilogues.
  const DType to = n.type.dtype;
  const std::optional<ValueRange> r = !is_floating(to) && to != DType::Bool ? c.range(n.inputs[0]) : std::nullopt;
  const bool in_range = r && converts_within(*r, to);
  if (in_range && (to == DType::U8 || to == DType::I8 || to == DType::U16 || to == DType::I16 || to == DType::I32) && rounded_as_bits(c, s, n)) return;
  unary(c, s, n, [in_range](Expr x, Type t) {
    if (t.is_bool()) return ieee::is_nonzero(x);
    if (in_range && x.type().is_float()) return cast(t, cast(t.is_uint() && t.bits() == 32 ? Int(64) : Int(32), x));
    if (x.type().is_float() && !t.is_float()) return float_to_int(x, t);
    // A bool made an integer by a select, not a widening cast: Halide 14's x86 code generator for
    // AVX2 crashed on products of widened bools ("Attempting to narrow a 1-bit type"). (Floats
    // keep the cast: a select of literals lets LLVM fold what reads it per branch, log(0) included.)
    if (x.type().is_bool() && !t.is_float()) return select(x, Internal::make_one(t), Internal::make_zero(t));
    return cast(t, x);
  });
}

// Whether a float op reads an operand of its own family (add/sub, or mul/div), or reads the same
// value twice: then it is computed strictly as the graph says, as eager execution does. LLVM's
// reassociation turns (x - max) - log(sum) into x - (max + log(sum)), which loses the digits of
// log_softmax for large x (PyTorch keeps the order for that reason), and (0.5 * x) * (1 + erf)
// into an overflow at the largest floats; Halide's simplifier folds x - x and x / x to constants,
// wrong for inf and NaN. strict_float keeps fast-math away from this op and what it inlines.
//
// Not where the graph shows every partial result a whole number below 2^24 (a quantized depthwise
// convolution's sum of taps): exact in any order, with its products fused into FMAs.
bool needs_order(LowerCtx& ctx, const Stage& s, const Node& n, std::initializer_list<OpKind> family) {
  if (!is_floating(n.type.dtype)) return false;
  if (const std::optional<ValueRange> r = ctx.range(s.node); r && r->exact_in_any_order()) return false;
  if (n.inputs.size() == 2 && n.inputs[0] == n.inputs[1]) return true;
  for (int in : n.inputs)
    for (OpKind k : family)
      if (ctx.g.node(in).op == k) return true;
  return false;
}
bool in_sum_chain(LowerCtx& ctx, const Stage& s, const Node& n) { return needs_order(ctx, s, n, {OpKind::Add, OpKind::Sub}); }
bool in_product_chain(LowerCtx& ctx, const Stage& s, const Node& n) { return needs_order(ctx, s, n, {OpKind::Mul, OpKind::Div}); }

// Bool operands: add is or, mul is and (PyTorch's bool arithmetic).
void Add(LowerCtx& c, Stage& s, const Node& n) {
  const bool chain = in_sum_chain(c, s, n);
  binary(c, s, n, [&](Expr a, Expr b) { return a.type().is_bool() ? a || b : chain ? strict_float(a + b) : a + b; });
}
void Sub(LowerCtx& c, Stage& s, const Node& n) {
  const bool chain = in_sum_chain(c, s, n);
  binary(c, s, n, [&](Expr a, Expr b) { return chain ? strict_float(a - b) : a - b; });
}
void Mul(LowerCtx& c, Stage& s, const Node& n) {
  const bool chain = in_product_chain(c, s, n);
  binary(c, s, n, [&](Expr a, Expr b) { return a.type().is_bool() ? a && b : chain ? strict_float(a * b) : a * b; });
}
void Div(LowerCtx& c, Stage& s, const Node& n) {
  const bool chain = in_product_chain(c, s, n);
  binary(c, s, n, [&](Expr a, Expr b) { return chain ? strict_float(a / b) : a / b; });
}
void Pow(LowerCtx& c, Stage& s, const Node& n) {
  binary(c, s, n, [](Expr a, Expr b) { return a.type().is_float() ? ieee::pow(a, b) : ieee::int_pow(a, b); });
}
void Max(LowerCtx& c, Stage& s, const Node& n) { binary(c, s, n, ieee::max); }
void Min(LowerCtx& c, Stage& s, const Node& n) { binary(c, s, n, ieee::min); }
// Comparisons follow IEEE for NaN (x != x is the NaN test; NaN < y is false), where Halide
// assumes there are none: its simplifier folds x == x to true, and LLVM's no-NaN flag lets an
// ordered compare become an unordered one.
// A literal operand is never NaN (see compared), so it needs no test.
Expr nan_operand(const Expr& a, const Expr& b) {
  if (Internal::as_const_float(a)) return ieee::is_nan(b);
  if (Internal::as_const_float(b)) return ieee::is_nan(a);
  return ieee::is_nan(a) || ieee::is_nan(b);
}
// An operand of a comparison: a finite fill is a literal here, zero included (a comparison with
// one is exact under fast-math, unlike x * 0; see value_of), which saves a load and a NaN test.
Expr compared(LowerCtx& ctx, const Stage& s, const Node& n, size_t i) {
  const Node& in = ctx.g.node(n.inputs[i]);
  if (in.op == OpKind::Full && std::isfinite(in.attrs.f("value"))) return constant(compute_type(in.type.dtype), in.attrs.f("value"));
  return operand(ctx, s, n, i);
}
// x OP y as IEEE orders floats. With a literal on one side, a range test on the other's bits where
// one exists (ieee::compare_with_literal); otherwise the NaN test and Halide's compare.
void comparison(LowerCtx& ctx, Stage& s, const Node& n, ieee::Cmp cmp) {
  Expr a = compared(ctx, s, n, 0), b = compared(ctx, s, n, 1);
  auto halide_cmp = [cmp](const Expr& x, const Expr& y) {
    switch (cmp) {
      case ieee::Cmp::Eq: return x == y;
      case ieee::Cmp::Ne: return x != y;
      case ieee::Cmp::Lt: return x < y;
      case ieee::Cmp::Le: return x <= y;
      case ieee::Cmp::Gt: return x > y;
      case ieee::Cmp::Ge: return x >= y;
    }
    throw InternalError("unknown comparison");
  };
  if (!a.type().is_float()) return LowerCtx::define(s, halide_cmp(a, b));
  // Operands the graph shows finite (a requantized value against its clamp's bounds): no NaN or
  // infinity to guard against, so Halide's compare as it is.
  if (ctx.range(n.inputs[0]) && ctx.range(n.inputs[1])) return LowerCtx::define(s, halide_cmp(a, b));
  Expr bits_test;
  if (const double* c = Internal::as_const_float(b)) bits_test = ieee::compare_with_literal(a, cmp, *c);
  else if (const double* c = Internal::as_const_float(a)) bits_test = ieee::compare_with_literal(b, ieee::mirrored(cmp), *c);
  if (bits_test.defined()) return LowerCtx::define(s, bits_test);
  Expr nan = nan_operand(a, b);
  LowerCtx::define(s, cmp == ieee::Cmp::Ne ? nan || a != b : !nan && halide_cmp(a, b));
}
void Eq(LowerCtx& c, Stage& s, const Node& n) { comparison(c, s, n, ieee::Cmp::Eq); }
void Ne(LowerCtx& c, Stage& s, const Node& n) { comparison(c, s, n, ieee::Cmp::Ne); }
void Lt(LowerCtx& c, Stage& s, const Node& n) { comparison(c, s, n, ieee::Cmp::Lt); }
void Le(LowerCtx& c, Stage& s, const Node& n) { comparison(c, s, n, ieee::Cmp::Le); }
void Gt(LowerCtx& c, Stage& s, const Node& n) { comparison(c, s, n, ieee::Cmp::Gt); }
void Ge(LowerCtx& c, Stage& s, const Node& n) { comparison(c, s, n, ieee::Cmp::Ge); }
void And(LowerCtx& c, Stage& s, const Node& n) { binary(c, s, n, [](Expr a, Expr b) { return a && b; }); }
void Or(LowerCtx& c, Stage& s, const Node& n) { binary(c, s, n, [](Expr a, Expr b) { return a || b; }); }
void Where(LowerCtx& c, Stage& s, const Node& n) {
  LowerCtx::define(s, select(operand(c, s, n, 0), operand(c, s, n, 1), operand(c, s, n, 2)));
}

void ReduceSum(LowerCtx& c, Stage& s, const Node& n) { reduce(c, s, n, Fold::Sum); }
void ReduceMax(LowerCtx& c, Stage& s, const Node& n) { reduce(c, s, n, Fold::Max); }
void ReduceMin(LowerCtx& c, Stage& s, const Node& n) { reduce(c, s, n, Fold::Min); }
void ArgMax(LowerCtx& c, Stage& s, const Node& n) { arg_reduce(c, s, n, true); }
void ArgMin(LowerCtx& c, Stage& s, const Node& n) { arg_reduce(c, s, n, false); }
// The product of the operand's extents (expressions of the dynamic sizes where they vary), in i64:
// the operand's values are never read.
void Numel(LowerCtx& c, Stage& s, const Node& n) {
  const int x = n.inputs[0];
  std::vector<int64_t> axes = n.attrs.ints("axes");
  if (axes.empty())
    for (int d = 0; d < c.g.type(x).rank(); ++d) axes.push_back(d);
  Expr count = cast(Int(64), 1);
  for (int64_t d : axes) count = count * cast(Int(64), c.extent(x, int(d)));
  LowerCtx::define(s, cast(ct(n), count));
}

namespace {
// A bf16 operand's stored bits where it is a constant (frozen weights), else null.
const uint16_t* constant_bf16_bits(const LowerCtx& ctx, int node) {
  const Node& c = ctx.g.node(node);
  if (c.op != OpKind::Constant || c.type.dtype != DType::BF16) return nullptr;
  return static_cast<const uint16_t*>(ctx.g.constants[size_t(c.constant)].data);
}

// A constant's elements rearranged when compiling (`fill` writes them in the packed order), bound
// as a constant and read where they lie: a dot product's operand packed once, not at every call.
template <typename T>
Expr packed_constant(LowerCtx& ctx, DType dtype, const Shape& shape, const std::function<void(T*)>& fill, const std::vector<Var>& at) {
  auto elems = std::make_shared<std::vector<T>>(size_t(shape_numel(shape)));
  fill(elems->data());
  const size_t nbytes = elems->size() * sizeof(T);
  const T* data = elems->data();
  ImageParam param = bind_constant_param(ctx.p, TensorType{dtype, shape}, ConstData{std::move(elems), data, nbytes});
  return param(std::vector<Expr>(at.begin(), at.end()));
}
Expr packed_constant(LowerCtx& ctx, const Shape& shape, const std::function<void(uint16_t*)>& fill, const std::vector<Var>& at) {
  return reinterpret(BFloat(16), packed_constant<uint16_t>(ctx, DType::BF16, shape, fill, at));
}

// A bf16 matmul whose code uses vdpbf16ps (bf16_dot_products) over a contraction of a fixed, even
// length.
bool bf16_pairs(const LowerCtx& ctx, const Node& n) {
  const TensorType& a = ctx.g.type(n.inputs[0]);
  const int64_t k = a.shape.back();
  const bool k_varies = ctx.p.dynamic && ctx.p.dynamic->extent_varies(n.inputs[0]);
  return a.dtype == DType::BF16 && bf16_dot_products(ctx.p.target) && k >= 2 && k % 2 == 0 && !k_varies;
}

// A contraction's left operand (graph node `node`) as a helper "rows" over its coordinates
// (Halide order: its last dimension innermost), its value left to the caller to define: the copy
// a dot product reads its pairs from. rows_at(rows, c): its element at row-major coordinates c.
Helper left_rows(const LowerCtx& ctx, const Stage& s, int node, Coords* row_major_vars) {
  const Shape& shape = ctx.g.type(node).shape;
  const size_t r = shape.size();
  Helper rows;
  rows.role = "rows";
  rows.func = Func(helper_name(s, "_rows"));
  for (size_t d = r; d-- > 0;) rows.vars.push_back(Var("a" + std::to_string(d))), rows.extents.push_back(shape[d]);
  row_major_vars->assign(r, Expr());
  for (size_t d = 0; d < r; ++d) (*row_major_vars)[d] = rows.vars[r - 1 - d];
  return rows;
}
Expr rows_at(const Helper& rows, const Coords& c) { return rows.func(std::vector<Expr>(c.rbegin(), c.rend())); }

// Two bf16 products summed into each f32 lane per step, as vdpbf16ps does: the right operand
// copied into pairs of rows ([.., K/2, N, 2], a helper computed at root, in bf16), the left one read
// two elements at a time. Halide matches the pattern where both sides are bf16 values widened.
void matmul_bf16_pairs(LowerCtx& ctx, Stage& s, const Node& n) {
  const TensorType &a = ctx.g.type(n.inputs[0]), &b = ctx.g.type(n.inputs[1]);
  const size_t r = size_t(n.type.rank());
  const int64_t K = a.shape[r - 1], N = b.shape[r - 1];
  Helper pairs;
  pairs.role = "pairs";
  pairs.func = Func(helper_name(s, "_pairs"));
  pairs.vars = {Var("p"), Var("n"), Var("k2")};
  pairs.extents = {2, N, K / 2};
  for (size_t d = r - 2; d-- > 0;) pairs.vars.push_back(Var("b" + std::to_string(d))), pairs.extents.push_back(b.shape[d]);
  Coords cb(r);
  for (size_t d = 0; d + 2 < r; ++d) cb[d] = pairs.vars[3 + (r - 3 - d)];
  cb[r - 2] = 2 * pairs.vars[2] + pairs.vars[0], cb[r - 1] = pairs.vars[1];
  if (const uint16_t* w = b.shape.size() == 2 ? constant_bf16_bits(ctx, n.inputs[1]) : nullptr) {
    pairs.func(pairs.vars) = packed_constant(ctx, {K / 2, N, 2}, [&](uint16_t* out) {
      for (int64_t k2 = 0; k2 < K / 2; ++k2)
        for (int64_t j = 0; j < N; ++j)
          for (int64_t p = 0; p < 2; ++p) *out++ = w[(2 * k2 + p) * N + j];
    }, pairs.vars);
    pairs.stored = false;
  } else {
    pairs.func(std::vector<Expr>(pairs.vars.begin(), pairs.vars.end())) = cast(BFloat(16), ctx.at(n.inputs[1], cb));
  }
  Coords o = LowerCtx::coords(s), ca(r);
  RDom k({{0, 2}, {0, int(K / 2)}}, rdom_name(s, "k"));
  std::vector<Expr> pb{k.x, o[r - 1], k.y};
  for (size_t d = r - 2; d-- > 0;) {
    ca[d] = a.shape[d] == 1 ? Expr(0) : o[d];
    pb.push_back(b.shape[d] == 1 ? Expr(0) : o[d]);
  }
  ca[r - 2] = o[r - 2], ca[r - 1] = 2 * k.y + k.x;
  // The left operand copied in bf16 too: its values reach the product as f32 computed from their
  // stored bits (ieee_math.h), which Halide cannot see through, so each step converted every
  // broadcast pair back to bf16 (four instructions a row: 125 GFLOP/s, then 136 with the panels).
  Coords cr;
  Helper rows = left_rows(ctx, s, n.inputs[0], &cr);
  if (constant_bf16_bits(ctx, n.inputs[0])) {
    // A constant left operand is read as bf16 where it lies.
    rows.func(rows.vars) = reinterpret(BFloat(16), ctx.p.stages[size_t(n.inputs[0])].constant(std::vector<Expr>(rows.vars.begin(), rows.vars.end())));
    rows.stored = false;
  } else {
    rows.func(std::vector<Expr>(rows.vars.begin(), rows.vars.end())) = cast(BFloat(16), ctx.at(n.inputs[0], cr));
  }
  std::vector<Expr> v(s.vars.begin(), s.vars.end());
  Func acc(helper_name(s, "_acc"));
  acc(v) = 0.0f;
  acc(v) += cast<float>(rows_at(rows, ca)) * cast<float>(pairs.func(pb));
  s.func(v) = acc(v);
  s.reduction = acc;
  s.rvars = {k.x, k.y};
  s.dot_lanes = 2;
  s.helpers.push_back(std::move(pairs));
  s.helpers.push_back(std::move(rows));
}
}  // namespace

}  // namespace lowering

namespace {
// An integer matmul's constant right operand, [1.., K/4, N, 4], packed once as an f32 one (below), in panels
// of a vector's columns with their four bytes, [N / V, K/4, V, 4]: a tile's steps then read its
// columns 64 bytes after the last instead of N * 4, and its block no longer copies each panel at
// every call (an int8 encoder's weights, 10 MB of copies a call at 2 blocks a product). Where the
// sums are vpdpbusd (VNNI); elsewhere the pairs (int_matmul_pairs) are packed when compiling already.
bool int_right_operand_packed(const Graph& g, const Halide::Target& target, const Node& n) {
  if (n.op != OpKind::IntMatmul || target.arch != Halide::Target::X86 || !target.has_feature(Halide::Target::AVX512_SapphireRapids) ||
      target.has_gpu_feature() || n.inputs[0] == n.inputs[1])
    return false;
  const Node& b = g.node(n.inputs[1]);
  const size_t r = b.type.shape.size();
  if (b.op != OpKind::Constant || (b.type.dtype != DType::I8 && b.type.dtype != DType::U8) || r < 3) return false;
  for (size_t d = 0; d + 3 < r; ++d)
    if (b.type.shape[d] != 1) return false;
  const int V = target.natural_vector_size(Halide::Int(32));
  return V > 1 && b.type.shape[r - 2] % V == 0 && !reads_weight_in_parts(n.type.shape[size_t(n.type.rank() - 2)], b.type.numel());
}
}  // namespace

// Packed once, when compiling: [K, N] as panels of V columns, [N / V, K, V], read at (column % V,
// k, column / V). A tile's columns are then runs of V that follow each other step after step,
// where [K, N] put each step a row after the last (4 KiB for 1024 columns: a new page every step,
// which no prefetcher follows, and every step in the same few sets of the L1 cache). A recurrent
// step's product, [8, 256] x [256, 1024], on Zen 3, 2 threads: the reference LSTM of 256 at batch 8
// 12.4-15.7 -> 8.3-9.0 ms; a frozen encoder's projections, 4 x 128 x 256, 31 -> 27.5 ms.
bool reads_right_operand_packed(const Graph& g, const Halide::Target& target, const Node& n) {
  if (n.op == OpKind::IntMatmul) return int_right_operand_packed(g, target, n);
  if (n.op != OpKind::Matmul || n.type.dtype != DType::F32 || n.type.rank() != 2 || target.has_gpu_feature()) return false;
  const Node& b = g.node(n.inputs[1]);
  const int V = target.natural_vector_size(Halide::Float(32));
  return b.op == OpKind::Constant && b.type.dtype == DType::F32 && b.type.rank() == 2 && n.inputs[0] != n.inputs[1] && V > 1 &&
         b.type.shape[1] % V == 0 && !reads_weight_in_parts(n.type.shape[0], b.type.numel() * 4);
}

bool reads_weight_in_parts(int64_t rows, int64_t weight_bytes) {
  return rows <= 2 && weight_bytes > int64_t(cpu_caches().l2) * machine_threads();
}

bool bf16_dot_products(const Halide::Target& target) {
  return target.has_feature(Halide::Target::AVX512_SapphireRapids) && !target.has_gpu_feature() && cpu_vendor() != CpuVendor::Intel;
}

namespace lowering {

namespace {
// A right operand [K, N, group] rearranged as panels of V columns, [N / V, K, V, group], for
// packed_constant: each panel's steps one after the other.
template <typename T>
std::function<void(T*)> panels(const T* from, int64_t K, int64_t N, int64_t V, int64_t group) {
  return [=](T* to) {
    for (int64_t panel = 0; panel < N / V; ++panel)
      for (int64_t k = 0; k < K; ++k, to += V * group) std::copy_n(from + (k * N + panel * V) * group, V * group, to);
  };
}

Expr packed_right_operand(LowerCtx& ctx, Stage& s, const Node& n, const Expr& column, const Expr& k) {
  const Node& b = ctx.g.node(n.inputs[1]);
  const int64_t K = b.type.shape[0], N = b.type.shape[1], V = ctx.p.target.natural_vector_size(Halide::Float(32));
  const auto fill = panels(static_cast<const float*>(ctx.g.constants[size_t(b.constant)].data), K, N, V, 1);
  s.right_packed = true;
  const Var lane("lane"), step("k"), panel("panel");
  Func packed(helper_name(s, "_packed"));
  packed(lane, step, panel) = packed_constant<float>(ctx, DType::F32, Shape{N / V, K, V}, fill, {lane, step, panel});
  return packed(column % int(V), k, column / int(V));
}

Expr packed_int_right_operand(LowerCtx& ctx, Stage& s, const Node& n, const Expr& column, const Expr& k4, const Expr& lane) {
  const Node& b = ctx.g.node(n.inputs[1]);
  const size_t r = b.type.shape.size();
  const int64_t K4 = b.type.shape[r - 3], N = b.type.shape[r - 2], V = ctx.p.target.natural_vector_size(Halide::Int(32));
  // (u8 and i8 alike: bytes moved)
  const auto fill = panels(static_cast<const int8_t*>(ctx.g.constants[size_t(b.constant)].data), K4, N, V, 4);
  s.right_packed = true;
  const Var byte("byte"), col("col"), step("k4"), panel("panel");
  Func packed(helper_name(s, "_packed"));
  packed(byte, col, step, panel) = packed_constant<int8_t>(ctx, b.type.dtype, Shape{N / V, K4, V, 4}, fill, {byte, col, step, panel});
  return packed(lane, column % int(V), k4, column / int(V));
}
}  // namespace

void Matmul(LowerCtx& ctx, Stage& s, const Node& n) {
  if (bf16_pairs(ctx, n)) return matmul_bf16_pairs(ctx, s, n);
  const TensorType &a = ctx.g.type(n.inputs[0]), &b = ctx.g.type(n.inputs[1]);
  const size_t r = size_t(n.type.rank());
  const Type t = ct(n);
  Coords o = LowerCtx::coords(s), ca(r), cb(r);
  RDom k({{0, ctx.extent(n.inputs[0], int(r - 1))}}, rdom_name(s, "k"));
  for (size_t d = 0; d + 2 < r; ++d) {
    ca[d] = a.shape[d] == 1 ? Expr(0) : o[d];
    cb[d] = b.shape[d] == 1 ? Expr(0) : o[d];
  }
  ca[r - 2] = o[r - 2], ca[r - 1] = k.x;
  cb[r - 2] = k.x, cb[r - 1] = o[r - 1];
  std::vector<Expr> v(s.vars.begin(), s.vars.end());
  Func acc(helper_name(s, "_acc"));
  acc(v) = constant(t, 0);
  // (A constant right operand in panels of a vector's columns: reads_right_operand_packed.)
  const Expr right = reads_right_operand_packed(ctx.g, ctx.p.target, n) ? packed_right_operand(ctx, s, n, o[r - 1], k.x) : ctx.at(n.inputs[1], cb);
  acc(v) += cast(t, ctx.at(n.inputs[0], ca)) * cast(t, right);
  s.func(v) = acc(v);
  s.reduction = acc;
  s.rvars.push_back(k.x);
}

namespace {
// An x86 CPU target without VNNI (Zen 3, AVX2), where Halide makes a sum of four u8 x i8 products a
// lane two vpmaddwd (pairs of i16 products into i32 lanes) whose pairs it then adds across lanes (a
// shuffle, a lane-crossing permute and an add a vector): the operands are better read in pairs,
// one vpmaddwd and one add a vector. (Zen 3 issues two vpmaddwd a cycle, 32 exact multiply-adds;
// vpmaddubsw's are as many but saturate their i16 sums.) Extents fixed: the pairs are helpers'.
bool int_pairs(const LowerCtx& ctx, const Node& n) {
  const Halide::Target& t = ctx.p.target;
  return t.arch == Halide::Target::X86 && !t.has_feature(Halide::Target::AVX512_SapphireRapids) && !t.has_gpu_feature() &&
         !(ctx.p.dynamic && (ctx.p.dynamic->extent_varies(n.inputs[0]) || ctx.p.dynamic->extent_varies(n.inputs[1])));
}

// IntMatmul's right operand, [.., K/4, N, 4], as pairs of rows [.., K/2, N, 2] (Halide order: p, n,
// k2, batches): rearranged when compiling where it is a constant (frozen weights), else a helper
// the schedule copies per panel.
Helper int_matmul_pairs(LowerCtx& ctx, const Stage& s, const Node& n) {
  const TensorType& b = ctx.g.type(n.inputs[1]);
  const size_t r = b.shape.size() - 1;  // the product's rank
  const int64_t K4 = b.shape[r - 2], N = b.shape[r - 1];
  Helper pairs;
  pairs.role = "pairs";
  pairs.func = Func(helper_name(s, "_pairs"));
  pairs.vars = {Var("p"), Var("n"), Var("k2")};
  pairs.extents = {2, N, 2 * K4};
  for (size_t d = r - 2; d-- > 0;) pairs.vars.push_back(Var("b" + std::to_string(d))), pairs.extents.push_back(b.shape[d]);
  const Node& c = ctx.g.node(n.inputs[1]);
  if (c.op == OpKind::Constant) {
    const auto* w = static_cast<const int8_t*>(ctx.g.constants[size_t(c.constant)].data);  // u8 and i8 alike: bytes moved
    Shape shape(b.shape.begin(), b.shape.end() - 3);
    shape.insert(shape.end(), {2 * K4, N, 2});
    pairs.func(pairs.vars) = packed_constant<int8_t>(ctx, b.dtype, shape, [&](int8_t* out) {
      for (int64_t m = 0, batches = shape_numel(b.shape) / (4 * K4 * N); m < batches; ++m, w += 4 * K4 * N)
        for (int64_t k2 = 0; k2 < 2 * K4; ++k2)
          for (int64_t j = 0; j < N; ++j)
            for (int64_t p = 0; p < 2; ++p) *out++ = w[((k2 / 2) * N + j) * 4 + 2 * (k2 % 2) + p];
    }, pairs.vars);
    pairs.stored = false;
    return pairs;
  }
  Coords cb(r + 1);
  for (size_t d = 0; d + 2 < r; ++d) cb[d] = pairs.vars[3 + (r - 3 - d)];
  cb[r - 2] = pairs.vars[2] / 2, cb[r - 1] = pairs.vars[1], cb[r] = 2 * (pairs.vars[2] % 2) + pairs.vars[0];
  pairs.func(std::vector<Expr>(pairs.vars.begin(), pairs.vars.end())) = ctx.at(n.inputs[1], cb);
  return pairs;
}
}  // namespace

// Four u8 x i8 products summed into each i32 lane per step of the reduction's inner variable:
// with that variable vectorized atomically (its schedule), Halide matches the sum to x86's
// vpdpbusd where the target has VNNI (avx512_sapphirerapids in Halide 14), and to widening
// multiply-adds elsewhere: in pairs on x86 without VNNI (int_pairs).
void IntMatmul(LowerCtx& ctx, Stage& s, const Node& n) {
  const TensorType &a = ctx.g.type(n.inputs[0]), &b = ctx.g.type(n.inputs[1]);
  const size_t r = size_t(n.type.rank());
  Coords o = LowerCtx::coords(s), ca(r), cb(r + 1);
  RDom k({{0, 4}, {0, ctx.extent(n.inputs[1], int(r - 2))}}, rdom_name(s, "k"));
  for (size_t d = 0; d + 2 < r; ++d) {
    ca[d] = a.shape[d] == 1 ? Expr(0) : o[d];
    cb[d] = b.shape[d] == 1 ? Expr(0) : o[d];
  }
  ca[r - 2] = o[r - 2], ca[r - 1] = 4 * k.y + k.x;
  cb[r - 2] = k.y, cb[r - 1] = o[r - 1], cb[r] = k.x;
  std::vector<Expr> v(s.vars.begin(), s.vars.end());
  Func acc(helper_name(s, "_acc"));
  acc(v) = 0;
  if (int_pairs(ctx, n)) {
    Helper pairs = int_matmul_pairs(ctx, s, n);
    RDom k2({{0, 2}, {0, int(pairs.extents[2])}}, rdom_name(s, "k"));
    std::vector<Expr> pb{k2.x, o[r - 1], k2.y};
    for (size_t d = r - 2; d-- > 0;) pb.push_back(b.shape[d] == 1 ? Expr(0) : o[d]);
    ca[r - 1] = 2 * k2.y + k2.x;
    // The left operand widened to i16 first (a copy at root): each step's pair of a row is then one
    // broadcast load, where a pair of bytes took a broadcast and a widening in the vector units,
    // which the products and sums keep busy (Zen 3, 1024^3: 140-160 -> 188-244 GOP/s, alternated).
    Coords cr;
    Helper rows = left_rows(ctx, s, n.inputs[0], &cr);
    rows.func(std::vector<Expr>(rows.vars.begin(), rows.vars.end())) = cast<int16_t>(ctx.at(n.inputs[0], cr));
    acc(v) += cast<int32_t>(rows_at(rows, ca)) * cast<int32_t>(pairs.func(pb));
    s.rvars = {k2.x, k2.y};
    s.dot_lanes = 2;
    s.helpers.push_back(std::move(pairs));
    s.helpers.push_back(std::move(rows));
  } else {
    // (A constant right operand in panels of a vector's columns: int_right_operand_packed.)
    const Expr right = int_right_operand_packed(ctx.g, ctx.p.target, n) ? packed_int_right_operand(ctx, s, n, o[r - 1], k.y, k.x)
                                                                        : ctx.at(n.inputs[1], cb);
    acc(v) += cast<int32_t>(ctx.at(n.inputs[0], ca)) * cast<int32_t>(right);
    s.rvars = {k.x, k.y};
    s.dot_lanes = 4;
  }
  s.func(v) = acc(v);
  s.reduction = acc;
}

void Reshape(LowerCtx& ctx, Stage& s, const Node& n) {
  // Inside a group the output coordinates are linearized and split into the input's.
  const int in_node = n.inputs[0], out_node = s.node;
  const std::vector<std::array<int, 4>> groups = reshape_groups(ctx.g.type(in_node).shape, n.type.shape);
  if (const SymbolicSizes* dyn = ctx.p.dynamic; dyn && (dyn->extent_varies(in_node) || dyn->extent_varies(out_node))) {
    // The grouping must hold at every size, not only at the traced one.
    std::vector<int64_t> other;
    for (const SymbolicSizes::Source& src : dyn->sources) other.push_back(ctx.g.type(ctx.g.inputs[size_t(src.input)]).shape[size_t(src.dim)] + 7);
    if (reshape_groups(dyn->shape_at(in_node, other), dyn->shape_at(out_node, other)) != groups)
      throw ValueError("a reshape that regroups dimensions differently at another dynamic size");
  }
  const Coords o = LowerCtx::coords(s);
  Coords ic(ctx.g.type(in_node).shape.size());
  for (const auto& [i0, i, j0, j] : groups) {
    if (j0 < 0) { ic[size_t(i)] = 0; continue; }
    if (i0 < 0) continue;
    Expr linear = 0, stride = 1;
    for (int d = j; d >= j0; --d) linear += o[size_t(d)] * stride, stride = stride * ctx.extent(out_node, d);
    stride = 1;
    for (int d = i; d >= i0; --d) {
      Expr q = Internal::is_const_one(stride) ? linear : linear / stride;
      ic[size_t(d)] = d == i0 ? q : q % ctx.extent(in_node, d);
      stride = stride * ctx.extent(in_node, d);
    }
  }
  LowerCtx::define(s, ctx.at(in_node, ic));
}

void Transpose(LowerCtx& ctx, Stage& s, const Node& n) {
  const auto& perm = n.attrs.ints("perm");
  const Coords o = LowerCtx::coords(s);
  Coords ic(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) ic[size_t(perm[d])] = o[d];
  LowerCtx::define(s, ctx.at(n.inputs[0], ic));
}

void BroadcastTo(LowerCtx& ctx, Stage& s, const Node& n) { LowerCtx::define(s, operand(ctx, s, n, 0)); }

void Slice(LowerCtx& ctx, Stage& s, const Node& n) {
  const auto& steps = n.attrs.ints("steps");
  const Coords o = LowerCtx::coords(s);
  Coords ic(o.size());
  const int id = int(&n - &ctx.g.nodes[0]);
  for (size_t d = 0; d < o.size(); ++d) ic[d] = ctx.attr(id, "starts", d) + int(steps[d]) * o[d];
  LowerCtx::define(s, ctx.at(n.inputs[0], ic));
}

void Concat(LowerCtx& ctx, Stage& s, const Node& n) {
  const size_t axis = size_t(n.attrs.i("axis"));
  const Coords o = LowerCtx::coords(s);
  // select(o < end_0, x_0, o < end_1, x_1, ..., x_last); each operand's index is clamped to its
  // own range, so bounds inference never asks an operand for more than it has.
  std::vector<Expr> conds, values;
  int64_t offset = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const int64_t extent = ctx.g.type(n.inputs[i]).shape[axis];
    Coords c = o;
    c[axis] = clamp(o[axis] - int(offset), 0, int(extent - 1));
    offset += extent;
    conds.push_back(o[axis] < int(offset));
    values.push_back(ctx.at(n.inputs[i], c));
  }
  Expr e = values.back();
  for (size_t i = values.size() - 1; i-- > 0;) e = select(conds[i], values[i], e);
  LowerCtx::define(s, e);
}

void Pad(LowerCtx& ctx, Stage& s, const Node& n) {
  const auto &lo = n.attrs.ints("lo"), &hi = n.attrs.ints("hi");
  const Shape& in = ctx.g.type(n.inputs[0]).shape;
  const Coords o = LowerCtx::coords(s);
  Coords ic(o.size());
  Expr inside = Internal::const_true();
  for (size_t d = 0; d < o.size(); ++d) {
    if (lo[d] == 0 && hi[d] == 0) {
      ic[d] = o[d];
      continue;
    }
    Expr x = o[d] - int(lo[d]);
    inside = inside && x >= 0 && x < int(in[d]);
    ic[d] = clamp(x, 0, int(in[d] - 1));
  }
  LowerCtx::define(s, select(inside, ctx.at(n.inputs[0], ic), value_of(ctx, n.type.dtype, n.attrs.f("value"))));
}

}  // namespace lowering
}  // namespace hjit::backend

namespace hjit::backend::lowering {
namespace {

// x read on a zero-based domain padded by (ph, pw) in its last two dimensions with `fill`.
Helper padded_input(LowerCtx& ctx, const Stage& s, int x_node, int64_t ph, int64_t pw, Expr fill) {
  const Shape& xs = ctx.g.type(x_node).shape;
  const size_t r = xs.size();
  const int64_t H = xs[r - 2], W = xs[r - 1];
  std::vector<Var> vars;
  for (size_t d = 0; d < r; ++d) vars.emplace_back("p" + std::to_string(d));
  Shape padded_shape = xs;
  padded_shape[r - 2] += 2 * ph;
  padded_shape[r - 1] += 2 * pw;
  Coords c = to_row_major(std::vector<Expr>(vars.begin(), vars.end()));
  Expr iy = c[r - 2] - int(ph), ix = c[r - 1] - int(pw);
  Coords inside = c;
  inside[r - 2] = clamp(iy, 0, int(H - 1));
  inside[r - 1] = clamp(ix, 0, int(W - 1));
  Func f(helper_name(s, "_padded"));
  Expr v = ctx.at(x_node, inside);
  f(vars) = (ph == 0 && pw == 0) ? v : select(iy >= 0 && iy < int(H) && ix >= 0 && ix < int(W), v, cast(v.type(), fill));
  return Helper{"padded", f, vars, to_halide_order(padded_shape), {}, {}};
}

}  // namespace

namespace {
// A bf16 convolution whose code uses vdpbf16ps (bf16_dot_products), ungrouped and of fixed sizes.
bool conv2d_bf16_pairs(const LowerCtx& ctx, const Node& n) {
  const bool varies = ctx.p.dynamic && (ctx.p.dynamic->extent_varies(n.inputs[0]) || ctx.p.dynamic->extent_varies(n.inputs[1]));
  return ctx.g.type(n.inputs[0]).dtype == DType::BF16 && ctx.g.type(n.inputs[1]).dtype == DType::BF16 && n.attrs.i("groups") == 1 &&
         bf16_dot_products(ctx.p.target) && !varies;
}

// Two bf16 products (two input channels) summed into each f32 lane per step, as IntConv2d sums
// four: the input padded and copied with its channels in pairs ([N, C/2, H, W, 2]) and the weights
// as int_conv2d packs its fours ([O/B, C/2, KH, KW, B, 2], B output channels a block), both
// helpers in bf16, zeros past an odd channel count. (Read where they lie, each product's operands
// reach it as f32 computed from their stored bits, which Halide cannot pair: matmul_bf16_pairs.)
void conv2d_in_pairs(LowerCtx& ctx, Stage& s, const Node& n) {
  const Shape &xs = ctx.g.type(n.inputs[0]).shape, &ws = ctx.g.type(n.inputs[1]).shape;
  const auto &stride = n.attrs.ints("stride"), &pad = n.attrs.ints("padding"), &dil = n.attrs.ints("dilation");
  const int64_t N = xs[0], C = xs[1], O = ws[0], KH = ws[2], KW = ws[3], C2 = (C + 1) / 2;
  int64_t block = 16;
  while (O % block != 0) block /= 2;
  const Expr zero = cast(BFloat(16), 0.0f);
  Helper input;
  input.role = "padded pairs";
  input.func = Func(helper_name(s, "_padded_pairs"));
  input.vars = {Var("p"), Var("x"), Var("y"), Var("c2"), Var("nb")};
  input.extents = {2, xs[3] + 2 * pad[1], xs[2] + 2 * pad[0], C2, N};
  {
    // (The padded input is read inside the pairs' copy, not stored itself.)
    const Func padded = padded_input(ctx, s, n.inputs[0], pad[0], pad[1], Expr(0)).func;
    const Var &p = input.vars[0], &x = input.vars[1], &y = input.vars[2], &c2 = input.vars[3], &nb = input.vars[4];
    Expr c = 2 * c2 + p;
    input.func(input.vars) = select(c < int(C), cast(BFloat(16), padded(x, y, clamp(c, 0, int(C - 1)), nb)), zero);
  }
  Helper weights;
  weights.role = "weight pairs";
  weights.func = Func(helper_name(s, "_weight_pairs"));
  weights.vars = {Var("p"), Var("b"), Var("kx"), Var("ky"), Var("c2"), Var("ob")};
  weights.extents = {2, block, KW, KH, C2, O / block};
  if (const uint16_t* w = constant_bf16_bits(ctx, n.inputs[1])) {
    weights.func(weights.vars) = packed_constant(ctx, {O / block, C2, KH, KW, block, 2}, [&](uint16_t* out) {
      for (int64_t ob = 0; ob < O / block; ++ob)
        for (int64_t c2 = 0; c2 < C2; ++c2)
          for (int64_t ky = 0; ky < KH; ++ky)
            for (int64_t kx = 0; kx < KW; ++kx)
              for (int64_t b = 0; b < block; ++b)
                for (int64_t c = 2 * c2; c < 2 * c2 + 2; ++c) *out++ = c < C ? w[(((ob * block + b) * C + c) * KH + ky) * KW + kx] : 0;
    }, weights.vars);
    weights.stored = false;
  } else {
    const Var &p = weights.vars[0], &b = weights.vars[1], &kx = weights.vars[2], &ky = weights.vars[3], &c2 = weights.vars[4], &ob = weights.vars[5];
    Expr c = 2 * c2 + p;
    Expr v = ctx.at(n.inputs[1], {ob * int(block) + b, clamp(c, 0, int(C - 1)), ky, kx});
    weights.func(weights.vars) = select(c < int(C), cast(BFloat(16), v), zero);
  }
  RDom r({{0, 2}, {0, int(KW)}, {0, int(KH)}, {0, int(C2)}}, rdom_name(s, "r"));
  const Var &ox = s.vars[0], &oy = s.vars[1], &co = s.vars[2], &nb = s.vars[3];
  Func acc(helper_name(s, "_acc"));
  acc(s.vars) = 0.0f;
  acc(s.vars) += cast<float>(input.func(r[0], ox * int(stride[1]) + r[1] * int(dil[1]), oy * int(stride[0]) + r[2] * int(dil[0]), r[3], nb)) *
                 cast<float>(weights.func(r[0], co % int(block), r[1], r[2], r[3], co / int(block)));
  LowerCtx::define(s, acc(s.vars));
  s.reduction = acc;
  s.rvars = {r[0], r[1], r[2], r[3]};
  s.dot_lanes = 2;
  s.helpers.push_back(std::move(input));
  s.helpers.push_back(std::move(weights));
}
}  // namespace

void Conv2d(LowerCtx& ctx, Stage& s, const Node& n) {
  if (conv2d_bf16_pairs(ctx, n)) return conv2d_in_pairs(ctx, s, n);
  const Shape &xs = ctx.g.type(n.inputs[0]).shape, &ws = ctx.g.type(n.inputs[1]).shape;
  const auto &stride = n.attrs.ints("stride"), &pad = n.attrs.ints("padding"), &dil = n.attrs.ints("dilation");
  const int64_t groups = n.attrs.i("groups"), cg = ws[1], per_group = ws[0] / groups;
  const Type t = ct(n);
  Helper padded_helper = padded_input(ctx, s, n.inputs[0], pad[0], pad[1], Expr(0));
  Func padded = padded_helper.func;
  // Halide order: (ox, oy, co, n); the domain runs kx, ky, then the input channels of the group.
  RDom r({{0, int(ws[3])}, {0, int(ws[2])}, {0, int(cg)}}, rdom_name(s, "r"));
  const Var &ox = s.vars[0], &oy = s.vars[1], &co = s.vars[2], &nb = s.vars[3];
  Expr ci = groups == 1 ? Expr(r.z) : (co / int(per_group)) * int(cg) + r.z;
  Func acc(helper_name(s, "_acc"));
  acc(s.vars) = constant(t, 0);
  acc(s.vars) += cast(t, ctx.at(n.inputs[1], {co, r.z, r.y, r.x})) *
                 cast(t, padded(ox * int(stride[1]) + r.x * int(dil[1]), oy * int(stride[0]) + r.y * int(dil[0]), ci, nb));
  LowerCtx::define(s, acc(s.vars));
  s.reduction = acc;
  s.rvars = {r.x, r.y, r.z};
  s.helpers.push_back(padded_helper);
  (void)xs;
}

namespace {
// An integer convolution's packed weights, [O/B, D1, D2, KW, B, 4] (the fours along D1, input
// channels, or D2, a depthwise kernel's rows), as pairs along that axis: [O/P, D1', D2', KW, P, 2],
// D1 or D2 doubled (Halide order: p, b, kx, d2, d1, ob), the "weight pairs" the schedule reads as a
// bf16 convolution's. Blocks P of outputs at most a vector of sums wide: a tile of one vector of
// channels in a wider block had its lanes' block and place in it computed lane by lane, and its
// weights gathered (512 -> 512 3x3 at 7x7 on Zen 3: 11 ms, as f32 1.9). Rearranged when compiling
// where they are a constant.
Helper int_weight_pairs(LowerCtx& ctx, const Stage& s, const Node& n, int axis) {
  const Shape& ws = ctx.g.type(n.inputs[1]).shape;
  const int64_t block = ws[4], pblock = std::min<int64_t>(block, ctx.p.target.natural_vector_size<int32_t>());
  Shape paired{ws[0] * (block / pblock), ws[1], ws[2], ws[3], pblock, 2};  // row-major
  paired[size_t(axis)] *= 2;
  Helper weights;
  weights.role = "weight pairs";
  weights.func = Func(helper_name(s, "_weight_pairs"));
  weights.vars = {Var("p"), Var("b"), Var("kx"), Var("d2"), Var("d1"), Var("ob")};
  weights.extents = to_halide_order(paired);
  // Element (ob, d1, d2, kx, b, p) of the pairs in the packed weights: coordinates and flat index.
  auto source = [&](auto ob, auto d1, auto d2, auto kx, auto b, auto p) {
    using T = decltype(ob);  // int64_t, or Expr
    const T k = ob * int(pblock) + b;  // output channel: block k / B, place k % B
    const T q = axis == 1 ? d1 : d2;
    return std::array<T, 6>{k / int(block), axis == 1 ? q / 2 : d1, axis == 2 ? q / 2 : d2, kx, k % int(block), 2 * (q % 2) + p};
  };
  if (const Node& c = ctx.g.node(n.inputs[1]); c.op == OpKind::Constant) {
    const auto* w = static_cast<const int8_t*>(ctx.g.constants[size_t(c.constant)].data);
    weights.func(weights.vars) = packed_constant<int8_t>(ctx, DType::I8, paired, [&](int8_t* out) {
      for (int64_t ob = 0; ob < paired[0]; ++ob)
        for (int64_t d1 = 0; d1 < paired[1]; ++d1)
          for (int64_t d2 = 0; d2 < paired[2]; ++d2)
            for (int64_t kx = 0; kx < paired[3]; ++kx)
              for (int64_t b = 0; b < pblock; ++b)
                for (int64_t p = 0; p < 2; ++p) {
                  const std::array<int64_t, 6> at = source(ob, d1, d2, kx, b, p);
                  int64_t flat = 0;
                  for (size_t d = 0; d < 6; ++d) flat = flat * ws[d] + at[d];
                  *out++ = w[flat];
                }
    }, weights.vars);
    weights.stored = false;
  } else {
    const std::vector<Var>& v = weights.vars;
    const std::array<Expr, 6> at = source(Expr(v[5]), Expr(v[4]), Expr(v[3]), Expr(v[2]), Expr(v[1]), Expr(v[0]));
    weights.func(weights.vars) = ctx.at(n.inputs[1], Coords(at.begin(), at.end()));
  }
  return weights;
}

// An integer convolution's packed weights ([O/B, C/4, KH, KW, B, 4]) re-laid with every output
// channel side by side, [C/4, KH, KW, O, 4], for outputs in blocks narrower than a vector of sums
// (24, 40, 72 channels: blocks of 8). A tile of 16 channels then reads its step's weights as one
// contiguous vector wherever it starts. Indexed by block and place, it read them lane by lane:
// the tile's start (the last one shifted inwards, at 8 of 24) is not known to fall on a block, and
// Halide gathered each byte from the copy (int8 MobileNet V2's 144 -> 24 projections: 28
// vpdpbusd to 60 vpinsrb and 48 vpextrd a step). The step's stride, O * 4 bytes, is then not a
// multiple of the cache line: the steps spread over L1's sets.
Helper int_weights_by_channel(LowerCtx& ctx, const Stage& s, const Node& n) {
  const Shape& ws = ctx.g.type(n.inputs[1]).shape;  // [O/B, C/4, KH, KW, B, 4]
  const int64_t block = ws[4], O = ws[0] * block;
  const Shape dense{ws[1], ws[2], ws[3], O, 4};  // row-major
  Helper weights;
  weights.role = "weights by channel";
  weights.func = Func(helper_name(s, "_weights_by_channel"));
  weights.vars = {Var("g"), Var("co"), Var("kx"), Var("ky"), Var("cg")};
  weights.extents = to_halide_order(dense);
  if (const Node& c = ctx.g.node(n.inputs[1]); c.op == OpKind::Constant) {
    const auto* w = static_cast<const int8_t*>(ctx.g.constants[size_t(c.constant)].data);
    weights.func(weights.vars) = packed_constant<int8_t>(ctx, DType::I8, dense, [&](int8_t* out) {
      for (int64_t cg = 0; cg < dense[0]; ++cg)
        for (int64_t ky = 0; ky < dense[1]; ++ky)
          for (int64_t kx = 0; kx < dense[2]; ++kx)
            for (int64_t co = 0; co < O; ++co)
              for (int64_t g = 0; g < 4; ++g)
                *out++ = w[((((co / block * ws[1] + cg) * ws[2] + ky) * ws[3] + kx) * block + co % block) * 4 + g];
    }, weights.vars);
    weights.stored = false;
  } else {
    const std::vector<Var>& v = weights.vars;
    weights.func(v) = ctx.at(n.inputs[1], {v[1] / int(block), v[4], v[3], v[2], v[1] % int(block), v[0]});
  }
  return weights;
}
}  // namespace

// Four u8 x i8 products (four input channels) summed into each i32 lane per step, as IntMatmul:
// the operands come packed channels in fours and padded (hjit::int_conv2d). On x86 without VNNI
// (int_pairs), two products a lane: the weights as pairs of input channels, [O/B, C/2, KH, KW, B,
// 2] (as a bf16 convolution's "weight pairs"), the input's fours of channels widened to i16, two at
// a time.
void IntConv2d(LowerCtx& ctx, Stage& s, const Node& n) {
  const Shape& ws = ctx.g.type(n.inputs[1]).shape;  // [O/B, C/4, KH, KW, B, 4]
  const auto &stride = n.attrs.ints("stride"), &dil = n.attrs.ints("dilation");
  const int block = int(ws[4]);
  const bool pairs = int_pairs(ctx, n);
  const int lanes = pairs ? 2 : 4, groups = int(ws[1]) * (4 / lanes);
  RDom r({{0, lanes}, {0, int(ws[3])}, {0, int(ws[2])}, {0, groups}}, rdom_name(s, "r"));
  const Var &ox = s.vars[0], &oy = s.vars[1], &co = s.vars[2], &nb = s.vars[3];
  Func acc(helper_name(s, "_acc"));
  // The offsets are where the sums start: the tiles' accumulators are loaded with them instead of
  // zeroed, and the epilogue has no subtraction left.
  acc(s.vars) = n.inputs.size() > 2 ? -ctx.at(n.inputs[2], {co}) : Expr(0);
  const Expr iy = oy * int(stride[0]) + r[2] * int(dil[0]), ix = ox * int(stride[1]) + r[1] * int(dil[1]);
  if (pairs) {
    Helper weights = int_weight_pairs(ctx, s, n, 1);
    // The input widened to i16 first (a copy at root, as the matmul's rows): each step's
    // pair of a pixel is then one broadcast load, not a broadcast and a widening in the vector
    // units. Zen 3, alone: 1x1 convolutions of 64-1024 channels 89-120 -> 143-185 GOP/s, a 3x3 of 64
    // at 56x56 142 -> 192. Stored channels innermost ([N, H, W, C]), as the convolutions before it
    // store their outputs: a tile's columns then read their channels as a few contiguous streams,
    // where in [N, C/4, H, W, 4] each step's pairs lay a plane apart and came from L2 (the loads
    // the multiply-adds waited on). Zen 3, alternated: ten ResNet-50 layers 11.0 -> 9.0 ms (1x1
    // of 1024 -> 256 at 14x14 0.85 -> 0.57), int8 ResNet-50 47 -> 43 ms, MobileNet V2 6.7-7.4 ->
    // 5.6-6.1 ms.
    const Shape& xs4 = ctx.g.type(n.inputs[0]).shape;  // [N, C/4, H, W, 4]
    Helper input{"wide input", Func(helper_name(s, "_wide_input")), {Var("q"), Var("c4"), Var("x"), Var("y"), Var("nb")},
                 {4, xs4[1], xs4[3], xs4[2], xs4[0]}, {}, {}};
    const std::vector<Var>& v = input.vars;
    input.func(v) = cast<int16_t>(ctx.at(n.inputs[0], {v[4], v[1], v[3], v[2], v[0]}));
    const int pblock = int(weights.extents[1]);
    acc(s.vars) += cast<int32_t>(input.func(2 * (r[3] % 2) + r[0], r[3] / 2, ix, iy, nb)) *
                   cast<int32_t>(weights.func(r[0], co % pblock, r[1], r[2], r[3], co / pblock));
    s.helpers.push_back(std::move(input));
    s.helpers.push_back(std::move(weights));
  } else if (block < ctx.p.target.natural_vector_size<int32_t>()) {
    Helper weights = int_weights_by_channel(ctx, s, n);
    acc(s.vars) += cast<int32_t>(ctx.at(n.inputs[0], {nb, r[3], iy, ix, r[0]})) * cast<int32_t>(weights.func(r[0], co, r[1], r[2], r[3]));
    s.helpers.push_back(std::move(weights));
  } else {
    acc(s.vars) += cast<int32_t>(ctx.at(n.inputs[0], {nb, r[3], iy, ix, r[0]})) *
                   cast<int32_t>(ctx.at(n.inputs[1], {co / block, r[3], r[2], r[1], co % block, r[0]}));
  }
  s.func(s.vars) = acc(s.vars);
  s.reduction = acc;
  s.rvars = {r[0], r[1], r[2], r[3]};
  s.dot_lanes = lanes;
}

// Element (b, c, row, col) of a padded 8-bit input. Where it is a constant's padding of a value
// (hjit::int_conv2d pads with a known zero point), the pad's test is read here, the columns' marked
// likely: Halide then splits a tile's loop over columns into its border and its interior, which
// loads without a test. (Through the pad's own select, each load of a tile's rows was a branch.)
namespace {
Expr padded_read(LowerCtx& ctx, int node, Expr b, Expr c, Expr row, Expr col) {
  const Node& pad = ctx.g.node(node);
  if (pad.op != OpKind::Pad) return ctx.at(node, {b, c, row, col});
  const auto &lo = pad.attrs.ints("lo"), &hi = pad.attrs.ints("hi");
  if (lo.size() != 4 || lo[0] != 0 || lo[1] != 0 || hi[0] != 0 || hi[1] != 0) return ctx.at(node, {b, c, row, col});
  const Shape& in = ctx.g.type(pad.inputs[0]).shape;
  const Expr iy = row - int(lo[2]), ix = col - int(lo[3]);
  const Expr v = ctx.at(pad.inputs[0], {b, c, clamp(iy, 0, int(in[2] - 1)), clamp(ix, 0, int(in[3] - 1))});
  const Expr fill = value_of(ctx, pad.type.dtype, pad.attrs.f("value"));
  return select(likely(ix >= 0 && ix < int(in[3])), select(iy >= 0 && iy < int(in[2]), v, fill), fill);
}
}  // namespace

// A depthwise convolution as VNNI dot products of four rows of one window column: a helper holds,
// for each output row, each input column's channels with the four input rows the row's window
// starts at interleaved ([.., W, C, 4]: one channel's four rows in one 32-bit lane; rows past the
// kernel are zeros), and each step of the sum is one dot product per lane (channel) of those
// bytes with the column's four weights. A 3x3 window is three dot products a channel vector, where
// products of widened taps took nine multiply-adds and the widening (int8 MobileNet V2 spent a
// third of its time there). The schedule computes the helper per tile (rows in fours).
void IntDepthwise2d(LowerCtx& ctx, Stage& s, const Node& n) {
  const Shape &xs = ctx.g.type(n.inputs[0]).shape, &ws = ctx.g.type(n.inputs[1]).shape;  // [N, C, H, W], [C/B, 1, R, KW, B, 4]
  const auto &stride = n.attrs.ints("stride"), &dil = n.attrs.ints("dilation"), &kernel = n.attrs.ints("kernel");
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], KW = ws[3], OH = n.type.shape[2];
  const int block = int(ws[4]), KH = int(kernel[0]);
  // On x86 without VNNI (int_pairs), the rows in pairs: two rows of a channel in each 16-bit lane
  // pair, one vpmaddwd a window column of two rows.
  const bool pairs = int_pairs(ctx, n);
  const int lanes = pairs ? 2 : 4;
  const int64_t R = pairs ? (KH + 1) / 2 : ws[2];  // groups of `lanes` rows
  const Var k("q4"), c("qc"), x("qx"), g("qg"), y("qy"), b("qn");
  // The input as the rows read it, channels innermost: inlined where the value is stored so, a
  // copy (schedule) where it is not (a caller's NCHW tensor, whose channel vectors would gather).
  const Var ic("ic"), ix("ix"), iy("iy"), ib("ib");
  Func input(helper_name(s, "_input"));
  input(ic, ix, iy, ib) = padded_read(ctx, n.inputs[0], ib, ic, iy, ix);
  Helper input_helper{"channels innermost input", input, {ic, ix, iy, ib}, {C, W, H, N}, {}, {}};
  input_helper.stored = false;
  Func rows(helper_name(s, "_rows"));
  // Rows past the input (past the kernel's last row) are read clamped and weigh nothing: zeros.
  Expr row = min(y * int(stride[0]) + (lanes * g + k) * int(dil[0]), int(H - 1));
  rows(k, c, x, g, y, b) = select(lanes * g + k < KH, input(c, x, row, b), cast<uint8_t>(0));
  RDom r({{0, lanes}, {0, int(KW)}, {0, int(R)}, {0, 1}}, rdom_name(s, "r"));
  const Var &ox = s.vars[0], &oy = s.vars[1], &co = s.vars[2], &nb = s.vars[3];
  Func acc(helper_name(s, "_acc"));
  acc(s.vars) = n.inputs.size() > 2 ? -ctx.at(n.inputs[2], {co}) : Expr(0);
  const Expr taps = cast<int32_t>(rows(r[0], co, ox * int(stride[1]) + r[1] * int(dil[1]), r[2], oy, nb));
  if (pairs) {
    Helper weights = int_weight_pairs(ctx, s, n, 2);
    const int pblock = int(weights.extents[1]);
    acc(s.vars) += taps * cast<int32_t>(weights.func(r[0], co % pblock, r[1], r[2], r[3], co / pblock));
    s.helpers.push_back(std::move(weights));
  } else {
    acc(s.vars) += taps * cast<int32_t>(ctx.at(n.inputs[1], {co / block, r[3], r[2], r[1], co % block, r[0]}));
  }
  s.func(s.vars) = acc(s.vars);
  s.reduction = acc;
  s.rvars = {r[0], r[1], r[2], r[3]};
  s.dot_lanes = lanes;
  s.helpers.push_back(Helper{pairs ? "rows in pairs" : "rows in fours", rows, {k, c, x, g, y, b}, {lanes, C, W, R, OH, N}, {}, {}});
  s.helpers.push_back(std::move(input_helper));
}

namespace {

constexpr int64_t kUnrolledWindow = 16;  // the most taps a pooling window unrolls

void pool(LowerCtx& ctx, Stage& s, const Node& n, bool is_max) {
  const Shape& xs = ctx.g.type(n.inputs[0]).shape;
  const size_t r = xs.size();
  const auto &k = n.attrs.ints("kernel"), &st = n.attrs.ints("stride"), &pad = n.attrs.ints("padding");
  const Type t = ct(n);
  // Integer averages accumulate in i64 and divide rounding toward zero (PyTorch's).
  const Type at_type = !is_max && !t.is_float() ? Int(64) : t;
  RDom w({{0, int(k[1])}, {0, int(k[0])}}, rdom_name(s, "w"));
  std::vector<Expr> at(s.vars.begin(), s.vars.end());
  at[0] = s.vars[0] * int(st[1]) + w.x;
  at[1] = s.vars[1] * int(st[0]) + w.y;
  // Without padding every window lies inside the input, which is read as it is: a padded copy
  // would be a pass over memory of its own (the relu before each of SqueezeNet's pools).
  std::optional<Helper> padded;
  if (pad[0] != 0 || pad[1] != 0) padded = padded_input(ctx, s, n.inputs[0], pad[0], pad[1], is_max ? ieee::max_identity(t) : constant(t, 0));
  auto read = [&](const std::vector<Expr>& where) { return padded ? Expr(padded->func(where)) : ctx.at(n.inputs[0], to_row_major(where)); };
  // A small window is one expression of its taps, in the reduction's order (the same values): a
  // pure stage's rows are vectorized whatever their length, where an update's vectors must divide
  // them (loop_nest.h), and SqueezeNet's pools of 55, 27 and 13 columns ran one lane at a time, 9%
  // of the model.
  const bool unrolled = k[0] * k[1] <= kUnrolledWindow;
  auto fold = [&](const Expr& so_far, const Expr& x) { return is_max ? ieee::max(so_far, cast(t, x)) : so_far + cast(at_type, x); };
  Func acc(helper_name(s, "_acc"));
  Expr value;
  if (unrolled) {
    value = is_max ? Expr() : constant(at_type, 0);  // (max(identity, x) is x: a max starts at the first tap)
    for (int wy = 0; wy < int(k[0]); ++wy)
      for (int wx = 0; wx < int(k[1]); ++wx) {
        std::vector<Expr> tap = at;
        tap[0] = s.vars[0] * int(st[1]) + wx;
        tap[1] = s.vars[1] * int(st[0]) + wy;
        value = value.defined() ? fold(value, read(tap)) : cast(t, read(tap));
      }
  } else {
    acc(s.vars) = is_max ? ieee::max_identity(t) : constant(at_type, 0);
    acc(s.vars) = fold(acc(s.vars), read(at));
    value = acc(s.vars);
  }
  if (!is_max) {
    Expr count = int(k[0] * k[1]);
    if (!n.attrs.i("count_include_pad")) {
      // The part of each window inside the unpadded input.
      auto inside = [](Expr o, int64_t stride, int64_t p, int64_t kk, int64_t size) {
        Expr lo = o * int(stride) - int(p);
        return max(min(lo + int(kk), int(size)) - max(lo, 0), 1);
      };
      count = inside(s.vars[1], st[0], pad[0], k[0], xs[r - 2]) * inside(s.vars[0], st[1], pad[1], k[1], xs[r - 1]);
    }
    value = t.is_float() ? value / cast(t, count) : cast(t, div_round_to_zero(value, cast(at_type, count)));
  }
  LowerCtx::define(s, value);
  if (!unrolled) {
    s.reduction = acc;
    s.rvars = {w.x, w.y};
  }
  if (padded) s.helpers.push_back(*padded);
}

}  // namespace

void MaxPool2d(LowerCtx& c, Stage& s, const Node& n) { pool(c, s, n, true); }
void AvgPool2d(LowerCtx& c, Stage& s, const Node& n) { pool(c, s, n, false); }

void CumSum(LowerCtx& ctx, Stage& s, const Node& n) {
  const Shape& xs = ctx.g.type(n.inputs[0]).shape;
  const size_t axis = size_t(n.attrs.i("axis")), hd = xs.size() - 1 - axis;  // the axis in Halide order
  const Type t = ct(n);
  Func acc(helper_name(s, "_acc"));
  std::vector<Expr> v(s.vars.begin(), s.vars.end());
  acc(s.vars) = cast(t, ctx.at(n.inputs[0], LowerCtx::coords(s)));
  if (xs[axis] >= 2) {
    RDom r({{1, int(xs[axis] - 1)}}, rdom_name(s, "r"));
    std::vector<Expr> here = v, before = v;
    here[hd] = r.x;
    before[hd] = r.x - 1;
    acc(here) = acc(before) + cast(t, ctx.at(n.inputs[0], to_row_major(here)));
    s.reduction = acc;
    s.rvars = {r.x};
  }
  LowerCtx::define(s, acc(s.vars));
}

namespace {

// A key whose integer order is the sort's order of x: a float's bits, made monotonic (negative
// values' magnitude bits flipped), -0.0 as +0.0 (they are equal, so the stable order keeps them
// as they came) and every NaN the largest key. Integer tests only: LLVM's fast-math flags make a
// float comparison with a NaN operand poison.
Expr sort_key(const Expr& x) {
  if (x.type().is_bool()) return cast(UInt(8), x);
  if (!x.type().is_float()) return x;
  const Type it = Int(x.type().bits());
  const Expr bits = reinterpret(it, x), flip = it.max();
  Expr k = select(bits < 0, bits ^ flip, bits);
  k = select(k == Internal::make_const(it, -1), Internal::make_const(it, 0), k);  // -0.0
  return select(ieee::is_nan(x), flip, k);
}

}  // namespace

namespace {

// The bitonic network below on the CPU, as one helper whose update runs the steps in a loop: step
// r's block and distance are read from r, and the row's (key, position) pairs are kept twice,
// step r reading copy r % 2 and writing the other, so that a step's pairs are independent of each
// other (vectorized and run in parallel chunks: allow_race_conditions, which Halide needs to be
// told) and the steps follow each other in any schedule (both loops reduction variables, whose
// order Halide keeps). One loop nest whatever the length: the unrolled network of GPT-2's 50257
// logits (136 steps, a helper each) took 70 s to compile on a Zen 3, in lowering and LLVM.
void sort_network_in_a_loop(Stage& s, const Node& n, const Expr& key, int64_t len, int64_t padded, bool descending) {
  const size_t hd = s.vars.size() - 1 - size_t(n.attrs.i("axis"));
  int levels = 0;
  while ((int64_t(1) << levels) < padded) ++levels;
  const int steps = levels * (levels + 1) / 2;
  const Var i = s.vars[hd], copy(helper_name(s, "_copy"));
  std::vector<Var> vars = s.vars;
  vars.push_back(copy);
  Shape extents = s.extents;
  extents[hd] = padded;
  extents.push_back(2);
  const Type kt = key.type();
  Func net(helper_name(s, "_sort_net"));
  net(vars) = Tuple(select(i < int(len), key, descending ? kt.min() : kt.max()), Expr(i));
  RDom r(0, int(padded), 0, steps, helper_name(s, "_step"));
  const Expr at = r.x, step = r.y;
  // Steps come in levels b = 1..levels of b steps each (blocks of 2^b, distances 2^(b-1) .. 1).
  Expr level = 1;
  for (int b = 2; b <= levels; ++b) level += select(step >= b * (b - 1) / 2, 1, 0);
  // (clamped: bounds inference then knows how far from a row the partners' loads reach)
  const Expr distance = clamp(Expr(1) << (level - 1 - (step - level * (level - 1) / 2)), 1, int(padded / 2));
  const Expr block = Expr(1) << level;
  const Expr lower = (at & distance) == 0;
  auto args = [&](const Expr& x, const Expr& c) {
    std::vector<Expr> a(vars.begin(), vars.end());
    a[hd] = x;
    a.back() = c;
    return a;
  };
  // The partner is distance ahead or behind: both read as vectors (the copies are realized half
  // a row beyond each end for it), where a load at a select of the two was a gather, lane by lane.
  const Expr from = step % 2;
  const Expr ks = net(args(at, from))[0], ps = net(args(at, from))[1];
  auto partner = [&](int k) { return select(lower, net(args(at + distance, from))[k], net(args(at - distance, from))[k]); };
  const Expr ko = partner(0), po = partner(1);
  const Expr self_first = select(ks == ko, ps < po, descending ? ks > ko : ks < ko);
  const Expr keep = (lower == ((at & block) == 0)) == self_first;
  net(args(at, 1 - from)) = Tuple(select(keep, ks, ko), select(keep, ps, po));
  s.helpers.push_back(Helper{"sort network", net, vars, extents, {r.x, r.y}, {}});
  std::vector<Expr> out(s.vars.begin(), s.vars.end());
  out.push_back(steps % 2);
  LowerCtx::define(s, cast<int64_t>(net(out)[1]));
}

}  // namespace

// Bitonic sorting network along the axis on (key, position) pairs, the axis padded to a power of
// two with keys that sort last: log2(P) * (log2(P) + 1) / 2 compare-exchange steps, each a helper
// stored at root (schedules/class_rules.cpp), data-independent, so it vectorizes and runs on a GPU
// as it does on the CPU. Positions break ties: the order is total, hence stable.
void ArgSort(LowerCtx& ctx, Stage& s, const Node& n) {
  const TensorType& in = ctx.g.type(n.inputs[0]);
  const size_t axis = size_t(n.attrs.i("axis")), hd = in.shape.size() - 1 - axis;
  const bool descending = n.attrs.i("descending") != 0;
  const int64_t len = in.shape[axis];
  if (len == 0) return LowerCtx::define(s, cast<int64_t>(0));  // nothing to compute
  int64_t padded = 1;
  while (padded < len) padded *= 2;
  std::vector<Var> vars = s.vars;
  Shape extents = s.extents;
  extents[hd] = padded;
  const Var i = vars[hd];
  std::vector<Expr> at(vars.begin(), vars.end());
  at[hd] = clamp(i, 0, int(len - 1));
  const Expr key = sort_key(ctx.at(n.inputs[0], to_row_major(at)));
  const Type kt = key.type();
  if (!ctx.p.target.has_gpu_feature() && padded > 1) return sort_network_in_a_loop(s, n, key, len, padded, descending);
  Func step(helper_name(s, "_sort0"));
  step(vars) = Tuple(select(i < int(len), key, descending ? kt.min() : kt.max()), Expr(i));
  s.helpers.push_back(Helper{"sort0", step, vars, extents, {}, {}});
  int count = 0;
  for (int64_t block = 2; block <= padded; block *= 2)
    for (int64_t j = block / 2; j >= 1; j /= 2) {
      const Expr lower = (i & int(j)) == 0;
      std::vector<Expr> other(vars.begin(), vars.end());
      other[hd] = clamp(select(lower, i + int(j), i - int(j)), 0, int(padded - 1));
      const Expr ks = step(vars)[0], ps = step(vars)[1], ko = step(other)[0], po = step(other)[1];
      const Expr self_first = select(ks == ko, ps < po, descending ? ks > ko : ks < ko);
      // The lower position of a pair takes the one that goes first in an ascending block.
      const Expr keep = (lower == ((i & int(block)) == 0)) == self_first;
      const std::string role = "sort" + std::to_string(++count);
      Func next(helper_name(s, ("_" + role).c_str()));
      next(vars) = Tuple(select(keep, ks, ko), select(keep, ps, po));
      s.helpers.push_back(Helper{role, next, vars, extents, {}, {}});
      step = next;
    }
  LowerCtx::define(s, cast<int64_t>(step(s.vars)[1]));
}

void Take(LowerCtx& ctx, Stage& s, const Node& n) {
  const Shape &xs = ctx.g.type(n.inputs[0]).shape, &is = ctx.g.type(n.inputs[1]).shape;
  const size_t axis = size_t(n.attrs.i("axis"));
  const Coords o = LowerCtx::coords(s);
  Coords idx(o.begin() + std::ptrdiff_t(axis), o.begin() + std::ptrdiff_t(axis + is.size()));
  // An index out of range fails the call (an IndexError, as eagerly); the clamp only keeps the
  // loads that run before the failure is noticed inside the buffer. The axis's extent is a number,
  // or an expression of the sizes a dynamic pipeline serves.
  const Expr extent = ctx.extent(n.inputs[0], int(axis));
  const bool fixed = Halide::Internal::is_const(extent);
  Expr raw = cast<int64_t>(ctx.at(n.inputs[1], idx));
  raw = index_in_range(ctx, raw, -extent, extent,
                       "take: index {} is out of range for axis " + std::to_string(axis) + " of " + ctx.g.type(n.inputs[0]).str() +
                           (fixed ? " (valid: " + std::to_string(-xs[axis]) + " to " + std::to_string(xs[axis] - 1) + ")"
                                  : " (valid: minus its size to its size less 1)"));
  Expr k = cast<int>(raw);
  // The promise makes bounds inference see the whole axis, not the one row a scalar index names:
  // a producer computed in tiles (a matmul) is then realized whole, never a tile shifted below 0
  // around a region narrower than the tile ("accessed at -2, before the min").
  k = unsafe_promise_clamped(clamp(select(k < 0, k + extent, k), 0, extent - 1), 0, extent - 1);
  Coords xc(o.begin(), o.begin() + std::ptrdiff_t(axis));
  xc.push_back(k);
  xc.insert(xc.end(), o.begin() + std::ptrdiff_t(axis + is.size()), o.end());
  LowerCtx::define(s, ctx.at(n.inputs[0], xc));
}

namespace {

// The Funcs of an attention stage besides its own, and its loops.
struct AttentionFuncs {
  Func keys_t, scores, scores_acc, row_max, probs, row_sum;
  Var j, d;
  RDom rd, rj;
  bool block_accumulator;
};

// The stage's helpers, for its schedule (schedules/attention.cpp): each Func with its loops (the
// lead ones, then the batch's) and extents, and its reduction's.
void add_attention_helpers(Stage& s, const AttentionFuncs& f, int64_t T, int64_t D) {
  const std::vector<Var> batch(s.vars.begin() + 2, s.vars.end());
  const Shape batch_extents(s.extents.begin() + 2, s.extents.end());
  const Var& i = s.vars[1];
  auto helper = [&](const char* role, Func func, std::initializer_list<Var> lead, std::initializer_list<int64_t> lead_extents,
                    std::vector<RVar> rvars) {
    std::vector<Var> vars(lead);
    vars.insert(vars.end(), batch.begin(), batch.end());
    Shape ex(lead_extents);
    ex.insert(ex.end(), batch_extents.begin(), batch_extents.end());
    s.helpers.push_back(Helper{role, func, vars, ex, std::move(rvars), {}});
  };
  const int64_t S = s.extents[1];
  helper("keys_t", f.keys_t, {f.j, f.d}, {T, D}, {});
  if (f.block_accumulator) {
    helper("scores", f.scores, {f.j, i}, {T, S}, {});
    helper("scores_acc", f.scores_acc, {f.j, i}, {T, S}, {f.rd.x});
  } else {
    helper("scores", f.scores, {f.j, i}, {T, S}, {f.rd.x});
  }
  helper("row_max", f.row_max, {i}, {S}, {f.rj.x});
  helper("probs", f.probs, {f.j, i}, {T, S}, {});
  helper("row_sum", f.row_sum, {i}, {S}, {f.rj.x});
  // Dynamic sizes: the key index j runs over the keys' length.
  if (!Internal::is_const(f.rj.x.extent()))
    for (Helper& h : s.helpers) h.dynamic_vars.insert(f.j.name());
}

}  // namespace

// Scaled dot-product attention without an [S, T] matrix: the scores of a tile of query rows are
// computed where the output tile needs them (see schedules/attention.cpp).
void Attention(LowerCtx& ctx, Stage& s, const Node& n) {
  const Shape &qs = ctx.g.type(n.inputs[0]).shape, &ks = ctx.g.type(n.inputs[1]).shape;
  const size_t r = qs.size();
  const int D = int(qs[r - 1]), T = int(ks[r - 2]);
  const Type t = ct(n);
  const Var &e = s.vars[0], &i = s.vars[1];
  Var j("j"), d("d");
  std::vector<Var> batch(s.vars.begin() + 2, s.vars.end());
  auto args = [&](std::initializer_list<Expr> lead) {
    std::vector<Expr> a(lead);
    a.insert(a.end(), batch.begin(), batch.end());
    return a;
  };
  auto vars = [&](std::initializer_list<Var> lead) {
    std::vector<Var> a(lead);
    a.insert(a.end(), batch.begin(), batch.end());
    return a;
  };
  // Halide order: q (d, i, batch), k (d, j, batch), v (e, j, batch).
  auto load = [&](int input, Expr inner, Expr outer) {
    return cast(t, ctx.at(n.inputs[size_t(input)], to_row_major(args({inner, outer}))));
  };
  const std::string name = helper_name(s, "");
  Func keys_t(name + "_keys_t"), scores(name + "_scores"), row_max(name + "_row_max"), probs(name + "_probs"),
      row_sum(name + "_row_sum"), acc(name + "_acc");
  keys_t(vars({j, d})) = load(1, d, j);  // keys with the key index innermost
  RDom rd({{0, D}}, rdom_name(s, "rd")), rj({{0, ctx.extent(n.inputs[1], int(r - 2))}}, rdom_name(s, "rj"));
  // With dynamic sizes a row of scores is as long as the keys, known only at run time, and LLVM
  // then keeps no accumulators of several rows in registers (the rows might overlap): the dot
  // products accumulate in a helper of their own, computed per block of keys, whose rows are a
  // constant distance apart.
  const bool block_accumulator = ctx.p.dynamic != nullptr;
  Func scores_acc(name + "_scores_acc");
  Func& dots = block_accumulator ? scores_acc : scores;
  dots(vars({j, i})) = constant(t, 0);
  dots(vars({j, i})) += load(0, rd, i) * keys_t(args({j, rd}));
  if (block_accumulator) scores(vars({j, i})) = scores_acc(vars({j, i}));
  // Softmax's shift is taken on the unscaled scores (their negations where the scale is negative)
  // and the scale applied after the subtraction: exp((s - max) * |scale|). Written as
  // exp(s * scale - max), LLVM contracts it into one FMA (NVPTX's backend whatever strict_float
  // says), which keeps the rounding error of the product: for scores of 1e29 an error of 1e22,
  // whose exp overflows where the exact difference is 0.
  const double scale = n.attrs.f("scale");
  const Expr dot = scores(vars({j, i}));
  const Expr key = scale < 0 ? -dot : dot;
  // Masked keys never enter a max or an exp (no -inf anywhere: see constant()).
  const bool causal = n.attrs.i("causal") != 0;
  Func masked(name + "_masked");
  masked(vars({j, i})) = causal ? select(j <= i, key, lowest(t)) : key;
  // Beside each row's maximum, whether a scaled score of it is NaN or +inf: then the row is NaN, as
  // eagerly (softmax of such a row), decided on the bits where fast-math cannot reason it away.
  Expr scaled = scores(args({rj, i})) * constant(t, scale);
  Expr bad = cast<uint8_t>(ieee::is_nan(scaled) || (ieee::is_inf(scaled) && !ieee::sign_bit(scaled)));
  if (causal) bad = select(rj <= i, bad, cast<uint8_t>(0));
  row_max(vars({i})) = Tuple(lowest(t), cast<uint8_t>(0));
  row_max(vars({i})) = Tuple(max(row_max(vars({i}))[0], masked(args({rj, i}))), row_max(vars({i}))[1] | bad);
  Expr p = ieee::exp((masked(vars({j, i})) - row_max(vars({i}))[0]) * constant(t, std::fabs(scale)));
  probs(vars({j, i})) = causal ? select(j <= i, p, constant(t, 0)) : p;
  row_sum(vars({i})) = constant(t, 0);
  row_sum(vars({i})) += probs(args({rj, i}));
  acc(s.vars) = constant(t, 0);
  // Masked keys do not contribute, whatever their values (inf or NaN in v included).
  Expr term = probs(args({rj, i})) * load(2, e, rj);
  acc(s.vars) += causal ? select(rj <= i, term, constant(t, 0)) : term;
  LowerCtx::define(s, select(row_max(vars({i}))[1] != 0, ieee::quiet_nan(t), acc(s.vars) / row_sum(vars({i}))));
  s.reduction = acc;
  s.rvars = {rj.x};
  add_attention_helpers(s, AttentionFuncs{keys_t, scores, scores_acc, row_max, probs, row_sum, j, d, rd, rj, block_accumulator}, T, D);
}

// A u32 expression for threefry2x32: additions are narrowed widening_adds. With plain adds,
// Halide 14's simplifier peels `let x = a + b` into its uses; where counters are constants (a 0-d
// draw, or a key drawn by split() read at fixed positions) that expands the chain of rounds into a
// tree doubling every round, and the compile never ends. An intrinsic call stays a let.
struct U32Expr {
  Expr e;
  U32Expr(Expr x) : e(std::move(x)) {}
  explicit U32Expr(uint32_t x) : e(Expr(x)) {}
  friend U32Expr operator+(const U32Expr& a, const U32Expr& b) {
    return U32Expr(cast(UInt(32), Internal::Call::make(UInt(64), Internal::Call::widening_add, {a.e, b.e},
                                                       Internal::Call::PureIntrinsic)));
  }
  friend U32Expr operator^(const U32Expr& a, const U32Expr& b) { return U32Expr(a.e ^ b.e); }
  friend U32Expr operator|(const U32Expr& a, const U32Expr& b) { return U32Expr(a.e | b.e); }
  friend U32Expr operator<<(const U32Expr& a, uint32_t r) { return U32Expr(a.e << Expr(r)); }
  friend U32Expr operator>>(const U32Expr& a, uint32_t r) { return U32Expr(a.e >> Expr(r)); }
};

// Threefry of each element's counter pair, in wrapping 32-bit unsigned arithmetic as the eager
// kernel's: the rounds as a chain of lets.
void RandomBits(LowerCtx& ctx, Stage& s, const Node& n) {
  const Shape& shape = n.type.shape;
  const int64_t count = n.type.numel();
  const Type it = count < (int64_t(1) << 31) ? Int(32) : Int(64), u = UInt(32);
  const Coords c = LowerCtx::coords(s);
  Expr i = Internal::make_const(it, 0);
  for (size_t d = 0; d < shape.size(); ++d) i = i * Internal::make_const(it, shape[d]) + cast(it, c[d]);
  Expr c0, c1, second;
  threefry::counter_of<Expr>(
      i, count, [&](int64_t v) { return Internal::make_const(it, v); },
      [](const Expr& cond, const Expr& x, const Expr& y) { return select(cond, x, y); }, &c0, &c1, &second);
  std::vector<std::pair<std::string, Expr>> lets;
  auto bind = [&](const U32Expr& v) {
    lets.emplace_back(helper_name(s, "_tf") + std::to_string(lets.size()), v.e);
    return U32Expr(Internal::Variable::make(u, lets.back().first));
  };
  auto [x0, x1] = threefry::threefry2x32<U32Expr>(ctx.at(n.inputs[0], {Expr(0)}), ctx.at(n.inputs[0], {Expr(1)}),
                                                  cast(u, c0), cast(u, c1), bind);
  Expr e = select(second, x1.e, x0.e);
  for (auto it = lets.rbegin(); it != lets.rend(); ++it) e = Internal::Let::make(it->first, it->second, e);
  LowerCtx::define(s, e);
}

}  // namespace hjit::backend::lowering

namespace hjit::backend::lowering {

void Flip(LowerCtx& ctx, Stage& s, const Node& n) {
  const Shape& shape = n.type.shape;
  Coords c = LowerCtx::coords(s);
  for (int64_t axis : n.attrs.ints("axes")) c[size_t(axis)] = int(shape[size_t(axis)] - 1) - c[size_t(axis)];
  LowerCtx::define(s, ctx.at(n.inputs[0], c));
}

// dL/dw of conv2d(x, w): for each weight, the sum over images and output positions of the output
// gradient times the input it multiplied. The output gradient is read channels-innermost (a
// transposed copy), so that a vector of output channels shares each input value.
void Conv2dWeightGrad(LowerCtx& ctx, Stage& s, const Node& n) {
  const Shape &gs = ctx.g.type(n.inputs[1]).shape, &ws = n.type.shape;
  const auto &stride = n.attrs.ints("stride"), &pad = n.attrs.ints("padding"), &dil = n.attrs.ints("dilation");
  const int64_t cg = ws[1], per_group = gs[1] / n.attrs.i("groups");
  const Type t = ct(n);
  Helper padded_helper = padded_input(ctx, s, n.inputs[0], pad[0], pad[1], Expr(0));
  Func padded = padded_helper.func;
  Var c("c"), ox("ox"), oy("oy"), nb("nb");
  // A depthwise convolution's tile reads the input at its vector of output channels: copied with
  // the channels innermost (as the gradient is), each step loads a vector where it gathered one
  // lane a channel plane apart.
  if (cg == 1 && per_group == 1) {
    Func padded_t(helper_name(s, "_padded_t"));
    padded_t(c, ox, oy, nb) = padded(ox, oy, c, nb);
    const Shape& e = padded_helper.extents;  // (x, y, c, n)
    padded_helper = Helper{"padded", padded_t, {c, ox, oy, nb}, {e[2], e[0], e[1], e[3]}, {}, {}};
    padded = Func(helper_name(s, "_padded_c"));
    padded(ox, oy, c, nb) = padded_t(c, ox, oy, nb);
  }
  Func grad_t(helper_name(s, "_grad_t"));
  grad_t(c, ox, oy, nb) = cast(t, ctx.at(n.inputs[1], {nb, c, oy, ox}));
  // Halide order: (kx, ky, cg, co); the domain runs over output x, output y, then images (as many
  // as the call has: the batch may be dynamic).
  RDom r({{0, int(gs[3])}, {0, int(gs[2])}, {0, ctx.extent(n.inputs[1], 0)}}, rdom_name(s, "r"));
  const Var &kx = s.vars[0], &ky = s.vars[1], &cv = s.vars[2], &co = s.vars[3];
  Expr ci = n.attrs.i("groups") == 1 ? Expr(cv) : (co / int(per_group)) * int(cg) + cv;
  Func acc(helper_name(s, "_acc"));
  acc(s.vars) = constant(t, 0);
  acc(s.vars) += grad_t(co, r.x, r.y, r.z) *
                 cast(t, padded(r.x * int(stride[1]) + kx * int(dil[1]), r.y * int(stride[0]) + ky * int(dil[0]), ci, r.z));
  LowerCtx::define(s, acc(s.vars));
  s.reduction = acc;
  s.rvars = {r.x, r.y, r.z};
  s.helpers.push_back(padded_helper);
  s.helpers.push_back(Helper{"grad_t", grad_t, {c, ox, oy, nb}, {gs[1], gs[3], gs[2], gs[0]}, {}, {}});
}

// dL/dx of max_pool2d: each window's gradient goes to the first maximum of the window; an input
// gathers from the (at most ceil(k / s) per dimension) windows that contain it.
void MaxPool2dGrad(LowerCtx& ctx, Stage& s, const Node& n) {
  const Shape &xs = ctx.g.type(n.inputs[0]).shape, &gs = ctx.g.type(n.inputs[1]).shape;
  const size_t rank = xs.size();
  const auto &k = n.attrs.ints("kernel"), &st = n.attrs.ints("stride"), &pad = n.attrs.ints("padding");
  const int64_t OH = gs[rank - 2], OW = gs[rank - 1];
  const Type vt = compute_type(ctx.g.type(n.inputs[0]).dtype), t = ct(n);
  const int64_t H = xs[rank - 2], W = xs[rank - 1];
  Helper padded_helper = padded_input(ctx, s, n.inputs[0], pad[0], pad[1], Expr(0));
  Func padded = padded_helper.func;
  // Which element of each window is its first maximum (ky * kw + kx), over windows in Halide
  // order: padding never wins, and the first NaN is the maximum (as max_pool2d and the eager kernel).
  std::vector<Var> wv;
  for (size_t d = 0; d < rank; ++d) wv.emplace_back("w" + std::to_string(d));
  RDom win({{0, int(k[1])}, {0, int(k[0])}}, rdom_name(s, "win"));
  std::vector<Expr> at(wv.begin(), wv.end());
  at[0] = wv[0] * int(st[1]) + win.x;
  at[1] = wv[1] * int(st[0]) + win.y;
  Func first_max(helper_name(s, "_argmax"));
  first_max(wv) = Tuple(-1, cast(vt, 0));
  Expr v = cast(vt, padded(at)), best = first_max(wv)[1];
  Expr iy = at[1] - int(pad[0]), ix = at[0] - int(pad[1]);
  Expr inside = iy >= 0 && iy < int(H) && ix >= 0 && ix < int(W);
  Expr exceeds = vt.is_float() ? !ieee::is_nan(best) && (ieee::is_nan(v) || v > best) : v > best;
  Expr better = inside && (first_max(wv)[0] < 0 || exceeds);
  first_max(wv) = Tuple(select(better, win.y * int(k[1]) + win.x, first_max(wv)[0]), select(better, v, best));
  // The windows containing input (ix, iy): ox in [(ix + pw - kw + 1) / sw, (ix + pw) / sw].
  const int cx = int((k[1] + st[1] - 1) / st[1]), cy = int((k[0] + st[0] - 1) / st[0]);
  RDom cand({{0, cx}, {0, cy}}, rdom_name(s, "cand"));
  Expr ox = (s.vars[0] + int(pad[1])) / int(st[1]) - cand.x, oy = (s.vars[1] + int(pad[0])) / int(st[0]) - cand.y;
  Expr kxe = s.vars[0] + int(pad[1]) - ox * int(st[1]), kye = s.vars[1] + int(pad[0]) - oy * int(st[0]);
  Expr valid = ox >= 0 && ox < int(OW) && oy >= 0 && oy < int(OH) && kxe < int(k[1]) && kye < int(k[0]);
  std::vector<Expr> wat(s.vars.begin(), s.vars.end()), gat = wat;
  wat[0] = gat[0] = clamp(ox, 0, int(OW - 1));
  wat[1] = gat[1] = clamp(oy, 0, int(OH - 1));
  Expr picked = valid && first_max(wat)[0] == kye * int(k[1]) + kxe;
  Func acc(helper_name(s, "_acc"));
  acc(s.vars) = constant(t, 0);
  acc(s.vars) += select(picked, cast(t, ctx.at(n.inputs[1], to_row_major(gat))), constant(t, 0));
  LowerCtx::define(s, acc(s.vars));
  s.reduction = acc;
  s.rvars = {cand.x, cand.y};
  s.helpers.push_back(padded_helper);
  s.helpers.push_back(Helper{"argmax", first_max, wv, to_halide_order(gs), {win.x, win.y}, {}});
}

}  // namespace hjit::backend::lowering

namespace hjit::backend::lowering {

// v where the output lies on the slice's lattice, x elsewhere.
void SliceUpdate(LowerCtx& ctx, Stage& s, const Node& n) {
  const auto &starts = n.attrs.ints("starts"), &stops = n.attrs.ints("stops"), &steps = n.attrs.ints("steps");
  const Shape& vs = ctx.g.type(n.inputs[1]).shape;
  const Coords o = LowerCtx::coords(s);
  Coords vc(o.size());
  Expr inside = Internal::const_true();
  for (size_t d = 0; d < o.size(); ++d) {
    if (starts[d] == 0 && steps[d] == 1 && stops[d] == n.type.shape[d]) {
      vc[d] = o[d];
      continue;
    }
    Expr rel = o[d] - int(starts[d]);
    inside = inside && rel >= 0 && o[d] < int(stops[d]) && (steps[d] == 1 ? Internal::const_true() : rel % int(steps[d]) == 0);
    vc[d] = clamp(steps[d] == 1 ? rel : rel / int(steps[d]), 0, int(std::max<int64_t>(vs[d], 1) - 1));
  }
  LowerCtx::define(s, select(inside, ctx.at(n.inputs[1], vc), ctx.at(n.inputs[0], o)));
}

void CheckIndex(LowerCtx& ctx, Stage& s, const Node& n) {
  const int64_t lo = n.attrs.i("lo"), hi = n.attrs.i("hi");
  LowerCtx::define(s, index_in_range(ctx, operand(ctx, s, n, 0), Expr(lo), Expr(hi),
                                     n.attrs.s("what") + " {} is out of range [" + std::to_string(lo) + ", " +
                                         std::to_string(hi) + ")"));
}

}  // namespace hjit::backend::lowering
