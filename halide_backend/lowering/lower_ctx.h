// What a per-op lowering function sees.
#pragma once
#include <memory>
#include <optional>

#include "graph/value_range.h"
#include "halide_backend/lowering/lowered.h"

namespace hjit::backend {

struct LowerCtx {
  const Graph& g;
  LoweredPipeline& p;

  // The value of `node` at row-major coordinates, in its compute type.
  Halide::Expr at(int node, const Coords& c) const { return p.stages[size_t(node)].func(halide_args(c)); }
  // The row-major coordinates of a stage's own pure vars.
  static Coords coords(const Stage& s) {
    std::vector<Halide::Var> v = to_row_major(s.vars);
    return Coords(v.begin(), v.end());
  }
  // Extent d (row-major) of a node: a constant, or an expression of the dynamic sizes.
  Halide::Expr extent(int node, int d) const;
  // Element i of an integer-list attribute of a node: a constant, or an expression of the dynamic
  // sizes (a slice's start counted from the end).
  Halide::Expr attr(int node, const std::string& name, size_t i) const;
  // out coordinates seen from an operand of `shape` broadcast to them (numpy trailing alignment).
  static Coords broadcast(const Coords& out, const Shape& shape);
  // s.func(vars) = e, rounded to the stage's dtype where that is a 16-bit float.
  static void define(Stage& s, Halide::Expr e);
  // What is known of an f32 node's elements (finite, within bounds), read off the graph once.
  std::optional<ValueRange> range(int node);
  ValueRanges& value_ranges();  // (range's, made at its first question)

  std::shared_ptr<ValueRanges> ranges = nullptr;  // (range's, made at its first question)
};

// A matmul (f32, or an int_matmul whose sums are VNNI's) that reads its right operand as panels
// packed when compiling (a constant: a frozen weight), not the operand's stage: that stage's
// constant then need not be bound.
bool reads_right_operand_packed(const Graph& g, const Halide::Target& target, const Node& matmul);

// The name of a Func a lowering adds besides a stage's func: the stage's name without Halide's
// uniquifying suffix, then `role`. unique_name() rewrites a '$' inside a name it must uniquify to
// '_', so "n3_sum$2_acc" could become "n3_sum_2_acc$1", a name that depends on the process's
// history, and a schedule value names these Funcs.
std::string helper_name(const Stage& s, const char* role);

#define HJIT_DECLARE_LOWERING(kind, name, arity, traits, attrs, infer, sched) void kind(LowerCtx& ctx, Stage& s, const Node& n);
namespace lowering {
HJIT_OPS(HJIT_DECLARE_LOWERING)
}
#undef HJIT_DECLARE_LOWERING

using Lowering = void (*)(LowerCtx&, Stage&, const Node&);
Lowering lowering_for(OpKind op);

}  // namespace hjit::backend
