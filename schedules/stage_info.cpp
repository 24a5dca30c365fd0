#include "schedules/stage_info.h"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "graph/op_def.h"
#include "schedules/class_rules.h"

namespace hjit::schedules {

bool is_source(const backend::Stage& s) { return has_trait(s.op, Source) || has_trait(s.op, ShapeOnly); }
bool has_reduction(const backend::Stage& s) { return !s.rvars.empty(); }
bool reduces_innermost(const backend::LoweredPipeline& p, const backend::Stage& s) {
  const Node& n = p.graph->node(s.node);
  const int rank = p.graph->type(n.inputs[0]).rank();
  if (cpu_rules(n.op).fold == Fold::Pair) return n.attrs.i("axis") == rank - 1;
  if (!n.attrs.has("axes")) return false;  // matmul, convolution, pools, scans
  const auto& axes = n.attrs.ints("axes");
  return !axes.empty() && axes.back() == rank - 1;
}

int64_t innermost_reduced_extent(const backend::LoweredPipeline& p, const backend::Stage& s) {
  const Node& n = p.graph->node(s.node);
  return p.graph->type(n.inputs[0]).shape.back();
}

std::pair<int, int64_t> innermost_reduced_block(const backend::LoweredPipeline& p, const backend::Stage& s) {
  const Node& n = p.graph->node(s.node);
  if (!n.attrs.has("axes") || cpu_rules(n.op).fold == Fold::Pair) return {0, 0};
  const auto& axes = n.attrs.ints("axes");  // ascending; the domain's variables run innermost first
  const Shape& shape = p.graph->type(n.inputs[0]).shape;
  const int64_t rank = int64_t(shape.size());
  if (axes.size() != s.rvars.size()) return {0, 0};
  int count = 0;
  int64_t elements = 1;
  for (size_t i = 0; i < axes.size() && axes[axes.size() - 1 - i] == rank - 1 - int64_t(i); ++i) {
    const int64_t* extent = Halide::Internal::as_const_int(s.rvars[i].extent());
    if (!extent) return {0, 0};
    ++count, elements *= *extent;
  }
  if (count == 0) return {0, 0};
  // Contiguous in memory only where the input is read as stored: followed back through element-wise
  // ops of its shape, no transpose or other view. (Summed over a transpose whose output axis is
  // innermost in memory, the vectors across the outputs load contiguous; fused, they would gather.)
  constexpr size_t kMaxSteps = 32;
  std::vector<int> todo{n.inputs[0]};
  std::set<int> seen;
  while (!todo.empty()) {
    const int id = todo.back();
    todo.pop_back();
    if (!seen.insert(id).second) continue;
    const Node& v = p.graph->node(id);
    if (seen.size() > kMaxSteps || has_trait(v.op, Movement)) return {0, 0};
    if (!has_trait(v.op, Elementwise) || has_trait(v.op, Source)) continue;
    for (int in : v.inputs)
      if (p.graph->type(in).shape == shape) todo.push_back(in);
  }
  return {count, elements};
}

std::optional<int64_t> reduced_along_memory(const backend::LoweredPipeline& p, const backend::Stage& s) {
  const Graph& g = *p.graph;
  const Node& n = g.node(s.node);
  if (!n.attrs.has("axes") || n.attrs.ints("axes").size() != 1) return std::nullopt;
  const int64_t axis = n.attrs.ints("axes")[0];
  // (node, the reduced axis in its coordinates), followed back through element-wise ops (their
  // operands of the same rank: the rest broadcast) and transposes to the values they read.
  constexpr size_t kMaxSteps = 32;
  std::vector<std::pair<int, int64_t>> todo{{n.inputs[0], axis}};
  std::set<std::pair<int, int64_t>> seen;
  bool transposed = false;
  while (!todo.empty()) {
    const auto [id, a] = todo.back();
    todo.pop_back();
    if (!seen.insert({id, a}).second) continue;
    if (seen.size() > kMaxSteps) return std::nullopt;
    const Node& v = g.node(id);
    const int64_t rank = v.type.rank();
    if (v.op == OpKind::Transpose) {
      transposed = true;
      todo.push_back({v.inputs[0], v.attrs.ints("perm")[size_t(a)]});
    } else if (has_trait(v.op, Elementwise) && !has_trait(v.op, Source)) {
      for (int in : v.inputs)
        if (g.type(in).rank() == rank && g.type(in).shape[size_t(a)] == v.type.shape[size_t(a)]) todo.push_back({in, a});
    } else if (a != rank - 1) {
      return std::nullopt;
    }
  }
  if (!transposed) return std::nullopt;
  return g.type(n.inputs[0]).shape[size_t(axis)];
}

namespace {
// Whether an expression divides, takes a remainder or selects (a view whose reads are conditional).
class DividesOrSelects : public Halide::Internal::IRGraphVisitor {
 public:
  bool found = false;

 private:
  using IRGraphVisitor::visit;
  void visit(const Halide::Internal::Div*) override { found = true; }
  void visit(const Halide::Internal::Mod*) override { found = true; }
  void visit(const Halide::Internal::Select*) override { found = true; }
};
}  // namespace

bool is_view_of_sources(const backend::LoweredPipeline& p, const backend::Stage& s) {
  if (!has_trait(s.op, Movement) || !s.func.defined() || has_reduction(s) || s.func.has_update_definition()) return false;
  for (int in : p.graph->node(s.node).inputs)
    if (!is_source(p.stages[size_t(in)])) return false;
  DividesOrSelects v;
  for (const Halide::Expr& e : s.func.function().definition().values()) e.accept(&v);
  return !v.found;
}

bool is_cheap_function_of_sources(const backend::LoweredPipeline& p, const backend::Stage& s) {
  // Deep enough for an i4 weight's unpacking (conversion, floor, scale, offset, concatenation,
  // views), shallow enough that nothing expensive hides in the chain.
  constexpr int kMaxSteps = 12;
  std::vector<const backend::Stage*> todo{&s};
  std::set<int> seen;
  while (!todo.empty()) {
    const backend::Stage& t = *todo.back();
    todo.pop_back();
    if (is_source(t) || !seen.insert(t.node).second) continue;
    if (seen.size() > size_t(kMaxSteps) || !t.func.defined() || has_reduction(t) || t.func.has_update_definition() || t.is_extern) return false;
    switch (t.op) {
      case OpKind::Cast: case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Neg: case OpKind::Floor:
      case OpKind::Reshape: case OpKind::Transpose: case OpKind::BroadcastTo: case OpKind::Concat: case OpKind::Slice:
        break;
      default:
        return false;
    }
    for (int in : p.graph->node(t.node).inputs) todo.push_back(&p.stages[size_t(in)]);
  }
  return true;
}

int64_t reduced_points(const backend::Stage& s) {
  int64_t points = 1;
  for (const Halide::RVar& r : s.rvars)
    if (const int64_t* e = Halide::Internal::as_const_int(r.extent())) points *= std::max<int64_t>(1, *e);
  return points;
}

Halide::Type value_type(const backend::Stage& s) { return s.func.defined() ? s.func.output_types()[0] : Halide::Float(32); }

}  // namespace hjit::schedules
