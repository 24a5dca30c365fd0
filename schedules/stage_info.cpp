#include "schedules/stage_info.h"

#include "graph/op_def.h"
#include "schedules/class_rules.h"

namespace hjit::schedules {

bool is_source(const backend::Stage& s) { return has_trait(s.op, Source); }
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

Halide::Type value_type(const backend::Stage& s) { return s.func.defined() ? s.func.output_types()[0] : Halide::Float(32); }

}  // namespace hjit::schedules
