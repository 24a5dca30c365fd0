#pragma once
#include <hjit/graph.h>

#include "graph/passes/fold_constants.h"

namespace hjit {

// The pass pipeline every traced graph goes through, as one straight line:
//   verify, dce, simplify, fold_constants (when an evaluator is given), cse, simplify, dce.
// The verifier runs after every pass; HJIT_LOG=debug logs each pass with its node count and time.
Graph optimize(const Graph& g, const ConstEvaluator* eval);

}  // namespace hjit
