#include "halide_backend/partition.h"

#include <cstdlib>
#include <map>
#include <sstream>

#include "graph/op_def.h"
#include "support/allocator.h"

namespace hjit::backend {
namespace {

int work_of(OpKind op) {
  if (has_trait(op, Source) || op == OpKind::Parameter || op == OpKind::Constant) return 0;
  if (has_trait(op, Contraction)) return 4;
  if (has_trait(op, Reduction)) return 2;
  return 1;
}

int64_t partition_threshold() {
  const char* env = std::getenv("HJIT_PARTITION_WORK");
  return env && *env ? std::atoll(env) : 96;
}

bool is_source(const Node& n) { return n.op == OpKind::Parameter || has_trait(n.op, Source) || n.op == OpKind::Constant; }

// Builds one part: the caller's parameters first (all of them, in order), then a parameter per
// boundary value it reads, then its nodes [begin, end) with sources it reads from before `begin`
// copied in.
struct Builder {
  const Graph& g;
  Graph out;
  std::vector<int> id;  // original node -> node in out, -1 when not there yet
  explicit Builder(const Graph& graph) : g(graph), id(graph.nodes.size(), -1) {
    out.name = g.name;
    for (int in : g.inputs) id[size_t(in)] = out.add_parameter(g.type(in), g.node(in).attrs.has("captured"));
  }
  int copy_source(int n) {
    if (id[size_t(n)] >= 0) return id[size_t(n)];
    const Node& node = g.node(n);
    if (node.op == OpKind::Constant) return id[size_t(n)] = out.add_constant(node.type, g.constants[size_t(node.constant)]);
    Node copy = node;
    return id[size_t(n)] = out.add(std::move(copy));
  }
  int copy_source_or_mapped(int n) { return id[size_t(n)] >= 0 ? id[size_t(n)] : copy_source(n); }
  void copy(int n) {
    if (id[size_t(n)] >= 0) return;
    Node copy = g.node(n);
    for (int& in : copy.inputs) in = id[size_t(in)];
    id[size_t(n)] = out.add(std::move(copy));
  }
};

}  // namespace

std::vector<Part> partition(const Graph& g) {
  const size_t n = g.nodes.size();
  int64_t total = 0;
  for (const Node& node : g.nodes) total += work_of(node.op);
  if (total < partition_threshold()) return {};
  // The cut: the first node after half the work.
  size_t cut = 0;
  for (int64_t work = 0; cut < n && work * 2 < total; ++cut) work += work_of(g.nodes[cut].op);
  if (cut == 0 || cut >= n) return {};

  // Values of the first part the second one reads (sources are copied, not handed on).
  std::vector<int> boundary;
  std::map<int, int> boundary_of;  // node -> boundary id
  for (size_t b = cut; b < n; ++b)
    for (int in : g.nodes[b].inputs)
      if (size_t(in) < cut && !is_source(g.node(in)) && !boundary_of.count(in))
        boundary_of[in] = int(boundary.size()), boundary.push_back(in);
  // Outputs (and updates' new values) computed in the first part that are sources stay wherever
  // they are: a source has no part, so it is copied into the part that outputs it.
  std::vector<int> slot_node(g.outputs);
  for (const Update& u : g.updates) slot_node.push_back(u.value);

  Part first, second;
  Builder a(g), b(g);
  for (size_t k = 0; k < cut; ++k)
    if (is_source(g.nodes[k])) a.copy_source(int(k));
    else a.copy(int(k));
  first.graph = std::move(a.out);
  for (int v : boundary) {
    first.graph.outputs.push_back(a.id[size_t(v)]);
    first.output_slot.push_back(-1 - boundary_of[v]);
  }
  for (int v : boundary) {
    b.id[size_t(v)] = b.out.add_parameter(g.type(v));
    second.boundary_inputs.push_back(boundary_of[v]);
  }
  for (size_t k = cut; k < n; ++k) {
    for (int in : g.nodes[k].inputs)
      if (b.id[size_t(in)] < 0) b.copy_source(in);  // a source node of the first part
    if (is_source(g.nodes[k])) b.copy_source(int(k));
    else b.copy(int(k));
  }
  for (size_t s = 0; s < slot_node.size(); ++s) {
    const int v = slot_node[s];
    if (size_t(v) < cut && !is_source(g.node(v))) {
      first.graph.outputs.push_back(a.id[size_t(v)]);
      first.output_slot.push_back(int(s));
    } else {
      b.out.outputs.push_back(b.copy_source_or_mapped(v));
      second.output_slot.push_back(int(s));
    }
  }
  second.graph = std::move(b.out);
  if (first.graph.outputs.empty() || second.graph.outputs.empty()) return {};
  std::vector<Part> parts;
  parts.push_back(std::move(first));
  parts.push_back(std::move(second));
  return parts;
}

namespace {

class PartitionedExecutable final : public Executable {
 public:
  PartitionedExecutable(const Graph& g, std::vector<Part> parts, std::vector<std::shared_ptr<const Executable>> exes)
      : parts_(std::move(parts)), exes_(std::move(exes)), inputs_(g.inputs.size()) {
    for (const Part& p : parts_)
      for (size_t k = 0; k < p.output_slot.size(); ++k)
        if (p.output_slot[k] < 0) {
          const size_t id = size_t(-1 - p.output_slot[k]);
          if (boundary_bytes_.size() <= id) boundary_bytes_.resize(id + 1);
          const TensorType& t = p.graph.type(p.graph.outputs[k]);
          boundary_bytes_[id] = size_t(t.numel()) * size_t(dtype_size(t.dtype));
        }
  }

  void run(const void* const* inputs, void* const* outputs) const override {
    std::vector<void*> boundary(boundary_bytes_.size());
    struct Free {
      std::vector<void*>& b;
      ~Free() {
        for (void* p : b) cached_free(p);
      }
    } free_all{boundary};
    for (size_t i = 0; i < boundary.size(); ++i) boundary[i] = cached_alloc(std::max<size_t>(boundary_bytes_[i], 64));
    for (size_t k = 0; k < parts_.size(); ++k) {
      const Part& p = parts_[k];
      std::vector<const void*> in(inputs, inputs + inputs_);
      for (int b : p.boundary_inputs) in.push_back(boundary[size_t(b)]);
      std::vector<void*> out;
      for (int slot : p.output_slot) out.push_back(slot >= 0 ? outputs[slot] : boundary[size_t(-1 - slot)]);
      exes_[k]->run(in.data(), out.data());
    }
  }

  std::string device_code() const override {
    std::string code;
    for (const auto& e : exes_) code += e->device_code();
    return code;
  }
  std::string explain() const override {
    std::ostringstream os;
    for (size_t k = 0; k < exes_.size(); ++k)
      os << "part " << k + 1 << " of " << exes_.size() << " (compiled at once, in two processes):\n" << exes_[k]->explain();
    return os.str();
  }
  std::string summary() const override { return exes_.front()->summary() + ", in " + std::to_string(exes_.size()) + " parts"; }

 private:
  std::vector<Part> parts_;
  std::vector<std::shared_ptr<const Executable>> exes_;
  size_t inputs_;
  std::vector<size_t> boundary_bytes_;
};

}  // namespace

std::shared_ptr<const Executable> make_partitioned(const Graph& g, std::vector<Part> parts,
                                                   std::vector<std::shared_ptr<const Executable>> exes) {
  return std::make_shared<PartitionedExecutable>(g, std::move(parts), std::move(exes));
}

}  // namespace hjit::backend
