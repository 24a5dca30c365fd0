// Automatic checkpointing (JitOptions::memory_budget_mb): a forward graph rewritten so that runs of
// its nodes become checkpoint ops, whose values the backward pass recomputes instead of keeping
// (MegEngine's sublinear memory, JAX's remat). Applied before differentiate().
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include <hjit/graph.h>

namespace hjit {

// The bytes of the values fwd computes that a compiled step stores rather than recomputes (all but
// element-wise and movement values): where runs are cut (at equal shares of them).
int64_t activation_bytes(const Graph& fwd);

struct CheckpointPlan {
  int runs = 0;                // checkpointed runs made (0: fwd as it was)
  int64_t budget_bytes = 0;
  int64_t plain_bytes = 0;     // the step's estimated peak without runs
  int64_t planned_bytes = 0;   // and with the runs made
  bool fits = false;           // planned_bytes <= budget_bytes
  std::string report;          // what was done, for the log
};

// The forward graph to differentiate for a step that holds at most budget_bytes at once, as
// peak_of(forward) estimates that step (the caller differentiates and asks the backend): fwd
// itself when its step fits; else fwd with its computing nodes cut into checkpointed runs (ops
// whose values the backward pass recomputes), as few runs as fit; else the runs estimated to hold
// least, when they hold less than fwd's step. Control flow ops stay as they are.
Graph checkpoint_to_fit(const Graph& fwd, int64_t budget_bytes, const std::function<int64_t(const Graph&)>& peak_of,
                        CheckpointPlan* plan = nullptr);

}  // namespace hjit
