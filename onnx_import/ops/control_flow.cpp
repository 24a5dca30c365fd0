// If, Loop and Scan onto hjit's cond, while_loop and scan: each body is a subgraph run by the
// interpreter in the node's scope, so inside a trace it becomes one body graph of the control flow
// op (compiled once, run as a loop by the host), and eagerly it is the loop it stands for.
#include <numeric>

#include <hjit/control_flow.h>

#include "onnx_import/interpreter.h"
#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

// A condition value known now (not traced): the branch or trip is decided while converting.
bool known(const Tensor& t) { return !t.is_traced(); }

V If(const NodeContext& n) {
  const Tensor& c = n.input(0);
  if (c.numel() != 1) n.fail("its condition must hold one element");
  const ::onnx::GraphProto &then_g = n.attr_graph("then_branch"), &else_g = n.attr_graph("else_branch");
  if (known(c)) return n.run_subgraph(c.item<bool>() ? then_g : else_g, {});
  return cond(
      reshape(astype(c, DType::Bool), {}), [&](const Tensors&) { return n.run_subgraph(then_g, {}); },
      [&](const Tensors&) { return n.run_subgraph(else_g, {}); }, {});
}

// The axis `from` of x moved to the front, or from the front to `to`.
Tensor to_front(const Tensor& x, int from) {
  if (from == 0) return x;
  std::vector<int> perm{from};
  for (int d = 0; d < int(x.shape().size()); ++d)
    if (d != from) perm.push_back(d);
  return transpose(x, perm);
}
Tensor from_front(const Tensor& x, int to) {
  if (to == 0) return x;
  std::vector<int> perm;
  for (int d = 1; d <= to; ++d) perm.push_back(d);
  perm.push_back(0);
  for (int d = to + 1; d < int(x.shape().size()); ++d) perm.push_back(d);
  return transpose(x, perm);
}

Tensor flip_front(const Tensor& x) {
  std::vector<int64_t> back(static_cast<size_t>(x.shape()[0]));
  std::iota(back.rbegin(), back.rend(), 0);
  return take(x, Tensor::from_vector<int64_t>(back, Shape{int64_t(back.size())}), 0);
}

// A Scan body as hjit::scan's: the subgraph run on (states..., scanned slices...), its first
// `states` outputs the next states and the rest the slices of the scan outputs.
ScanBody scan_body(const NodeContext& n, const ::onnx::GraphProto& body, int64_t states) {
  return [&n, &body, states](const Tensors& carries, const Tensors& x) {
    Tensors args = carries;
    args.insert(args.end(), x.begin(), x.end());
    Tensors outs = n.run_subgraph(body, args);
    return std::make_pair(Tensors(outs.begin(), outs.begin() + states), Tensors(outs.begin() + states, outs.end()));
  };
}

// Scan (opset 9+): the scanned inputs moved to the front of their scan axes (flipped when
// scanned backwards), run by hjit::scan, the outputs moved to their axes.
V scan_opset8(const NodeContext& n);

V Scan(const NodeContext& n) {
  if (n.opset() < 9) return scan_opset8(n);
  const ::onnx::GraphProto& body = n.attr_graph("body");
  const int64_t scanned = n.attr_int("num_scan_inputs");
  const int64_t states = int64_t(n.num_inputs()) - scanned;
  if (scanned < 1 || states < 0) n.fail("num_scan_inputs does not fit its inputs");
  const std::vector<int64_t> in_axes = n.attr_ints("scan_input_axes", std::vector<int64_t>(size_t(scanned), 0));
  const std::vector<int64_t> in_dirs = n.attr_ints("scan_input_directions", std::vector<int64_t>(size_t(scanned), 0));
  const int64_t outputs = body.output_size() - states;
  const std::vector<int64_t> out_axes = n.attr_ints("scan_output_axes", std::vector<int64_t>(size_t(outputs), 0));
  const std::vector<int64_t> out_dirs = n.attr_ints("scan_output_directions", std::vector<int64_t>(size_t(outputs), 0));
  Tensors init, xs;
  for (int64_t i = 0; i < states; ++i) init.push_back(n.input(size_t(i)));
  for (int64_t i = 0; i < scanned; ++i) {
    const Tensor& x = n.input(size_t(states + i));
    Tensor f = to_front(x, n.axis(in_axes.at(size_t(i)), int64_t(x.shape().size())));
    xs.push_back(in_dirs.at(size_t(i)) ? flip_front(f) : f);
  }
  const ScanResult r = scan(scan_body(n, body, states), init, xs);
  V out = r.carries;
  for (int64_t k = 0; k < outputs; ++k) {
    Tensor y = out_dirs.at(size_t(k)) ? flip_front(r.ys[size_t(k)]) : r.ys[size_t(k)];
    out.push_back(from_front(y, n.axis(out_axes.at(size_t(k)), int64_t(y.shape().size()))));
  }
  return out;
}

