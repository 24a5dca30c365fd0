// The built-in schedule's knobs: the space a tuning run searches (hjit-tune). The defaults are the
// built-in schedule itself; a schedule decided with other values names them in its source line.
// Written and read as "key=value" words: "cols=3 rows=6 vec=2".
#pragma once
#include <string>

namespace hjit::backend {

struct BuiltinParams {
  int cols = 0;               // a contraction tile's columns, in vectors (0: from the target's registers:
                              // matmul 3 with 32 vector registers, else 2; attention 2)
  int rows = 0;               // a contraction tile's unrolled rows / output channels (0: per op and
                              // target: matmul 8 with 32 vector registers, else 6; attention 4; conv 8)
  int vec = 0;                // vector width of element-wise and row nests, in natural vectors
                              // (0: per nest, 4 where it computes exp, log, tanh, ... else 1)
  int tasks = 8;              // parallel tasks per thread that fused outer loops aim for
  int grain = 14;             // log2 of the fewest points a loop nest needs to run in parallel
  int runs = 0;               // a matrix-vector product's interleaved runs of rows a thread (0: by the
                              // CPU's prefetchers: 1 on AMD, 4 elsewhere)
  int ahead = -1;             // KiB a matrix-vector product's narrow (1- or 2-byte) weight is prefetched
                              // ahead of its steps (0: no software prefetch; -1: by the CPU: 2 on AMD,
                              // 0 elsewhere)
  bool store_expensive = true;  // expensive values read twice are stored (per row or at root), not recomputed
  bool extern_gemm = false;     // 2-D f32 matmuls call oneDNN's / OpenBLAS's sgemm (halide_backend/providers/extern_stages.h)
  bool extern_conv = false;     // f32 convolutions call oneDNN
  // u8 x s8 matmuls (int_matmul) call oneDNN's matmul where it runs on AMX's tiles (a CPU with
  // AMX-INT8, which Halide 14 cannot drive at speed): on by default, as the faster code there.
  bool extern_int_gemm = true;
  // bf16 matmuls call oneDNN's where it runs on AMX-BF16's tiles (8x the FMA's multiply-adds on
  // Sapphire Rapids, whose vdpbf16ps does half): on by default, likewise.
  bool extern_bf16_gemm = true;
  // Integer convolutions (int_conv2d) call oneDNN's where it runs on AMX-INT8: a tuning
  // candidate, off by default. Its sums come back whole in i32 and are requantized in a pass of
  // their own, where hjit's tiles requantize each tile as they finish it: int8 ResNet-50 ran no
  // faster with it on Sapphire Rapids (docs/low-precision.md).
  bool extern_int_conv = false;

  // The runs a matrix-vector product takes: `runs`, or where it is 0, the CPU's (the two vendors'
  // prefetchers want opposite patterns: schedules/contraction.h, TileSpec::row_runs).
  int row_runs() const;
  // The bytes ahead such a product prefetches its weight: `ahead` KiB, or where it is -1, the
  // CPU's. On Intel the prefetches (Halide's are prefetchnta: into L1, not L2) halved the speed of
  // GPT-2's i8 products, which its hardware prefetchers stream at the triad's speed without them.
  int prefetch_bytes() const;

  bool is_default() const;
  std::string str() const;  // only the values that differ from the defaults
  // Throws ValueError naming a bad word.
  static BuiltinParams parse(const std::string& words);
  bool operator==(const BuiltinParams&) const = default;
};

}  // namespace hjit::backend
