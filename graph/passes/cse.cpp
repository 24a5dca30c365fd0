#include "graph/passes/cse.h"

#include <cstring>
#include <unordered_map>

#include "graph/op_def.h"
#include "graph/rewriter.h"
#include "support/hash.h"

namespace hjit {
namespace {

uint64_t node_hash(const Node& n, const std::vector<int>& inputs, const Graph& g) {
  Hasher h;
  h.add(int(n.op)).add(int(n.type.dtype)).add_range(n.type.shape).add_range(inputs);
  for (const auto& [key, value] : n.attrs.items()) {
    h.add_string(key).add(value.index());
    std::visit([&](const auto& v) {
      using V = std::decay_t<decltype(v)>;
      if constexpr (std::is_same_v<V, std::vector<int64_t>>) h.add_range(v);
      else if constexpr (std::is_same_v<V, std::string>) h.add_string(v);
      else if constexpr (std::is_same_v<V, std::shared_ptr<const Graph>>) h.add(reinterpret_cast<uintptr_t>(v.get()));
      else h.add(v);
    }, value);
  }
  if (n.op == OpKind::Constant) {
    const ConstData& c = g.constants[size_t(n.constant)];
    h.add_bytes(c.data, c.nbytes);
  }
  return h.value();
}

bool same_node(const Node& a, const Graph& ga, const Node& b, const Graph& gb) {
  if (a.op != b.op || !(a.type == b.type) || a.inputs != b.inputs || !(a.attrs == b.attrs)) return false;
  if (a.op != OpKind::Constant) return true;
  const ConstData &ca = ga.constants[size_t(a.constant)], &cb = gb.constants[size_t(b.constant)];
  return ca.nbytes == cb.nbytes && (ca.data == cb.data || std::memcmp(ca.data, cb.data, ca.nbytes) == 0);
}

}  // namespace

Graph cse(const Graph& g) {
  Rewriter rw(g);
  std::unordered_multimap<uint64_t, int> seen;  // hash -> new node id
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    if (n.op == OpKind::Parameter) continue;
    if (has_trait(n.op, Collective)) {  // two alike collectives are two exchanges every rank makes
      rw.copy(int(id));
      continue;
    }
    Node probe = n;
    probe.inputs = rw.mapped_inputs(int(id));
    uint64_t h = node_hash(probe, probe.inputs, g);
    int found = -1;
    auto [lo, hi] = seen.equal_range(h);
    for (auto it = lo; it != hi && found < 0; ++it) {
      const Node& candidate = rw.out().node(it->second);
      if (same_node(probe, g, candidate, rw.out())) found = it->second;
    }
    if (found >= 0) {
      rw.map(int(id), found);
    } else {
      int nid = rw.copy(int(id));
      seen.emplace(h, nid);
    }
  }
  return rw.finish();
}

}  // namespace hjit
