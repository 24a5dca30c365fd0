#include "halide_backend/lowering/ieee_math.h"

#include <cstring>
#include <limits>

#include <hjit/error.h>

namespace hjit::backend::ieee {

using namespace Halide;
using Internal::make_const;

namespace {

bool is_f64(const Expr& x) { return x.type().bits() == 64; }
Type bits_type(const Expr& x) { return UInt(x.type().bits(), x.type().lanes()); }
Expr ucon(const Expr& like, uint64_t v) { return make_const(bits_type(like), v); }
Expr fcon(const Expr& like, double v) { return make_const(like.type(), v); }

Expr magnitude_bits(const Expr& x) {
  return reinterpret(bits_type(x), x) & ucon(x, is_f64(x) ? 0x7fffffffffffffffull : 0x7fffffffull);
}
Expr infinity_bits(const Expr& x) { return ucon(x, is_f64(x) ? 0x7ff0000000000000ull : 0x7f800000ull); }

// Halide's runtime defines these constants in functions LLVM inlines after it has applied the
// fast-math flags, so they arrive as values rather than as literals it may assume away.
Expr runtime_constant(Type t, const char* f32_name, const char* f64_name) {
  const Type scalar = t.with_lanes(1);
  Expr c = Internal::Call::make(scalar, scalar.bits() == 64 ? f64_name : f32_name, {}, Internal::Call::PureExtern);
  return t.is_vector() ? Internal::Broadcast::make(c, t.lanes()) : c;
}

}  // namespace

Expr is_nan(const Expr& x) { return magnitude_bits(x) > infinity_bits(x); }
Expr is_inf(const Expr& x) { return magnitude_bits(x) == infinity_bits(x); }
Expr sign_bit(const Expr& x) {
  return (reinterpret(bits_type(x), x) >> (x.type().bits() - 1)) != ucon(x, 0);
}

// The bits of a value below zero lie in (-0.0, -inf], one unsigned range.
Expr is_negative(const Expr& x) {
  const bool f64 = is_f64(x);
  Expr offset = reinterpret(bits_type(x), x) - ucon(x, f64 ? 0x8000000000000001ull : 0x80000001ull);
  return offset < ucon(x, f64 ? 0x7ff0000000000000ull : 0x7f800000ull);
}

// Non-negative floats ascend with their bits from +0 to +inf, negative ones descend from -0 to
// -inf; NaNs lie above both runs. So x > c for c >= 0 is "bits in (bits(c), bits(+inf)]".
Expr compare_with_literal(const Expr& x, Cmp cmp, double literal) {
  const bool f64 = is_f64(x);
  const uint64_t sign = f64 ? 0x8000000000000000ull : 0x80000000ull, inf = f64 ? 0x7ff0000000000000ull : 0x7f800000ull;
  const double c = literal == 0 ? 0.0 : literal;  // -0.0 compares as +0.0
  uint64_t cbits;
  if (f64) std::memcpy(&cbits, &c, 8);
  else {
    const float cf = float(c);
    if (double(cf) != c) return Expr();  // compared in f64 by the eager kernel? leave it to the general path
    uint32_t b;
    std::memcpy(&b, &cf, 4);
    cbits = b;
  }
  Expr bits = reinterpret(bits_type(x), x);
  auto within = [&](uint64_t lo, uint64_t hi) { return bits - ucon(x, lo) <= ucon(x, hi - lo); };
  switch (cmp) {
    case Cmp::Eq: return c == 0 ? magnitude_bits(x) == ucon(x, 0) : bits == ucon(x, cbits);
    case Cmp::Ne: return c == 0 ? magnitude_bits(x) != ucon(x, 0) : bits != ucon(x, cbits);
    case Cmp::Gt: return c >= 0 ? within(cbits + 1, inf) : Expr();
    case Cmp::Ge: return c > 0 ? within(cbits, inf) : Expr();
    case Cmp::Lt: return c < 0 ? within(cbits + 1, sign | inf) : c == 0 ? within(sign + 1, sign | inf) : Expr();
    case Cmp::Le: return c < 0 ? within(cbits, sign | inf) : Expr();
  }
  return Expr();
}

Cmp mirrored(Cmp cmp) {
  switch (cmp) {
    case Cmp::Lt: return Cmp::Gt;
    case Cmp::Le: return Cmp::Ge;
    case Cmp::Gt: return Cmp::Lt;
    case Cmp::Ge: return Cmp::Le;
    default: return cmp;
  }
}

Expr infinity(Type t, bool negative) {
  if (!t.is_float()) throw InternalError("ieee::infinity of a non-float type");
  return negative ? runtime_constant(t, "neg_inf_f32", "neg_inf_f64") : runtime_constant(t, "inf_f32", "inf_f64");
}
Expr quiet_nan(Type t) { return runtime_constant(t, "nan_f32", "nan_f64"); }

// NaN in either operand gives a NaN (a + b is one); otherwise Halide's max, exact on numbers.
Expr max(const Expr& a, const Expr& b) {
  if (a.type().is_bool()) return a || b;
  if (!a.type().is_float()) return Halide::max(a, b);
  return select(ieee::is_nan(a) || ieee::is_nan(b), a + b, Halide::max(a, b));
}
Expr min(const Expr& a, const Expr& b) {
  if (a.type().is_bool()) return a && b;
  if (!a.type().is_float()) return Halide::min(a, b);
  return select(ieee::is_nan(a) || ieee::is_nan(b), a + b, Halide::min(a, b));
}
Expr max_identity(Type t) {
  if (t.is_bool()) return Internal::const_false();
  return t.is_float() ? infinity(t, true) : t.min();
}
Expr min_identity(Type t) {
  if (t.is_bool()) return Internal::const_true();
  return t.is_float() ? infinity(t) : t.max();
}

Expr nan_seen_identity(Type t) { return make_const(UInt(t.bits()), 0); }
Expr nan_seen(const Expr& seen, const Expr& x) { return Halide::max(seen, magnitude_bits(x)); }
Expr nan_if_seen(const Expr& seen, const Expr& v) {
  return select(seen > ucon(v, v.type().bits() == 64 ? 0x7ff0000000000000ull : 0x7f800000ull), quiet_nan(v.type()), v);
}

// f32: Cody-Waite reduction x = k ln2 + r with |r| <= ln2 / 2 and Cephes' polynomial for e^r (under
// 0.9 ulp from libm over [-86.5, 88.5], for x and for a negation: tests/test_backend.cpp), scaled
// by 2^k built in the exponent bits. The input is clamped first so that k stays in range (overflow
// comes out as inf); results below 2^-125 (x < -86.6) are 0, not libm's tiny normals and
// subnormals. NaN comes back as NaN.
// k is rounded by adding 1.5 * 2^23: the sum's low bits are k itself, which then shift into the
// exponent field with no conversion, and k as a float is those bits less the constant's, converted
// (fewer instructions than round() and a conversion: AVX-512 rounds 16 lanes in two halves). Not
// (sum - 1.5 * 2^23) as floats: under fast-math LLVM distributes that subtraction into the
// multiplication by ln2 below, and r loses every digit.
Expr exp(const Expr& x, bool finite) {
  if (is_f64(x)) return Halide::exp(x);
  const Type f = x.type(), u = bits_type(x), i = Int(32, f.lanes());
  Expr xc = Halide::clamp(x, -104.0f, 89.0f);
  Expr shifted = reinterpret(u, xc * 1.44269504088896341f + 12582912.0f);
  Expr k = cast(f, reinterpret(i, shifted - ucon(x, 0x4b400000u)));
  // Cody-Waite: x - k C1 is exact (k C1 has few bits; the difference, Sterbenz's lemma), and only
  // then is the small k C2 taken off. Strict, so that neither Halide's simplifier (which merges
  // k C1 + k C2 into k (C1 + C2)) nor LLVM's reassociation (which took k C2 from -x first) undoes
  // that order: either costs the split its accuracy (5 and 60 ulp, not 1).
  Expr r = strict_float(xc - k * 0.693359375f) - k * -2.12194440e-4f;
  // e^r = 1 + r (1 + r P(r)) in Horner's form, all of it doubled (exactly: the coefficients are
  // doubled), which is 2 e^r in seven fused multiply-adds.
  Expr p = 2 * 1.9875691500e-4f;
  for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f, 1.0f, 1.0f})
    p = p * r + 2 * c;
  // e^x as (2 e^r) 2^(k-1): k reaches 128 (x up to 88.72 rounds there) while the result is finite.
  // The exponent field k + 126, built in unsigned arithmetic (it wraps), is negative as an int32
  // for k < -126 and zero at -126, where the result is 0: a max with 0 makes those scales +0.0,
  // one instruction instead of a compare and a select.
  Expr field = reinterpret(i, (shifted << 23) + ucon(x, 126u << 23));
  Expr scale = reinterpret(f, Halide::max(field, 0));
  return finite ? p * scale : select(ieee::is_nan(x), x, p * scale);
}

