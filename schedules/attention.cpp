#include "schedules/attention.h"

#include <optional>

#include "schedules/loop_nest.h"
#include "schedules/schedule.h"

namespace hjit::schedules {

using Halide::Var;

std::string schedule_attention_helpers(const backend::LoweredPipeline& p, const backend::Stage& s, const FuncRef& nest,
                                       Var row_tile, const TileSpec& spec, Schedule& out) {
  std::string what;
  std::optional<FuncRef> scores;  // dynamic sizes: the scores, computed in blocks of keys
  const Var scores_block("jo");
  for (const backend::Helper& h : s.helpers) {
    FuncRef f(&out, h.func);
    const int vec = vector_width(p.target, h.func.output_types()[0]);
    const Var& j = h.vars[0];
    if (h.role == "keys_t") {
      f.compute_root();
      what += " keys_t: root " + vectorize_and_parallelize(f, h.vars, h.extents, vec, halide_threads()).what;
      continue;
    }
    if (h.role == "scores_acc") {
      // A block's dot products, as the scores' own below: keys vectorized, the block's vectors
      // and the tile's rows unrolled, accumulating in registers over the head dimension.
      f.compute_at(*scores, scores_block);
      f.vectorize(j, vec);
      StageRef u = f.update();
      Var jv("jv");
      u.split(j, j, jv, vec).reorder(jv, j, h.vars[1], h.rvars[0]).vectorize(jv).unroll(j);
      if (spec.tu > 1) u.unroll(h.vars[1]);
      what += " scores_acc: per block of keys;";
      continue;
    }
    f.compute_at(nest, row_tile);
    if (h.role == "scores" && h.rvars.empty()) {
      const int jt = 2 * vec;
      Var ji("ji");
      f.split(j, scores_block, ji, jt).reorder(ji, h.vars[1], scores_block).vectorize(ji, vec);
      scores.emplace(f);
      what += " scores: per row tile, in blocks of " + std::to_string(jt) + " keys;";
      continue;
    }
    if (h.role == "scores") {
      // The row tile's scores: a small matmul, keys vectorized, the tile's query rows unrolled.
      const int64_t T = h.extents[0];
      const int jt = int(T >= 2 * vec ? 2 * vec : T >= vec ? vec : T);
      Var jo("jo"), ji("ji");
      StageRef u = f.update();
      u.split(j, jo, ji, jt).reorder(ji, h.vars[1], h.rvars[0], jo);
      if (jt >= vec) {
        f.vectorize(j, vec);
        u.vectorize(ji, vec).unroll(ji);
      }
      if (spec.tu > 1) u.unroll(h.vars[1]);
    } else if (h.role == "probs" && h.extents[0] >= vec) {
      f.vectorize(j, vec);
    }
    what += " " + h.role + ": per row tile";
  }
  return what;
}

}  // namespace hjit::schedules
