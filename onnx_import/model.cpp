// hjit::onnx::Model: a model read and checked (model_file), its initializers split into
// parameters (floating point) and constants, run by the interpreter, traced into a Module.
#include <hjit/onnx.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <hjit/autocast.h>

#include "onnx_import/interpreter.h"
#include "onnx_import/model_file.h"
#include "onnx_import/model_impl.h"
#include "onnx_import/node_context.h"
#include "onnx_import/tensor_proto.h"
#include "support/log.h"

namespace hjit::onnx {

using namespace onnx_import;

namespace {

// The size a symbolic dimension LoadOptions::dims does not size is traced at, when dynamic.
constexpr int64_t kDynamicTraceSize = 8;

ValueInfo value_info(const ::onnx::ValueInfoProto& v, const std::string& who) {
  ValueInfo info;
  info.name = v.name();
  const ::onnx::TypeProto* type = &v.type();
  if (type->has_optional_type()) info.optional = true, type = &type->optional_type().elem_type();
  if (type->has_sequence_type()) info.sequence = true, type = &type->sequence_type().elem_type();
  if (!type->has_tensor_type())
    throw ValueError(who + "'" + v.name() + "' is not a tensor, a sequence of tensors or an optional of those " +
                     "(maps and sparse tensors are not inputs or outputs hjit takes)");
  const auto& tt = type->tensor_type();
  info.dtype = dtype_from_onnx(tt.elem_type(), who + "'" + v.name() + "'");
  for (const auto& d : tt.shape().dim()) {
    info.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
    info.dim_names.push_back(d.has_dim_param() ? d.dim_param() : "");
  }
  return info;
}

void count_ops(const ::onnx::GraphProto& g, std::map<std::string, int>& counts) {
  for (const auto& n : g.node()) {
    ++counts[n.op_type()];
    for (const auto& a : n.attribute()) {
      if (a.has_g()) count_ops(a.g(), counts);
      for (const auto& sub : a.graphs()) count_ops(sub, counts);
    }
  }
}

std::shared_ptr<Model::Impl> make_impl(const std::string& bytes, const std::string& base_dir, const std::string& who,
                                        const LoadOptions& options) {
  if (options.max_bytes < 0) throw ValueError(who + "LoadOptions::max_bytes is negative (0: hjit's memory limit)");
  if (options.max_loop_trips < 0) throw ValueError(who + "LoadOptions::max_loop_trips is negative");
  if (options.autocast && *options.autocast != DType::BF16 && *options.autocast != DType::F16)
    throw ValueError(who + "LoadOptions::autocast must be bf16 or f16 (or none), given " + dtype_name(*options.autocast));
  auto m = std::make_shared<Model::Impl>();
  m->who = who;
  m->options = options;
  m->proto = read_model(bytes, base_dir, who, options.max_bytes);
  m->opset = default_opset(m->proto, who);
  const ::onnx::GraphProto& g = m->proto.graph();
  ModelInfo& info = m->info;
  info.producer = m->proto.producer_name() + (m->proto.producer_version().empty() ? "" : " " + m->proto.producer_version());
  info.ir_version = m->proto.ir_version();
  info.opset = m->opset;
  std::set<std::string> initialized;
  for (const auto& t : g.initializer()) {
    initialized.insert(t.name());
    const DType dtype = dtype_from_onnx(t.data_type(), who + "initializer '" + t.name() + "'");
    if (!is_floating(dtype)) continue;  // integer initializers (shapes, indices) stay constants of the graph
    m->param_names.push_back(t.name());
    m->params.push_back(to_tensor(t, who + "initializer '" + t.name() + "'"));
    info.parameters += m->params.back().numel();
    info.parameter_bytes += m->params.back().numel() * dtype_size(dtype);
  }
  for (const auto& v : g.input())
    if (!initialized.count(v.name())) info.inputs.push_back(value_info(v, who + "input "));
  for (const auto& v : g.output()) info.outputs.push_back(value_info(v, who + "output "));
  count_ops(g, info.op_counts);
  return m;
}

std::string dims_str(const ValueInfo& v) {
  std::string s = std::string(dtype_name(v.dtype)) + "[";
  for (size_t i = 0; i < v.shape.size(); ++i)
    s += (i ? "," : "") + (v.shape[i] >= 0 ? std::to_string(v.shape[i]) : v.dim_names[i].empty() ? "?" : v.dim_names[i]);
  return s + "]";
}

}  // namespace

std::string ValueInfo::str() const {
  std::string type = dims_str(*this);
  if (sequence) type = "seq(" + type + ")";
  if (optional) type = "optional(" + type + ")";
  return name + " " + type;
}

std::string ModelInfo::str() const {
  std::ostringstream os;
  os << "producer: " << (producer.empty() ? "unknown" : producer) << ", IR version " << ir_version << ", opset " << opset << "\n";
  os << "inputs:";
  for (const ValueInfo& v : inputs) os << "\n  " << v.str();
  os << "\noutputs:";
  for (const ValueInfo& v : outputs) os << "\n  " << v.str();
  os << "\nparameters: " << parameters << " elements, " << parameter_bytes << " bytes\nops:";
  for (const auto& [op, count] : op_counts) os << "\n  " << op << " x" << count;
  return os.str();
}

Model Model::read(const std::string& path, const LoadOptions& options) {
  const std::string who = "hjit::onnx: model '" + path + "': ";
  const std::string bytes = read_file(path, "model", options.max_bytes);
  const std::string dir = std::filesystem::path(path).parent_path().string();
  Timer t;
  Model m(make_impl(bytes, dir.empty() ? "." : dir, who, options));
  log().debug("onnx: read {} in {:.1f} ms: opset {}, {} nodes, {} parameters", path, t.ms(), m.impl_->opset,
              m.impl_->proto.graph().node_size(), m.impl_->params.size());
  return m;
}

Model Model::parse(const std::string& bytes, const std::string& base_dir, const LoadOptions& options) {
  return Model(make_impl(bytes, base_dir, "hjit::onnx: model: ", options));
}

const ModelInfo& Model::info() const { return impl_->info; }

std::vector<Tensor> Model::parameters() const { return impl_->params; }

std::vector<TensorType> Model::input_types() const {
  std::vector<TensorType> types;
  for (const ValueInfo& v : impl_->info.inputs) {
    if (v.sequence || v.optional)
      throw ValueError(impl_->who + "input '" + v.str() + "' is not a tensor: give example values to Model::module_for");
    TensorType t{v.dtype, v.shape};
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] >= 0) continue;
      auto it = impl_->options.dims.find(v.dim_names[d]);
      if (impl_->options.dynamic && it == impl_->options.dims.end()) {
        t.shape[d] = kDynamicTraceSize;
        continue;
      }
      if (v.dim_names[d].empty() || it == impl_->options.dims.end())
        throw ValueError(impl_->who + "input '" + v.name + "' has a dimension " +
                         (v.dim_names[d].empty() ? std::string("without a size or a name") : "'" + v.dim_names[d] + "'") +
                         " (dimension " + std::to_string(d) + " of " + dims_str(v) +
                         "): give its size in LoadOptions::dims, or pass input types to Model::module");
      if (it->second < 0) throw ValueError(impl_->who + "LoadOptions::dims gives '" + it->first + "' a negative size");
      t.shape[d] = it->second;
    }
    types.push_back(t);
  }
  return types;
}