// f32: x = m 2^e with m in [sqrt(1/2), sqrt(2)), Cephes' polynomial for log(m) (about 1 ulp).
// Subnormals are scaled into the normal range first.
Expr log(const Expr& x) {
  const Type f = x.type();
  // f64: libm's log, or libdevice's in CUDA kernels, whose code made under Halide's fast-math
  // flags gave NaN for +inf on an H100: the special values are picked out on the bits.
  auto specials = [&](const Expr& y) {
    return select(ieee::is_nan(x), x, magnitude_bits(x) == ucon(x, 0), infinity(f, true), ieee::sign_bit(x), quiet_nan(f),
                  ieee::is_inf(x), x, y);
  };
  if (is_f64(x)) return specials(Halide::log(x));
  const Type u = bits_type(x), i = Int(32, f.lanes());
  Expr tiny = magnitude_bits(x) < ucon(x, 0x00800000u);
  Expr xs = select(tiny, x * 33554432.0f, x);  // 2^25
  Expr bits = reinterpret(u, xs);
  Expr e = cast(i, (bits >> 23) & ucon(x, 0xff)) - select(tiny, 126 + 25, 126);
  Expr m = reinterpret(f, (bits & ucon(x, 0x807fffffu)) | ucon(x, 0x3f000000u));  // [0.5, 1)
  Expr small = m < 0.707106781186547524f;
  Expr ef = cast(f, e - select(small, 1, 0));
  Expr t = select(small, m + m, m) - 1.0f;
  Expr z = t * t;
  Expr p = 7.0376836292e-2f;
  for (float c : {-1.1514610310e-1f, 1.1676998740e-1f, -1.2420140846e-1f, 1.4249322787e-1f, -1.6668057665e-1f,
                  2.0000714765e-1f, -2.4999993993e-1f, 3.3333331174e-1f})
    p = p * t + c;
  // Strict: reassociated, this sum loses the digits of log(m) for m near 1 (2000 ulp).
  Expr y = strict_float(p * t * z + ef * -2.12194440e-4f - 0.5f * z + t + ef * 0.693359375f);
  return specials(y);
}

