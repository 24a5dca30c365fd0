// Runs an ONNX graph node by node as hjit ops: eagerly on concrete tensors, or recorded into the
// active trace. Values live in scopes: a subgraph (If, Loop, Scan) reads its parent's.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <hjit/tensor.h>

#include "onnx/onnx_pb.h"

namespace hjit::onnx_import {

class Interpreter {
 public:
  Interpreter(int64_t opset, const std::map<std::string, Tensor>* outer) : opset_(opset), outer_(outer) {}

  int64_t opset() const { return opset_; }
  // Binds the graph's inputs and initializers first (initializers not given by `bound` are read
  // from the graph), then runs every node; returns the graph's outputs.
  std::vector<Tensor> run(const ::onnx::GraphProto& graph, const std::map<std::string, Tensor>& bound) const;
  // Every value visible here (this scope's, then the outer scopes').
  std::map<std::string, Tensor> visible() const;

 private:
  std::optional<Tensor> lookup(const std::string& name) const;
  int64_t opset_;
  const std::map<std::string, Tensor>* outer_;
  mutable std::map<std::string, Tensor> values_;
};

}  // namespace hjit::onnx_import
