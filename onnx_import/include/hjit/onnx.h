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
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <hjit/calibration.h>
#include <hjit/module.h>

namespace hjit::onnx {

struct LoadOptions {
  ModuleOptions module{};  // how the module compiles (opt_level, autoscheduler, tuning_db)
  // Initializers become constants of the graph instead of the module's parameters.
  bool freeze = false;
  // Sizes of the symbolic dimensions of the inputs, by name ("N" -> 8): the size a module is
  // traced at. With `dynamic`, a dimension not given here is traced at 8; without, any input
  // dimension without a size (unnamed, or named and not given here) is a ValueError naming it.
  std::map<std::string, int64_t> dims{};
  // Symbolic input dimensions (a batch "N", a sequence length) become ModuleOptions::dynamic_dims:
  // the module compiles once and runs every size of them. A model that cannot be one pipeline for
  // every size (its graph changes with the size) compiles for the traced sizes, and HJIT_LOG=debug
  // says why.
  bool dynamic = true;
  // A model that reads a value it computes as a size (a shape, axes, a count from its inputs, an
  // output size that depends on values: NonZero, NonMaxSuppression) cannot be one graph: true, the
  // module runs in segments between graph breaks (Module::segmented(): each call runs the model's
  // host steps, the graph up to each read computed compiled, or eagerly where small; saved as
  // any module); false, a ValueError naming the node and the input whose value it reads.
  bool graph_breaks = true;
  // The most bytes the model may take: its file with its external data, and any one tensor it
  // makes while it is converted or run eagerly (checked before it is made: a ResourceError naming
  // the node). 0: hjit's memory limit (hjit::set_memory_limit), which bounds all of them together.
  int64_t max_bytes = 0;
  // The most trips a Loop whose trips are decided while converting (unrolled, or run eagerly) may
  // make: past it, a ResourceError naming the node instead of a conversion that never ends.
  int64_t max_loop_trips = 1'000'000;
  // Mixed precision for every run of the model, eager and compiled: BF16 or F16 computes its
  // contractions in that dtype by hjit::autocast's rules (the same as loading it inside an
  // autocast scope); none: as the model's types say. Another dtype is a ValueError.
  std::optional<DType> autocast{};
};

// A value of an ONNX graph: a tensor, a sequence of tensors (ONNX's seq(tensor)), or an optional
// without an element ("none"; an optional holding an element is that tensor or sequence).
class Value {
 public:
  enum class Kind { None, Tensor, Sequence };
  Value() = default;  // none
  Value(Tensor tensor);  // NOLINT(google-explicit-constructor): every tensor is a value
  // A sequence; elem is the element type, which an empty sequence still has.
  static Value sequence(std::vector<Tensor> items, DType elem);

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_tensor() const { return kind_ == Kind::Tensor; }
  bool is_sequence() const { return kind_ == Kind::Sequence; }
  const Tensor& tensor() const;               // ValueError unless a tensor
  const std::vector<Tensor>& items() const;  // ValueError unless a sequence
  DType elem_type() const;                    // of the tensor or of the sequence's elements
  std::string str() const;                    // "f32[2,3]", "seq(2: f32[2], f32[3])", "none"

 private:
  Kind kind_ = Kind::None;
  Tensor tensor_;
  std::vector<Tensor> items_;
  DType elem_ = DType::F32;
};

// The tensors of these values in order: a tensor itself, a sequence's items, nothing for none (how
// a Module made by Model::module_for takes and returns them).
std::vector<Tensor> flatten(const std::vector<Value>& values);

// One input or output of a model, as the file declares it (a symbolic dimension is -1 in shape,
// its name in dim_names). For a sequence or an optional, dtype and shape are its elements'.
struct ValueInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::vector<std::string> dim_names;
  bool sequence = false;  // seq(tensor), or optional(seq(tensor))
  bool optional = false;  // optional(...): may be none
  std::string str() const;  // "input f32[N,3,224,224]", "x seq(f32[?])", "y optional(f32[2])"
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

class Compiled;

// A model read, checked and converted: calling it runs its nodes as hjit ops, eagerly on concrete
// tensors or recorded into the active trace (jit, grad, make_module). Copies share the model.
class Model {
 public:
  static Model read(const std::string& path, const LoadOptions& options = {});
  // From the bytes of a .onnx file; external data is read relative to base_dir ("" : none allowed).
  static Model parse(const std::string& bytes, const std::string& base_dir = "", const LoadOptions& options = {});