std::vector<Value> Model::run(const std::vector<Value>& inputs) const {
  const Impl& m = *impl_;
  const std::vector<ValueInfo>& declared = m.info.inputs;
  if (inputs.size() != declared.size())
    throw ValueError(m.who + "the model takes " + std::to_string(declared.size()) + " inputs, given " + std::to_string(inputs.size()));
  Scope bound;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueInfo& v = declared[i];
    const Value& x = inputs[i];
    const bool kind_fits = x.is_none() ? v.optional : x.is_sequence() == v.sequence;
    if (!kind_fits) throw ValueError(m.who + "input '" + v.str() + "' is given " + x.str());
    if (!x.is_none() && x.elem_type() != v.dtype)
      throw DTypeError(m.who + "input '" + v.str() + "' is given " + x.str());
    auto fits = [&](const Tensor& t) {
      bool ok = t.shape().size() == v.shape.size();
      for (size_t d = 0; ok && d < v.shape.size(); ++d) ok = v.shape[d] < 0 || v.shape[d] == t.shape()[d];
      return ok;
    };
    if (x.is_tensor() && !fits(x.tensor())) throw ShapeError(m.who + "input '" + v.str() + "' is given " + x.str());
    bound[v.name] = x;
  }
  for (size_t k = 0; k < m.params.size(); ++k) bound[m.param_names[k]] = m.params[k];
  // (The scope is this run's, and a trace of it records the conversions: a module made from the
  // model computes by the same rules whatever scope its calls are made in.)
  std::optional<Autocast> mixed;
  if (m.options.autocast) mixed.emplace(*m.options.autocast);
  return Interpreter(m.opset, nullptr, {m.options.max_bytes, m.options.max_loop_trips}).run(m.proto.graph(), bound);
}

std::vector<Tensor> Model::operator()(const std::vector<Tensor>& inputs) const {
  std::vector<Tensor> outs;
  const std::vector<Value> values = run(std::vector<Value>(inputs.begin(), inputs.end()));
  for (size_t k = 0; k < values.size(); ++k) {
    if (!values[k].is_tensor())
      throw ValueError(impl_->who + "output '" + impl_->info.outputs[k].name + "' is " + values[k].str() +
                       ": run a model with sequence or optional outputs through Model::run");
    outs.push_back(values[k].tensor());
  }
  return outs;
}

Module Model::module() const { return module(input_types()); }

