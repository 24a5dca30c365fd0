// Compiling a big graph as two pipelines at once. Halide lowers and LLVM compiles one pipeline on
// one core; a training step spends seconds there (W9: 2 s on this 2-core machine). Cut in two at
// the middle of its work (in node order), each half is an ordinary graph: one is compiled in a
// child process, which leaves it in the disk cache, while this process compiles the other. The
// values that cross the cut are stored between the two calls; everything else stays fused.
#pragma once
#include <memory>
#include <vector>

#include "halide_backend/backend.h"

namespace hjit::backend {

struct Part {
  Graph graph;  // no updates: every value it hands on is an output
  // Inputs: the caller's inputs, in order, then the values earlier parts computed (boundary ids).
  std::vector<int> boundary_inputs;
  // Per output of graph: >= 0: the caller's output slot (graph outputs, then updates); < 0:
  // boundary value -1 - id.
  std::vector<int> output_slot;
};

// The graph cut in two when it is worth it: nodes of work (weighted: contractions 4, reductions
// 2, other computing nodes 1) at least HJIT_PARTITION_WORK (default 96). Empty otherwise.
std::vector<Part> partition(const Graph& g);

// Runs the parts in order, holding the values that cross between them.
std::shared_ptr<const Executable> make_partitioned(const Graph& g, std::vector<Part> parts,
                                                   std::vector<std::shared_ptr<const Executable>> exes);

}  // namespace hjit::backend
