#include "graph/input_sizes.h"

#include "graph/op_def.h"

namespace hjit {

InputSizes::InputSizes(const Graph& g, const SymbolicSizes* dynamic) {
  bool varies = false;
  for (int node : g.inputs) {
    const TensorType& t = g.type(node);
    types_.push_back(t);
    const bool symbolic = dynamic && size_t(node) < dynamic->extents.size() && dynamic->extents[size_t(node)].size() == t.shape.size();
    std::vector<Affine> e;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      e.push_back(symbolic ? dynamic->extents[size_t(node)][d] : Affine{t.shape[d], {}});
      varies |= !e.back().is_constant();
    }
    extents_.push_back(std::move(e));
  }
  if (!varies) extents_.clear();
}

namespace {

// The graph's ops again, from inputs of these types: each node's type inferred by the op table, as
// eager execution infers it, so that the first op the types do not suit throws eager's error.
void infer_again(const Graph& g, const std::vector<TensorType>& types) {
  Graph again;
  again.name = g.name;
  again.constants = g.constants;
  for (const Node& node : g.nodes) {
    Node n = node;
    if (n.op == OpKind::Parameter) {
      const int64_t index = n.attrs.i("index");
      if (index >= 0 && size_t(index) < types.size()) n.type = types[size_t(index)];
    } else if (!has_trait(n.op, Source)) {
      n.type = TensorType{};
    }
    again.add(std::move(n));
  }
}

std::string shape_text(const Shape& s) {
  std::string t = "[";
  for (size_t d = 0; d < s.size(); ++d) t += (d ? ", " : "") + std::to_string(s[d]);
  return t + "]";
}

}  // namespace

void InputSizes::raise(const Graph& g, const SymbolicSizes* dynamic, const std::vector<TensorType>& types,
                       const std::vector<int64_t>& symbols, const std::string& who) const {
  try {
    infer_again(dynamic ? instantiate(g, *dynamic, symbols) : g, types);
  } catch (const InternalError&) {
    // (Not an answer about the call's types: the relation below is.)
  }
  for (size_t i = 0; i < types_.size() && i < types.size(); ++i) {
    if (agrees(i, types[i], symbols)) continue;
    const std::string input = "input " + std::to_string(i);
    if (types[i].dtype != types_[i].dtype)
      throw DTypeError(who + ": " + input + " must be " + dtype_name(types_[i].dtype) + ", got " + types[i].str());
    if (types[i].shape.size() != types_[i].shape.size())
      throw ShapeError(who + ": " + input + " must have rank " + std::to_string(types_[i].rank()) + ", got " + types[i].str());
    std::vector<Affine> forms = extents_.empty() ? std::vector<Affine>{} : extents_[i];
    if (extents_.empty())
      for (int64_t v : types_[i].shape) forms.push_back(Affine{v, {}});
    Shape want;
    for (const Affine& a : forms) want.push_back(a.at(symbols));
    std::string why;
    for (size_t d = 0; d < want.size(); ++d) {
      if (types[i].shape[d] == want[d]) continue;
      const Affine& a = forms[d];
      std::string relation = a.is_constant() ? "it is fixed" : "it is " + a.str();
      for (size_t k = 0; dynamic && k < dynamic->sources.size() && k < a.coef.size(); ++k)
        if (a.coef[k] != 0)
          relation += ", s" + std::to_string(k) + " being input " + std::to_string(dynamic->sources[k].input) + "'s dimension " +
                    std::to_string(dynamic->sources[k].dim) + " (" + std::to_string(k < symbols.size() ? symbols[k] : 0) + " in this call)";
      why = "dimension " + std::to_string(d) + " is " + std::to_string(types[i].shape[d]) + ", but " + relation;
      break;
    }
    throw ShapeError(who + ": " + input + " has shape " + shape_text(types[i].shape) + " where the compiled pipeline needs " +
                     shape_text(want) + ": " + why +
                     ". Dimensions that were equal when it was traced stay equal in every call; trace it at sizes where "
                     "they differ to make them independent");
  }
  throw InternalError(who + ": the inputs' sizes were refused, yet every input agrees");
}

}  // namespace hjit
