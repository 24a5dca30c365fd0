// What a Model holds (hjit::onnx::Model's copies share it), and the program a model that runs in
// segments between graph breaks becomes (model_program.cpp).
#pragma once
#include <map>
#include <string>
#include <vector>

#include <hjit/onnx.h>

#include "onnx/onnx_pb.h"

namespace hjit::onnx {

struct Model::Impl {
  std::string who;  // "hjit::onnx: model 'x.onnx': "
  ::onnx::ModelProto proto;
  int64_t opset = 0;
  LoadOptions options;
  ModelInfo info;
  std::vector<std::string> param_names;
  std::vector<Tensor> params;
};

}  // namespace hjit::onnx

namespace hjit::onnx_import {

using onnx::LoadOptions;
using onnx::Model;
using onnx::ModelInfo;
using onnx::Value;
using onnx::ValueInfo;

// The model's inputs rebuilt from the flattened tensors of a call, like `traced_like` (the
// examples of the arguments), with the `fixed` inputs' values copied in: what a module made from
// the model runs, flattened.
using FlatRun = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
FlatRun flat_run(const Model& model, const std::vector<Value>& traced_like, const std::map<std::string, Value>& fixed);

// The model as the program of a module in segments (Module::from_program): `run` is flat_run's,
// the arguments typed as the model declares them (a symbolic dimension: any size), the parameters
// the model's. Saved as kind "onnx" (the model, its LoadOptions and the arguments' structure)
// unless inputs are fixed, whose values it does not keep.
ModuleProgram model_program(const Model& model, const std::vector<Value>& traced_like, const std::map<std::string, Value>& fixed,
                            const std::string& why);

}  // namespace hjit::onnx_import
