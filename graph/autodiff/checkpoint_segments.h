// Automatic checkpointing (JitOptions::memory_budget_mb): a forward graph rewritten so that runs of
// its nodes become checkpoint ops, whose values the backward pass recomputes instead of keeping
// (MegEngine's sublinear memory, JAX's remat). Applied before differentiate().
#pragma once
#include <cstdint>
#include <string>

#include <hjit/graph.h>

namespace hjit {

// The bytes of the values fwd computes that a compiled step stores rather than recomputes (all but
// element-wise and movement values): what a backward pass could keep.
int64_t activation_bytes(const Graph& fwd);

// fwd unchanged when its activation_bytes() fit in budget_bytes; else its computing nodes in runs
// of at most budget_bytes / 3 of values each, every run a checkpoint op (whose results are the
// run's values read after it). Control flow ops stay as they are. *report says what was done.
Graph checkpoint_to_fit(const Graph& fwd, int64_t budget_bytes, std::string* report = nullptr);

}  // namespace hjit
