// Sequences and optionals, resolved while converting: a sequence is a list of tensors (traced or
// concrete) whose length is known then, so SequenceAt, SplitToSequence and SequenceMap become
// ordinary hjit ops on its items, and an optional is its element or none.
#include "onnx_import/ops/ops.h"
#include "onnx_import/tensor_proto.h"

namespace hjit::onnx_import {

namespace {

using Values = std::vector<Value>;

DType elem_of(const ::onnx::TypeProto& type, const NodeContext& n) {
  const ::onnx::TypeProto* t = &type;
  while (t->has_optional_type()) t = &t->optional_type().elem_type();
  while (t->has_sequence_type()) t = &t->sequence_type().elem_type();
  if (!t->has_tensor_type()) n.fail("gives a value whose elements are not tensors");
  return dtype_from_onnx(t->tensor_type().elem_type(), "hjit::onnx: " + n.where() + " output");
}

// A position of a sequence of `size` items: in [-size, size) to read or erase, [-size, size] to
// insert; made non-negative.
int64_t position(const NodeContext& n, size_t k, int64_t fallback, size_t size, bool insert) {
  int64_t p = fallback;
  if (n.has_input(k)) {
    const std::vector<int64_t> v = n.input_ints(k);
    if (v.size() != 1) n.fail("its position must hold one element");
    p = v[0];
  }
  const int64_t s = int64_t(size), hi = insert ? s : s - 1;
  if (p < -s || p > hi)
    n.fail("position " + std::to_string(p) + " is outside a sequence of " + std::to_string(size) + " tensors");
  return p < 0 ? p + s : p;
}

Value same_elems(const NodeContext& n, std::vector<Tensor> items, DType elem) {
  for (const Tensor& t : items)
    if (t.dtype() != elem)
      n.fail<DTypeError>(std::string("puts a ") + dtype_name(t.dtype()) + " tensor in a sequence of " + dtype_name(elem));
  return Value::sequence(std::move(items), elem);
}

Values SequenceEmpty(const NodeContext& n) {
  return {Value::sequence({}, dtype_from_onnx(int(n.attr_int("dtype", ::onnx::TensorProto::FLOAT)), "hjit::onnx: " + n.where()))};
}

Values SequenceConstruct(const NodeContext& n) {
  if (n.num_inputs() == 0) n.fail("needs at least one tensor");
  std::vector<Tensor> items;
  for (size_t k = 0; k < n.num_inputs(); ++k) items.push_back(n.input(k));
  return {same_elems(n, items, items[0].dtype())};
}

Values SequenceInsert(const NodeContext& n) {
  std::vector<Tensor> items = n.sequence(0);
  const int64_t at = position(n, 2, int64_t(items.size()), items.size(), true);
  items.insert(items.begin() + at, n.input(1));
  return {same_elems(n, items, n.value(0).elem_type())};
}

Values SequenceAt(const NodeContext& n) {
  const std::vector<Tensor>& items = n.sequence(0);
  return {items[size_t(position(n, 1, 0, items.size(), false))]};
}

Values SequenceErase(const NodeContext& n) {
  std::vector<Tensor> items = n.sequence(0);
  if (items.empty()) n.fail("erases from an empty sequence");
  items.erase(items.begin() + position(n, 1, -1, items.size(), false));
  return {Value::sequence(std::move(items), n.value(0).elem_type())};
}

Values SequenceLength(const NodeContext& n) { return {Tensor::scalar(double(n.sequence(0).size()), DType::I64)}; }

// SplitToSequence: pieces of one element (squeezed unless keepdims), of a size (the last shorter),
// or of the lengths given.
Values SplitToSequence(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int rank = int(x.shape().size());
  const int axis = n.axis(n.attr_int("axis", 0), rank);
  const int64_t dim = x.shape()[size_t(axis)];
  std::vector<int64_t> lengths;
  const bool whole = !n.has_input(1);
  if (whole) {
    lengths.assign(size_t(dim), 1);
  } else {
    const std::vector<int64_t> split = n.input_ints(1);
    if (n.input(1).shape().empty()) {
      if (split.at(0) <= 0) n.fail("splits into pieces of " + std::to_string(split.at(0)) + " elements");
      for (int64_t at = 0; at < dim; at += split[0]) lengths.push_back(std::min(split[0], dim - at));
    } else {
      lengths = split;
      int64_t sum = 0;
      for (int64_t l : lengths) {
        if (l < 0) n.fail("splits into a piece of negative length");
        sum += l;
      }
      if (sum != dim)
        n.fail("its split lengths add up to " + std::to_string(sum) + " where the axis has " + std::to_string(dim));
    }
  }
  std::vector<Tensor> items;
  int64_t at = 0;
  for (int64_t l : lengths) {
    Tensor piece = slice(x, axis, at, at + l);
    if (whole && n.attr_int("keepdims", 1) == 0) piece = squeeze(piece, {axis});
    items.push_back(piece);
    at += l;
  }
  return {Value::sequence(std::move(items), x.dtype())};
}

Values ConcatFromSequence(const NodeContext& n) {
  const std::vector<Tensor>& items = n.sequence(0);
  if (items.empty()) n.fail("concatenates an empty sequence");
  const bool new_axis = n.attr_int("new_axis", 0) != 0;
  const int64_t rank = int64_t(items[0].shape().size()) + (new_axis ? 1 : 0);
  const int axis = n.axis(n.attr_int("axis"), rank);
  return {new_axis ? stack(items, axis) : concat(items, axis)};
}

// SequenceMap: the body run on each item (and the same item of every other sequence input, or the
// whole of a tensor input); each body output collected into a sequence.
Values SequenceMap(const NodeContext& n) {
  const ::onnx::GraphProto& body = n.attr_graph("body");
  const size_t length = n.sequence(0).size();
  for (size_t k = 1; k < n.num_inputs(); ++k)
    if (n.value(k).is_sequence() && n.sequence(k).size() != length)
      n.fail("maps sequences of " + std::to_string(length) + " and " + std::to_string(n.sequence(k).size()) + " tensors");
  std::vector<std::vector<Tensor>> outs(size_t(body.output_size()));
  for (size_t i = 0; i < length; ++i) {
    std::vector<Tensor> args;
    for (size_t k = 0; k < n.num_inputs(); ++k) args.push_back(n.value(k).is_sequence() ? n.sequence(k)[i] : n.input(k));
    const std::vector<Tensor> got = n.run_subgraph(body, args);
    for (size_t o = 0; o < outs.size(); ++o) outs[o].push_back(got[o]);
  }
  Values result;
  for (size_t o = 0; o < outs.size(); ++o) result.push_back(same_elems(n, outs[o], elem_of(body.output(int(o)).type(), n)));
  return result;
}

Values Optional(const NodeContext& n) { return {n.has_input(0) ? n.value(0) : Value()}; }

Values OptionalHasElement(const NodeContext& n) {
  return {Tensor::scalar(n.has_input(0) && !n.value(0).is_none() ? 1 : 0, DType::Bool)};
}

Values OptionalGetElement(const NodeContext& n) {
  if (n.value(0).is_none()) n.fail("reads the element of an optional that has none");
  return {n.value(0)};
}

// Identity of a sequence or a none is the value; of a tensor, the tensor op.
Values Identity(const NodeContext& n) {
  if (!n.value(0).is_tensor()) return {n.value(0)};
  const std::vector<Tensor> out = find_converter("Identity")(n);
  return Values(out.begin(), out.end());
}

}  // namespace

void add_sequence_ops(ValueConverterTable& t) {
  t["SequenceEmpty"] = SequenceEmpty;
  t["SequenceConstruct"] = SequenceConstruct;
  t["SequenceInsert"] = SequenceInsert;
  t["SequenceAt"] = SequenceAt;
  t["SequenceErase"] = SequenceErase;
  t["SequenceLength"] = SequenceLength;
  t["SplitToSequence"] = SplitToSequence;
  t["ConcatFromSequence"] = ConcatFromSequence;
  t["SequenceMap"] = SequenceMap;
  t["Optional"] = Optional;
  t["OptionalHasElement"] = OptionalHasElement;
  t["OptionalGetElement"] = OptionalGetElement;
  t["Identity"] = Identity;
}

}  // namespace hjit::onnx_import
