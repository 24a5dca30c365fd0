// Trial runs of a compiled candidate on made-up inputs: how fast it is, and whether it computes
// what another candidate computes. Used to guard autoscheduled schedules.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "halide_backend/backend.h"

namespace hjit::backend {

// Inputs hold deterministic values in [-1, 1) (integers in [0, 4), so that indices stay in
// range); outputs start as zeros.
struct TrialBuffers {
  std::vector<std::shared_ptr<void>> owned;
  std::vector<const void*> in;
  std::vector<void*> out;
  std::vector<TensorType> out_types;
  explicit TrialBuffers(const Graph& g);
};

// The fastest of a few runs, in ms; throws if the pipeline fails to run.
double trial_ms(const Executable& exe, TrialBuffers& b);

// Where two runs' outputs differ beyond what reassociating a float sum explains ("" if nowhere).
std::string first_difference(const TrialBuffers& a, const TrialBuffers& reference);

}  // namespace hjit::backend
