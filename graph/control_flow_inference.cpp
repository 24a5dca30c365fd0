// Shape and dtype inference of the control flow ops: their results are what their graphs give, so
// each checks the operands against the graphs' inputs and the graphs against one another.
#include <algorithm>

#include "graph/shape_inference.h"

namespace hjit {
namespace {

std::string list_str(const std::vector<TensorType>& ts) {
  std::string s = "(";
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].str();
  return s + ")";
}
std::vector<TensorType> input_types(const Graph& g) {
  std::vector<TensorType> out;
  for (int id : g.inputs) out.push_back(g.type(id));
  return out;
}
std::vector<TensorType> output_types(const Graph& g) {
  std::vector<TensorType> out;
  for (int id : g.outputs) out.push_back(g.type(id));
  return out;
}
std::vector<TensorType> operand_types(const InferArgs& a, size_t first, size_t count) {
  std::vector<TensorType> out;
  for (size_t i = first; i < first + count && i < a.in.size(); ++i) out.push_back(*a.in[i]);
  return out;
}

void require_no_updates(const char* op, const char* which, const Graph& g) {
  if (!g.updates.empty())
    throw ValueError(std::string(op) + ": its " + which + " assigns to a tensor; a branch or loop body must return "
                     "the new values instead (they become results or carries)");
}

// The graph takes exactly `want` as its inputs.
void require_inputs(const char* op, const char* which, const Graph& g, const std::vector<TensorType>& want) {
  if (input_types(g) != want)
    throw ShapeError(std::string(op) + ": its " + which + " takes " + list_str(input_types(g)) + " but is given " +
                     list_str(want));
  require_no_updates(op, which, g);
}

int64_t result_index(const InferArgs& a, size_t count) {
  const int64_t r = a.attrs.i("result");
  if (r < 0 || size_t(r) >= count)
    throw ValueError(std::string(op_name(a.op)) + ": result " + std::to_string(r) + " of " + std::to_string(count));
  return r;
}

}  // namespace

TensorType infer_cond(const InferArgs& a) {
  const TensorType& pred = *a.in[0];
  if (pred.dtype != DType::Bool || pred.rank() != 0)
    throw DTypeError("cond: the predicate must be a bool[] (a 0-d comparison such as hjit::sum(x) > 0.0), got " +
                     pred.str());
  const Graph &then_g = a.attrs.graph("then"), &else_g = a.attrs.graph("else");
  const std::vector<TensorType> operands = operand_types(a, 1, a.in.size() - 1);
  require_inputs("cond", "true branch", then_g, operands);
  require_inputs("cond", "false branch", else_g, operands);
  const std::vector<TensorType> results = output_types(then_g);
  if (output_types(else_g) != results)
    throw ShapeError("cond: the branches must return the same types: the true branch gives " + list_str(results) +
                     ", the false branch " + list_str(output_types(else_g)));
  return results[size_t(result_index(a, results.size()))];
}

TensorType infer_while(const InferArgs& a) {
  const Graph &cond = a.attrs.graph("cond"), &body = a.attrs.graph("body");
  const std::vector<TensorType> operands = operand_types(a, 0, a.in.size());
  require_inputs("while_loop", "condition", cond, operands);
  require_inputs("while_loop", "body", body, operands);
  const std::vector<TensorType> carries = output_types(body);
  if (carries.empty() || carries.size() > operands.size() || operand_types(a, 0, carries.size()) != carries)
    throw ShapeError("while_loop: the body must return the loop state it is given, " +
                     list_str(operand_types(a, 0, std::max<size_t>(carries.size(), 1))) + ", got " + list_str(carries) +
                     " (a carry may not change its shape or dtype from one iteration to the next)");
  const std::vector<TensorType> c = output_types(cond);
  if (c.size() != 1 || c[0].dtype != DType::Bool || c[0].rank() != 0)
    throw DTypeError("while_loop: the condition must return one bool[], got " + list_str(c));
  return carries[size_t(result_index(a, carries.size()))];
}

TensorType infer_scan(const InferArgs& a) {
  const Graph& body = a.attrs.graph("body");
  const int64_t length = a.attrs.i("length"), n = a.attrs.i("carries"), k = a.attrs.i("xs");
  a.attrs.i("reverse");
  if (length < 0) throw ShapeError("scan: negative length " + std::to_string(length));
  if (n < 0 || k < 0 || size_t(n + k) > a.in.size()) throw ValueError("scan: more carries and xs than operands");
  // The body sees one slice of each x along its leading axis.
  std::vector<TensorType> given = operand_types(a, 0, a.in.size());
  for (int64_t i = n; i < n + k; ++i) {
    TensorType& x = given[size_t(i)];
    if (x.rank() == 0 || x.shape[0] != length)
      throw ShapeError("scan: every scanned operand needs a leading axis of the scan's length " + std::to_string(length) +
                       ", got " + x.str());
    x.shape.erase(x.shape.begin());
  }
  require_inputs("scan", "body", body, given);
  const std::vector<TensorType> out = output_types(body);
  const std::vector<TensorType> carries(given.begin(), given.begin() + n);
  if (out.size() < size_t(n) || std::vector<TensorType>(out.begin(), out.begin() + n) != carries)
    throw ShapeError("scan: the body must return the carries it is given, " + list_str(carries) + ", first; got " +
                     list_str(out) + " (a carry may not change its shape or dtype from one step to the next)");
  TensorType r = out[size_t(result_index(a, out.size()))];
  if (a.attrs.i("result") >= n) r.shape.insert(r.shape.begin(), length);  // ys stacked along a new axis 0
  return r;
}

TensorType infer_checkpoint(const InferArgs& a) {
  const Graph& body = a.attrs.graph("body");
  require_inputs("checkpoint", "function", body, operand_types(a, 0, a.in.size()));
  const std::vector<TensorType> results = output_types(body);
  return results[size_t(result_index(a, results.size()))];
}

int control_flow_results(const Node& n) {
  switch (n.op) {
    case OpKind::Cond: return int(n.attrs.graph("then").outputs.size());
    case OpKind::While:
    case OpKind::Scan:
    case OpKind::Checkpoint: return int(n.attrs.graph("body").outputs.size());
    default: throw InternalError(std::string(op_name(n.op)) + " is not a control flow op");
  }
}

bool same_control_flow(const Node& a, const Node& b) {
  if (a.op != b.op || a.inputs != b.inputs || a.attrs.items().size() != b.attrs.items().size()) return false;
  for (size_t i = 0; i < a.attrs.items().size(); ++i) {
    const auto &x = a.attrs.items()[i], &y = b.attrs.items()[i];
    if (x.first != y.first || (x.first != "result" && !(x.second == y.second))) return false;
  }
  return true;
}

}  // namespace hjit
