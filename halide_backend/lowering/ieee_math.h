// Floating point in Halide Exprs that computes what the eager kernels (C++ and libm) compute,
// special values included.
//
// Halide compiles every pipeline with LLVM's fast-math flags (no NaNs, no infinities, reassociation,
// approximate functions), its own f32 exp and log are polynomials that know neither infinities nor
// subnormals (exp(1e10) is 0, log(1e-40) is -88), its f32 pow is exp(log(x) * y), its max drops
// NaNs, and its float16 conversion turns NaN into infinity. Every lowering whose result depends
// on NaN, infinity, signed zero, subnormals or rounding to a 16-bit float goes through here:
// special values are recognized on the bits (integer tests LLVM cannot fold away), and infinities
// and NaNs are produced by arithmetic or read from Halide's runtime, never written as literals.
#pragma once
#include <Halide.h>
#include <hjit/dtype.h>

namespace hjit::backend::ieee {

using Halide::Expr;
using Halide::Type;

// Tests on the bits of an f32 or f64 value.
Expr is_nan(const Expr& x);
Expr is_inf(const Expr& x);
Expr sign_bit(const Expr& x);  // true for -0.0, negative values, -inf and NaNs with the sign set
Expr is_negative(const Expr& x);  // x < 0: false for -0.0 and NaN

// An IEEE comparison of a float with a finite literal as one range test on its bits, where the
// values it holds for are one run of bit patterns (x > 0, x <= -1, x == 2.5, ...): two integer
// instructions instead of a NaN test and a compare. Undefined where no such run exists.
enum class Cmp { Eq, Ne, Lt, Le, Gt, Ge };
Expr compare_with_literal(const Expr& x, Cmp cmp, double literal);
Cmp mirrored(Cmp cmp);  // c OP x as x mirrored(OP) c

// +inf or -inf, and a quiet NaN, of float type t (values LLVM does not see as literals).
Expr infinity(Type t, bool negative = false);
Expr quiet_nan(Type t);

// maximum / minimum that propagate NaN (as PyTorch's and the eager kernels'); bool: or / and.
Expr max(const Expr& a, const Expr& b);
Expr min(const Expr& a, const Expr& b);
// The identity of max (min) for a type: -inf (+inf) for floats, the lowest (highest) value else.
Expr max_identity(Type t);
Expr min_identity(Type t);

// A reduction that propagates NaN without giving up Halide's (NaN-dropping) max and min: a second
// accumulator folds the magnitude bits of the inputs with an unsigned max, and is above the bits of
// infinity exactly when a NaN went in.
Expr nan_seen_identity(Type t);                    // no NaN yet
Expr nan_seen(const Expr& seen, const Expr& x);    // the accumulator after x
Expr nan_if_seen(const Expr& seen, const Expr& v); // v, or NaN when one was seen

// libm's functions: NaN and infinities in and out, gradual underflow, overflow to infinity.
Expr exp(const Expr& x, bool finite = false);  // finite: x is never NaN (its test left out)
Expr log(const Expr& x);
Expr log1p(const Expr& x);
Expr sin(const Expr& x);                     // f32 vectorized (within an ulp, any argument); f64 libm's
Expr cos(const Expr& x);                     // as sin
Expr tanh(const Expr& x);                    // f32 vectorized (under 1.5 ulp); f64 libm's
Expr erf(const Expr& x, bool cuda = false);  // cuda: f64 from NVIDIA's libdevice, not libm
// CUDA rounds f32 to an integer with .ftz instructions, which read a subnormal as zero: floor of
// a negative subnormal would be -0, ceil of a positive one 0. cuda: those two picked out on the bits.
Expr floor(const Expr& x, bool cuda = false);
Expr ceil(const Expr& x, bool cuda = false);
Expr pow(const Expr& x, const Expr& y);      // floats: C99 pow, special cases included
Expr int_pow(const Expr& x, const Expr& y);  // integers: wrapping, PyTorch's negative exponents
Expr sign(const Expr& x);                    // -1, 0 or 1; NaN stays NaN for floats
Expr is_nonzero(const Expr& x);              // conversion to bool: NaN is true

// 16-bit floats are stored as their bits (UInt(16)) and computed in f32. Conversions round to
// nearest even, overflow to infinity, keep NaN a NaN and handle subnormals.
Expr narrow_bits(DType dtype, const Expr& f32);   // f32 -> UInt(16) bits of dtype (F16 or BF16)
Expr widen_bits(DType dtype, const Expr& bits);   // UInt(16) bits of dtype -> f32
Expr round_to(DType dtype, const Expr& f32);      // f32 rounded to a value dtype holds

}  // namespace hjit::backend::ieee
