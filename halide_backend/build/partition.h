// Compiling a big graph as several pipelines. Two reasons:
//   - Halide lowers and LLVM compiles one pipeline on one core; a training step spends seconds
//     there (W9: 2 s on this 2-core machine). Cut at equal work, the parts are ordinary graphs: a
//     child process compiles every other one into the disk cache while this process compiles the
//     rest.
//   - Several of Halide's lowering passes take time quadratic in a pipeline's stages (inlining
//     them one at a time, bounds inference), and LLVM's more than linear in a function's size: a
//     chain of 4000 element-wise ops compiled as one pipeline took 3.4 s, 500 matmuls minutes.
//     Parts of bounded work make compile time linear in the graph's size.
// The values that cross a cut are stored between the calls; everything else stays fused.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "halide_backend/backend.h"
#include "halide_backend/runtime/partitioned.h"

namespace hjit::backend {

// A 4-D 8-bit value of a graph with integer convolutions crosses a cut [N, H, W, C]: the part that
// hands it on ends with a transpose by kToChannelsLast, the part that reads it starts with one of
// its parameter by kFromChannelsLast (which the built-in schedule reads as a value stored channels
// innermost).
inline const std::vector<int64_t> kToChannelsLast{0, 2, 3, 1}, kFromChannelsLast{0, 3, 1, 2};

// The graph cut into parts of equal compile cost (in element-wise ops: a contraction 24, a
// reduction 4), as many as keep each part within HJIT_PART_MAX_COST (default 384: 16 matmuls. 128
// compiled a GPT training step of 2 blocks in 4.6-6.0 s instead of 7.6-8.8, as fast, but its cuts
// held more values at once: a ResNet block's step 6.5 activations of temporaries, not 5.5), and,
// `at_once` (parts can be compiled in two processes), two at least when it has HJIT_PARTITION_WORK
// (default 96) nodes of work (contractions 4, reductions 2, others 1). Empty when not worth it.
std::vector<Part> partition(const Graph& g, bool at_once);

// What compiling g costs, in the units of partition()'s limit: how compiling parts is shared.
int64_t compile_cost(const Graph& g);

// The parts compile() makes of g (control flow split out before) under o: partition()'s where the
// schedule is the built-in one on the CPU, else none.
std::vector<Part> parts_to_compile(const Graph& g, const Options& o);

}  // namespace hjit::backend