// Opset 8's Scan: a batch axis first and an optional sequence_lens input; each batch entry scanned
// on its own (sequence_lens must be the full length).
V scan_opset8(const NodeContext& n) {
  const ::onnx::GraphProto& body = n.attr_graph("body");
  const int64_t scanned = n.attr_int("num_scan_inputs");
  const int64_t states = int64_t(n.num_inputs()) - 1 - scanned;
  const std::vector<int64_t> dirs = n.attr_ints("directions", std::vector<int64_t>(size_t(scanned), 0));
  if (scanned < 1 || states < 0) n.fail("num_scan_inputs does not fit its inputs");
  const int64_t batch = n.input(size_t(1 + states)).shape().at(0), length = n.input(size_t(1 + states)).shape().at(1);
  if (n.has_input(0))
    for (int64_t l : n.input_ints(0))
      if (l != length) n.fail("scans sequences of different lengths (sequence_lens), which is not converted");
  std::vector<V> per_batch;
  for (int64_t b = 0; b < batch; ++b) {
    Tensors init, xs;
    for (int64_t i = 0; i < states; ++i) init.push_back(squeeze(slice(n.input(size_t(1 + i)), 0, b, b + 1), {0}));
    for (int64_t i = 0; i < scanned; ++i) {
      const Tensor x = squeeze(slice(n.input(size_t(1 + states + i)), 0, b, b + 1), {0});
      xs.push_back(dirs.at(size_t(i)) ? flip_front(x) : x);
    }
    const ScanResult r = scan(scan_body(n, body, states), init, xs);
    V out = r.carries;
    out.insert(out.end(), r.ys.begin(), r.ys.end());
    per_batch.push_back(out);
  }
  V out;
  for (size_t k = 0; k < per_batch[0].size(); ++k) {
    Tensors entries;
    for (const V& v : per_batch) entries.push_back(v[k]);
    out.push_back(stack(entries, 0));
  }
  return out;
}

// Loop: eagerly (or with a trip count and condition known now and no early exit) the loop itself;
// traced without scan outputs, a while_loop over (iteration, condition, carried values).
// Whether the body hands its condition input back unchanged (as exporters write a for loop), or
// gives a Constant true: either way the loop runs until its trip count.
bool condition_passes_through(const ::onnx::GraphProto& body) {
  const std::string& in = body.input(1).name();
  if (body.output(0).name() == in) return true;
  for (const auto& node : body.node()) {
    if (node.output_size() < 1 || node.output(0) != body.output(0).name()) continue;
    if (node.op_type() == "Identity" && node.input_size() == 1 && node.input(0) == in) return true;
    if (node.op_type() == "Constant" && node.attribute_size() == 1 && node.attribute(0).name() == "value" && node.attribute(0).has_t()) {
      const ::onnx::TensorProto& t = node.attribute(0).t();
      return t.data_type() == ::onnx::TensorProto::BOOL && t.dims_size() == 0 &&
             ((t.int32_data_size() == 1 && t.int32_data(0) != 0) || (t.raw_data().size() == 1 && t.raw_data()[0] != 0));
    }
  }
  return false;
}

