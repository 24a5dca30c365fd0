// A model that reads values it computes as sizes, as the program of a module in segments
// (Module::from_program), and the loader that rebuilds one from a saved module (kind "onnx").
//
// The program's bytes: LoadOptions (module options aside: Module::load takes its own) | the
// arguments' structure, one entry per input of the model (none, a tensor, or a sequence of n
// items of a dtype) | the model (a ModelProto, external data read in).
#include <hjit/onnx.h>

#include "onnx_import/model_impl.h"
#include "support/binary_io.h"

namespace hjit::onnx_import {
namespace {

// The values of `like` rebuilt from flattened tensors, taken from `flat` at `at`.
Value unflatten_one(const Value& like, const std::vector<Tensor>& flat, size_t& at) {
  if (like.is_none()) return Value();
  if (like.is_tensor()) return flat.at(at++);
  std::vector<Tensor> items(flat.begin() + std::ptrdiff_t(at), flat.begin() + std::ptrdiff_t(at + like.items().size()));
  at += items.size();
  return Value::sequence(std::move(items), like.elem_type());
}

// A value holding the same data as v, copied inside the trace (a constant of the graph, not a
// captured parameter).
Value constant_copy(const Value& v) {
  auto copy = [](const Tensor& t) { return Tensor::from_bytes(t.data(), size_t(t.numel()) * size_t(dtype_size(t.dtype())), t.shape(), t.dtype()); };
  if (v.is_tensor()) return copy(v.tensor());
  if (v.is_none()) return v;
  std::vector<Tensor> items;
  for (const Tensor& t : v.items()) items.push_back(copy(t));
  return Value::sequence(std::move(items), v.elem_type());
}

enum class Kind : uint8_t { None = 0, Tensor = 1, Sequence = 2 };

std::string encode(const Model& model, const std::vector<Value>& traced_like) {
  const LoadOptions& o = model.impl().options;
  BinaryWriter w;
  w.u8(o.freeze);
  w.u64(o.dims.size());
  for (const auto& [dim, size] : o.dims) w.str(dim), w.i64(size);
  w.u8(o.dynamic);
  w.i64(o.max_bytes);
  w.i64(o.max_loop_trips);
  w.u8(o.autocast ? uint8_t(*o.autocast) : uint8_t(0xff));
  w.u64(traced_like.size());
  for (const Value& v : traced_like) {
    w.u8(uint8_t(v.is_none() ? Kind::None : v.is_tensor() ? Kind::Tensor : Kind::Sequence));
    w.u8(v.is_none() ? 0 : uint8_t(v.elem_type()));
    w.u64(v.is_sequence() ? v.items().size() : 0);
    if (v.is_sequence())
      for (const Tensor& item : v.items()) {
        w.u64(item.shape().size());
        for (int64_t d : item.shape()) w.i64(d);
      }
  }
  w.str(model.impl().proto.SerializeAsString());
  return w.out();
}

ModuleProgram decode(const std::string& bytes) {
  BinaryReader r(bytes);
  LoadOptions o;
  o.freeze = r.u8() != 0;
  const size_t dims = r.count(1 << 16);
  for (size_t k = 0; k < dims; ++k) {
    std::string dim = r.str();
    o.dims[dim] = r.i64();
  }
  o.dynamic = r.u8() != 0;
  o.max_bytes = r.i64();
  o.max_loop_trips = r.i64();
  const uint8_t autocast = r.u8();
  if (autocast != 0xff) {
    if (autocast >= kNumDTypes) throw ValueError("its program's autocast dtype is unknown");
    o.autocast = DType(autocast);
  }
  // (Examples of the structure only: a sequence's items are stand-ins, their types kept apart.)
  std::vector<Value> traced_like(r.count(1 << 16));
  std::vector<std::vector<TensorType>> item_types(traced_like.size());
  for (size_t i = 0; i < traced_like.size(); ++i) {
    const uint8_t kind = r.u8(), elem = r.u8();
    if (kind > uint8_t(Kind::Sequence) || elem >= kNumDTypes) throw ValueError("its program's arguments are not valid");
    const size_t items = r.count(1 << 16);
    for (size_t k = 0; k < items; ++k) {
      TensorType t{DType(elem), Shape(r.count(64))};
      for (int64_t& d : t.shape) d = r.i64();
      item_types[i].push_back(std::move(t));
    }
    if (kind == uint8_t(Kind::Tensor)) traced_like[i] = Tensor::zeros({0}, DType(elem));
    if (kind == uint8_t(Kind::Sequence))
      traced_like[i] = Value::sequence(std::vector<Tensor>(items, Tensor::zeros({0}, DType(elem))), DType(elem));
  }
  const std::string proto = r.str();
  if (!r.done()) throw ValueError("its program has bytes after its end");
  // (Model::parse checks the options and the model as reading a file does; no external data.)
  const Model model = Model::parse(proto, "", o);
  if (traced_like.size() != model.info().inputs.size()) throw ValueError("its program's arguments are not its model's inputs");
  ModuleProgram p = model_program(model, traced_like, {}, "");
  p.input_types.clear();
  for (size_t i = 0; i < traced_like.size(); ++i) {
    const ValueInfo& v = model.info().inputs[i];
    if (traced_like[i].is_tensor()) p.input_types.push_back(TensorType{v.dtype, v.shape});
    p.input_types.insert(p.input_types.end(), item_types[i].begin(), item_types[i].end());
  }
  return p;
}

const bool registered = (register_module_program("onnx", decode), true);

}  // namespace

FlatRun flat_run(const Model& model, const std::vector<Value>& traced_like, const std::map<std::string, Value>& fixed) {
  return [model, fixed, traced_like](const std::vector<Tensor>& in) {
    std::vector<Value> all;
    size_t at = 0, k = 0;
    for (const ValueInfo& v : model.info().inputs) {
      auto it = fixed.find(v.name);
      all.push_back(it == fixed.end() ? unflatten_one(traced_like[k++], in, at) : constant_copy(it->second));
    }
    if (at != in.size())
      throw ValueError(model.impl().who + "the module takes " + std::to_string(at) + " tensors, given " + std::to_string(in.size()));
    return flatten(model.run(all));
  };
}

ModuleProgram model_program(const Model& model, const std::vector<Value>& traced_like, const std::map<std::string, Value>& fixed,
                            const std::string& why) {
  (void)registered;
  ModuleProgram p;
  p.kind = fixed.empty() ? "onnx" : "";
  if (fixed.empty()) p.bytes = encode(model, traced_like);
  p.why = why;
  p.parameters = model.parameters();
  // The arguments: a tensor input as the model declares it (a symbolic dimension takes any size),
  // a sequence's items as the example's.
  size_t k = 0;
  for (const ValueInfo& v : model.info().inputs) {
    if (fixed.count(v.name)) continue;
    const Value& like = traced_like.at(k++);
    if (like.is_tensor()) p.input_types.push_back(TensorType{v.dtype, v.shape});
    if (like.is_sequence())
      for (const Tensor& item : like.items()) p.input_types.push_back(TensorType{item.dtype(), item.shape()});
  }
  p.run = flat_run(model, traced_like, fixed);
  return p;
}

}  // namespace hjit::onnx_import
