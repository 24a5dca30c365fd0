#include "graph/rewriter.h"

#include <cstring>
#include <type_traits>

namespace hjit {

Rewriter::Rewriter(const Graph& old) : old_(old), map_(old.nodes.size(), -1) {
  out_.name = old.name;
  // Parameters first, in call order, so that every pass preserves the signature.
  for (int id : old.inputs) {
    map_[size_t(id)] = out_.add_parameter(old.type(id), old.is_captured(id));
  }
}

std::vector<int> Rewriter::mapped_inputs(int old_id) const {
  std::vector<int> ins;
  for (int in : old_.node(old_id).inputs) {
    if (map_[size_t(in)] < 0) throw InternalError("rewriter: operand used before it was mapped");
    ins.push_back(map_[size_t(in)]);
  }
  return ins;
}

int Rewriter::copy(int old_id) {
  if (map_[size_t(old_id)] >= 0) return map_[size_t(old_id)];
  const Node& n = old_.node(old_id);
  int id;
  if (n.op == OpKind::Constant) {
    id = out_.add_constant(n.type, old_.constants[size_t(n.constant)]);
  } else {
    Node c = n;
    c.inputs = mapped_inputs(old_id);
    id = out_.add(std::move(c));
  }
  map_[size_t(old_id)] = id;
  return id;
}

Graph Rewriter::finish() {
  for (size_t id = 0; id < old_.nodes.size(); ++id)
    if (map_[id] < 0) copy(int(id));
  for (int o : old_.outputs) out_.outputs.push_back(map_[size_t(o)]);
  for (const Update& u : old_.updates) out_.updates.push_back(Update{map_[size_t(u.target)], map_[size_t(u.value)]});
  return std::move(out_);
}

std::vector<int> inline_graph(Graph& into, const Graph& g, const std::vector<int>& args) {
  if (args.size() != g.inputs.size()) throw InternalError("inline_graph: wrong number of arguments");
  if (!g.updates.empty()) throw InternalError("inline_graph: a graph with updates");
  std::vector<int> map(g.nodes.size(), -1);
  for (size_t i = 0; i < g.inputs.size(); ++i) map[size_t(g.inputs[i])] = args[i];
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    if (n.op == OpKind::Parameter) continue;
    if (n.op == OpKind::Constant) {
      map[id] = into.add_constant(n.type, g.constants[size_t(n.constant)]);
      continue;
    }
    Node c = n;
    for (int& in : c.inputs) in = map[size_t(in)];
    map[id] = into.add(std::move(c));
  }
  std::vector<int> outs;
  for (int o : g.outputs) outs.push_back(map[size_t(o)]);
  return outs;
}

namespace {
template <class T>
void fill_as(void* p, size_t n, double v) {
  T x;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) x = static_cast<T>(static_cast<int64_t>(v));
  else x = static_cast<T>(v);
  for (size_t i = 0; i < n; ++i) static_cast<T*>(p)[i] = x;
}
}  // namespace

ConstData fill_bytes(const TensorType& type, double value) {
  size_t n = size_t(type.numel()), bytes = n * size_t(dtype_size(type.dtype));
  auto buf = std::shared_ptr<unsigned char[]>(new unsigned char[bytes > 0 ? bytes : 1]);
  switch (type.dtype) {
#define HJIT_FILL_CASE(e, name, T, kind) \
  case DType::e: fill_as<T>(buf.get(), n, value); break;
    HJIT_DTYPES(HJIT_FILL_CASE)
#undef HJIT_FILL_CASE
  }
  return ConstData{std::shared_ptr<const void>(buf, buf.get()), buf.get(), bytes};
}

double read_scalar(DType t, const void* data) {
  switch (t) {
#define HJIT_READ_CASE(e, name, T, kind) \
  case DType::e: return double(*static_cast<const T*>(data));
    HJIT_DTYPES(HJIT_READ_CASE)
#undef HJIT_READ_CASE
  }
  return 0;
}

}  // namespace hjit