// log(1 + x) without losing the digits of small x: log(u) * x / (u - 1) with u = 1 + x rounded
// (Goldberg). Strict, so that (1 + x) - 1 is not simplified back to x.
Expr log1p(const Expr& x) {
  Expr one = fcon(x, 1.0);
  Expr u = strict_float(x + one);
  Expr d = strict_float(u - one);
  // Strict product: LLVM would reassociate log(u) * (x / d) into (log(u) * x) / d, which
  // overflows for x near the largest float.
  Expr y = select(d == fcon(x, 0.0), x, strict_float(ieee::log(u) * (x / d)));
  // +inf (where x / d is inf / inf) and NaN pass through; -1 gives log(0) = -inf, below it NaN.
  return select(ieee::is_nan(x) || (ieee::is_inf(x) && !ieee::sign_bit(x)), x, y);
}

// f32: a rational approximation on [-4, 4] (odd numerator, even denominator; a few ulp), beyond
// which erf is +-1 in f32; f64: libm's erf (scalar, exact), OpenCL C's built-in of that name in
// OpenCL kernels, or libdevice's in CUDA kernels (Halide links it into every PTX module).
Expr erf(const Expr& x, bool cuda) {
  if (is_f64(x)) return Internal::Call::make(x.type(), cuda ? "__nv_erf" : "erf", {x}, Internal::Call::PureExtern);
  Expr c = Halide::clamp(x, -4.0f, 4.0f), x2 = c * c;
  Expr p = -2.72614225801306e-10f;
  for (float a : {2.77068142495902e-08f, -2.10102402082508e-06f, -5.69250639462346e-05f, -7.34990630326855e-04f,
                  -2.95459980854025e-03f, -1.60960333262415e-02f})
    p = p * x2 + a;
  Expr q = -1.45660718464996e-05f;
  for (float b : {-2.13374055278905e-04f, -1.68282697438203e-03f, -7.37332916720468e-03f, -1.42647390514189e-02f})
    q = q * x2 + b;
  return select(ieee::is_nan(x), x, c * p / q);
}

