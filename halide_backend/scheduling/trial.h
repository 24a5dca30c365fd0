// Trial runs of a compiled candidate on made-up inputs: how fast it is, and whether it computes
// what another candidate computes. Used to guard autoscheduled schedules.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "halide_backend/backend.h"

namespace hjit::backend {

// What integer inputs hold. Varied: 1 to 4, never zero, so that a schedule that zeroes what it
// should keep (or keeps what it should zero) shows (booleans are half true); floats are in
// [-1, 1). Zeros: integers 0, the one index in range of every non-empty axis, for pipelines that
// gather with indices and raise on Varied's (an embedding of 2 rows).
enum class TrialInts { Varied, Zeros };

// Deterministic inputs; outputs start as zeros.
struct TrialBuffers {
  std::vector<std::shared_ptr<void>> owned;
  std::vector<const void*> in;
  std::vector<void*> out;
  std::vector<TensorType> out_types;
  TrialBuffers(const Graph& g, TrialInts ints);
};

// The fastest of a few runs, in ms, not counting runs that waited for a CPU another process held
// (support/run_queue.h) while there are others; throws if the pipeline fails to run.
double trial_ms(const Executable& exe, TrialBuffers& b);

// Where two runs' outputs differ beyond what reassociating a float sum explains ("" if nowhere).
std::string first_difference(const TrialBuffers& a, const TrialBuffers& reference);

}  // namespace hjit::backend
