// hjit::onnx::Value (a tensor, a sequence of tensors, or none) and its protobufs: ONNX's
// SequenceProto and OptionalProto, read as the model declares the value.
#include <hjit/onnx.h>

#include <hjit/error.h>

#include "onnx/onnx-data_pb.h"
#include "onnx_import/model_file.h"
#include "onnx_import/tensor_proto.h"

namespace hjit::onnx {

Value::Value(Tensor tensor) : kind_(Kind::Tensor), tensor_(std::move(tensor)) {
  if (!tensor_.defined()) throw ValueError("hjit::onnx: a Value made of an undefined tensor");
  elem_ = tensor_.dtype();
}

Value Value::sequence(std::vector<Tensor> items, DType elem) {
  for (const Tensor& t : items)
    if (!t.defined() || t.dtype() != elem)
      throw DTypeError(std::string("hjit::onnx: a sequence of ") + dtype_name(elem) + " holds " +
                       (t.defined() ? dtype_name(t.dtype()) : "an undefined tensor"));
  Value v;
  v.kind_ = Kind::Sequence;
  v.items_ = std::move(items);
  v.elem_ = elem;
  return v;
}

const Tensor& Value::tensor() const {
  if (kind_ != Kind::Tensor) throw ValueError("hjit::onnx: the value is " + str() + ", not a tensor");
  return tensor_;
}

const std::vector<Tensor>& Value::items() const {
  if (kind_ != Kind::Sequence) throw ValueError("hjit::onnx: the value is " + str() + ", not a sequence");
  return items_;
}

DType Value::elem_type() const { return elem_; }

std::string Value::str() const {
  auto type = [](const Tensor& t) { return std::string(dtype_name(t.dtype())) + shape_str(t.shape()); };
  switch (kind_) {
    case Kind::None: return "none";
    case Kind::Tensor: return type(tensor_);
    case Kind::Sequence: break;
  }
  std::string s = "seq(" + std::to_string(items_.size()) + (items_.empty() ? std::string(" x ") + dtype_name(elem_) : ":");
  for (size_t i = 0; i < items_.size(); ++i) s += (i ? ", " : " ") + type(items_[i]);
  return s + ")";
}

std::vector<Tensor> flatten(const std::vector<Value>& values) {
  std::vector<Tensor> out;
  for (const Value& v : values) {
    if (v.is_tensor()) out.push_back(v.tensor());
    if (v.is_sequence()) out.insert(out.end(), v.items().begin(), v.items().end());
  }
  return out;
}

Value read_value(const std::string& path, const ValueInfo& as) {
  try {
    return parse_value(onnx_import::read_file(path, "value file"), as);
  } catch (const ValueError& e) {
    const std::string what = e.what();
    if (what.find(path) != std::string::npos) throw;
    throw ValueError(what + " (in '" + path + "')");
  }
}

Value parse_value(const std::string& bytes, const ValueInfo& as) {
  const std::string who = "hjit::onnx: " + as.name + " (" + as.str() + ")";
  if (!as.optional && !as.sequence) return parse_tensor(bytes);
  auto sequence = [&](const ::onnx::SequenceProto& p) {
    if (p.elem_type() != ::onnx::SequenceProto::TENSOR && !(p.elem_type() == 0 && p.tensor_values_size() == 0))
      throw ValueError(who + ": a sequence whose elements are not tensors (maps, sequences and sparse tensors are not read)");
    std::vector<Tensor> items;
    for (const auto& t : p.tensor_values()) items.push_back(onnx_import::to_tensor(t, who + " element"));
    return Value::sequence(std::move(items), as.dtype);
  };
  if (!as.optional) {
    ::onnx::SequenceProto p;
    if (!p.ParseFromString(bytes)) throw ValueError(who + ": not a SequenceProto (the protobuf does not parse)");
    return sequence(p);
  }
  ::onnx::OptionalProto p;
  if (!p.ParseFromString(bytes)) throw ValueError(who + ": not an OptionalProto (the protobuf does not parse)");
  if (p.has_tensor_value() && !as.sequence) return onnx_import::to_tensor(p.tensor_value(), who);
  if (p.has_sequence_value() && as.sequence) return sequence(p.sequence_value());
  if (p.has_tensor_value() || p.has_sequence_value() || p.has_map_value() || p.has_optional_value() || p.has_sparse_tensor_value())
    throw ValueError(who + ": the OptionalProto holds another kind of value than the model declares");
  return Value();
}

}  // namespace hjit::onnx