// f32: Cephes' tanhf on |x|: an odd polynomial below 0.625, 1 - 2 / (e^(2|x|) + 1) from there (about
// 1.3 ulp from the exact value: tests/test_backend.cpp), with the sign put back in the bits (tanh(-0.0) is -0.0).
// |x| is clamped to 10 (tanh rounds to 1 in f32 from 9.02 on) so that e^(2|x|) stays finite: under
// fast-math a reciprocal of infinity may be NaN. Halide's own tanh calls libm's tanhf one element at
// a time, about 50 times slower. f64: libm's (scalar).
Expr tanh(const Expr& x) {
  if (is_f64(x)) return Halide::tanh(x);
  const Type f = x.type(), u = bits_type(x);
  Expr a = reinterpret(f, magnitude_bits(x)), z = a * a;
  Expr p = -5.70498872745e-3f;
  for (float c : {2.06390887954e-2f, -5.37397155531e-2f, 1.33314422036e-1f, -3.33332819422e-1f}) p = p * z + c;
  Expr small = a * z * p + a;
  Expr large = 1.0f - 2.0f / (ieee::exp(2.0f * Halide::min(a, 10.0f)) + 1.0f);
  Expr magnitude = select(a < 0.625f, small, large);
  Expr signed_result = reinterpret(f, reinterpret(u, magnitude) | (reinterpret(u, x) & ucon(x, 0x80000000u)));
  return select(ieee::is_nan(x), x, signed_result);
}

