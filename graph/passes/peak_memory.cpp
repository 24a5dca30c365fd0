#include "graph/passes/peak_memory.h"

#include <algorithm>

#include "graph/op_def.h"

namespace hjit {
namespace {

int64_t bytes_of(const TensorType& t, const PeakModel& model) {
  const int64_t bytes = t.numel() * int64_t(dtype_size(t.dtype));
  return model.block_bytes ? model.block_bytes(bytes) : bytes;
}

bool is_source(const Node& n) { return has_trait(n.op, Source) || n.op == OpKind::Parameter || n.op == OpKind::Constant; }

bool is_convolution(OpKind op) { return op == OpKind::Conv2d || op == OpKind::Conv2dWeightGrad; }

// The bodies a control flow node runs; the peak of the one that holds most.
int64_t bodies_peak(const Node& n, const PeakModel& model) {
  int64_t peak = 0;
  for (const char* name : {"body", "then", "else", "cond"})
    if (n.attrs.has(name)) {
      const Graph& body = n.attrs.graph(name);
      peak = std::max(peak, model.body_peak ? model.body_peak(body) : estimate_peak_bytes(body, model));
    }
  return peak;
}

// Nodes of one control flow op (one node per result) share their operands and body: the host runs
// it once.
bool same_step(const Node& a, const Node& b) {
  if (a.op != b.op || a.inputs != b.inputs || !has_trait(a.op, ControlFlow)) return false;
  for (const char* name : {"body", "then", "cond"})
    if (a.attrs.has(name) && (!b.attrs.has(name) || &a.attrs.graph(name) != &b.attrs.graph(name))) return false;
  return true;
}

}  // namespace

int64_t estimate_peak_bytes(const Graph& g, const PeakModel& model) {
  const size_t n = g.nodes.size();
  std::vector<bool> stored(n, false), result(n, false);
  std::vector<std::vector<size_t>> readers(n);
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.nodes[id];
    if (is_source(node)) continue;
    if (!has_trait(node.op, Elementwise) && !has_trait(node.op, Movement)) stored[id] = true;
    for (int v : node.inputs) {
      readers[size_t(v)].push_back(id);
      if (node.op == OpKind::Matmul || node.op == OpKind::Attention || is_host_step(node.op)) stored[size_t(v)] = true;
    }
  }
  if (model.stores_elementwise)
    for (size_t id = 0; id < n; ++id)
      if (has_trait(g.nodes[id].op, Elementwise) && model.stores_elementwise(g.nodes[id].op, readers[id].size())) stored[id] = true;
  for (int o : g.outputs) result[size_t(o)] = true;
  for (const Update& u : g.updates) result[size_t(u.value)] = true;
  // A contraction read only element-wise at its own shape, by values that all end in one stored
  // one, is computed at each tile of that one (schedules/builtin.cpp): not stored, its operands
  // kept until that one is computed (weight gradients summed into one keep their operands until the
  // sum). site: the one stored value a value ends in (kNone, or kMany).
  constexpr int64_t kNone = -1, kMany = -2;
  std::vector<int64_t> site(n, kNone);
  for (size_t id = n; id-- > 0;) {
    for (size_t r : readers[id]) {
      const int64_t s = stored[r] || result[r] ? int64_t(r) : site[r];
      site[id] = site[id] == kNone ? s : (s == kNone || s == site[id] ? site[id] : kMany);
    }
    const Node& node = g.nodes[id];
    if (!has_trait(node.op, Contraction) || site[id] < 0 || result[id]) continue;
    bool fused = true;
    for (size_t r : readers[id]) fused &= has_trait(g.nodes[r].op, Elementwise) && g.nodes[r].type.shape == node.type.shape;
    if (fused) stored[id] = false;
  }
  // A value is needed until its last reader runs, and a fused reader runs wherever its own readers
  // do (a batch norm's centred input, recomputed from the convolution's output in the backward pass,
  // keeps that output until then).
  std::vector<size_t> last_use(n, 0);
  for (size_t id = n; id-- > 0;)
    for (size_t r : readers[id])
      last_use[id] = std::max(last_use[id], stored[r] || result[r] ? r : std::max(r, last_use[r]));

  int64_t live = 0, peak = 0;
  for (size_t id = 0; id < n; ++id)
    if (result[id] && !is_source(g.nodes[id])) live += bytes_of(g.nodes[id].type, model);
  std::vector<int64_t> freed_after(n + 1, 0);
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.nodes[id];
    int64_t transient = 0;
    if (is_convolution(node.op))
      for (int v : node.inputs) transient += bytes_of(g.nodes[size_t(v)].type, model);
    // A body's peak includes its results.
    if (has_trait(node.op, ControlFlow) && !(id > 0 && same_step(g.nodes[id - 1], node)))
      peak = std::max(peak, live + bodies_peak(node, model));
    if (stored[id] && !result[id] && !is_source(node)) {
      live += bytes_of(node.type, model);
      freed_after[std::max(last_use[id], id)] += bytes_of(node.type, model);
    }
    peak = std::max(peak, live + transient);
    live -= freed_after[id];
  }
  return peak;
}

}  // namespace hjit
