#include "frontend/jit/debug_nans.h"

#include <algorithm>
#include <cmath>

#include "frontend/jit/captured.h"
#include "frontend/tracing/replay.h"
#include "graph/op_def.h"
#include "support/log.h"

namespace hjit::detail {
namespace {

// What a value is, in the user's terms: an argument, a captured tensor, a constant, or an op.
std::string describe(const Graph& g, const Version& v, int node) {
  const Node& n = g.node(node);
  const std::string type = " (" + n.type.str() + ")";
  if (n.op == OpKind::Parameter) {
    const size_t index = size_t(n.attrs.i("index"));
    return index < v.num_args ? "argument " + std::to_string(index) + type
                              : "a captured tensor (input " + std::to_string(index) + ")" + type;
  }
  if (n.op == OpKind::Constant) return "a constant" + type;
  return std::string(op_name(n.op)) + " (node " + std::to_string(node) + ")" + type;
}

// Whether t holds a NaN (nan) or an infinity (!nan).
bool holds(const Tensor& t, bool nan) {
  if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) return false;
  for (double d : t.to_vector<double>())
    if (nan ? std::isnan(d) : std::isinf(d)) return true;
  return false;
}

}  // namespace

bool has_nonfinite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return false;
  for (double d : t.to_vector<double>())
    if (!std::isfinite(d)) return true;
  return false;
}

void check_finite(const std::string& fn, const Version& v, const CallArgs& args, const std::vector<Tensor>& outputs) {
  // What the call made: its results, then the new values of its assigned tensors.
  std::vector<Tensor> made(outputs.begin(), outputs.begin() + std::ptrdiff_t(v.num_outputs()));
  for (size_t k = 0; k < v.fn->update_inputs().size(); ++k)
    made.push_back(v.fn->updated_value(k, input_tensor(v, args, v.fn->update_inputs()[k]).type));
  size_t bad = 0;
  while (bad < made.size() && !has_nonfinite(made[bad])) ++bad;
  if (bad == made.size()) return;
  const std::string where = bad < v.num_outputs() ? "result " + std::to_string(bad)
                                                  : "the new value of assigned tensor " + std::to_string(bad - v.num_outputs());
  log().debug("jit '{}' (debug_nans): {} is not finite; running the function op by op", fn, where);
  // The call's inputs, copied: the replay's assigns land in the copies.
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < args.count; ++i) inputs.push_back(args.tensor(i).clone());
  for (const auto& c : v.captured) inputs.push_back(Tensor(c).clone());
  const Graph& g = v.graph();
  // A NaN anywhere is a fault; an infinity is one only where an op makes it from finite inputs
  // (a mask filled with -inf, made on purpose, is no culprit of an overflow after it).
  const bool nan = std::any_of(made.begin(), made.end(), [](const Tensor& t) { return holds(t, true); });
  const char* kind = nan ? "a NaN" : "an infinity";
  std::string found;
  try {
    replay(g, inputs, [&](size_t id, const std::vector<Tensor>& values) {
      const Node& n = g.nodes[id];
      if (has_trait(n.op, Source) || !holds(values[id], nan)) return;
      std::string bad_inputs;
      for (size_t i = 0; i < n.inputs.size(); ++i)
        if (holds(values[size_t(n.inputs[i])], nan))
          bad_inputs += (bad_inputs.empty() ? "" : ", ") + ("its input " + std::to_string(i) + ", " + describe(g, v, n.inputs[i]));
      if (!nan && !bad_inputs.empty()) return;
      found = describe(g, v, int(id)) + " made " + kind +
              (bad_inputs.empty() ? " from finite inputs" : "; " + bad_inputs + ", already held one");
      throw FloatingPointError(found);
    });
  } catch (const FloatingPointError&) {
  }
  for (size_t i = 0; i < g.inputs.size() && found.empty(); ++i)
    if (holds(inputs[i], nan)) found = describe(g, v, g.inputs[i]) + " holds " + kind + " that reaches it unchanged";
  throw FloatingPointError("jit '" + fn + "' (debug_nans): " + where + " holds a NaN or an infinity; " +
                           (found.empty() ? std::string("run op by op eagerly, no op made one (the compiled code differs "
                                                        "from eager execution: check_trace compares them)")
                                          : found) +
                           ". Nothing was assigned.");
}

}  // namespace hjit::detail