namespace {

// 32 zero bits, then the first 288 bits of 2/pi after the binary point, in five 64-bit limbs (from
// pi to 700 bits by Machin's formula, in integers).
const uint64_t kTwoOverPiLimbs[5] = {0x00000000a2f9836eull, 0x4e441529fc2757d1ull, 0xf534ddc0db629599ull,
                                     0x3c439041fe5163abull, 0xdebbc561b7246e3aull};

// Payne and Hanek's reduction of a finite f32 magnitude a = m 2^e (m the 24-bit significand) by
// pi/2: a = n pi/2 + r with |r| <= pi/4, r in f64, n mod 4. a (2/pi) mod 4 is m 2^e times the
// bits of 2/pi from the one worth 2^(1-e) on (the bits before it give multiples of 4): 96 of
// them, cut out of the limbs by shifts (selects and shifts vectorize; a table read per lane
// would not), multiplied in 64-bit integers into a fixed-point number with 2 integer and 62
// fraction bits, exact to 2^-61. Exact for every magnitude, where a reduction by a rounded pi/2
// loses the digits of r from about 2^20 on. a_bits: the bits of a; the result is meaningless (but
// defined) for a below 2^-24 and for inf and NaN.
std::pair<Expr, Expr> reduce_by_half_pi(const Expr& a_bits) {
  const int lanes = a_bits.type().lanes();
  const Type i32 = Int(32, lanes), u64 = UInt(64, lanes);
  auto c64 = [&](uint64_t v) { return make_const(u64, v); };
  // The window's first bit, counted from the limbs' first: bit 2^(1-e) of 2/pi is bit 30 + e.
  Expr start = Halide::clamp(cast(i32, a_bits >> 23) - 150 + 30, 0, 134);
  Expr limb = start >> 6, shift = cast(u64, start & 63);
  auto limb_at = [&](int offset) {  // kTwoOverPiLimbs[limb + offset] for limb in 0..2
    const uint64_t* l = kTwoOverPiLimbs + offset;
    return select(limb == 0, c64(l[0]), limb == 1, c64(l[1]), c64(l[2]));
  };
  Expr l0 = limb_at(0), l1 = limb_at(1), l2 = limb_at(2);
  // (x >> 1) >> (63 - shift): x >> (64 - shift), also where shift is 0.
  Expr high = (l0 << shift) | ((l1 >> c64(1)) >> (c64(63) - shift));
  Expr low = ((l1 << shift) | ((l2 >> c64(1)) >> (c64(63) - shift))) >> c64(32);
  Expr m = cast(u64, (a_bits & make_const(a_bits.type(), 0x7fffffu)) | make_const(a_bits.type(), 0x800000u));
  Expr w0 = high >> c64(32), w1 = high & c64(0xffffffffu);
  Expr fixed = ((m * w0) << c64(32)) + m * w1 + ((m * low) >> c64(32));  // a (2/pi) 2^62 mod 2^64
  Expr n = (fixed + c64(uint64_t(1) << 61)) >> c64(62);
  Expr fraction = reinterpret(Int(64, lanes), fixed - (n << c64(62)));
  Expr r = cast(Float(64, lanes), fraction) * make_const(Float(64, lanes), 1.5707963267948966 * 0x1p-62);
  return {cast(i32, n), r};
}

// sin and cos of |r| <= pi/4 in f64: Taylor's series to r^13 and r^14 (under 1e-11 relative there,
// far below an f32 ulp).
Expr sin_near_zero(const Expr& r) {
  Expr z = r * r, p = make_const(r.type(), -1.0 / 39916800);
  for (double c : {1.0 / 362880, -1.0 / 5040, 1.0 / 120, -1.0 / 6}) p = p * z + make_const(r.type(), c);
  return r + r * z * p;
}
Expr cos_near_zero(const Expr& r) {
  Expr z = r * r, p = make_const(r.type(), 1.0 / 479001600);
  for (double c : {-1.0 / 3628800, 1.0 / 40320, -1.0 / 720, 1.0 / 24, -0.5, 1.0}) p = p * z + make_const(r.type(), c);
  return p;
}

// f32: the argument reduced by pi/2 exactly (Payne-Hanek above pi/4), sin and cos of the rest in
// f64, rounded once (within an ulp of the exact value for every float: tests/test_backend.cpp).
// Halide's own sin and cos call libm one element at a time, about 40 times slower. f64: libm's.
Expr sin_or_cos(const Expr& x, bool cosine) {
  if (is_f64(x)) return cosine ? Halide::cos(x) : Halide::sin(x);
  const Type f = x.type(), i32 = Int(32, f.lanes()), f64 = Float(64, f.lanes());
  Expr a_bits = magnitude_bits(x), a = reinterpret(f, a_bits);
  auto [n, r_reduced] = reduce_by_half_pi(a_bits);
  Expr near_zero = a < 0.78125f;  // below pi/4: no reduction
  Expr r = select(near_zero, cast(f64, a), r_reduced);
  // cos(x) = sin(x + pi/2): one quadrant on. Quadrants 0..3: sin r, cos r, -sin r, -cos r.
  Expr quadrant = select(near_zero, make_const(i32, 0), n) + make_const(i32, cosine ? 1 : 0);
  Expr v = select((quadrant & 1) == 0, sin_near_zero(r), cos_near_zero(r));
  Expr magnitude = cast(f, select((quadrant & 2) == 0, v, -v));
  Expr y = cosine ? magnitude : select(a < 0x1p-12f, x, ieee::sign_bit(x), -magnitude, magnitude);  // sin is odd, and x where x^3/6 is below its ulp
  return select(ieee::is_nan(x) || ieee::is_inf(x), quiet_nan(f), y);
}

}  // namespace

