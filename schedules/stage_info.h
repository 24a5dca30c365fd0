// Facts about stages that schedules ask of the lowered pipeline.
#pragma once
#include <optional>
#include <utility>

#include "halide_backend/lowering/lowered.h"

namespace hjit::schedules {

// Sources (inputs, constants, fills, iota) and counts of sizes (numel) are never scheduled: they
// inline into their readers.
bool is_source(const backend::Stage& s);
// The stage has a reduction (an update definition over a domain).
bool has_reduction(const backend::Stage& s);
// Whether the reduction folds the innermost axis of its input (a row reduction), and that axis's
// extent.
bool reduces_innermost(const backend::LoweredPipeline& p, const backend::Stage& s);
int64_t innermost_reduced_extent(const backend::LoweredPipeline& p, const backend::Stage& s);
// Of a sum, max or min over its input's innermost axes: how many of its domain's leading variables
// are those axes, contiguous in memory, and the elements they span together (sum(w, {1, 2, 3}) of
// [O, C, 3, 3]: 3 and C * 9; over {0, 2, 3}: 2 and 9). {0, 0} where the innermost axis is not
// reduced, the input is read through a view (a transpose) or the extents are known only at run
// time.
std::pair<int, int64_t> innermost_reduced_block(const backend::LoweredPipeline& p, const backend::Stage& s);
// A reduction over one axis that is not its operand's innermost but is the innermost of the values
// that operand is computed from, through transposes and element-wise ops (a zero point's
// correction of attention's scores, the sums of K^T along its rows, read from K stored row by
// row): that axis's extent, else nullopt.
std::optional<int64_t> reduced_along_memory(const backend::LoweredPipeline& p, const backend::Stage& s);
// A reshape, broadcast or transpose of sources (inputs, constants) whose indices need no division:
// inlined into its readers it costs nothing, stored it is a copy of an input every call.
bool is_view_of_sources(const backend::LoweredPipeline& p, const backend::Stage& s);
// Computed from sources element by element in a few cheap steps (conversions, scales, offsets,
// roundings down, views): a weight dequantized from i8 or i4. Read once by a contraction of a few
// rows it costs its arithmetic inlined, where stored it is written and read back whole every call.
bool is_cheap_function_of_sources(const backend::LoweredPipeline& p, const backend::Stage& s);
// The points of the stage's reduction domain (1 without one; extents known only at run time count 1).
int64_t reduced_points(const backend::Stage& s);
// The type the stage's values are computed in.
Halide::Type value_type(const backend::Stage& s);

}  // namespace hjit::schedules
