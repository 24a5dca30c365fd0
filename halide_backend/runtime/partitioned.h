// A graph compiled in parts (build/partition.h) runs as its parts' pipelines one after another;
// a value between parts is held from the part that computes it to the last that reads it.
#pragma once
#include <memory>
#include <vector>

#include "halide_backend/backend.h"

namespace hjit::backend {

struct Part {
  Graph graph;  // no updates: every value it hands on is an output
  // Inputs: the caller's inputs it reads (their indices, in order), then the values earlier parts
  // computed (boundary ids). Only what it reads: a model's layers, each reading its own weights,
  // are then parts alike, compiled once.
  std::vector<int> caller_inputs;
  std::vector<int> boundary_inputs;
  // Per output of graph: >= 0: the caller's output slot (graph outputs, then updates); < 0:
  // boundary value -1 - id.
  std::vector<int> output_slot;
};

// The values between parts: each one's bytes (at least 64) by boundary id, per part the values no
// later part reads (freed after it), and the most they hold at once.
struct Boundaries {
  std::vector<size_t> bytes;
  std::vector<std::vector<int>> frees_after;
  int64_t most_held = 0;
};
Boundaries plan_boundaries(const std::vector<Part>& parts);

class PartitionedExecutable final : public Executable {
 public:
  PartitionedExecutable(std::vector<Part> parts, std::vector<std::shared_ptr<const Executable>> exes);
  void run(const void* const* inputs, void* const* outputs) const override;
  std::string device_code() const override;
  std::string name() const override { return exes_.front()->name(); }
  // The most the values between the parts take at once, and the most any part took besides.
  int64_t temporary_bytes() const override;
  std::string explain() const override;
  std::string summary() const override;

  // What an exported library runs in the same order (export/plan.h).
  const std::vector<Part>& parts() const { return parts_; }
  const std::vector<std::shared_ptr<const Executable>>& executables() const { return exes_; }
  const Boundaries& boundaries() const { return boundaries_; }

 private:
  std::vector<Part> parts_;
  std::vector<std::shared_ptr<const Executable>> exes_;
  Boundaries boundaries_;
};

}  // namespace hjit::backend