  const ModelInfo& info() const;
  // The inputs' types with the symbolic dimensions sized from LoadOptions::dims (8 where not given
  // and LoadOptions::dynamic; otherwise a ValueError).
  std::vector<TensorType> input_types() const;
  // The initializers, in file order: the parameters of the modules this model makes.
  std::vector<Tensor> parameters() const;

  // Every output of the graph, in order. Inputs in the model's order (initializers excluded).
  // A model with sequence or optional inputs or outputs runs through run().
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  std::vector<Value> run(const std::vector<Value>& inputs) const;

  // A module traced for these input types (default: input_types()). Inputs named in `fixed` are
  // not arguments of the module: their values are baked in (an input the model reads as a shape,
  // axes or pads, which a compiled pipeline needs when it is built, rather than as data). With
  // LoadOptions::dynamic, the inputs' symbolic dimensions are its dynamic_dims (where traced at 2
  // or more). A model that reads a value it computes as a size makes a module in segments
  // (LoadOptions::graph_breaks; Module::segmented() says so and why).
  Module module() const;
  Module module(const std::vector<TensorType>& input_types, const std::map<std::string, Tensor>& fixed = {}) const;
  // A module for inputs like these examples (their dtypes and shapes, and each sequence's length,
  // which is resolved while converting as ONNX's sequence ops are): it takes and returns the
  // flattened values (flatten()), every sequence's items in order.
  Module module_for(const std::vector<Value>& examples, const std::map<std::string, Value>& fixed = {}) const;
  // module_for(examples) as a callable that says whether it runs in segments (kept for callers of
  // the first version of segments; a module says the same through Module::segmented()).
  Compiled compiled_for(const std::vector<Value>& examples) const;

  struct Impl;
  const Impl& impl() const { return *impl_; }  // (opaque: the importer's own files read it)

 private:
  explicit Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// A model compiled by Model::compiled_for: it takes and returns the flattened values (flatten()).
class Compiled {
 public:
  using Call = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  Compiled(Call call, std::string why_segmented) : call_(std::move(call)), why_segmented_(std::move(why_segmented)) {}
  std::vector<Tensor> operator()(const std::vector<Tensor>& flat_inputs) const { return call_(flat_inputs); }
  // Whether it runs in segments between graph breaks, and the read that made it ("" : one module).
  bool segmented() const { return !why_segmented_.empty(); }
  const std::string& why_segmented() const { return why_segmented_; }

 private:
  Call call_;
  std::string why_segmented_;
};

// The op types of the default domain hjit converts, sorted.
std::vector<std::string> supported_ops();

// Model::read(path, options).module(): the model as a Module, compiled on its first call; in
// segments between graph breaks where it reads values as sizes (LoadOptions::graph_breaks).
Module load(const std::string& path, const LoadOptions& options = {});

// The options of calibration (hjit/calibration.h), as hjit::nn::quantize takes them.
using QuantizeOptions = hjit::QuantizeOptions;
// Post-training static quantization into the QDQ form ONNX Runtime's quantizer writes, which
// load() computes on integer kernels (docs/low-precision.md): the activations in and out of every
// Conv, MatMul, Gemm, Add and pooling quantized to u8 per tensor, from ranges calibrated on
// `calibration` (batches of the model's inputs, run eagerly), each behind a QuantizeLinear/
// DequantizeLinear pair (a Relu they make redundant goes), and the weight of every Conv (2-d),
// MatMul and Gemm whose weight is an f32 initializer stored as i8 per output channel (symmetric).
void quantize(const std::string& path, const std::string& out_path, const std::vector<std::vector<Tensor>>& calibration,
              const QuantizeOptions& options = {});

// A TensorProto file (the test_data_set_N/*.pb of ONNX's test suite), any numeric dtype.
Tensor read_tensor(const std::string& path);
Tensor parse_tensor(const std::string& bytes);
// A TensorProto, SequenceProto or OptionalProto file (the test data of sequence and optional
// values), read as the model declares the value (the three protobufs cannot be told apart).
Value read_value(const std::string& path, const ValueInfo& as);
Value parse_value(const std::string& bytes, const ValueInfo& as);
void save_tensor(const std::string& path, const Tensor& tensor, const std::string& name = "");

}  // namespace hjit::onnx
