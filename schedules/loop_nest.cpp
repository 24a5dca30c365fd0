#include "schedules/loop_nest.h"

#include <algorithm>

namespace hjit::schedules {

using Halide::TailStrategy;
using Halide::Var;

Var fuse_all(StageRef stage, const std::vector<Var>& vars) {
  Var fused = vars.back();
  for (size_t k = vars.size() - 1; k-- > 0;) {
    Var next(fused.name() + "_" + vars[k].name());
    stage.fuse(vars[k], fused, next);
    fused = next;
  }
  return fused;
}

int vector_width(const Halide::Target& target, const Halide::Type& t) {
  // Bools are stored as bytes, but computed next to the values they select: size them as 32-bit.
  Halide::Type sized = t.is_bool() ? Halide::UInt(32) : t;
  return std::max(1, target.natural_vector_size(sized));
}

LoopNest vectorize_and_parallelize(StageRef stage, const std::vector<Var>& vars, const Shape& extents, int vec,
                                   int threads, bool update, int64_t min_parallel_work,
                                   int tasks_per_thread, TailStrategy pure_tail) {
  const TailStrategy tail = update ? TailStrategy::GuardWithIf : pure_tail;
  // An update's vectors divide its row, narrower if need be: Halide 14 lost the lanes of a guarded
  // vector tail of an update on AVX2 (argmax's last column came out 0, a softmax gradient's NaN),
  // and an update cannot shift its tail inwards (it would apply twice).
  if (update)
    while (vec > 1 && !extents.empty() && extents[0] % vec != 0) vec /= 2;
  // A row shorter than the natural vector (56 bytes against AVX-512's 64) takes a narrower one
  // rather than none: a quantized network's u8 activations 56 wide ran scalar.
  while (vec > 8 && !extents.empty() && extents[0] < vec) vec /= 2;
  LoopNest nest;
  if (vars.empty()) return LoopNest{"scalar", false, Var()};
  std::string& what = nest.what;
  if (vars.size() > 1) nest.has_row = true, nest.row = vars[1];
  int64_t total = 1;
  for (int64_t e : extents) total *= e;
  const bool parallel = total >= min_parallel_work && threads > 1;
  const size_t rank = vars.size();

  if (rank == 1 || (parallel && total / extents[0] < 2 * threads)) {
    // Few or no outer iterations: split the innermost dimension into parallel chunks.
    Var inner = vars[0];
    int64_t per_task = std::max<int64_t>(vec, (extents[0] / (4 * threads) + vec - 1) / vec * vec);
    if (update && vec > 1)
      while (extents[0] % per_task != 0) per_task -= vec;  // no guarded last chunk: vec divides the row
    if (parallel && vec > 1 && extents[0] >= 2 * vec * threads) {
      Var outer(vars[0].name() + "_o"), chunk(vars[0].name() + "_i");
      // A pure stage's last chunk shifts inwards (overlapping the one before it, whose values it
      // writes again): guarded, where the rest was a whole number of vectors and the values read
      // came from a stored stage, Halide 14 dropped the guard and the chunk ran whole, past the
      // buffer's end (an argmax of 20000 rows, in chunks of 2528, wrote 224 elements past its
      // output). An update's chunks divide its row: no tail.
      stage.split(vars[0], outer, chunk, int(per_task), update ? TailStrategy::GuardWithIf : TailStrategy::ShiftInwards);
      stage.vectorize(chunk, vec);
      stage.parallel(outer);
      what = "vec" + std::to_string(vec) + " par(chunks of " + std::to_string(per_task) + ")";
      return nest;
    }
    if (vec > 1 && extents[0] >= vec) stage.vectorize(inner, vec, tail), what = "vec" + std::to_string(vec);
    if (parallel && rank > 1) {
      stage.parallel(vars[rank - 1]);
      what += " par(" + vars[rank - 1].name() + ")";
      if (rank == 2) nest.row = vars[1];
    }
    if (what.empty()) what = "serial";
    return nest;
  }

  if (vec > 1 && extents[0] >= vec) {
    stage.vectorize(vars[0], vec, tail);
    what = "vec" + std::to_string(vec);
  }
  if (parallel) {
    // Fuse outer dimensions (outermost first) until there are enough tasks.
    Var par = vars[rank - 1];
    int64_t tasks = extents[rank - 1];
    std::string names = par.name();
    const int64_t wanted = int64_t(tasks_per_thread) * threads;
    for (size_t d = rank - 1; d-- > 1 && tasks < wanted;) {
      // A long dimension fused whole overshoots: an int8 attention's queries, 8 heads x 128 rows of
      // 32 bytes, ran as 1024 tasks of one vector each, as long as the task's own bookkeeping.
      // Only as many of its slices as the tasks need join the parallel loop (with a quarter of the
      // grain a task at least), and the rest stays a serial loop inside each task.
      const int64_t min_task_points = std::max<int64_t>(1, min_parallel_work / 4);
      const int64_t slices = std::max((wanted + tasks - 1) / tasks, (total + tasks * min_task_points - 1) / (tasks * min_task_points));
      if (4 * slices <= extents[d]) {
        const int64_t per_slice = (extents[d] + slices - 1) / slices;
        Var outer(vars[d].name() + "_s"), inner(vars[d].name() + "_r"), fused(par.name() + "_" + outer.name());
        stage.split(vars[d], outer, inner, int(per_slice), TailStrategy::GuardWithIf);
        stage.fuse(outer, par, fused);
        par = fused;
        if (d == 1) nest.row = inner;
        tasks *= (extents[d] + per_slice - 1) / per_slice;
        names += "," + vars[d].name() + "/" + std::to_string(per_slice);
        break;
      }
      Var fused(par.name() + "_" + vars[d].name());
      stage.fuse(vars[d], par, fused);
      par = fused;
      if (d == 1) nest.row = fused;
      tasks *= extents[d];
      names += "," + vars[d].name();
    }
    stage.parallel(par);
    what += (what.empty() ? "" : " ") + std::string("par(") + names + ")";
  }
  if (what.empty()) what = "serial";
  return nest;
}

LoopNest transpose_tiles(StageRef stage, const std::vector<Var>& vars, const Shape& extents, int j, int vec, int threads,
                         int64_t min_parallel_work) {
  // At most 16 x 16: a tile is one shuffle of its vec vectors, and LLVM's time on it grows fast
  // with the lanes. An i8 cache's keys transposed in 64 x 64 tiles of bytes (a 512-bit vector's
  // lanes) took 78.6 s of code generation for a one-layer GPT-2 prefill, 1.2 s before it.
  vec = std::min(vec, 16);
  // A side no longer than its dimension: a tile wider than its dimension shifts inwards to start
  // before 0 (Halide's tail for a pure stage), and a copy of a parameter then read before its
  // buffer (an int8 depthwise convolution's input of 2 channels, copied in tiles of 16 channels,
  // read 14 channels before it: a crash where that memory was not mapped).
  auto side = [vec](int64_t extent) {
    int s = vec;
    while (s > 1 && s > extent) s /= 2;
    return s;
  };
  const int sx = side(extents[0]), sy = side(extents[size_t(j)]);
  const Var &x = vars[0], &y = vars[size_t(j)];
  Var xo(x.name() + "_t"), xi(x.name() + "_i"), yo(y.name() + "_t"), yi(y.name() + "_i");
  stage.split(x, xo, xi, sx).split(y, yo, yi, sy);
  std::vector<Halide::VarOrRVar> order{xi, yi, xo, yo};
  std::vector<Var> outer{yo};
  for (size_t d = 1; d < vars.size(); ++d)
    if (int(d) != j) order.emplace_back(vars[d]), outer.push_back(vars[d]);
  stage.reorder(order);
  stage.vectorize(xi).unroll(yi);
  int64_t total = 1;
  for (int64_t e : extents) total *= e;
  std::string what = "transposed in tiles " + std::to_string(sx) + "x" + std::to_string(sy) + " vec" + std::to_string(sx);
  if (total >= min_parallel_work && threads > 1) {
    stage.parallel(fuse_all(stage, outer));  // the outermost loop, with the ones inside it fused in up to yo
    what += " par";
  }
  return LoopNest{what, false, Var()};
}

}  // namespace hjit::schedules
