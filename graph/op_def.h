// The op table: for each OpKind its name, arity, attributes, traits and shape/dtype inference.
// Eager execution and tracing both go through infer_type(), so a shape error reads the same in both.
#pragma once
#include <string>
#include <vector>

#include <hjit/graph.h>

namespace hjit {

// Properties as sets: passes and backends ask the table ("is this elementwise?"), not a switch.
enum OpTrait : uint32_t {
  Source = 1u << 0,             // no operands; the creator declares the type
  Elementwise = 1u << 1,        // out[i] depends on the operands at i (after broadcasting)
  NumericOnly = 1u << 2,        // rejects Bool operands
  FloatOnly = 1u << 3,          // rejects integer and Bool operands
  BoolOnly = 1u << 4,           // takes only Bool operands
  Commutative = 1u << 5,        // op(a, b) == op(b, a)
  Comparison = 1u << 6,         // Bool result
  Reduction = 1u << 7,          // folds axes
  Contraction = 1u << 8,        // matmul-like: a reduction over products
  Movement = 1u << 9,           // moves data without arithmetic
  NonDifferentiable = 1u << 10, // gradient is undefined (integer results)
  // Runs graphs held in its attributes (branches, loop bodies). An op with several results is one
  // node per result (attribute `result`), siblings sharing operands and graphs: the IR stays one
  // value per node, DCE drops unused results, and whoever runs one runs the group once.
  ControlFlow = 1u << 11,
  // Communicates with the other ranks of the process group (hjit/distributed.h): runs as a host
  // step between compiled pipelines, and every rank must run the same ones in the same order, so
  // passes never fold, merge or drop one (a result nobody reads is still computed).
  Collective = 1u << 12,
  // Reads its operands' sizes, never their values (numel): the backend computes it from extents,
  // so the operand is not a use that makes it stored or keeps it alive in a pipeline.
  ShapeOnly = 1u << 13
};

struct InferArgs {
  OpKind op;
  const std::vector<const TensorType*>& in;
  const Attrs& attrs;
  const TensorType* declared;  // source ops only
};
using InferFn = TensorType (*)(const InferArgs&);

struct OpDef {
  OpKind kind;
  const char* name;
  int arity;  // -1: one or more operands
  uint32_t traits;
  std::vector<std::string> attrs;
  InferFn infer;
  ScheduleClass schedule_class;  // how the schedulers treat it (schedules/class_rules.h)

  bool has(OpTrait t) const { return (traits & t) != 0; }
};

const OpDef& op_def(OpKind op);
// Control flow nodes a and b are results of one operation (same op, operands and attributes but
// `result`).
bool same_control_flow(const Node& a, const Node& b);
// How many results a control flow node's operation has (its graphs' outputs).
int control_flow_results(const Node& n);
inline bool has_trait(OpKind op, OpTrait t) { return op_def(op).has(t); }
inline ScheduleClass schedule_class(OpKind op) { return op_def(op).schedule_class; }
// Runs on the host between compiled pipelines rather than inside one (control flow, communication).
inline bool is_host_step(OpKind op) { return has_trait(op, ControlFlow) || has_trait(op, Collective); }
// OpKind by printed name; ValueError for an unknown name.
OpKind op_from_name(const std::string& name);

// Validates arity, attribute names and operand dtypes against the table, then infers the type.
TensorType infer_type(OpKind op, const std::vector<const TensorType*>& inputs, const Attrs& attrs,
                      const TensorType* declared = nullptr);

}  // namespace hjit
