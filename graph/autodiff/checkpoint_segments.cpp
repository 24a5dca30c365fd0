#include "graph/autodiff/checkpoint_segments.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>

#include "graph/op_def.h"
#include "graph/rewriter.h"

namespace hjit {
namespace {

bool is_source(const Node& n) { return has_trait(n.op, Source) || n.op == OpKind::Parameter || n.op == OpKind::Constant; }

int64_t bytes_of(const TensorType& t) { return t.numel() * int64_t(dtype_size(t.dtype)); }

// What keeping node n's value for the backward pass costs a compiled step: element-wise and
// movement values are fused into their readers and recomputed from the values they read, so only
// the others (contractions, reductions, control flow) are stored. Counting every value made a
// budget checkpoint a ResNet block whose compiled step held a third of the estimate.
int64_t stored_bytes(const Node& n) {
  if (is_source(n) || has_trait(n.op, Elementwise) || has_trait(n.op, Movement)) return 0;
  return bytes_of(n.type);
}

// A run's body: the values it reads from outside become parameters (sources are copied in), its
// nodes are copied, and the values read after it are its outputs.
struct Segment {
  std::vector<int> nodes, operands, results;
  Graph body;
};

void build_body(const Graph& fwd, Segment& s, const std::vector<bool>& read_later) {
  std::map<int, int> id;
  std::vector<bool> inside(fwd.nodes.size(), false);
  for (int m : s.nodes) inside[size_t(m)] = true;
  for (int m : s.nodes) {
    Node c = fwd.node(m);
    for (int& v : c.inputs) {
      if (!id.count(v)) {
        const Node& src = fwd.node(v);
        if (inside[size_t(v)]) throw InternalError("checkpoint_to_fit: a node reads a later one");
        if (src.op == OpKind::Constant) id[v] = s.body.add_constant(src.type, fwd.constants[size_t(src.constant)]);
        else if (is_source(src) && src.op != OpKind::Parameter) id[v] = s.body.add(Node(src));
        else id[v] = s.body.add_parameter(fwd.type(v)), s.operands.push_back(v);
      }
      v = id.at(v);
    }
    id[m] = s.body.add(std::move(c));
  }
  for (int m : s.nodes)
    if (read_later[size_t(m)]) s.body.outputs.push_back(id.at(m)), s.results.push_back(m);
}

// Where to cut a run of nodes: after position p, the bytes of values computed at or before p and
// read after it (what a cut there keeps between the forward and the backward pass).
std::vector<int64_t> crossing_bytes(const Graph& fwd) {
  const size_t n = fwd.nodes.size();
  std::vector<size_t> last_read(n, 0);
  for (size_t id = 0; id < n; ++id)
    for (int v : fwd.nodes[id].inputs) last_read[size_t(v)] = std::max(last_read[size_t(v)], id);
  for (int o : fwd.outputs) last_read[size_t(o)] = n;
  for (const Update& u : fwd.updates) last_read[size_t(u.value)] = n;
  std::vector<int64_t> delta(n + 2, 0), out(n, 0);
  for (size_t v = 0; v < n; ++v) {
    if (is_source(fwd.nodes[v]) || last_read[v] <= v) continue;
    delta[v] += bytes_of(fwd.nodes[v].type);
    delta[last_read[v]] -= bytes_of(fwd.nodes[v].type);
  }
  int64_t live = 0;
  for (size_t p = 0; p < n; ++p) out[p] = live += delta[p];
  return out;
}

// k runs of about equal bytes, each cut moved (within half a run) to where the fewest bytes cross.
std::vector<size_t> cuts_for(const Graph& fwd, const std::vector<int64_t>& crossing, int64_t total, int k) {
  const size_t n = fwd.nodes.size();
  std::vector<int64_t> before(n + 1, 0);  // bytes of the values computed before position p
  for (size_t id = 0; id < n; ++id) before[id + 1] = before[id] + stored_bytes(fwd.nodes[id]);
  std::vector<size_t> cuts;
  for (int i = 1; i < k; ++i) {
    const int64_t target = total * i / k, window = total / (2 * k);
    size_t best = n;
    for (size_t p = 0; p + 1 < n; ++p) {
      if (before[p + 1] < target - window || before[p + 1] > target + window) continue;
      if (!cuts.empty() && p <= cuts.back()) continue;
      if (has_trait(fwd.nodes[p].op, ControlFlow)) continue;
      if (best == n || crossing[p] < crossing[best] ||
          (crossing[p] == crossing[best] && std::llabs(before[p + 1] - target) < std::llabs(before[best + 1] - target)))
        best = p;
    }
    if (best < n) cuts.push_back(best);
  }
  return cuts;
}

// fwd with the computing nodes between cuts made checkpointed runs; *made: how many.
Graph with_runs(const Graph& fwd, const std::vector<size_t>& cuts, int* made_runs) {
  const size_t n = fwd.nodes.size();
  // Runs: the computing nodes between cuts (control flow ops stay outside them).
  std::vector<Segment> segments;
  std::vector<int> segment_of(n, -1);
  bool open = false;
  for (size_t id = 0, next = 0; id < n; ++id) {
    const Node& node = fwd.nodes[id];
    if (!is_source(node) && !has_trait(node.op, ControlFlow)) {
      if (!open) segments.emplace_back(), open = true;
      segments.back().nodes.push_back(int(id));
      segment_of[id] = int(segments.size()) - 1;
    } else if (has_trait(node.op, ControlFlow)) {
      open = false;
    }
    if (next < cuts.size() && id == cuts[next]) open = false, ++next;
  }
  // A value is a run's result when a node of another run, a control flow op, an output or an
  // update reads it.
  std::vector<bool> read_later(n, false);
  for (size_t id = 0; id < n; ++id)
    for (int v : fwd.nodes[id].inputs)
      if (segment_of[size_t(v)] >= 0 && segment_of[size_t(v)] != segment_of[id]) read_later[size_t(v)] = true;
  for (int o : fwd.outputs) read_later[size_t(o)] = true;
  for (const Update& u : fwd.updates) read_later[size_t(u.value)] = true;

  Rewriter rw(fwd);
  Graph& out = rw.out();
  std::vector<bool> emitted(segments.size(), false);
  int made = 0;
  for (size_t id = 0; id < n; ++id) {
    const int s = segment_of[id];
    if (s < 0) {
      rw.copy(int(id));
      continue;
    }
    if (emitted[size_t(s)]) continue;
    emitted[size_t(s)] = true;
    Segment& seg = segments[size_t(s)];
    build_body(fwd, seg, read_later);
    if (seg.results.empty()) continue;  // nothing of it is read: dead code
    std::vector<int> operands;
    for (int v : seg.operands) operands.push_back(rw.mapped(v));
    auto body = std::make_shared<const Graph>(std::move(seg.body));
    for (size_t r = 0; r < seg.results.size(); ++r)
      rw.map(seg.results[r], out.add_op(OpKind::Checkpoint, operands, Attrs{{"body", body}, {"result", int64_t(r)}}));
    ++made;
  }
  for (int o : fwd.outputs) out.outputs.push_back(rw.mapped(o));
  for (const Update& u : fwd.updates) out.updates.push_back(Update{rw.mapped(u.target), rw.mapped(u.value)});
  out.name = fwd.name;
  *made_runs = made;
  return std::move(out);
}

std::string mib(int64_t bytes) { return std::to_string((bytes + (1 << 19)) >> 20) + " MiB"; }

}  // namespace

int64_t activation_bytes(const Graph& fwd) {
  int64_t total = 0;
  for (const Node& n : fwd.nodes) total += stored_bytes(n);
  return total;
}

Graph checkpoint_to_fit(const Graph& fwd, int64_t budget_bytes, const std::function<int64_t(const Graph&)>& peak_of,
                        CheckpointPlan* plan) {
  CheckpointPlan p;
  p.budget_bytes = budget_bytes;
  p.plain_bytes = p.planned_bytes = peak_of(fwd);
  const int64_t total = activation_bytes(fwd);
  Graph best = fwd;
  if (p.plain_bytes > budget_bytes && total > 0) {
    // The fewest runs whose step fits; each count's cuts at equal stored bytes, moved to where the
    // fewest bytes cross. Counts past a few grow by about a quarter: a step is estimated per count.
    const std::vector<int64_t> crossing = crossing_bytes(fwd);
    for (int k = 2; k <= 64 && size_t(k) <= fwd.nodes.size(); k = std::max(k + 1, k * 5 / 4)) {
      int made = 0;
      Graph g = with_runs(fwd, cuts_for(fwd, crossing, total, k), &made);
      if (made == 0) continue;
      const int64_t estimate = peak_of(g);
      if (estimate < p.planned_bytes) p.planned_bytes = estimate, p.runs = made, best = std::move(g);
      if (p.planned_bytes <= budget_bytes) break;
    }
  }
  p.fits = p.planned_bytes <= budget_bytes;
  if (p.runs > 0)
    p.report = std::to_string(p.runs) + " checkpointed runs: the step is estimated at " + mib(p.planned_bytes) + ", " +
               mib(p.plain_bytes) + " without them (budget " + mib(budget_bytes) + ")";
  else if (p.fits)
    p.report = "no checkpointed runs: the step is estimated at " + mib(p.plain_bytes) + ", within the budget of " + mib(budget_bytes);
  else
    p.report = "no checkpointed runs: the step is estimated at " + mib(p.plain_bytes) + " and no runs would hold less (budget " +
               mib(budget_bytes) + ")";
  if (plan) *plan = p;
  return best;
}

}  // namespace hjit