Expr sin(const Expr& x) { return sin_or_cos(x, false); }
Expr cos(const Expr& x) { return sin_or_cos(x, true); }

// pow in f64 (libm's, scalar, correctly rounded for f32 operands; libdevice's in CUDA kernels) with
// C99's special cases (pow(x, 0) = 1 for NaN x, pow(-inf, 3) = -inf, ...) picked out on the bits,
// as the eager kernel has them: libdevice's pow made under Halide's fast-math flags gave 1 for
// pow(inf, 2) on an H100.
Expr pow(const Expr& x, const Expr& y) {
  const Type d = Float(64, x.type().lanes());
  const Expr X = cast(d, x), Y = cast(d, y);
  const Expr r = Internal::Call::make(d, "pow_f64", {X, Y}, Internal::Call::PureExtern);
  const Expr one = fcon(X, 1.0), zero = fcon(X, 0.0), inf = infinity(d, false), minus_inf = infinity(d, true);
  const Expr minus_zero = reinterpret(d, ucon(X, 0x8000000000000000ull));
  const Expr one_bits = ucon(X, 0x3ff0000000000000ull), ax = magnitude_bits(X);
  // Whether y is an odd integer, tested on a finite stand-in (a float compare with inf or NaN is
  // poison under fast-math); the branches that read it have a finite y.
  const Expr yf = select(ieee::is_inf(Y) || ieee::is_nan(Y), zero, Y), y_half = yf * fcon(yf, 0.5);
  const Expr odd = Halide::floor(yf) == yf && Halide::floor(y_half) != y_half;
  const Expr negative_y = ieee::sign_bit(Y);
  // x = +-0 or +-inf: the size is 0 or inf as the signs say, negative for a negative x and odd y.
  const Expr to_inf = (ax == ucon(X, 0)) == negative_y, negative = ieee::sign_bit(X) && odd;
  const Expr edge = select(to_inf, select(negative, minus_inf, inf), select(negative, minus_zero, zero));
  const Expr special = select(magnitude_bits(Y) == ucon(Y, 0) || reinterpret(bits_type(X), X) == one_bits, one,
                              ieee::is_nan(X) || ieee::is_nan(Y), quiet_nan(d),
                              ieee::is_inf(Y), select(ax == one_bits, one, (ax > one_bits) != negative_y, inf, zero),
                              ieee::is_inf(X) || ax == ucon(X, 0), edge, r);
  return cast(x.type(), special);
}