V Loop(const NodeContext& n) {
  const ::onnx::GraphProto& body = n.attr_graph("body");
  std::optional<Tensor> max_trips = n.optional_input(0), first_cond = n.optional_input(1);
  const size_t carried = n.num_inputs() - 2;
  const size_t scan_outputs = size_t(body.output_size()) - 1 - carried;
  if (scan_outputs > 0) {  // the number of trips shapes the outputs: it must be known now
    if (max_trips) max_trips = Tensor::scalar(double(n.input_ints(0).at(0)), DType::I64);
    if (first_cond) first_cond = Tensor::scalar(double(n.input_ints(1).at(0)), DType::Bool);
  }
  const bool concrete = (!max_trips || known(*max_trips)) && (!first_cond || known(*first_cond));
  Tensors state;
  for (size_t i = 0; i < carried; ++i) state.push_back(n.input(2 + i));
  const bool for_loop = condition_passes_through(body) && (!first_cond || !concrete || first_cond->item<bool>());
  if (concrete && !max_trips && for_loop) n.fail<ResourceError>("never ends: it has no trip count and its condition stays true");
  // A for loop (known trips, the condition true and handed back): one scan, not unrolled.
  if (concrete && max_trips && for_loop) {
    const int64_t trips = max_trips->item<int64_t>();
    n.require_trips(trips);
    const Tensor go = Tensor::scalar(1, DType::Bool);
    if (trips > 0) try {
      const ScanResult r = scan(
          [&](const Tensors& carries, const Tensors& x) {
            Tensors args{x[0], go};
            args.insert(args.end(), carries.begin(), carries.end());
            Tensors outs = n.run_subgraph(body, args);
            return std::make_pair(Tensors(outs.begin() + 1, outs.begin() + 1 + std::ptrdiff_t(carried)),
                                  Tensors(outs.begin() + 1 + std::ptrdiff_t(carried), outs.end()));
          },
          state, {iota({trips}, 0, DType::I64)});
      V out = r.carries;
      out.insert(out.end(), r.ys.begin(), r.ys.end());
      return out;
    } catch (const ValueError& e) {
      // A body that needs its iteration number known (a slice at it): unrolled, trip by trip.
      if (std::string(e.what()).find(kMustBeKnown) == std::string::npos) throw;
    }
  }
  if (concrete) {
    const int64_t trips = max_trips ? max_trips->item<int64_t>() : std::numeric_limits<int64_t>::max();
    Tensor go = first_cond ? astype(*first_cond, DType::Bool) : Tensor::scalar(1, DType::Bool);
    std::vector<Tensors> stacked(scan_outputs);
    for (int64_t i = 0; i < trips; ++i) {
      if (!go.is_traced() && !go.item<bool>()) break;
      if (i == n.limits().max_loop_trips) n.require_trips(i + 1);
      if (go.is_traced()) n.fail("its condition is computed from the model's inputs while scan outputs grow with each trip");
      Tensors args{Tensor::scalar(double(i), DType::I64), go};
      args.insert(args.end(), state.begin(), state.end());
      Tensors outs = n.run_subgraph(body, args);
      go = astype(outs[0], DType::Bool);
      state.assign(outs.begin() + 1, outs.begin() + 1 + std::ptrdiff_t(carried));
      for (size_t k = 0; k < scan_outputs; ++k) stacked[k].push_back(outs[1 + carried + k]);
    }
    V out = state;
    for (size_t k = 0; k < scan_outputs; ++k) {
      if (stacked[k].empty()) n.fail("its scan output " + std::to_string(k) + " is empty: no trip ran");
      out.push_back(stack(stacked[k], 0));
    }
    return out;
  }
  if (scan_outputs > 0) n.fail("a loop whose trip count is computed from the model's inputs cannot give scan outputs (their shape depends on values)");
  Tensors init{Tensor::scalar(0, DType::I64), first_cond ? reshape(astype(*first_cond, DType::Bool), {}) : Tensor::scalar(1, DType::Bool)};
  init.insert(init.end(), state.begin(), state.end());
  const Tensor limit = max_trips ? reshape(astype(*max_trips, DType::I64), {}) : Tensor::scalar(9.2e18, DType::I64);
  Tensors done = while_loop(
      [&](const Tensors& s) { return logical_and(s[0] < limit, s[1]); },
      [&](const Tensors& s) {
        Tensors outs = n.run_subgraph(body, s);
        Tensors next{s[0] + int64_t(1), reshape(astype(outs[0], DType::Bool), {})};
        next.insert(next.end(), outs.begin() + 1, outs.begin() + 1 + std::ptrdiff_t(carried));
        return next;
      },
      init);
  return V(done.begin() + 2, done.end());
}

