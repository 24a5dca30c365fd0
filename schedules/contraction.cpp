#include "schedules/contraction.h"

#include <algorithm>

#include "schedules/class_rules.h"
#include "schedules/loop_nest.h"
#include "schedules/schedule.h"
#include "schedules/stage_info.h"

namespace hjit::schedules {

using Halide::Var;
using Halide::VarOrRVar;

std::pair<int, int> matmul_register_tile(const Halide::Target& target) {
  const bool many_registers = target.has_feature(Halide::Target::AVX512) || target.arch == Halide::Target::ARM;
  return many_registers ? std::pair{3, 8} : std::pair{2, 6};
}

namespace {
// Row tiles per block: as many as keep every thread busy, so that each panel is packed by as few
// blocks as possible (measured on W3, Zen 5: one block per thread 381 GFLOP/s, blocks of 128 rows
// that fit the L2 cache 351). Other dimensions (a batch, heads) count as blocks of their own.
int64_t row_tiles(const backend::Stage& s, const TileSpec& spec) {
  return (s.extents[size_t(spec.unrolled)] + spec.tu - 1) / spec.tu;
}
// The iterations of the dimensions outside the tile's two (a batch, heads).
int64_t other_iterations(const backend::Stage& s, const TileSpec& spec) {
  int64_t others = 1;
  for (size_t d = 0; d < s.extents.size(); ++d)
    if (int(d) != spec.inner && int(d) != spec.unrolled) others *= s.extents[d];
  return others;
}

int row_block(const backend::Stage& s, const TileSpec& spec, int threads) {
  const int64_t row_tiles = schedules::row_tiles(s, spec), others = other_iterations(s, spec);
  const int64_t blocks = std::clamp<int64_t>((threads + others - 1) / others, 1, row_tiles);
  const int64_t per_block = (row_tiles + blocks - 1) / blocks;
  // A panel read by one row tile only is not worth its copy.
  return per_block >= 2 ? int(per_block) : 0;
}
// The fewest elements computed twice when n is cut in tiles of k.
int64_t waste(int64_t n, int64_t k) { return (n + k - 1) / k * k - n; }

// Output channels in vectors times output columns. Images narrower than two vectors waste lanes
// along their rows (a 7-wide row in 16 lanes; ResNet-18's last stage ran at 80 GFLOP/s) but have
// channels to spare: the tile takes as many channel vectors (at most 3) and columns as the
// accumulators allow, both cut with the least recomputed.
TileSpec channel_tiles(int64_t width, int64_t channels, int vec, int accumulators) {
  TileSpec spec;
  spec.inner = 2, spec.unrolled = 0, spec.channels = true;
  int vectors = 1;
  for (int c : {2, 3})
    if (channels >= int64_t(c) * vec && waste(channels, int64_t(c) * vec) <= waste(channels, int64_t(vectors) * vec)) vectors = c;
  spec.tx = vectors * vec, spec.vec = vec;
  int columns = 1;
  for (int k = 2; k <= std::min<int64_t>(width, accumulators / vectors); ++k)
    if (waste(width, k) <= waste(width, columns)) columns = k;
  spec.tu = columns;
  return spec;
}
}  // namespace

TileSpec tile_spec(const backend::LoweredPipeline& p, const backend::Stage& s, const BuiltinParams& params) {
  const int vec = vector_width(p.target, value_type(s));
  const Tile tile = cpu_rules(s.op).tile;
  const auto [kernel_cols, kernel_rows] = matmul_register_tile(p.target);
  int cols = params.cols > 0 ? params.cols : tile == Tile::Matmul ? kernel_cols : 2;
  TileSpec spec;
  auto columns = [&](int64_t n) {
    for (int c = cols; c >= 1; --c)
      if (n >= int64_t(c) * vec) return c * vec;
    return int(n);
  };
  auto rows = [&](int fallback) { return params.rows > 0 ? params.rows : fallback; };
  if (tile == Tile::ConvolutionWeightGrad) {
    // A vector of output channels times one input value; the kernel window and two input
    // channels of accumulators stay in registers while the sum over positions and images runs.
    const bool small_kernel = s.extents[0] * s.extents[1] <= 9;
    spec.inner = 3, spec.unrolled = 2;
    spec.tx = int(s.extents[3] >= vec ? vec : s.extents[3]);
    spec.tu = int(std::min<int64_t>(small_kernel ? 2 : 1, s.extents[2]));
    if (small_kernel) spec.whole = {0, 1};
  } else if (tile == Tile::Convolution) {
    // Width vectorized, times output rows, times output channels, all unrolled: per reduction step
    // one input vector per row feeds a weight broadcast per channel. Rows and channels share the
    // accumulators the registers hold (24 with AVX-512, 12 with AVX2); W8's 3x3 conv on Zen 5:
    // 228 GFLOP/s as 16 x 8 channels, 344 as 16 x 4 rows x 6 channels. A row narrower than a
    // vector (the 14 and 7 of a classifier's last stages) takes the widest vector that fits, the
    // last one shifted inwards over the one before, rather than scalar code.
    const int64_t width = s.extents[0], channels = s.extents[2];
    const Attrs& attrs = p.graph->node(s.node).attrs;
    const bool grouped = !attrs.has("groups") || attrs.i("groups") != 1;
    if (s.extents.size() == 4 && width < 2 * vec && channels >= 2 * vec && !grouped && params.cols == 0 && params.rows == 0)
      return channel_tiles(width, channels, vec, kernel_cols * kernel_rows);
    spec.inner = 0, spec.unrolled = 2;
    int lanes = vec;
    while (lanes > 4 && s.extents[0] < lanes) lanes /= 2;
    spec.tx = int(s.extents[0] >= lanes ? lanes : s.extents[0]);
    const int accumulators = kernel_cols * kernel_rows;
    const int64_t height = s.extents.size() == 4 ? s.extents[1] : 1;
    // Rows share a kernel's loads of one input row: up to 4 for kernels taller than 3 (the 7x7
    // stem: 282 against 214 GFLOP/s with 2), 2 for 3x3 and 1x1, where 4 took twice as long to
    // lower (W8: 390 against 255 ms) for no speed (5.90 against 5.73 ms).
    const int64_t kernel_height = p.graph->type(p.graph->node(s.node).inputs[1]).shape[2];
    const std::vector<int> candidates = kernel_height > 3 ? std::vector<int>{4, 3, 2} : std::vector<int>{2};
    int tile_rows = 1;
    for (int r : candidates) {  // the fewest rows computed twice by the last tile; then the taller
      auto waste = [&](int k) { return (height + k - 1) / k * k - height; };
      if (height >= r && (tile_rows == 1 || waste(r) < waste(tile_rows))) tile_rows = r;
    }
    if (tile_rows > 1) spec.second = 1, spec.ts = tile_rows;
    spec.tu = int(std::min<int64_t>(rows(std::min(8, accumulators / tile_rows)), s.extents[2]));
  } else {
    // Matmul and attention: columns x rows; attention keeps fewer rows (its scores are per row).
    spec.inner = 0, spec.unrolled = 1;
    spec.tu = int(std::min<int64_t>(rows(tile == Tile::Attention ? 4 : kernel_rows), s.extents[1]));
    // Fewer rows than the kernel's (batch-1 inference, a matrix-vector product): the accumulators
    // the rows leave go to columns, so that enough FMA chains run side by side.
    if (tile == Tile::Matmul && params.cols == 0 && spec.tu < kernel_rows)
      cols = std::clamp(kernel_cols * kernel_rows / spec.tu, kernel_cols, 8);
    spec.tx = columns(s.extents[0]);
    // Dynamic sizes keep unblocked tiles: a block's split would raise the smallest size served.
    const bool varies = p.dynamic && p.dynamic->extent_varies(s.node);
    const int threads = halide_threads();
    if (tile == Tile::Matmul && spec.tx % vec == 0 && !varies) spec.block = row_block(s, spec, threads);
    // Too few row tiles (times batches) for the threads: the column tiles run in parallel instead.
    const int64_t row_tasks = row_tiles(s, spec) * other_iterations(s, spec);
    if (tile == Tile::Matmul && spec.block == 0 && row_tasks < threads && s.extents[0] >= 2 * int64_t(spec.tx))
      spec.columns_parallel = true;
  }
  spec.vec = spec.tx >= vec ? vec : spec.tx >= 4 && (spec.tx & (spec.tx - 1)) == 0 ? spec.tx : 0;
  return spec;
}

namespace {
std::string tile_text(const TileSpec& spec) {
  return std::to_string(spec.tx) + (spec.second >= 0 ? "x" + std::to_string(spec.ts) : "") + "x" + std::to_string(spec.tu);
}

int64_t points(const Shape& extents) {
  int64_t work = 1;
  for (int64_t e : extents) work *= e;
  return work;
}

// What every tiled nest ends with: `par` in parallel where there is work enough, the tile's
// columns vectorized and its rows unrolled.
TiledNest finish_tiles(FuncRef f, const Shape& extents, const TileSpec& spec, Var ii, Var ui, Var par, int threads,
                       int64_t min_parallel_work, const std::string& how) {
  const bool parallel = points(extents) >= min_parallel_work;
  if (parallel && threads > 1) f.parallel(par);
  if (spec.vec > 0) f.vectorize(ii, spec.vec);
  f.unroll(ui);
  TiledNest t;
  t.tile = par, t.parallel = par;
  t.what = "tiles " + tile_text(spec) + how + (parallel ? " par" : "");
  return t;
}

// Loops, innermost first: the tile (ii, ui), the row tiles of a block, the column panels, then the
// blocks fused with every other dimension, in parallel. The rows are cut in blocks first, each a
// whole number of tiles, the last shifted inwards over the one before: every block runs the same
// loop, compiled once. (Blocks cut from the row tiles had to be guarded, since Halide 14 rounds a
// split of a split's outer loop up and the last block computed rows past the end; Halide then
// compiled the kernel twice, for the full blocks and the last: a matmul of 1024 rows in tiles of 6,
// 171 tiles in blocks of 86, took 160 ms to compile against 100 for 1032 rows.)
TiledNest tile_blocks(FuncRef f, const std::vector<Var>& vars, const Shape& extents, const TileSpec& spec, Var io,
                      Var ii, Var unrolled, Var ut, Var ui, int threads, int64_t min_parallel_work) {
  Var ub(unrolled.name() + "_tb"), ur(unrolled.name() + "_r");
  // (One block is every row: its tiles' split then has the tail, shifted inwards like any.)
  const int64_t block_rows = std::min<int64_t>(int64_t(spec.block) * spec.tu, extents[size_t(spec.unrolled)]);
  f.split(unrolled, ub, ur, int(block_rows), Halide::TailStrategy::ShiftInwards).split(ur, ut, ui, spec.tu);
  std::vector<VarOrRVar> order{ii, ui, ut, io};
  Var par = ub;
  for (size_t d = 0; d < vars.size(); ++d) {
    if (int(d) == spec.inner || int(d) == spec.unrolled) continue;
    Var fused(par.name() + "_" + vars[d].name());
    f.fuse(par, vars[d], fused);
    par = fused;
  }
  order.emplace_back(par);
  // (the fuses above leave the block loop outermost; reorder names the fused loop)
  f.reorder(order);
  TiledNest t = finish_tiles(f, extents, spec, ii, ui, par, threads, min_parallel_work,
                             " in blocks of " + std::to_string(spec.block));
  t.tile = ut, t.panel = io;
  return t;
}
}  // namespace

TiledNest tile_nest(FuncRef f, const std::vector<Var>& vars, const Shape& extents, const TileSpec& spec, int vec,
                    int threads, int64_t min_parallel_work) {
  const Var &inner = vars[size_t(spec.inner)], &unrolled = vars[size_t(spec.unrolled)];
  Var io(inner.name() + "_t"), ii(inner.name() + "_i"), uo(unrolled.name() + "_t"), ui(unrolled.name() + "_i");
  f.split(inner, io, ii, spec.tx);
  if (spec.block > 0) return tile_blocks(f, vars, extents, spec, io, ii, unrolled, uo, ui, threads, min_parallel_work);
  f.split(unrolled, uo, ui, spec.tu);
  if (spec.channels) {
    // The tile (channel lanes by columns), the column tiles, rows, images, then the channel tiles,
    // in parallel: each channel tile's weights are copied once and read from cache for the image.
    f.reorder({ii, ui, uo, vars[1], vars[3], io});
    TiledNest t = finish_tiles(f, extents, spec, ii, ui, io, threads, min_parallel_work, " over channels");
    t.tile = uo, t.panel = io;
    return t;
  }
  Var so, si;
  if (spec.second >= 0) {
    const Var& second = vars[size_t(spec.second)];
    so = Var(second.name() + "_t"), si = Var(second.name() + "_i");
    f.split(second, so, si, spec.ts);
  }
  if (spec.columns_parallel) {
    // The tile innermost, then the other loops (a row tile or few), then the column tiles, in
    // parallel.
    std::vector<VarOrRVar> order{ii, ui};
    for (size_t d = 0; d < vars.size(); ++d)
      if (int(d) != spec.inner) order.emplace_back(int(d) == spec.unrolled ? uo : vars[d]);
    order.emplace_back(io);
    f.reorder(order);
    return finish_tiles(f, extents, spec, ii, ui, io, threads, min_parallel_work, " over columns");
  }
  // Loops: the tile (ii, si, ui) innermost, then the tiles of `inner`, then every other dimension
  // in its own order with the tiles of `unrolled` and `second` in place of them.
  auto is_whole = [&](size_t d) { return std::find(spec.whole.begin(), spec.whole.end(), int(d)) != spec.whole.end(); };
  std::vector<VarOrRVar> order{ii};
  for (int d : spec.whole) order.emplace_back(vars[size_t(d)]);
  if (spec.second >= 0) order.emplace_back(si);
  order.emplace_back(ui);
  order.emplace_back(io);
  std::vector<Var> outer;
  for (size_t d = 0; d < vars.size(); ++d)
    if (int(d) != spec.inner && !is_whole(d))
      outer.push_back(int(d) == spec.unrolled ? uo : int(d) == spec.second ? so : vars[d]);
  for (const Var& v : outer) order.emplace_back(v);
  f.reorder(order);
  Var par = outer.front();
  for (size_t d = 1; d < outer.size(); ++d) {
    Var fused(par.name() + "_" + outer[d].name());
    f.fuse(par, outer[d], fused);
    par = fused;
  }
  TiledNest t = finish_tiles(f, extents, spec, ii, ui, par, threads, min_parallel_work, "");
  if (spec.second >= 0) f.unroll(si);
  for (int d : spec.whole) f.unroll(vars[size_t(d)]);
  t.tile = io;
  return t;
}

std::string schedule_contraction_tile(const backend::LoweredPipeline& p, const backend::Stage& s, const TileSpec& spec,
                                      Schedule& out) {
  FuncRef acc(&out, s.reduction);
  StageRef u = acc.update();
  const Var &inner = s.vars[size_t(spec.inner)], &unrolled = s.vars[size_t(spec.unrolled)];
  auto is_whole = [&](size_t d) { return std::find(spec.whole.begin(), spec.whole.end(), int(d)) != spec.whole.end(); };
  std::vector<VarOrRVar> order{inner};
  for (int d : spec.whole) order.emplace_back(s.vars[size_t(d)]);
  if (spec.second >= 0) order.emplace_back(s.vars[size_t(spec.second)]);
  order.emplace_back(unrolled);
  for (const Halide::RVar& r : s.rvars) order.emplace_back(r);
  for (size_t d = 0; d < s.vars.size(); ++d)
    if (int(d) != spec.inner && int(d) != spec.unrolled && int(d) != spec.second && !is_whole(d)) order.emplace_back(s.vars[d]);
  u.reorder(order);
  if (spec.inner != 0) {
    // The vectorized dimension innermost in memory too: each accumulator one register.
    std::vector<Var> storage{inner};
    for (size_t d = 0; d < s.vars.size(); ++d)
      if (int(d) != spec.inner) storage.push_back(s.vars[d]);
    acc.reorder_storage(storage);
  }
  for (int d : spec.whole) {
    acc.unroll(s.vars[size_t(d)]);
    u.unroll(s.vars[size_t(d)]);
  }
  if (spec.vec > 0) {
    acc.vectorize(inner, spec.vec).unroll(inner);
    u.vectorize(inner, spec.vec).unroll(inner);
  }
  acc.unroll(unrolled);
  u.unroll(unrolled);
  if (spec.second >= 0) {
    acc.unroll(s.vars[size_t(spec.second)]);
    u.unroll(s.vars[size_t(spec.second)]);
  }
  // A convolution's narrow kernel row is unrolled too (3 loads of one input row per channel).
  // (With rows in the tile too, the tile alone has work enough: unrolling the row as well tripled
  // W8's lowering time for no speed.)
  if (cpu_rules(s.op).tile == Tile::Convolution && spec.second < 0 && !spec.channels &&
      p.graph->type(p.graph->node(s.node).inputs[1]).shape[3] <= 7)
    u.unroll(s.rvars[0]);
  return "tile " + tile_text(spec) + (spec.vec > 0 ? " vec" + std::to_string(spec.vec) : "");
}

}  // namespace hjit::schedules
