// Models from outside: ONNX files read, checked and converted into hjit ops.
//
//   hjit::Module m = hjit::onnx::load("resnet50.onnx");   // read, checked, converted
//   hjit::Tensor logits = m(image);                         // compiled on the first call
//   hjit::Tensor t = hjit::onnx::read_tensor("input_0.pb");
//   hjit::onnx::save_tensor("out_0.pb", logits);
//
// The model is checked and its shapes inferred by ONNX's own library (ONNX 1.12: opsets 7 to 17 of
// the default domain) before conversion. Every node becomes hjit ops, so a loaded model is an
// ordinary Module (save, freeze, export_library, hjit-tune --module), and a Model runs eagerly or
// inside jit/grad like any C++ function. Anything wrong with the file (truncated, inconsistent,
// unknown ops, opsets out of range, external data outside the model's folder) is a ValueError
// naming the node.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <hjit/module.h>

namespace hjit::onnx {

struct LoadOptions {
  ModuleOptions module{};  // how the module compiles (opt_level, autoscheduler, tuning_db)
  // Initializers become constants of the graph instead of the module's parameters.
  bool freeze = false;
  // Sizes of the symbolic dimensions of the inputs, by name ("N" -> 8); any input dimension
  // without a size (unnamed, or named and not given here) is a ValueError naming it.
  std::map<std::string, int64_t> dims{};
};

// One input or output of a model, as the file declares it (a symbolic dimension is -1 in shape,
// its name in dim_names).
struct ValueInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::vector<std::string> dim_names;
  std::string str() const;  // "input f32[N,3,224,224]"
};

struct ModelInfo {
  std::string producer;  // "pytorch 1.13.1"
  int64_t ir_version = 0;
  int64_t opset = 0;  // of the default domain
  std::vector<ValueInfo> inputs, outputs;
  std::map<std::string, int> op_counts;  // op type -> nodes (subgraphs included)
  int64_t parameters = 0;                // initializer elements
  int64_t parameter_bytes = 0;
  std::string str() const;
};

// A model read, checked and converted: calling it runs its nodes as hjit ops, eagerly on concrete
// tensors or recorded into the active trace (jit, grad, make_module). Copies share the model.
class Model {
 public:
  static Model read(const std::string& path, const LoadOptions& options = {});
  // From the bytes of a .onnx file; external data is read relative to base_dir ("" : none allowed).
  static Model parse(const std::string& bytes, const std::string& base_dir = "", const LoadOptions& options = {});

  const ModelInfo& info() const;
  // The inputs' types with the symbolic dimensions sized from LoadOptions::dims (ValueError when one
  // is not given).
  std::vector<TensorType> input_types() const;
  // The initializers, in file order: the parameters of the modules this model makes.
  std::vector<Tensor> parameters() const;

  // Every output of the graph, in order. Inputs in the model's order (initializers excluded).
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;

  // A module traced for these input types (default: input_types()). Inputs named in `fixed` are
  // not arguments of the module: their values are baked in (an input the model reads as a shape,
  // axes or pads, which a compiled pipeline needs when it is built, rather than as data).
  Module module() const;
  Module module(const std::vector<TensorType>& input_types, const std::map<std::string, Tensor>& fixed = {}) const;

  struct Impl;

 private:
  explicit Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// The op types of the default domain hjit converts, sorted.
std::vector<std::string> supported_ops();

// Model::read(path, options).module(): the model as a Module, compiled on its first call.
Module load(const std::string& path, const LoadOptions& options = {});

// A TensorProto file (the test_data_set_N/*.pb of ONNX's test suite), any numeric dtype.
Tensor read_tensor(const std::string& path);
Tensor parse_tensor(const std::string& bytes);
void save_tensor(const std::string& path, const Tensor& tensor, const std::string& name = "");

}  // namespace hjit::onnx
