// Runs an ONNX graph node by node as hjit ops: eagerly on concrete tensors, or recorded into the
// active trace. Values (tensors, sequences, nones) live in scopes: a subgraph (If, Loop, Scan,
// SequenceMap) reads its parent's.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <hjit/onnx.h>

#include "onnx/onnx_pb.h"
#include "onnx_import/node_context.h"

namespace hjit::onnx_import {

using onnx::Value;
using Scope = std::map<std::string, Value>;

// What a model may take while it converts or runs eagerly (LoadOptions, validated where they entered).
struct Limits {
  int64_t max_bytes = 0;  // one tensor; 0: hjit's memory limit
  int64_t max_loop_trips = 1'000'000;
};

class Interpreter {
 public:
  Interpreter(int64_t opset, const Scope* outer, Limits limits) : opset_(opset), outer_(outer), limits_(limits) {}

  int64_t opset() const { return opset_; }
  const Limits& limits() const { return limits_; }
  // Binds the graph's inputs and initializers first (initializers not given by `bound` are read
  // from the graph), then runs every node; returns the graph's outputs.
  std::vector<Value> run(const ::onnx::GraphProto& graph, const Scope& bound) const;
  // Every value visible here (this scope's, then the outer scopes').
  Scope visible() const;
  // The value `name` computed again by the nodes before the one running now, with `replaced`
  // bound over the current values (what ONNX's Gradient differentiates).
  Value recompute(const std::string& name, const Scope& replaced) const;
  // What the DequantizeLinear node before the running one that gives `name` read; nullopt where
  // another kind of node (or an input) gives it.
  std::optional<Dequantized> dequantized(const std::string& name) const;
  // The factors a converter of this graph noted for the value `name` (NodeContext::note_factored).
  void note_factored(const std::string& name, Factored f) const { factored_[name] = std::move(f); }
  std::optional<Factored> factored(const std::string& name) const;

 private:
  std::optional<Value> lookup(const std::string& name) const;
  int64_t opset_;
  const Scope* outer_;
  Limits limits_;
  mutable Scope values_;
  mutable std::map<std::string, Factored> factored_;  // (this graph's values only)
  // The graph running and the index of its node running now (recompute).
  mutable const ::onnx::GraphProto* graph_ = nullptr;
  mutable int node_ = 0;
  // Drop each value of the graph's nodes after the last node that reads it (recompute does not,
  // for it reads one at the end).
  bool drop_dead_ = true;
  // Runs the graph's nodes [0, stop) on values_.
  void run_nodes(const ::onnx::GraphProto& graph, int stop) const;
};

}  // namespace hjit::onnx_import