// If and Loop over any values: a branch or loop that gives sequences or nones runs while the model
// is converted (its condition and trip count known then); one of tensors is the control flow op.
std::vector<Value> as_values(const V& tensors) { return std::vector<Value>(tensors.begin(), tensors.end()); }

bool gives_values(const ::onnx::GraphProto& g, int from) {
  for (int k = from; k < g.output_size(); ++k)
    if (!g.output(k).type().has_tensor_type()) return true;
  return false;
}

std::vector<Value> IfValues(const NodeContext& n) {
  const ::onnx::GraphProto &then_g = n.attr_graph("then_branch"), &else_g = n.attr_graph("else_branch");
  if (known(n.input(0)) || gives_values(then_g, 0) || gives_values(else_g, 0)) {
    const std::vector<int64_t> c = n.input_ints(0);  // "must be known" when traced
    if (c.size() != 1) n.fail("its condition must hold one element");
    return n.run_subgraph_values(c[0] ? then_g : else_g, {});
  }
  return as_values(If(n));
}

std::vector<Value> LoopValues(const NodeContext& n) {
  const ::onnx::GraphProto& body = n.attr_graph("body");
  const size_t carried = n.num_inputs() - 2;
  bool values = gives_values(body, 1);
  for (size_t i = 0; i < carried; ++i) values = values || !n.value(2 + i).is_tensor();
  if (!values) return as_values(Loop(n));
  const int64_t trips = n.has_input(0) ? n.input_ints(0).at(0) : std::numeric_limits<int64_t>::max();
  bool go = !n.has_input(1) || n.input_ints(1).at(0) != 0;
  const size_t scan_outputs = size_t(body.output_size()) - 1 - carried;
  std::vector<Value> state;
  for (size_t i = 0; i < carried; ++i) state.push_back(n.value(2 + i));
  std::vector<Tensors> stacked(scan_outputs);
  for (int64_t i = 0; i < trips && go; ++i) {
    if (i == n.limits().max_loop_trips) n.require_trips(i + 1);
    std::vector<Value> args{Tensor::scalar(double(i), DType::I64), Tensor::scalar(1, DType::Bool)};
    args.insert(args.end(), state.begin(), state.end());
    std::vector<Value> outs = n.run_subgraph_values(body, args);
    try {
      go = outs[0].tensor().item<bool>();  // a graph break under fullgraph = false
    } catch (const ConcretizationError&) {
      n.fail("its condition is computed from the model's inputs while it carries sequences or nones");
    }
    state.assign(outs.begin() + 1, outs.begin() + 1 + std::ptrdiff_t(carried));
    for (size_t k = 0; k < scan_outputs; ++k) {
      if (!outs[1 + carried + k].is_tensor()) n.fail("its scan output " + std::to_string(k) + " is not a tensor");
      stacked[k].push_back(outs[1 + carried + k].tensor());
    }
  }
  for (size_t k = 0; k < scan_outputs; ++k) {
    if (stacked[k].empty()) n.fail("its scan output " + std::to_string(k) + " is empty: no trip ran");
    state.push_back(stack(stacked[k], 0));
  }
  return state;
}

}  // namespace

void add_control_flow_ops(ConverterTable& t) { t["Scan"] = Scan; }

void add_control_flow_value_ops(ValueConverterTable& t) {
  t["If"] = IfValues;
  t["Loop"] = LoopValues;
}

}  // namespace hjit::onnx_import
