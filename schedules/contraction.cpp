#include "schedules/contraction.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "schedules/class_rules.h"
#include "schedules/loop_nest.h"
#include "schedules/schedule.h"
#include "schedules/stage_info.h"
#include "support/cpu_caches.h"

namespace hjit::schedules {

using Halide::Var;
using Halide::VarOrRVar;

namespace {
int vector_registers(const Halide::Target& target) {
  return target.has_feature(Halide::Target::AVX512) || target.arch == Halide::Target::ARM ? 32 : 16;
}
}  // namespace

std::pair<int, int> matmul_register_tile(const Halide::Target& target, bool dot_products) {
  const bool many_registers = vector_registers(target) == 32;
  // VNNI, 1024^3 on Zen 5, 2 threads (a test kernel): 4 x 6 1105 GOP/s, 2 x 12 1053, 3 x 8 754 (each
  // right-operand vector of 4 x 6 feeds 6 dot products, and the broadcasts of the left one 4).
  if (dot_products && target.has_feature(Halide::Target::AVX512)) return {4, 6};
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
// The most row tiles whose matmul runs its column panels in parallel rather than in row blocks
// (tile_spec).
constexpr int64_t kPanelParallelRowTiles = 32;
// The fewest elements computed twice when n is cut in tiles of k.
int64_t waste(int64_t n, int64_t k) { return (n + k - 1) / k * k - n; }

// Output channels in vectors times output columns. Images narrower than two vectors waste lanes
// along their rows (a 7-wide row in 16 lanes; ResNet-18's last stage ran at 80 GFLOP/s) but have
// channels to spare: the tile takes channel vectors (at most 3) and columns, the last tile of each
// shifted inwards over the one before. Of the tiles the accumulators allow, the one with the most
// useful FMAs a cycle: a step of v vectors by k columns issues v*k FMAs, v loads and k broadcasts,
// and takes at least the FMA latency (4 cycles: 8 accumulators keep two FMA units busy), v*k/2
// cycles of FMAs and (v+k)/2 of loads; only the columns and channels inside the image count. On a
// tie, columns that divide the row (a last tile shifted inwards is a second kernel to compile), then
// the more accumulators. (Cut with the least recomputed instead, a 7-wide row on AVX2 took 2 vectors
// x 1 column, 2 chains: ResNet-50's last 1x1 convolution ran at 31 GFLOP/s.) Zen 3, AVX2, batch 1:
// 7 wide 8x7 (1x1 of 2048 -> 512: 3.3 -> 1.5 ms; 3x3 of 512: 5.8 -> 1.9 ms, 16x4 2.1 ms), 14 wide
// 16x5 (1x1 of 1024 -> 256: 1.5 -> 1.1 ms; 3x3 of 256: 2.7 -> 1.55 ms, 8x7 1.65 ms).
// A step's accumulators and its v vectors of weights share `registers` (the vector registers less
// the broadcast input and, where the multiply-add does not accumulate in place, its product): a
// tile that needs more spills an accumulator, whose sum then waits on a store and a load every
// step. (AVX2's exact integer pairs, vpmaddwd then an add: 3 vectors x 4 columns spilled one of its
// 12 sums in 13 of int8 MobileNet V2's layers; 2 vectors x 4 instead, Zen 3, one thread,
// alternated: the model 7.98 -> 7.61 ms.)
TileSpec channel_tiles(int64_t width, int64_t channels, int vec, int accumulators, int registers, int64_t vector_panel_bytes) {
  // A tile's weights (its channels by every input channel and window position) are read again
  // for every column tile: more than half the L2 cache, they come from L3 each time. Zen 4, 3x3
  // of 512 channels at 7x7 (a panel of 295 KiB a vector): 3 vectors 2.2 ms, 2 2.0, 1 1.57; the
  // same of stride 2 at 14x14: 2.7, 3.1, 1.48 ms; 256 channels at 14x14 (147 KiB) within 5%.
  const int64_t kMaxChannelPanel = int64_t(cpu_caches().l2) / 2;
  double best = -1;
  int vectors = 1, columns = 1;
  for (int v = 1; v <= 3 && channels >= int64_t(v) * vec && (v == 1 || v * vector_panel_bytes <= kMaxChannelPanel); ++v)
    for (int k = 1; k <= std::min<int64_t>(width, std::min(accumulators, registers - v) / v); ++k) {
      const double cycles = std::max({v * k / 2.0, 4.0, (v + k) / 2.0});
      const double useful = double(width) / double(width + waste(width, k)) *
                            double(channels) / double(channels + waste(channels, int64_t(v) * vec));
      const double rate = v * k / cycles * useful;
      const bool exact = waste(width, k) == 0, best_exact = waste(width, columns) == 0;
      if (rate > best + 1e-9 || (rate > best - 1e-9 && (exact > best_exact || (exact == best_exact && v * k > vectors * columns))))
        best = rate, vectors = v, columns = k;
    }
  TileSpec spec;
  spec.inner = 2, spec.unrolled = 0, spec.channels = true;
  spec.tx = vectors * vec, spec.vec = vec;
  spec.tu = columns;
  return spec;
}

// A weight gradient's tile: output channels in vectors (`inner`, Halide dimension 3) times input
// channels (`unrolled`, 2), with the kernel window's columns (0), or columns and rows (0, 1), inside
// the tile. Per step of the sum over images and positions, each channel vector loads one gradient
// vector, and each input channel and window position broadcasts one input value, which feeds one
// accumulator per channel vector. The tile holds the most accumulators the registers allow, then
// loads the least per FMA, then keeps the most of the window inside (each window position left
// outside sums over every position again). W9's 3x3 gradient, 64 -> 64 channels, on Zen 3 (AVX2,
// 12 accumulators): 2 vectors x 3 columns x 2 channels 7.5-8.2 ms; 2 vectors x 6 channels
// 10.4 ms; 1 vector x 9 x 1 10.3-11 ms; 1 vector x 9 x 2 (18 accumulators, spilled) 16.6 ms.
TileSpec weight_grad_tiles(const backend::Stage& s, int vec, int accumulators, const BuiltinParams& params) {
  const int64_t kw = s.extents[0], kh = s.extents[1], inputs = s.extents[2], outputs = s.extents[3];
  struct Choice {
    int vectors = 1, window_dims = 0;
    int64_t window = 1, channels = 1;
    int64_t accumulators() const { return vectors * window * channels; }
    int64_t loads() const { return vectors + window * channels; }
  } best;
  bool found = false;
  for (int vectors : params.cols > 0 ? std::vector<int>{params.cols} : std::vector<int>{2, 1}) {
    if (vectors > 1 && outputs < int64_t(vectors) * vec) continue;
    for (int dims : {0, 1, 2}) {
      Choice c{vectors, dims, dims == 0 ? 1 : dims == 1 ? kw : kw * kh, 1};
      c.channels = std::min(params.rows > 0 ? int64_t(params.rows) : accumulators / (vectors * c.window), inputs);
      if (c.channels < 1 || (dims > 0 && c.accumulators() > accumulators)) continue;
      const bool better = !found || c.accumulators() > best.accumulators() ||
                          (c.accumulators() == best.accumulators() &&
                           (c.loads() < best.loads() || (c.loads() == best.loads() && c.window > best.window)));
      if (better) best = c, found = true;
    }
  }
  TileSpec spec;
  spec.inner = 3, spec.unrolled = 2;
  spec.tx = int(outputs >= int64_t(best.vectors) * vec ? best.vectors * vec : std::min<int64_t>(outputs, vec));
  spec.tu = int(best.channels);
  if (best.window_dims == 1) spec.whole = {0};
  if (best.window_dims == 2) spec.whole = {0, 1};
  return spec;
}

// A weight gradient's blocks (TileSpec::block_inputs). A chunk is the fewest whole output rows
// (dividing the height) that hold 32 positions, enough for a tile to reuse its accumulators, loaded
// and stored once per chunk. The block starts as every tile and is halved, its longer side first,
// until there are two per thread and its accumulator takes at most half the L2 cache (the other
// half for the chunk's gradient and input). Without such a chunk, or with blocks of one tile, none.
// Measured on Zen 3 (AVX2) against one sum over every position per tile: W9's 3x3 gradient the same
// (7.9-10.6 against 7.6-11.8 ms), a 1x1 of 8 x 64 x 56 x 56 14.5-19.1 -> 5.2-8.1 ms, the 7x7
// stride-2 stem of 8 x 3 x 112 x 112 57-62 -> 8.9 ms.
void weight_grad_blocks(TileSpec& spec, const backend::Stage& s, const Shape& grad_shape, int threads) {
  const int64_t height = grad_shape[2], width = grad_shape[3];
  int64_t rows = 0;
  for (int64_t r = 1; r <= height && rows == 0; ++r)
    if (height % r == 0 && r * width >= 32) rows = r;
  if (rows == 0) return;
  const int64_t window = s.extents[0] * s.extents[1];
  const int64_t input_tiles = (s.extents[2] + spec.tu - 1) / spec.tu, output_tiles = (s.extents[3] + spec.tx - 1) / spec.tx;
  int64_t inputs = input_tiles, outputs = output_tiles;  // per block, in tiles
  auto blocks = [&] { return ((input_tiles + inputs - 1) / inputs) * ((output_tiles + outputs - 1) / outputs); };
  auto bytes = [&] { return inputs * spec.tu * outputs * spec.tx * window * 4; };
  while ((blocks() < 2 * threads || bytes() > cpu_caches().l2 / 2) && inputs * outputs > 1) {
    if ((inputs * spec.tu >= outputs * spec.tx && inputs > 1) || outputs == 1) inputs = (inputs + 1) / 2;
    else outputs = (outputs + 1) / 2;
  }
  // Whole tiles, within the extents: the last block is shifted inwards, and the accumulator's
  // tiles cover a block exactly (a tile past the end would read the gradient past its end).
  inputs = std::min(inputs, s.extents[2] / spec.tu), outputs = std::min(outputs, s.extents[3] / spec.tx);
  if (inputs * outputs <= 1) return;
  spec.block_inputs = int(inputs * spec.tu), spec.block_outputs = int(outputs * spec.tx);
  spec.chunk_rows = int(rows);
}
}  // namespace

// TileSpec::lanes_along_k for contraction s, or 0: a float matmul of at most 8 rows (in each of any
// batches: attention's heads) and at least 64 columns, of a fixed size, whose right operand is a
// source (or a cheap function of sources: a dequantized weight) with its last two dimensions
// swapped, read where it lies, the reduction a multiple of 4 lanes.
int lanes_along_k(const backend::LoweredPipeline& p, const backend::Stage& s, int vec) {
  if (cpu_rules(s.op).tile != Tile::Matmul || s.dot_lanes > 0 || s.rvars.size() != 1 || s.extents.size() < 2) return 0;
  if (value_type(s) != Halide::Float(32) || (p.dynamic && p.dynamic->extent_varies(s.node))) return 0;
  if (s.extents[1] > kMatrixVectorRows || s.extents[0] < 64) return 0;
  const Node& n = p.graph->node(s.node);
  const Node& b = p.graph->node(n.inputs[1]);
  if (b.op != OpKind::Transpose || !is_cheap_function_of_sources(p, p.stages[size_t(n.inputs[1])])) return 0;
  const auto& perm = b.attrs.ints("perm");
  if (perm.size() < 2) return 0;
  std::vector<int64_t> last_two_swapped(perm.size());
  std::iota(last_two_swapped.begin(), last_two_swapped.end(), 0);
  std::swap(last_two_swapped[perm.size() - 1], last_two_swapped[perm.size() - 2]);
  if (perm != last_two_swapped) return 0;
  // Several vectors of lanes for one row: each is an accumulator of its own, so the products'
  // additions are independent chains (one chain of 48 dependent FMAs a 768-long row ran at its
  // latency, 3.3 ms for GPT-2's vocabulary in i8); rows unrolled are chains enough from 4.
  const int64_t k = p.graph->type(n.inputs[0]).shape.back(), rows = s.extents[1];
  int lanes = vec * (rows >= 4 ? 1 : rows >= 2 ? 2 : 4);
  while (lanes >= 4 && (k % lanes != 0 || (lanes > vec && k < 2 * lanes))) lanes /= 2;
  return lanes >= 4 && k >= 2 * lanes ? lanes : 0;
}

TileSpec tile_spec(const backend::LoweredPipeline& p, const backend::Stage& s, const BuiltinParams& params) {
  const int vec = vector_width(p.target, value_type(s));
  const Tile tile = cpu_rules(s.op).tile;
  const auto [kernel_cols, kernel_rows] = matmul_register_tile(p.target, s.dot_lanes > 0);
  int cols = params.cols > 0 ? params.cols : tile == Tile::Matmul ? kernel_cols : 2;
  TileSpec spec;
  // A tile of c column vectors by `tile_rows`, c at most `cols`. The last tile is shifted inwards, so a
  // tile wider than the matrix divides computes columns twice: 64 columns in AVX-512 tiles of 48
  // computed 96. Of the widths that fit, the one with the most useful FMAs a cycle (as
  // channel_tiles counts them), a narrower one only where that is clearly more (5%): 1024 columns
  // keep tiles of 48 (3% computed twice), 64 take 32. Parameters a tuning run chose are kept.
  auto columns = [&](int64_t n, int tile_rows) {
    int best = 0;
    double best_rate = -1;
    for (int c = cols; c >= 1; --c) {
      if (n < int64_t(c) * vec) continue;
      if (params.cols > 0) return c * vec;
      const double fmas = double(c) * tile_rows, cycles = std::max({fmas / 2, 4.0, (c + tile_rows) / 2.0});
      const double rate = fmas / cycles * double(n) / double(n + waste(n, int64_t(c) * vec));
      if (rate > 1.05 * best_rate) best_rate = rate, best = c;
    }
    return best > 0 ? best * vec : int(n);
  };
  auto rows = [&](int fallback) { return params.rows > 0 ? params.rows : fallback; };
  if (tile == Tile::ConvolutionWeightGrad) {
    spec = weight_grad_tiles(s, vec, kernel_cols * kernel_rows, params);
    const Node& n = p.graph->node(s.node);
    const bool varies = p.dynamic && (p.dynamic->varies(s.node) || p.dynamic->extent_varies(n.inputs[0]) ||
                                      p.dynamic->extent_varies(n.inputs[1]));
    if (!varies && spec.tx % vec == 0) weight_grad_blocks(spec, s, p.graph->type(n.inputs[1]).shape, halide_threads());
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
    // Tiles over channels too where the input's loads along a row would be strided (stride 2: two
    // loads and a shuffle a vector) or read a window wider than 1 (each unaligned, a third of them
    // across two cache lines): a channel tile loads aligned vectors of its packed weights and
    // broadcasts the input. Zen 3 (AVX2), alternated: W8's 3x3 conv 9.0 -> 6.2 ms (148 GFLOP/s,
    // 80% of peak); 3x3 of 128 at 28x28 2.0 -> 1.5 ms; the 7x7 stride-2 stem, batch 1, 3.0 -> 1.5
    // ms (PyTorch 1.7), batch 8 32 -> 13.5 ms (PyTorch 18); a 1x1 stride 2, 256 -> 512 at 56, 4.5
    // -> 2.7 ms. A 1x1 of stride 1 on a wide image stays along the width (64 -> 256 at 56x56: 0.94
    // against 1.44 ms over channels).
    const Shape& weights = p.graph->type(p.graph->node(s.node).inputs[1]).shape;  // [out, in, kh, kw]
    // An integer convolution's weights come packed, [out / B, in / 4, kh, kw, B, 4] (IntConv2d); a
    // bf16 one packs its own in pairs (as [out, in, kh, kw] in the graph).
    const bool packed = s.dot_lanes > 0;
    const int64_t kernel_h = weights[2], kernel_w = weights[3];
    const bool strided = attrs.has("stride") && attrs.ints("stride")[1] > 1;
    // An integer convolution goes over channels at any width, down to one vector of them: its
    // neighbours store their values channels innermost, which it then reads and writes as they
    // are (int8 ResNet-50's 56-wide layers: 14.6 -> 13.6 ms), and a depthwise convolution between
    // two of them loads its taps' channel vectors contiguous. Along the width, a MobileNet's layers
    // of 16 and 24 channels at 112 and 56 wide stored NCHW, and the depthwise sums after them
    // were computed into the next convolution's packed fours of channels: int8 MobileNet V2 on Zen
    // 4, alternated in one process, 3.80 -> 3.34 ms over channels.
    if (s.extents.size() == 4 && (width < 2 * vec || strided || kernel_w > 1 || packed) && channels >= (packed ? 1 : 2) * vec && (packed || !grouped) &&
        params.cols == 0 && params.rows == 0) {
      const int64_t in_channels = weights.size() == 6 ? weights[1] * weights[5] : weights[1];
      const int64_t weight_bytes = dtype_size(p.graph->type(p.graph->node(s.node).inputs[1]).dtype);
      // Besides the broadcast input, pairs of products (s.dot_lanes == 2) take a register for the
      // product before its add; a float FMA or a dot product accumulates in place.
      const int others = s.dot_lanes == 2 ? 2 : 1;
      return channel_tiles(width, channels, vec, kernel_cols * kernel_rows, vector_registers(p.target) - others,
                           int64_t(vec) * in_channels * kernel_h * kernel_w * weight_bytes);
    }
    spec.inner = 0, spec.unrolled = 2;
    int lanes = vec;
    while (lanes > 4 && s.extents[0] < lanes) lanes /= 2;
    spec.tx = int(s.extents[0] >= lanes ? lanes : s.extents[0]);
    const int accumulators = kernel_cols * kernel_rows;
    const int64_t height = s.extents.size() == 4 ? s.extents[1] : 1;
    // Rows share a kernel's loads of one input row: up to 4 for kernels taller than 3 (the 7x7
    // stem: 282 against 214 GFLOP/s with 2), 2 for 3x3 and 1x1, where 4 took twice as long to
    // lower (W8: 390 against 255 ms) for no speed (5.90 against 5.73 ms).
    const std::vector<int> candidates = kernel_h > 3 ? std::vector<int>{4, 3, 2} : std::vector<int>{2};
    int tile_rows = 1;
    for (int r : candidates) {  // the fewest rows computed twice by the last tile; then the taller
      auto waste = [&](int k) { return (height + k - 1) / k * k - height; };
      if (height >= r && (tile_rows == 1 || waste(r) < waste(tile_rows))) tile_rows = r;
    }
    if (tile_rows > 1) spec.second = 1, spec.ts = tile_rows;
    spec.tu = int(std::min<int64_t>(rows(std::min(8, accumulators / tile_rows)), s.extents[2]));
    // A grouped convolution's channel tile stays within a group: a tile across two groups sums
    // different input channels per output channel, and no input vector is shared. 8x128x28x28 in
    // 4 groups (32 channels each), tiles of 6 channels -> 4: 7.7 -> 3.9 ms.
    const int64_t groups = attrs.has("groups") ? attrs.i("groups") : 1;
    const int64_t per_group = groups > 0 && !packed ? weights[0] / groups : 0;
    if (groups > 1 && per_group > 1 && params.rows == 0)
      while (spec.tu > 1 && per_group % spec.tu != 0) --spec.tu;
  } else if (const int lanes = params.cols == 0 && params.rows == 0 ? lanes_along_k(p, s, vec) : 0) {
    // One output a tile: wider tiles, sharing each vector of the left operand, measured slower
    // (Sapphire Rapids, 2 threads, [1, 768] x [768, 50257]^T: 1 output 33 GB/s, 2 29, 4 18, 8 15).
    spec.inner = 0, spec.unrolled = 1, spec.lanes_along_k = lanes, spec.k_vector = std::min(lanes, vec);
    spec.row_runs = params.row_runs(), spec.prefetch_bytes = params.prefetch_bytes();
    spec.tx = 1, spec.tu = int(s.extents[1]);
    return spec;
  } else {
    // Matmul and attention: columns x rows; attention keeps fewer rows (its scores are per row).
    spec.inner = 0, spec.unrolled = 1;
    spec.tu = int(std::min<int64_t>(rows(tile == Tile::Attention ? 4 : kernel_rows), s.extents[1]));
    // Rows between one tile and two (a batch of 8 through a recurrent step or a classifier): the
    // tile takes fewer rows, down to half the kernel's, where fewer are then computed twice, the
    // accumulators they leave going to columns below. AVX2's tiles of 6 rows computed 12 of 8 (the
    // second shifted inwards over the first); tiles of 4 compute 8. Zen 3, 2 threads, alternated:
    // the reference LSTM of 256 at batch 8 17.3 -> 13.4 ms, the GRU 10.0 -> 8.7.
    if (tile == Tile::Matmul && params.rows == 0 && s.extents[1] > spec.tu && s.extents[1] < 2 * int64_t(spec.tu)) {
      int best = spec.tu;
      for (int r = spec.tu - 1; 2 * r >= kernel_rows; --r)
        if (waste(s.extents[1], r) < waste(s.extents[1], best)) best = r;
      spec.tu = best;
    }
    // Fewer rows than the kernel's (batch-1 inference, a matrix-vector product): the accumulators
    // the rows leave go to columns, so that enough FMA chains run side by side.
    if (tile == Tile::Matmul && params.cols == 0 && spec.tu < kernel_rows)
      cols = std::clamp(kernel_cols * kernel_rows / spec.tu, kernel_cols, 8);
    spec.tx = columns(s.extents[0], spec.tu);
    // Dynamic sizes keep unblocked tiles: a block's split would raise the smallest size served.
    // Their column panels run in parallel instead, each packed once (unpacked, a prompt's [448,
    // 768] x [768, 3072] read its panels strided from memory: 138 against 295 GFLOP/s fixed).
    const bool varies = p.dynamic && p.dynamic->extent_varies(s.node);
    const int threads = halide_threads();
    if (tile == Tile::Matmul && spec.tx % vec == 0 && !varies) spec.block = row_block(s, spec, threads);
    // Few row tiles (a 1x1 convolution of at most 256 output channels at batch 1) and many column
    // panels: the panels run in parallel, each packed once and read by every row tile, where a
    // block of rows per thread packed every panel once per block, for a few tiles each. Sapphire
    // Rapids, 2 threads, alternated: 64 -> 64 channels at 56x56 0.21 -> 0.17 ms, 256 -> 64 0.78 ->
    // 0.58, 256 -> 128 1.07 -> 0.94, 512 -> 128 at 28x28 0.52 -> 0.48; MobileNet V2 6.6-7.0 ->
    // 5.7-6.0 ms, MobileNet V3 5.2-5.8 -> 5.0, ResNet-50 48.8-49.4 -> 45.7-48.8. With 64 row
    // tiles (128 -> 512 at 28x28: 17 panels) the panels balance worse than the blocks: 0.38 -> 0.43.
    if (tile == Tile::Matmul && spec.block > 0 && s.extents.size() == 2 && params.cols == 0 && params.rows == 0 &&
        row_tiles(s, spec) <= kPanelParallelRowTiles && s.extents[0] >= 4 * int64_t(threads) * spec.tx)
      spec.block = 0, spec.panels_parallel = true;
    if (tile == Tile::Matmul && spec.tx % vec == 0 && varies && s.extents.size() == 2 && s.extents[0] >= 2 * int64_t(threads) * spec.tx &&
        !p.dynamic->extent_varies(p.graph->node(s.node).inputs[1]))
      spec.panels_parallel = true;
    // Too few row tiles (times batches) for the threads: the column tiles run in parallel instead,
    // each over every row (its accumulator's rows unrolled: a number of rows fixed at compile time).
    const int64_t row_tasks = row_tiles(s, spec) * other_iterations(s, spec);
    if (tile == Tile::Matmul && spec.block == 0 && !varies && row_tasks < threads && s.extents[0] >= 2 * int64_t(spec.tx))
      spec.columns_parallel = true;
    const int64_t* k_extent = s.rvars.size() == 1 ? Halide::Internal::as_const_int(s.rvars[0].extent()) : nullptr;
    // Only where the operand does not fit the threads' L2 caches together: where it does, each
    // thread's share of the columns stays in its own L2 from call to call (the pool splits a loop
    // the same way every time) and its sums in registers, where the parts' row of sums took a load
    // and a store to memory with every multiply-add. Zen 3 (512 KiB L2), 2 threads: [256, 768]
    // alone 11.7-12.6 -> 8.4-9.6 us; a 2-layer GRU of 256, batch 1, 1.97 -> 1.54 ms, the LSTM 2.55
    // -> 2.15.
    if (spec.columns_parallel && params.cols == 0 && params.rows == 0 && s.extents.size() == 2 && k_extent &&
        backend::reads_weight_in_parts(s.extents[1], *k_extent * s.extents[0] * value_type(s).bytes()) && s.extents[0] >= 4 * int64_t(threads) * vec) {
      spec.k_outer = true;
      spec.tu = int(s.extents[1]);
      // Each thread a part of the reduction over every column: its rows of the right operand are
      // one run of memory, where a share of the columns is a strip of runs a row apart. Zen 4, 2
      // threads, 12 weights of [768, 3072]: 22.6 -> 51.8 GB/s; GPT-2's f32 decode step 25.0 ->
      // 17.2 ms. (Columns a vector does not divide keep the strips: one tile of all of them would
      // round up past the operand's end. Four rows, whose sums no longer stay in L1, were slower:
      // GPT-2's decode at batch 4, 29 -> 39 ms.)
      if (*k_extent % threads == 0 && s.extents[0] % vec == 0) {
        spec.split_k = threads;
        spec.tx = int(s.extents[0]);
      } else {
        const int64_t share = (s.extents[0] + threads - 1) / threads;
        spec.tx = int((share + vec - 1) / vec * vec);
      }
    }
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

// A matrix-vector product's parallel iterations a thread (tile_nest).
constexpr int64_t kChunksPerThread = 4;
// A matrix-vector product of many outputs (a language model's head: 50,257 of them) takes more
// iterations, each of at most about this many outputs: with four a thread, GPT-2's head (38 MB
// of i8 weights) ran in iterations of 80 us, and a thread done first waited up to one of them for
// the other (90 us a decode step on a Zen 5 guest, measured in the pool).
constexpr int64_t kOutputsPerIteration = 2048, kMostChunksPerThread = 64;

TiledNest tile_nest(FuncRef f, const std::vector<Var>& vars, const Shape& extents, const TileSpec& spec, int vec,
                    int threads, int64_t min_parallel_work) {
  const Var &inner = vars[size_t(spec.inner)], &unrolled = vars[size_t(spec.unrolled)];
  Var io(inner.name() + "_t"), ii(inner.name() + "_i"), uo(unrolled.name() + "_t"), ui(unrolled.name() + "_i");
  if (spec.block_inputs > 0) {
    // The blocks, in parallel; inside, the block's values copied from its accumulator.
    Var ib(unrolled.name() + "_b"), ir(unrolled.name() + "_r"), ob(inner.name() + "_b"), orr(inner.name() + "_r");
    Var par(ib.name() + "_" + ob.name());
    f.split(unrolled, ib, ir, spec.block_inputs).split(inner, ob, orr, spec.block_outputs);
    std::vector<VarOrRVar> order{orr};
    for (size_t d = 0; d < vars.size(); ++d)
      if (int(d) != spec.inner && int(d) != spec.unrolled) order.emplace_back(vars[d]);
    order.insert(order.end(), {ir, ib, ob});
    f.reorder(order).fuse(ib, ob, par);
    f.vectorize(orr, vec);
    f.parallel(par);
    TiledNest t;
    t.tile = par, t.parallel = par;
    t.what = "blocks of " + std::to_string(spec.block_inputs) + "x" + std::to_string(spec.block_outputs) + " par";
    return t;
  }
  if (spec.lanes_along_k > 0) {
    // The tile (outputs by the rows, unrolled) innermost, then the tiles, then the batches, all
    // fused and run in parallel.
    f.split(inner, io, ii, spec.tx, Halide::TailStrategy::ShiftInwards);
    std::vector<VarOrRVar> order{ii, unrolled, io};
    Var par = io;
    for (size_t d = 2; d < vars.size(); ++d) order.emplace_back(vars[d]);
    f.reorder(order);
    for (size_t d = 2; d < vars.size(); ++d) {
      Var fused(par.name() + "_" + vars[d].name());
      f.fuse(par, vars[d], fused);
      par = fused;
    }
    f.unroll(unrolled);
    // Each thread's outputs taken from spec.row_runs interleaved runs of rows (TileSpec::row_runs),
    // in kChunksPerThread iterations of the parallel loop: the pool hands each thread its
    // iterations as one contiguous share, read front to back (one run of memory, as one iteration
    // would), and a thread done early takes the other's last ones, where one iteration a thread
    // left it waiting (a worker late to wake or preempted). GPT-2's int8 decode step (6 layers,
    // prompt 448, Zen 3), alternated in one process: 2.5% faster with 4 than with 1; its 48
    // products alone 5-8%; 2 and 8 within noise of 4.
    int64_t outputs = extents[0] / spec.tx;
    for (size_t d = 2; d < extents.size(); ++d) outputs *= extents[d];
    // (Runs of at least 16 outputs, as many as asked: the last, shifted inwards, is a whole one.)
    auto fits = [&](int64_t runs) {
      const int64_t run = (outputs + runs - 1) / runs;
      return outputs >= 16 * runs && (outputs + run - 1) / run == runs;
    };
    int64_t chunks = kChunksPerThread;
    while (chunks < kMostChunksPerThread && outputs > int64_t(spec.row_runs) * threads * chunks * kOutputsPerIteration) chunks *= 2;
    while (chunks > 1 && !fits(int64_t(spec.row_runs) * threads * chunks)) chunks /= 2;
    const int64_t runs = int64_t(spec.row_runs) * threads * chunks, run = (outputs + runs - 1) / runs;
    Var tile = par, parallel = par;
    std::string how = " along k in " + std::to_string(spec.lanes_along_k) + " lanes";
    if (threads > 1 && points(extents) >= min_parallel_work && fits(runs)) {
      Var g(par.name() + "_g"), m(par.name() + "_m"), h(par.name() + "_h");
      parallel = Var(par.name() + "_p");
      f.split(par, g, m, int(run), Halide::TailStrategy::ShiftInwards).split(g, parallel, h, spec.row_runs, Halide::TailStrategy::RoundUp);
      f.reorder({h, m}).unroll(h);
      tile = h;
      how += ", " + std::to_string(spec.row_runs) + (spec.row_runs == 1 ? " run" : " runs") + " of rows a thread in " +
             std::to_string(chunks) + (chunks == 1 ? " iteration" : " iterations");
    }
    TiledNest t = finish_tiles(f, extents, spec, ii, ii, parallel, threads, min_parallel_work, how);
    t.tile = tile;
    return t;
  }
  f.split(inner, io, ii, spec.tx);
  if (spec.block > 0) return tile_blocks(f, vars, extents, spec, io, ii, unrolled, uo, ui, threads, min_parallel_work);
  f.split(unrolled, uo, ui, spec.tu);
  if (spec.channels) {
    // The tile (channel lanes by columns), the column tiles, rows, images, then the channel tiles:
    // each channel tile's weights are copied once and read from cache for the image. The channel
    // tiles run in parallel fused with the images, and with blocks of rows where both together
    // are fewer than two a thread (a batch of one with few channel tiles: the stem).
    // Stored channels innermost, a pixel's channel tiles share its cache lines: split between
    // threads, both wrote the same lines at once (false sharing), and the line moved between the
    // cores at every store. There the threads take blocks of rows instead, each running every
    // channel tile of its rows (a channel tile's weights then read once a block). Int8 MobileNet
    // V2's 16 -> 96 1x1 at 112x112 (two tiles of 48 channels, one a thread) ran at 9% of the VNNI
    // peak, its epilogue's stores stalled.
    const int64_t channel_tiles = (extents[2] + spec.tx - 1) / spec.tx, tasks = channel_tiles * extents[3];
    const int64_t blocks_for_threads = (2 * threads + tasks - 1) / tasks;
    const int64_t row_blocks =
        std::min<int64_t>(extents[1], spec.channels_last ? std::max<int64_t>(threads, blocks_for_threads) : blocks_for_threads);
    Var rows = vars[1], rb(vars[1].name() + "_b"), par(io.name() + "_" + vars[3].name());
    if (row_blocks > 1) {
      rows = Var(vars[1].name() + "_r");
      f.split(vars[1], rb, rows, int((extents[1] + row_blocks - 1) / row_blocks));
    }
    // The tile's results are stored a column vector per channel (the registers transposed), not a
    // channel vector per column: the channel lanes of one column are a plane apart, and where a
    // plane is a multiple of 4 KiB (images of 32 or 64 columns) the 16 or 32 lines of each store
    // fall in one set of the L1 cache. Zen 5, 8x64 -> 64 channels 3x3: 32x32 2.21 -> 1.24 ms, 64x64
    // 8.87 -> 4.91 ms, 56x56 3.78 -> 3.65 ms. (A tile of 7 columns keeps the channel lanes.)
    const bool by_columns = !spec.channels_last && spec.tu >= 4 && (spec.tu & (spec.tu - 1)) == 0;
    std::vector<VarOrRVar> order{ii, ui, uo, rows};
    if (by_columns) order = {ui, ii, uo, rows};
    const bool rows_outside = row_blocks > 1 && spec.channels_last;
    if (row_blocks > 1 && !rows_outside) order.emplace_back(rb);
    order.insert(order.end(), {vars[3], io});
    if (rows_outside) order.emplace_back(rb);
    f.reorder(order);
    f.fuse(vars[3], io, par);
    if (row_blocks > 1) {
      Var all(rb.name() + "_" + par.name());
      if (rows_outside) f.fuse(par, rb, all);
      else f.fuse(rb, par, all);
      par = all;
    }
    TiledNest t;
    if (by_columns) {
      TileSpec cs = spec;
      cs.vec = spec.tu;
      t = finish_tiles(f, extents, cs, ui, ii, par, threads, min_parallel_work, " over channels, stored by columns");
    } else {
      t = finish_tiles(f, extents, spec, ii, ui, par, threads, min_parallel_work, rows_outside ? " over channels in row blocks" : " over channels");
    }
    t.tile = uo, t.panel = par;
    return t;
  }
  Var so, si;
  if (spec.second >= 0) {
    const Var& second = vars[size_t(spec.second)];
    so = Var(second.name() + "_t"), si = Var(second.name() + "_i");
    f.split(second, so, si, spec.ts);
  }
  if (spec.panels_parallel) {
    // The tile, the row tiles, then the column panels in parallel: a panel packed once a task.
    f.reorder({ii, ui, uo, io});
    TiledNest t = finish_tiles(f, extents, spec, ii, ui, io, threads, min_parallel_work, " over column panels");
    t.tile = uo, t.panel = io;
    return t;
  }
  if (spec.columns_parallel) {
    // The tile innermost, then the other loops (a row tile or few), then the column tiles, in
    // parallel.
    std::vector<VarOrRVar> order{ii, ui};
    for (size_t d = 0; d < vars.size(); ++d)
      if (int(d) != spec.inner) order.emplace_back(int(d) == spec.unrolled ? uo : vars[d]);
    order.emplace_back(io);
    f.reorder(order);
    // (With the reduction in parts, one tile: the parts run in parallel inside it.)
    if (spec.split_k > 1) return finish_tiles(f, extents, spec, ii, ui, io, 1, min_parallel_work, "");
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

namespace {
// A weight gradient's block accumulator (TileSpec::block_inputs), output channels innermost in
// memory: inside each chunk of rows, the tiles (output channel vectors by the window's columns by
// input channels) sum along the chunk.
std::string schedule_weight_grad_block(const backend::Stage& s, const TileSpec& spec, FuncRef acc) {
  const Var &kx = s.vars[0], &ky = s.vars[1], &ci = s.vars[2], &co = s.vars[3];
  const Halide::RVar &rx = s.rvars[0], &ry = s.rvars[1], &rn = s.rvars[2];
  Var cot(co.name() + "_t"), coi(co.name() + "_i"), cit(ci.name() + "_t"), cii(ci.name() + "_i");
  Halide::RVar ryo(ry.name() + "_o"), ryi(ry.name() + "_i");
  acc.reorder_storage({co, kx, ky, ci});
  acc.vectorize(co, spec.vec);
  StageRef u = acc.update();
  u.split(co, cot, coi, spec.tx).split(ci, cit, cii, spec.tu).split(ry, ryo, ryi, spec.chunk_rows);
  std::vector<VarOrRVar> order{coi};
  for (int d : spec.whole) order.emplace_back(s.vars[size_t(d)]);
  order.insert(order.end(), {cii, rx, ryi, cot, cit});
  if (spec.whole.size() < 2) order.emplace_back(ky);
  if (spec.whole.empty()) order.emplace_back(kx);
  order.insert(order.end(), {ryo, rn});
  u.reorder(order);
  u.vectorize(coi, spec.vec).unroll(coi).unroll(cii);
  for (int d : spec.whole) u.unroll(s.vars[size_t(d)]);
  return "tile " + tile_text(spec) + " vec" + std::to_string(spec.vec) + " in chunks of " + std::to_string(spec.chunk_rows) + " rows";
}
}  // namespace

namespace {

// The largest buffer a matrix-vector product's right operand reads (the weight, under its
// conversion and views; TileSpec::lanes_along_k): its parameter and element bytes, or none.
std::optional<std::pair<Halide::ImageParam, int>> weight_buffer(const backend::LoweredPipeline& p, const backend::Stage& s) {
  const Graph& g = *p.graph;
  std::optional<std::pair<Halide::ImageParam, int>> best;
  int64_t best_bytes = 0;
  std::vector<int> todo{g.node(s.node).inputs[1]};
  std::set<int> seen;
  while (!todo.empty()) {
    const int id = todo.back();
    todo.pop_back();
    if (!seen.insert(id).second) continue;
    const backend::Stage& t = p.stages[size_t(id)];
    const Node& node = g.node(id);
    const TensorType& type = node.type;
    const Halide::ImageParam buffer = node.op == OpKind::Parameter ? p.params[size_t(node.attrs.i("index"))] : t.constant;
    const int64_t bytes = type.numel() * int64_t(dtype_size(type.dtype));
    if (buffer.defined() && bytes > best_bytes) best = {buffer, int(dtype_size(type.dtype))}, best_bytes = bytes;
    if (!is_source(t))
      for (int in : node.inputs) todo.push_back(in);
  }
  return best;
}

}  // namespace

std::string schedule_contraction_tile(const backend::LoweredPipeline& p, const backend::Stage& s, const TileSpec& spec,
                                      Schedule& out) {
  FuncRef acc(&out, s.reduction);
  StageRef u = acc.update();
  if (spec.block_inputs > 0) return schedule_weight_grad_block(s, spec, acc);
  if (spec.lanes_along_k > 0) {
    // Each output's lanes summed along K (the rfactor'ed intermediate, per tile), then across.
    // Each vector of lanes a chain of its own (`chains` of them): K in steps of all the lanes,
    // each step one vector a chain. The chains are summed by vector adds (a second rfactor), then
    // the lanes of one vector across: summed across directly, 64 lanes cost more than the chains
    // saved (GPT-2's vocabulary in i8: 1.25 ms one chain, 1.87 ms four summed lane by lane).
    const Halide::RVar k = s.rvars[0], ko(k.name() + "_o"), kr(k.name() + "_r"), kc(k.name() + "_c"), ki(k.name() + "_i");
    const Var lane("lane"), chain("chain");
    const int chains = spec.lanes_along_k / spec.k_vector;
    u.split(k, ko, kr, spec.lanes_along_k);
    if (chains > 1) u.split(kr, kc, ki, spec.k_vector);
    FuncRef lanes = u.rfactor(chains > 1 ? ki : kr, lane);
    lanes.compute_at(acc, Var::outermost());
    // The lanes innermost in memory too (rfactor's new variable comes last: with rows, each
    // vector of lanes was scattered a row apart; 4 rows ran at 7 GB/s).
    auto lanes_first = [&](const std::vector<Var>& extra) {
      std::vector<Var> storage{lane};
      storage.insert(storage.end(), extra.begin(), extra.end());
      storage.insert(storage.end(), s.vars.begin(), s.vars.end());
      return storage;
    };
    lanes.reorder_storage(lanes_first({}));
    lanes.vectorize(lane);
    StageRef lu = lanes.update();
    FuncRef steps = lanes;  // the Func whose update walks K
    if (chains > 1) {
      steps = lu.rfactor(kc, chain);
      steps.compute_at(lanes, Var::outermost());
      steps.reorder_storage(lanes_first({chain}));
      steps.vectorize(lane).unroll(chain);
      lu.reorder({lane, kc}).vectorize(lane).unroll(kc);
    }
    StageRef su = steps.update();
    std::vector<VarOrRVar> order{lane};
    if (chains > 1) order.emplace_back(chain);
    for (const Var& v : s.vars) order.emplace_back(v);
    // Steps of 32 positions along K, unrolled in vectors: each vector's first position is then a
    // known multiple of the vector within a known multiple of 32, which lets Halide read blocks of
    // 32 (an i4 weight's halves, a group's scale) with dense loads instead of gathers.
    const int64_t* k_extent = Halide::Internal::as_const_int(k.extent());
    const int per_block = 32 / spec.lanes_along_k;  // (1 from 32 lanes: their steps are multiples of 32)
    Halide::RVar step = ko;  // and the positions along K one of its iterations covers
    int64_t step_positions = spec.lanes_along_k;
    if (per_block > 1 && k_extent && *k_extent % 32 == 0) {
      const Halide::RVar koo(ko.name() + "o"), koi(ko.name() + "i");
      su.split(ko, koo, koi, per_block);
      order.emplace_back(koi), order.emplace_back(koo);
      su.reorder(order).vectorize(lane).unroll(koi);
      step = koo, step_positions = 32;
    } else {
      order.emplace_back(ko);
      su.reorder(order).vectorize(lane);
    }
    // A weight of 1 or 2 bytes an element is converted as it is read, and its product then waits
    // on memory and on the conversions in turn: on AMD each step asks for the bytes
    // spec.prefetch_bytes ahead (past the row's end, the next rows': a weight [out, in] is read
    // in rows). Zen 3, a C loop of GPT-2's i8 products, 2 threads: 10.5-11.7 -> 12.4-14.3 GB/s 2
    // KiB ahead. (f32 weights are read at the memory's speed without.)
    std::string ahead;
    if (const auto weight = weight_buffer(p, s); weight && weight->second <= 2 && k_extent && spec.prefetch_bytes > 0) {
      su.prefetch(weight->first.name(), step, step, int(std::max<int64_t>(1, spec.prefetch_bytes / (step_positions * weight->second))));
      ahead = ", " + weight->first.name() + " fetched " + std::to_string(spec.prefetch_bytes) + " bytes ahead";
    }
    if (chains > 1) su.unroll(chain);
    for (const Var& v : s.vars) lanes.unroll(v), lu.unroll(v), acc.unroll(v), u.unroll(v);
    if (chains > 1)
      for (const Var& v : s.vars) steps.unroll(v), su.unroll(v);
    return "tile " + std::to_string(spec.tx) + "x" + std::to_string(spec.tu) + " along k, " + std::to_string(spec.lanes_along_k) + " lanes in " + std::to_string(chains) + " chains" + ahead;
  }
  const Var &inner = s.vars[size_t(spec.inner)], &unrolled = s.vars[size_t(spec.unrolled)];
  if (spec.k_outer) {
    // Per step of the reduction, the tile's vectors in turn, each row's sum read and written back
    // (from L1: the tile's sums are a few KiB), and the right operand's row read as one run.
    const Var vectors(inner.name() + "_v"), lanes(inner.name() + "_l");
    acc.vectorize(inner, spec.vec);
    if (spec.split_k > 1) {
      // The sums of each part (rfactor'ed: [columns, rows, part]) in parallel, then added.
      const Halide::RVar k = s.rvars[0], kp(k.name() + "_p"), kr(k.name() + "_r");
      const Var part("part");
      const int64_t K = *Halide::Internal::as_const_int(k.extent());
      u.split(k, kp, kr, int(K / spec.split_k));
      FuncRef parts = u.rfactor(kp, part);
      parts.compute_at(acc, Var::outermost());
      parts.vectorize(inner, spec.vec);
      StageRef pu = parts.update();
      pu.split(inner, vectors, lanes, spec.vec).reorder({lanes, unrolled, vectors, kr, part}).vectorize(lanes).unroll(unrolled).parallel(part);
      u.split(inner, vectors, lanes, spec.vec).reorder({lanes, unrolled, kp, vectors}).vectorize(lanes).unroll(unrolled).unroll(kp);
      return "tile " + tile_text(spec) + " vec" + std::to_string(spec.vec) + ", the reduction outermost in " + std::to_string(spec.split_k) + " parts par";
    }
    u.split(inner, vectors, lanes, spec.vec).reorder({lanes, unrolled, vectors, s.rvars[0]}).vectorize(lanes).unroll(unrolled);
    return "tile " + tile_text(spec) + " vec" + std::to_string(spec.vec) + ", the reduction outermost";
  }
  auto is_whole = [&](size_t d) { return std::find(spec.whole.begin(), spec.whole.end(), int(d)) != spec.whole.end(); };
  // A dot product's products per lane (its first reduction variable) innermost: vectorized with
  // the tile's columns, each step is one dot product per accumulator (Stage::dot_lanes).
  const bool dot4 = s.dot_lanes > 0;
  std::vector<VarOrRVar> order;
  if (dot4) order.emplace_back(s.rvars[0]);
  order.emplace_back(inner);
  for (int d : spec.whole) order.emplace_back(s.vars[size_t(d)]);
  if (spec.second >= 0) order.emplace_back(s.vars[size_t(spec.second)]);
  order.emplace_back(unrolled);
  for (size_t k = dot4 ? 1 : 0; k < s.rvars.size(); ++k) order.emplace_back(s.rvars[k]);
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
  if (dot4) u.atomic().vectorize(s.rvars[0]);
  if (spec.second >= 0) {
    acc.unroll(s.vars[size_t(spec.second)]);
    u.unroll(s.vars[size_t(spec.second)]);
  }
  // A convolution's narrow kernel row is unrolled too (3 loads of one input row per channel).
  // (With rows in the tile too, the tile alone has work enough: unrolling the row as well tripled
  // W8's lowering time for no speed.)
  if (cpu_rules(s.op).tile == Tile::Convolution && spec.second < 0 && !spec.channels &&
      p.graph->type(p.graph->node(s.node).inputs[1]).shape[dot4 ? 2 : 3] <= 7)
    u.unroll(s.rvars[dot4 ? 1 : 0]);
  return "tile " + tile_text(spec) + (spec.vec > 0 ? " vec" + std::to_string(spec.vec) : "");
}

}  // namespace hjit::schedules