// Square and multiply over every bit of the exponent, in unsigned arithmetic (where wrapping is
// defined, also for Halide's constant folding of a literal base), then back to the type; a
// negative exponent gives 1 for base 1, +-1 for base -1 and 0 otherwise (PyTorch's rule).
Expr int_pow(const Expr& x_in, const Expr& y_in) {
  const Type t = x_in.type(), u = t.with_code(halide_type_uint);
  if (t.is_bool()) throw InternalError("ieee::int_pow of bool");
  // Every intermediate is a Let: base * base as a tree would double in size with each bit.
  using Internal::Let;
  using Internal::Variable;
  auto var = [&](Type type, const char* prefix) { return Variable::make(type, Internal::unique_name(prefix)); };
  const Expr one = make_const(u, 1), zero = make_const(u, 0);
  const Expr x = var(t, "pow_x"), y = var(t, "pow_y"), e = var(u, "pow_e");
  const int bits = t.bits() - (t.is_int() ? 1 : 0);
  std::vector<Expr> base{cast(u, x)}, acc{one};
  for (int bit = 0; bit < bits; ++bit) base.push_back(var(u, "pow_b")), acc.push_back(var(u, "pow_r"));
  Expr body = cast(t, acc.back());
  if (t.is_int()) {
    const Expr tone = make_const(t, 1), tminus = make_const(t, -1);
    Expr odd = (y & tone) != make_const(t, 0);
    Expr negative_power = select(x == tone, tone, x == tminus, select(odd, tminus, tone), make_const(t, 0));
    body = select(y < make_const(t, 0), negative_power, body);
  }
  for (int bit = bits - 1; bit >= 0; --bit) {
    const std::string& b_next = base[size_t(bit + 1)].as<Variable>()->name;
    const std::string& r_next = acc[size_t(bit + 1)].as<Variable>()->name;
    Expr set = ((e >> bit) & one) != zero;
    body = Let::make(b_next, base[size_t(bit)] * base[size_t(bit)], body);
    body = Let::make(r_next, select(set, acc[size_t(bit)] * base[size_t(bit)], acc[size_t(bit)]), body);
  }
  body = Let::make(e.as<Variable>()->name, cast(u, y), body);
  body = Let::make(y.as<Variable>()->name, y_in, body);
  return Let::make(x.as<Variable>()->name, x_in, body);
}

namespace {
// rounded(x), except that an f32 subnormal of the given sign, which CUDA's .ftz rounding reads as
// zero, gives `value`.
Expr with_subnormals(const Expr& x, const Expr& rounded, bool cuda, bool negative, int value) {
  if (!cuda || x.type() != Halide::Float(32)) return rounded;
  Expr u = reinterpret(Halide::UInt(32), x);
  Expr subnormal = (u & ucon(x, 0x7f800000u)) == ucon(x, 0) && (u & ucon(x, 0x7fffffu)) != ucon(x, 0) &&
                   (u >> 31) == ucon(x, negative ? 1 : 0);
  return select(subnormal, fcon(x, value), rounded);
}
}  // namespace

Expr floor(const Expr& x, bool cuda) { return with_subnormals(x, Halide::floor(x), cuda, true, -1); }
Expr ceil(const Expr& x, bool cuda) { return with_subnormals(x, Halide::ceil(x), cuda, false, 1); }

Expr sign(const Expr& x) {
  const Type t = x.type();
  if (t.is_bool()) return x;
  if (t.is_uint()) return select(x > make_const(t, 0), make_const(t, 1), make_const(t, 0));
  Expr zero = make_const(t, 0);
  Expr s = select(x > zero, make_const(t, 1), x < zero, make_const(t, -1), zero);
  return t.is_float() ? select(ieee::is_nan(x), zero, s) : s;  // PyTorch's sign(NaN) is 0
}

Expr is_nonzero(const Expr& x) {
  if (x.type().is_bool()) return x;
  if (x.type().is_float()) return magnitude_bits(x) != ucon(x, 0);  // NaN is nonzero
  return x != make_const(x.type(), 0);
}

