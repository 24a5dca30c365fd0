// Loop-nest building blocks the schedules share.
#pragma once
#include <string>
#include <vector>

#include <Halide.h>
#include <hjit/dtype.h>

#include "schedules/recorder.h"

namespace hjit::schedules {

// Vectorizes the innermost of `vars` (innermost first, with their extents) at width `vec` when it
// is long enough, and runs the outer loops in parallel when there is enough work: outer
// dimensions are fused until there are tasks for every thread, and a 1-D loop is split into
// parallel chunks.
struct LoopNest {
  std::string what;          // a short description ("vec16 par(d1,d2)")
  bool has_row = false;      // row: the loop inside which one whole row (innermost dimension) is done
  Halide::Var row;
};
// `update`: the stage is an update definition, whose splits must guard their tails (rounding up
// would read inputs past their ends, and shifting inwards would apply the update twice).
// `tail`: how a pure stage's vectors meet the end of its rows (Auto: the last shifted inwards
// where the stage is stored; GuardWithIf: no vector's start is a min, schedule_helpers_at_root).
LoopNest vectorize_and_parallelize(StageRef stage, const std::vector<Halide::Var>& vars, const Shape& extents,
                                   int vec, int threads, bool update = false, int64_t min_parallel_work = 1 << 14,
                                   int tasks_per_thread = 8, Halide::TailStrategy tail = Halide::TailStrategy::Auto);

// A transpose's nest in tiles of vec x vec (vec at most 16, and no longer than each dimension): the
// innermost output dimension vectorized and the output dimension `j` (the one that walks along the
// input's rows) unrolled inside it, so that a tile reads vec input rows while they sit in cache.
// Untiled, each output vector gathered from vec rows a whole matrix apart: a 2048 x 1000 weight
// transposed in 5 ms where its matmul took 0.14.
// The tiles run in parallel over the outer loops; no row loop hosts other stages.
LoopNest transpose_tiles(StageRef stage, const std::vector<Halide::Var>& vars, const Shape& extents, int j, int vec,
                         int threads, int64_t min_parallel_work);

// Fuses `vars` (innermost first, consecutive loops of the stage) into one loop, returned: the
// outermost with each next one inward (names joined outermost first).
Halide::Var fuse_all(StageRef stage, const std::vector<Halide::Var>& vars);

// The natural SIMD width for values of type t on the target.
int vector_width(const Halide::Target& target, const Halide::Type& t);

}  // namespace hjit::schedules
