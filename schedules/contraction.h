// Register tiles for contractions (matmul, convolution, attention): the accumulator of one tile
// lives in vector registers while the reduction runs, and the epilogue (bias, normalization,
// activation) inlined into the tile's consumer runs on it before it is stored.
#pragma once
#include <string>

#include "halide_backend/lowering/lowered.h"
#include "halide_backend/builtin_params.h"
#include "schedules/recorder.h"

namespace hjit::schedules {

using backend::BuiltinParams;

// Which two dimensions (Halide order) form the tile, and its size: `inner` is vectorized,
// `unrolled` is unrolled (matmul: columns x rows; convolution: width x output channels).
struct TileSpec {
  int inner = 0, unrolled = 1;
  int tx = 1, tu = 1;
  int vec = 0;             // lanes `inner` is vectorized by (0: not vectorized)
  std::vector<int> whole;  // dimensions kept whole inside the tile (a weight gradient's kx, ky)
  int second = -1, ts = 1; // a second unrolled dimension (a convolution's output rows) and its tile
  // Matmul, BLIS-style: tiles of `unrolled` (rows) in blocks of this many, one block per parallel
  // task; inside a block the tiles of `inner` (column panels) run outermost, and the right operand's
  // panel (tx columns by the whole reduction) is copied contiguous once per block and read by all
  // its row tiles from cache. 0: no blocks (too few rows to reuse a panel).
  int block = 0;
  // Matmul with too few row tiles for the threads (batch-1 inference): the column tiles, outermost,
  // run in parallel.
  bool columns_parallel = false;
  // Such a product of one or two rows over a right operand larger than the L2 cache: summed with
  // the reduction outermost, so that each step reads a run of one row of the right operand;
  // column tiles of a few vectors read theirs a row apart, a strip no prefetcher follows (GPT-2's
  // f32 projections, 2 threads on Sapphire Rapids, a Halide test kernel: 20.6 against 24.4 GB/s).
  // The threads take parts of the reduction (split_k), or else shares of the columns (tx).
  bool k_outer = false;
  // With k_outer: the reduction cut in this many parts (the threads), each summed over every
  // column in parallel, then added (0: the columns shared out instead).
  int split_k = 0;
  // Matmul whose rows vary with a dynamic size (a prompt's tokens): the column panels, outermost,
  // run in parallel, each packing its panel of the right operand once and running every row tile
  // over it (blocks of rows would make a block's rows the smallest size the pipeline serves).
  bool panels_parallel = false;
  // Convolution of narrow images (a classifier's 14- and 7-wide last stages): output channels
  // vectorized (`inner`) times output columns (`unrolled`); the channel tiles run outermost, in
  // parallel, each with its weights copied channels-innermost once (TiledNest::panel).
  bool channels = false;
  // Its result stored channels innermost (NHWC): each tile stores its channel vectors as they are.
  bool channels_last = false;
  // Weight gradient in blocks (0: none): one parallel task per block of input channels (`unrolled`)
  // by output channels (`inner`), its accumulator in cache, and the sum over images and chunks of
  // `chunk_rows` output rows outside the block's tiles: every tile reads a chunk of the gradient and
  // the input from cache, instead of each tile reading all of them from memory.
  int block_inputs = 0, block_outputs = 0, chunk_rows = 1;
  // A matrix-vector product (a decode step's Linear layer: one row, or a few) whose right operand
  // is a view of a weight read along its rows (matmul(x, transpose(w)), w [N, K]): each output is a
  // dot product along K in this many lanes, one or more vectors (the reduction split and
  // rfactor'ed), `tx`
  // outputs by every row unrolled per tile, the tiles in parallel. Across the columns instead, each
  // vector of w^T gathers 16 rows of w: 8.5 against 37 GB/s for a [3072, 768] w. 0: not such a
  // product.
  int lanes_along_k = 0;
  int k_vector = 0;  // the lanes of one of those vectors
  // Each thread's outputs of such a product taken from this many interleaved runs of rows, one
  // output of each in turn. The vendors' prefetchers want opposite patterns (a DRAM-sized product,
  // 2 threads): on Sapphire Rapids a thread reading one run waits on it (one run 16.2 GB/s, two
  // 24.0, four 26.4; the triad 25), where several keep more of its misses in flight; on Zen 4 one
  // run is followed best (24 i8 weights of GPT-2's shapes, 56.6 MB: one 36.5-39.0 GB/s, two 25.0,
  // four 18.0-22.3, eight 19.2; the triad 39).
  int row_runs = 1;
  // The bytes ahead of its steps along K such a product prefetches a weight of 1 or 2 bytes an
  // element (BuiltinParams::prefetch_bytes; 0: none). Sapphire Rapids, 2 threads, 48 i8 products
  // of GPT-2's shapes chained (85 MB): 14.4 GB/s 2 KiB ahead, 30.2 without (the triad 29.8).
  int prefetch_bytes = 0;
};
// A matmul of at most this many rows is a matrix-vector product: one register tile of rows (8 with
// AVX-512) reads its right operand once.
constexpr int64_t kMatrixVectorRows = 8;
// The register tile of a matmul on this target: {columns in vectors, rows}. Accumulators, the
// right operand's vectors and one broadcast fill the vector registers but for a few: 3 x 8 with
// AVX-512's 32 registers, 2 x 6 with AVX2's 16; 4 x 6 with AVX-512 for dot products
// (Stage::dot_lanes).
std::pair<int, int> matmul_register_tile(const Halide::Target& target, bool dot_products = false);
TileSpec tile_spec(const backend::LoweredPipeline& p, const backend::Stage& contraction, const BuiltinParams& params);

struct TiledNest {
  Halide::Var tile;      // the loop inside which one tile is computed
  Halide::Var panel;     // the loop over column panels (blocked matmul) or channel tiles (one packed panel each)
  Halide::Var parallel;  // the fused loop over everything outside it
  std::string what;
};
// Splits the nest `f` (iterating `vars` with `extents`) into tiles and runs the tiles in parallel.
TiledNest tile_nest(FuncRef f, const std::vector<Halide::Var>& vars, const Shape& extents, const TileSpec& spec,
                    int vec, int threads, int64_t min_parallel_work = 1 << 14);

// The accumulator of contraction stage `s`, computed at one tile: reduction loops outside, the
// tile vectorized and unrolled inside.
std::string schedule_contraction_tile(const backend::LoweredPipeline& p, const backend::Stage& s, const TileSpec& spec,
                                      Schedule& out);

}  // namespace hjit::schedules
