#pragma once
// What a float value's elements are known to be, read off the graph: finite, within bounds, and
// perhaps whole numbers. A requantized activation (its sums' conversion, scale, rounding and
// clamp) is known finite and within [0, 255]: its conversion to u8 needs no NaN, infinity or
// range tests, and a sum of 8-bit products that f32 holds exactly needs no round trip through i32.
#include <map>
#include <optional>

#include <hjit/graph.h>

namespace hjit {

// f32 holds every whole number below 2^24 exactly: sums and products of such stay exact.
inline constexpr double kWholeInF32 = 16777216.0;

struct ValueRange {
  double lo = 0, hi = 0;  // every element within [lo, hi] (finite: no NaN, no infinity)
  bool whole = false;     // and a whole number
  // The sum of the magnitudes of the terms of the sums and differences that compute it: no partial
  // sum, in any order, is larger. Whole terms whose magnitudes sum below 2^24 add up exactly in f32
  // in any order and with any products fused.
  double terms = 0;
  bool exact_in_any_order() const { return whole && terms < kWholeInF32; }
  // Whole numbers f32 holds exactly (converted to i32 and back, each is itself).
  bool whole_in_f32() const { return whole && lo > -kWholeInF32 && hi < kWholeInF32; }
};

class ValueRanges;

// round(x) + z (either order) for a zero point z that is a whole scalar within a 16-bit type's
// range, or round(x) alone (zero_point -1): a quantization's rounding, as simplify's
// clamp_before_round and the conversion that adds z as an integer (lower_ops.cpp, Cast) read it.
struct RoundedWithZeroPoint {
  int round = -1, zero_point = -1;
};
std::optional<RoundedWithZeroPoint> rounded_with_zero_point(const Graph& g, ValueRanges& ranges, int id);

// Whether every value of r, truncated toward 0, is one of the integer type `to`'s (of at most 32
// bits): a conversion then needs no range test.
bool converts_within(const ValueRange& r, DType to);

// Ranges of an f32 graph's values, each computed once, on demand. nullopt: nothing is known (an
// input, a NaN or an infinity possible, an op not modelled, a value not f32).
class ValueRanges {
 public:
  explicit ValueRanges(const Graph& g) : g_(g) {}
  std::optional<ValueRange> operator()(int id) { return at(id, 0); }

 private:
  std::optional<ValueRange> at(int id, int depth);
  std::optional<ValueRange> compute(int id, int depth);
  std::optional<ValueRange> constant(const Node& n) const;
  std::optional<ValueRange> selected(const Node& where, int depth);
  std::optional<ValueRange> softmax_part(const Node& n, int depth);
  bool less_its_row_maximum(const Node& n) const;

  const Graph& g_;
  std::map<int, std::optional<ValueRange>> memo_;
};

}  // namespace hjit
