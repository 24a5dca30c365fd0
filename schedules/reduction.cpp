#include "schedules/reduction.h"

#include <algorithm>
#include <optional>

#include "schedules/class_rules.h"
#include "schedules/loop_nest.h"
#include "schedules/schedule.h"
#include "schedules/stage_info.h"

namespace hjit::schedules {

using Halide::RVar;
using Halide::Var;
using Halide::VarOrRVar;

std::string schedule_reduction(const backend::LoweredPipeline& p, const backend::Stage& s, bool parallel, Schedule& out) {
  // (Or the accumulator's, where it is narrower than the value: an i64 sum of bytes in i32.)
  const int vec = std::max(vector_width(p.target, value_type(s)), vector_width(p.target, s.reduction.output_types()[0]));
  const int threads = parallel ? halide_threads() : 1;
  FuncRef acc(&out, s.reduction);
  std::string what = vectorize_and_parallelize(acc, s.vars, s.extents, vec, threads).what;
  StageRef u = acc.update();
  // The update is worth threads when the reduction is big, even if its output is small (a batch
  // norm's per-channel sums).
  const Node& node = p.graph->node(s.node);
  const int64_t out_points = std::max<int64_t>(1, node.type.numel());
  const int64_t reduced = std::max<int64_t>(1, p.graph->type(node.inputs[0]).numel() / out_points);
  const int64_t min_points = std::max<int64_t>(2, (int64_t(1) << 14) / reduced);
  const Fold fold = cpu_rules(s.op).fold;
  if (fold == Fold::Scan) {
    // A scan: the scanned dimension is no var of the update; the others loop around it.
    const size_t axis = s.vars.size() - 1 - size_t(p.graph->node(s.node).attrs.i("axis"));
    std::vector<Var> others;
    Shape extents;
    for (size_t d = 0; d < s.vars.size(); ++d)
      if (d != axis) others.push_back(s.vars[d]), extents.push_back(s.extents[d]);
    if (others.empty()) return what + "; scan serial";
    return what + "; scan " + vectorize_and_parallelize(u, others, extents, axis == 0 ? 1 : vec, threads, true).what;
  }
  const bool tuple = fold == Fold::Pair;
  // A sum along rows whose result drops that axis (sum(x, {-1}) of a [4096, 1024] x: [4096]) has
  // an innermost output dimension, but it is not contiguous in the input: looped outside it, each
  // vector of outputs gathered 8 lanes a row apart (19.5 ms where a pass over x takes 1).
  // (So is one along a transposed value's rows: each vector of outputs gathered across rows, 8% of
  // an int8 encoder's time in its attention's zero-point corrections.)
  int64_t row = reduces_innermost(p, s) ? innermost_reduced_extent(p, s) : reduced_along_memory(p, s).value_or(0);
  // A row shorter than two vectors that continues into the next reduced axes (a convolution
  // weight's sums over [C, 3, 3]) is one row of them all: the domain's variables fused, loaded as
  // contiguous vectors. Looped over as they are, each vector of outputs gathered its lanes a whole
  // row apart (a 512 x 512 x 3 x 3 weight on Zen 3: 8-16 ms, fused 0.1 ms).
  RVar along = s.rvars.empty() ? RVar() : s.rvars[0];
  if (const auto [count, elements] = innermost_reduced_block(p, s); row < 2 * vec && count >= 2 && elements >= 2 * vec) {
    for (int i = 1; i < count; ++i) {
      RVar fused(along.name() + "_" + s.rvars[size_t(i)].name());
      u.fuse(along, s.rvars[size_t(i)], fused);
      along = fused;
    }
    row = elements;
    what += "; update fused " + std::to_string(count) + " axes";
  }
  const bool along_rows = row >= 2 * vec;
  if (!s.vars.empty() && s.extents[0] >= vec && !along_rows) {
    // Column reduction: the innermost output dimension is kept: loop the reduction outside it.
    std::vector<VarOrRVar> order{s.vars[0]};
    for (const RVar& r : s.rvars) order.emplace_back(r);
    for (size_t d = 1; d < s.vars.size(); ++d) order.emplace_back(s.vars[d]);
    u.reorder(order);
    return what + "; update " + vectorize_and_parallelize(u, s.vars, s.extents, vec, threads, true, min_points).what;
  }
  // Row reduction: accumulate lanes across the row, then fold the lanes. The lanes divide the row
  // (a guarded last step costs a masked load), halved down to 8; a row only narrower lanes divide
  // takes a whole vector with its last step guarded (a 7x7 or 13x13 image's global average pool,
  // 49 or 169: one lane, or 4, at a time before; EfficientNet-B0's squeeze-excitation pools, 2% of
  // the model). The guard keeps bounds inference within the row: rounded up, the split read
  // past an input's end.
  int lanes_n = vec;
  while (lanes_n >= 4 && row % lanes_n != 0) lanes_n /= 2;
  const bool guarded = lanes_n < std::min(vec, 8) && row >= 2 * vec;
  if (guarded) lanes_n = vec;
  std::optional<FuncRef> lanes;
  if (!tuple && row >= 2 * lanes_n && lanes_n >= 4) {
    RVar ro(along.name() + "_o"), ri(along.name() + "_i");
    Var lane("lane");
    u.split(along, ro, ri, lanes_n, guarded ? Halide::TailStrategy::GuardWithIf : Halide::TailStrategy::Auto);
    lanes = u.rfactor(ri, lane);
    lanes->vectorize(lane);
    lanes->update().vectorize(lane);
    // The lanes folded in a tree of shuffles (Halide's VectorReduce), not a chain of scalar steps:
    // a softmax's row of 128 waited on two chains of 16 dependent steps (its max, then its sum).
    u.atomic().vectorize(ri);
    what += "; update rfactor(" + std::to_string(lanes_n) + (guarded ? " lanes, the last step guarded)" : " lanes)") + ", folded as a tree";
  }
  // One output dimension (the rows of a matrix, summed or searched): its rows in parallel chunks,
  // each row's lanes summed where it is (vectorize_and_parallelize parallelizes a single dimension
  // only in vectors, which an update of rows does not have).
  const int64_t chunk = s.vars.size() == 1 && row > 0 ? s.extents[0] / (4 * threads) : 0;
  if (chunk >= 1 && threads > 1 && s.extents[0] * row >= (int64_t(1) << 14)) {
    Var o(s.vars[0].name() + "_o"), i(s.vars[0].name() + "_i");
    u.split(s.vars[0], o, i, int(chunk), Halide::TailStrategy::GuardWithIf);
    u.parallel(o);
    if (lanes) lanes->compute_at(acc, i);
    return what + "; update par(chunks of " + std::to_string(chunk) + ")";
  }
  if (lanes) lanes->compute_at(acc, s.vars.empty() ? Var::outermost() : s.vars[0]);
  return what + "; update " + vectorize_and_parallelize(u, s.vars, s.extents, 1, threads, true, min_points).what;
}

namespace {
// A sorting network's steps over one row or few: the row in parallel chunks that divide it exactly
// (its length a power of two), or 0 where vectorize_and_parallelize's nest serves. Its guarded
// chunks (the partner loads clamped across chunks) made Halide 14 fail in codegen ("Unknown
// intrinsic unreachable", topk over 50257 logits); on one thread, the 137 steps' constant-size
// buffers went on the stack and overflowed it.
int64_t exact_row_chunk(const backend::Helper& h, int vec) {
  const int threads = halide_threads();
  int64_t rows = 1;
  for (size_t d = 1; d < h.extents.size(); ++d) rows *= h.extents[d];
  const int64_t row = h.extents.empty() ? 0 : h.extents[0];
  int64_t chunk = vec;
  while (chunk * 2 * 4 * threads <= row) chunk *= 2;
  return rows < 2 * threads && row >= 2 * vec * threads && row % chunk == 0 ? chunk : 0;
}
}  // namespace

namespace {
// A sorting network's steps in a loop (lower_ops.cpp: r.x the pairs along the row, r.y the
// steps, each reading one copy of the row and writing the other). Along a row in memory: a step's
// pairs vectorized; rows along another axis: the innermost one's vectorized inside each step. The
// rows in parallel, each task running every step of its rows, where there are enough of them (the
// dimensions outside the row fused); else a long row's steps in parallel chunks. A parallel loop a
// step is a barrier a step: top-k's sort of GPT-2's logits in 50 blocks of 1,024 ran 2,750 of
// them a token (55 steps of 64 vectors each, 9 ms a decode step of 3.4).
constexpr int64_t kParallelStep = int64_t(1) << 15;  // the shortest row whose steps are split
std::string schedule_sort_network(const backend::LoweredPipeline& p, const backend::Helper& h, FuncRef& f) {
  const int threads = halide_threads(), vec = vector_width(p.target, h.func.output_types()[0]);
  const Halide::RVar& at = h.rvars[0];
  const std::vector<Halide::Expr> args = h.func.update_args(0);
  size_t axis = 0;  // the sorted axis: where the update writes at r.x
  for (size_t d = 0; d < args.size(); ++d)
    if (const auto* v = args[d].as<Halide::Internal::Variable>(); v && v->name == at.name()) axis = d;
  const int64_t padded = h.extents[axis];
  // The rows: every dimension but the sorted one and the copies (the last); the update's own
  // loops over them, outside its steps, are those after the innermost (a vector's lanes where the
  // axis is another).
  int64_t row_count = 1, outer_rows = 1;
  std::vector<Var> outer;
  for (size_t d = 0; d + 1 < h.vars.size(); ++d) {
    if (d == axis) continue;
    row_count *= h.extents[d];
    if (d > 0) outer_rows *= h.extents[d], outer.push_back(h.vars[d]);
  }
  if (h.extents[0] >= vec) f.vectorize(h.vars[0], vec);
  StageRef u = f.update();
  std::string what = " sort network: root, steps in a loop";
  const bool rows_parallel = threads > 1 && outer_rows >= 2 * threads;
  if (axis == 0) {
    if (padded >= vec) {
      u.allow_race_conditions();
      if (!rows_parallel && threads > 1 && padded >= kParallelStep) {
        int64_t chunk = vec;  // a power of two, as the row: the chunks divide it
        while (chunk * 2 * 4 * threads <= padded) chunk *= 2;
        Halide::RVar o(at.name() + "_o"), i(at.name() + "_i");
        u.split(at, o, i, int(chunk)).vectorize(i, vec).parallel(o);
        what += ", each step's pairs vec" + std::to_string(vec) + " par(exact chunks of " + std::to_string(chunk) + ")";
      } else {
        u.vectorize(at, vec);
        what += ", each step's pairs vec" + std::to_string(vec);
      }
    }
  } else if (h.extents[0] >= vec) {
    u.reorder(h.vars[0], at, h.rvars[1]).vectorize(h.vars[0], vec, Halide::TailStrategy::GuardWithIf);
    what += ", rows vec" + std::to_string(vec) + " inside each step";
  }
  if (rows_parallel) {
    const Var rows = fuse_all(u, outer);
    u.parallel(rows);
    what += " par(" + rows.name() + ")";
  }
  return what + " (" + std::to_string(row_count) + (row_count == 1 ? " row)" : " rows)");
}

// Whether the schedule computes f somewhere already (a helper placed in a tile).
bool placed(const Schedule& out, const Halide::Func& f) {
  const std::string name = backend::canonical_name(f.name());
  return std::any_of(out.directives.begin(), out.directives.end(),
                     [&](const backend::Directive& d) { return d.func == name && (d.verb == "compute_at" || d.verb == "compute_root"); });
}
}  // namespace

std::string schedule_helpers_at_root(const backend::LoweredPipeline& p, const backend::Stage& s, Schedule& out) {
  std::string what;
  for (const backend::Helper& h : s.helpers) {
    if (!h.stored || placed(out, h.func)) continue;
    FuncRef f(&out, h.func);
    f.compute_root();
    if (h.role == "lane extremes") {
      // An argmax's searches along its rows (lane i: elements i, i + 16, ... of a row): the lanes
      // one vector, stepping along the row, the rows in turn (in parallel where there are many).
      StageRef u = f.update();
      std::vector<VarOrRVar> order{h.vars[0], h.rvars[0]};
      for (size_t d = 1; d < h.vars.size(); ++d) order.emplace_back(h.vars[d]);
      f.vectorize(h.vars[0]);
      u.reorder(order).vectorize(h.vars[0]);
      int64_t rows = 1;
      for (size_t d = 1; d < h.extents.size(); ++d) rows *= h.extents[d];
      const bool parallel = h.vars.size() > 1 && halide_threads() > 1 && h.extents.back() >= 2 * halide_threads();
      if (parallel) f.parallel(h.vars.back()), u.parallel(h.vars.back());
      what += " " + h.role + ": root vec" + std::to_string(h.extents[0]) + (parallel ? " par(" + h.vars.back().name() + ")" : "") + " (" +
              std::to_string(rows) + (rows == 1 ? " row)" : " rows)");
      continue;
    }
    if (h.role == "sort network") {
      what += schedule_sort_network(p, h, f);
      continue;
    }
    const int vec = vector_width(p.target, h.func.output_types()[0]);
    if (h.role.rfind("sort", 0) == 0)
      if (const int64_t chunk = exact_row_chunk(h, vec)) {
        Var o(h.vars[0].name() + "_o"), i(h.vars[0].name() + "_i");
        f.split(h.vars[0], o, i, int(chunk), Halide::TailStrategy::RoundUp).vectorize(i, vec).parallel(o);
        what += " " + h.role + ": root vec" + std::to_string(vec) + " par(exact chunks of " + std::to_string(chunk) + ")";
        continue;
      }
    // A padded copy's rows (clamped reads, the border filled) end in a guarded vector: with the
    // last vector shifted inwards every vector starts at a min(), which kept Halide from
    // partitioning the row into border and interior, and each of its vectors gathered lane by
    // lane (MobileNet V2's depthwise inputs, 113 and 114 wide: 6.0-6.2 -> 5.5-5.7 ms). Rounded up
    // instead, the rows of 58 and 30 became 64 and 32 wide, and ResNet-50 4% slower.
    const Halide::TailStrategy tail = h.role == "padded" || h.role == "padded pairs" ? Halide::TailStrategy::GuardWithIf : Halide::TailStrategy::Auto;
    std::vector<Var> vars = h.vars;
    Shape extents = h.extents;
    while ((h.role.ends_with("pairs") || h.role == "wide input" || h.role == "weights by channel") && vars.size() >= 2 && extents[0] < vec) {
      // A dot product's pairs (or an integer convolution's fours of channels, widened), innermost
      // and shorter than a vector: fused with the next dimensions until they fill one, the vectors
      // interleave them (a bf16 3x3 convolution of 64 channels at 56 x 56: 0.585 -> 0.570 ms; an
      // RGB stem's one four of channels with its columns, where it was copied element by element).
      Var fused(vars[0].name() + "_" + vars[1].name());
      f.fuse(vars[0], vars[1], fused);
      vars.erase(vars.begin()), extents[1] *= extents[0], extents.erase(extents.begin());
      vars[0] = fused;
    }
    what += " " + h.role + ": root " + vectorize_and_parallelize(f, vars, extents, vec, halide_threads(), false, 1 << 14, 8, tail).what;
    if (h.func.has_update_definition())
      what += " update " + vectorize_and_parallelize(f.update(), h.vars, h.extents, 1, halide_threads(), true).what;
  }
  return what;
}

std::string schedule_rows_in_fours(const backend::LoweredPipeline& p, const backend::Stage& s, FuncRef nest, Var tile,
                                   bool input_channels_innermost, Schedule& out) {
  std::string what;
  for (const backend::Helper& h : s.helpers) {
    if (h.role != "channels innermost input" || input_channels_innermost) continue;
    // Copied from NCHW in tiles of 16 x 16 (channels by columns): a tile reads 16 rows of 16
    // columns and writes 16 channel vectors.
    FuncRef f(&out, h.func);
    f.compute_root();
    f.reorder_storage({h.vars[0], h.vars[1], h.vars[2], h.vars[3]});
    what += " input copied channels innermost: " + transpose_tiles(f, h.vars, h.extents, 1, 16, halide_threads(), 1 << 14).what + ";";
  }
  for (const backend::Helper& h : s.helpers) {
    if (h.role != "rows in fours" && h.role != "rows in pairs") continue;
    // Loops: the channels in vectors innermost, the four (two) rows unrolled around them: Halide
    // writes the strided stores of a channel vector as one store of the rows interleaved, which
    // the dot products then read whole (four rows of a channel in each 32-bit lane).
    FuncRef f(&out, h.func);
    const Var &k = h.vars[0], &c = h.vars[1], co(c.name() + "_o"), ci(c.name() + "_i");
    const int vec = std::min<int>(vector_width(p.target, Halide::Int(32)), int(h.extents[1]));
    f.compute_at(nest, tile);
    f.split(c, co, ci, vec).reorder({ci, k, co}).vectorize(ci).unroll(k);
    return what + " " + h.role + ": per tile, vec" + std::to_string(vec) + " by " + std::to_string(h.extents[0]) + " rows interleaved";
  }
  return what;
}

}  // namespace hjit::schedules