Module Model::module(const std::vector<TensorType>& input_types, const std::map<std::string, Tensor>& fixed) const {
  if (input_types.size() != impl_->info.inputs.size())
    throw ValueError(impl_->who + "the model takes " + std::to_string(impl_->info.inputs.size()) + " inputs, given " +
                     std::to_string(input_types.size()) + " input types");
  std::vector<Value> examples;
  for (const TensorType& t : input_types) examples.push_back(Tensor::zeros(t.shape, t.dtype));
  return module_for(examples, std::map<std::string, Value>(fixed.begin(), fixed.end()));
}


Module Model::module_for(const std::vector<Value>& examples, const std::map<std::string, Value>& fixed) const {
  const std::vector<ValueInfo>& declared = impl_->info.inputs;
  if (examples.size() != declared.size())
    throw ValueError(impl_->who + "the model takes " + std::to_string(declared.size()) + " inputs, given " +
                     std::to_string(examples.size()) + " examples");
  for (const auto& [name, value] : fixed)
    if (std::none_of(declared.begin(), declared.end(), [&](const ValueInfo& v) { return v.name == name; }))
      throw ValueError(impl_->who + "the model has no input '" + name + "' to fix");
  std::vector<Value> traced_like;  // the examples of the module's arguments
  for (size_t i = 0; i < declared.size(); ++i)
    if (!fixed.count(declared[i].name)) traced_like.push_back(examples[i]);
  const FlatRun fn = flat_run(*this, traced_like, fixed);
  std::string name = impl_->proto.graph().name();
  if (name.empty()) name = "onnx_model";
  // The symbolic dimensions of tensor inputs traced at 2 or more: the module's dynamic_dims.
  ModuleOptions options = impl_->options.module;
  if (impl_->options.dynamic) {
    size_t flat = 0, k = 0;
    for (size_t i = 0; i < declared.size(); ++i) {
      if (fixed.count(declared[i].name)) continue;
      const Value& like = traced_like[k++];
      if (like.is_tensor())
        for (size_t d = 0; d < declared[i].shape.size() && d < like.tensor().shape().size(); ++d)
          if (declared[i].shape[d] < 0 && like.tensor().shape()[d] >= 2) options.dynamic_dims.emplace_back(int(flat), int(d));
      flat += like.is_tensor() ? 1 : like.is_sequence() ? like.items().size() : 0;
    }
  }
  // (A size one pipeline cannot serve keeps the module at the traced sizes, from the same trace.)
  options.fixed_sizes_otherwise = true;
  const SaveOptions save{.freeze_parameters = impl_->options.freeze};
  Timer t;
  try {
    Module m = make_module(name, options, save, fn, flatten(traced_like));
    log().debug("onnx: converted '{}' in {:.1f} ms: {} graph nodes, {} dynamic dimensions", name, t.ms(), m.graph().nodes.size(),
                m.dynamic_dims().size());
    return m;
  } catch (const ValueError& e) {
    // (NodeContext::read_known's refusal: a value the conversion reads comes from the inputs.)
    const std::string what = e.what();
    const size_t at = what.find(kMustBeKnown);
    if (at == std::string::npos) throw;
    if (!impl_->options.graph_breaks) throw ValueError(what + "; LoadOptions::graph_breaks is off, which asks for one graph");
    // The reason without read_known's advice: "node 'y' (NonZero): input 0 ('x') is computed from the model's inputs".
    std::string why = what.substr(0, at == 0 ? 0 : at - 1) + " is computed from the model's inputs";
    if (why.rfind("hjit::onnx: ", 0) == 0) why = why.substr(12);
    log().debug("onnx: '{}' runs in segments between graph breaks: {}", name, why);
    return Module::from_program(name, model_program(*this, traced_like, fixed, why), impl_->options.module);
  }
}

Compiled Model::compiled_for(const std::vector<Value>& examples) const {
  const Module m = module_for(examples);
  return Compiled([m](const std::vector<Tensor>& in) { return std::vector<Tensor>(m.call(in)); }, m.why_segmented());
}

std::vector<std::string> supported_ops() { return converted_ops(); }

Module load(const std::string& path, const LoadOptions& options) { return Model::read(path, options).module(); }

Tensor parse_tensor(const std::string& bytes) {
  ::onnx::TensorProto p;
  if (!p.ParseFromString(bytes)) throw ValueError("hjit::onnx: not a TensorProto (the protobuf does not parse)");
  return to_tensor(p, "hjit::onnx: tensor '" + p.name() + "'");
}

Tensor read_tensor(const std::string& path) {
  try {
    return parse_tensor(read_file(path, "tensor file"));
  } catch (const ValueError& e) {
    const std::string what = e.what();
    if (what.find(path) != std::string::npos) throw;
    throw ValueError(what + " (in '" + path + "')");
  }
}

void save_tensor(const std::string& path, const Tensor& tensor, const std::string& name) {
  const std::string bytes = to_proto(tensor, name).SerializeAsString();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw ValueError("hjit::onnx: cannot write the tensor file '" + path + "'");
}

}  // namespace hjit::onnx
