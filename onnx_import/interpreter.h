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

namespace hjit::onnx_import {

using onnx::Value;
using Scope = std::map<std::string, Value>;

class Interpreter {
 public:
  Interpreter(int64_t opset, const Scope* outer) : opset_(opset), outer_(outer) {}

  int64_t opset() const { return opset_; }
  // Binds the graph's inputs and initializers first (initializers not given by `bound` are read
  // from the graph), then runs every node; returns the graph's outputs.
  std::vector<Value> run(const ::onnx::GraphProto& graph, const Scope& bound) const;
  // Every value visible here (this scope's, then the outer scopes').
  Scope visible() const;

 private:
  std::optional<Value> lookup(const std::string& name) const;
  int64_t opset_;
  const Scope* outer_;
  mutable Scope values_;
};

}  // namespace hjit::onnx_import
