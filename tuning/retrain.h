// Adams2019's cost model, retrained on this machine: each Adams2019 candidate a tuning run
// measures leaves its featurization (AutoSchedulerResults::featurization) and its time as a
// sample beside the database; retrain_cost_model (shipped with Debian's Halide beside the
// plugins) fits the weights to them, and later Adams2019 searches use those weights.
#pragma once
#include <string>

namespace hjit::tuning {

struct CostModelFiles {
  std::string dir;  // <db>.adams2019/: samples and weights
  explicit CostModelFiles(const std::string& db_path);
  std::string featurization(long long pipeline, long long candidate) const;
  // The latest retrained weights, <dir>/retrained-<n>.weights ("" when none): each retraining
  // writes the next n, so a candidate's request (which names its weights file) says which
  // model searched.
  std::string weights() const;
  int samples() const;
};

// Turns a measured featurization into a sample (featurization_to_sample); false when it cannot.
bool add_sample(const CostModelFiles& f, const std::string& featurization, double ms, long long pipeline, long long candidate);

// Retrains on every sample there (starting from the current weights, else Halide's), writing the
// weights. Returns a one-line account, or the reason it did not.
std::string retrain(const CostModelFiles& f, int epochs, double timeout_s);

}  // namespace hjit::tuning