// IEEE binary16 from f32 bits, all in integer arithmetic: round to nearest even, overflow to inf,
// subnormals by a variable shift of the significand, NaN kept quiet.
namespace {

Expr f32_to_f16(const Expr& f) {
  const Type u32 = UInt(32, f.type().lanes()), u16 = UInt(16, f.type().lanes());
  auto c = [&](uint32_t v) { return make_const(u32, v); };
  Expr bits = reinterpret(u32, f);
  Expr sign = (bits >> 16) & c(0x8000);
  Expr a = bits & c(0x7fffffff);
  // Normal halves: rebias the exponent, keep 10 significand bits, round on the 13 dropped.
  Expr h = (a >> 13) - c(112 << 10), rest = a & c(0x1fff);
  Expr normal = h + select(rest > c(0x1000) || (rest == c(0x1000) && (h & c(1)) == c(1)), c(1), c(0));
  // Subnormal halves: the significand (with its leading 1) shifted right by 126 - exponent.
  Expr m = (a & c(0x7fffff)) | c(0x800000);
  Expr shift = Halide::clamp(c(126) - (a >> 23), c(14), c(25));
  Expr q = m >> shift, r = m & ((c(1) << shift) - c(1)), half = c(1) << (shift - c(1));
  Expr sub = q + select(r > half || (r == half && (q & c(1)) == c(1)), c(1), c(0));
  sub = select((a >> 23) == c(0), c(0), sub);  // f32 zeros and subnormals are far below the smallest half
  Expr out = select(a > c(0x7f800000), c(0x7e00), a >= c(0x477ff000), c(0x7c00), a < c(0x38800000), sub, normal);
  return cast(u16, out | sign);
}

Expr f16_to_f32(const Expr& bits) {
  const Type u32 = UInt(32, bits.type().lanes()), f32 = Float(32, bits.type().lanes());
  auto c = [&](uint32_t v) { return make_const(u32, v); };
  Expr h = cast(u32, bits);
  Expr sign = (h & c(0x8000)) << 16, e = (h >> 10) & c(0x1f), m = h & c(0x3ff);
  Expr special = sign | c(0x7f800000) | (m << 13);            // inf, NaN
  Expr normal = sign | ((e + c(112)) << 23) | (m << 13);
  Expr sub = cast(f32, m) * 5.9604644775390625e-8f;           // m * 2^-24, exact
  sub = select((sign != c(0)), -sub, sub);
  return select(e == c(0x1f), reinterpret(f32, special), e == c(0), sub, reinterpret(f32, normal));
}

Expr f32_to_bf16(const Expr& f) {
  const Type u32 = UInt(32, f.type().lanes()), u16 = UInt(16, f.type().lanes());
  auto c = [&](uint32_t v) { return make_const(u32, v); };
  Expr u = reinterpret(u32, f);
  Expr rounded = (u + c(0x7fff) + ((u >> 16) & c(1))) >> 16;
  return cast(u16, select((u & c(0x7fffffff)) > c(0x7f800000), (u >> 16) | c(0x40), rounded));
}

Expr bf16_to_f32(const Expr& bits) {
  const Type u32 = UInt(32, bits.type().lanes());
  return reinterpret(Float(32, bits.type().lanes()), cast(u32, bits) << 16);
}

}  // namespace

Expr narrow_bits(DType dtype, const Expr& f32) {
  if (dtype == DType::F16) return f32_to_f16(f32);
  if (dtype == DType::BF16) return f32_to_bf16(f32);
  throw InternalError("ieee::narrow_bits: not a 16-bit float dtype");
}

Expr widen_bits(DType dtype, const Expr& bits) {
  if (dtype == DType::F16) return f16_to_f32(bits);
  if (dtype == DType::BF16) return bf16_to_f32(bits);
  throw InternalError("ieee::widen_bits: not a 16-bit float dtype");
}

Expr round_to(DType dtype, const Expr& f32) { return widen_bits(dtype, narrow_bits(dtype, f32)); }

}  // namespace hjit::backend::ieee
