// Post-training static quantization of an ONNX model into the QDQ form ONNX Runtime's quantizer
// writes: calibrate the activations in and out of every Conv, MatMul, Gemm, Add and pooling on the
// caller's batches, then put a QuantizeLinear/DequantizeLinear pair after each (u8, per tensor),
// drop the Relus and Clips those pairs make redundant, and store each weight as i8 (per output channel,
// symmetric) behind a DequantizeLinear. hjit::onnx::load computes those groups on integer kernels
// (onnx_import/ops/quantized.cpp).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <hjit/calibration.h>
#include <hjit/onnx.h>
#include <hjit/ops.h>

#include "onnx_import/model_file.h"
#include "onnx_import/tensor_proto.h"

namespace hjit::onnx {
namespace {

using onnx_import::to_proto;
using onnx_import::to_tensor;

const char* const kWho = "hjit::onnx::quantize";

// A contraction whose weight quantize() stores in i8: the node, its weight (input 1, an f32
// initializer) and the weight's axis of output channels.
struct Site {
  int node = -1;
  std::string weight;
  int64_t channel_axis = 0;
};

// What quantize() does to a graph: the activations it puts a QuantizeLinear/DequantizeLinear pair
// after (each once, in graph order), the weights it stores in i8, and the Relus and Clips the pairs replace.
struct Plan {
  std::vector<Site> weights;
  std::vector<std::string> activations;
  std::set<std::string> quantized;           // the same names
  std::map<std::string, std::string> alias;  // a removed Relu's output -> its input
  std::map<std::string, std::string> range_of;  // an activation -> the value whose range it takes
  std::set<int> removed;
};

const ::onnx::TensorProto* initializer(const ::onnx::GraphProto& g, const std::string& name) {
  for (const ::onnx::TensorProto& t : g.initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

// A value known before the model runs: an initializer, or a Constant node's tensor (PyTorch's
// export gives a Clip's bounds so).
const ::onnx::TensorProto* constant_value(const ::onnx::GraphProto& g, const std::string& name) {
  if (const ::onnx::TensorProto* t = initializer(g, name)) return t;
  for (const ::onnx::NodeProto& c : g.node())
    if (c.op_type() == "Constant" && c.domain().empty() && c.output_size() == 1 && c.output(0) == name)
      for (const ::onnx::AttributeProto& a : c.attribute())
        if (a.name() == "value" && a.has_t()) return &a.t();
  return nullptr;
}

// A Conv, MatMul or Gemm whose weight is a 2-d (4-d for Conv) f32 initializer.
std::optional<Site> weight_site(const ::onnx::GraphProto& g, int i) {
  const ::onnx::NodeProto& n = g.node(i);
  const bool conv = n.op_type() == "Conv", matmul = n.op_type() == "MatMul", gemm = n.op_type() == "Gemm";
  if ((!conv && !matmul && !gemm) || n.input_size() < 2) return std::nullopt;
  const ::onnx::TensorProto* w = initializer(g, n.input(1));
  if (!w || w->data_type() != ::onnx::TensorProto::FLOAT) return std::nullopt;
  int64_t axis = 0;
  if (conv) {
    if (w->dims_size() != 4) return std::nullopt;  // 2-d convolutions: int_conv2d's
  } else {
    if (w->dims_size() != 2) return std::nullopt;
    bool trans_a = false, trans_b = false;
    for (const ::onnx::AttributeProto& a : n.attribute()) {
      if (a.name() == "transA") trans_a = a.i() != 0;
      if (a.name() == "transB") trans_b = a.i() != 0;
    }
    if (trans_a) return std::nullopt;  // the product's rows are then the activation's columns
    axis = matmul || !trans_b ? 1 : 0;
  }
  return Site{i, n.input(1), axis};
}

// A Clip whose bounds are constants with 0 between them (a ReLU6: [0, 6]). After a quantized
// contraction it is what ONNX Runtime's quantizer removes as it removes a Relu: the output's
// quantization, calibrated on the clipped values (its range holds 0, so its zero point falls in
// the clip's range), saturates where the clip would clamp. Kept, it was a dequantization, two
// comparisons and a second requantization of every element between the convolution and the next.
bool clamps_to_a_range_around_0(const ::onnx::GraphProto& g, const ::onnx::NodeProto& clip) {
  if (clip.op_type() != "Clip" || clip.input_size() < 1 || clip.input_size() > 3) return false;
  auto bound = [&](int k, double unbounded) -> std::optional<double> {  // (as inputs: quantize() takes opset 13 on)
    if (k >= clip.input_size() || clip.input(k).empty()) return unbounded;
    const ::onnx::TensorProto* t = constant_value(g, clip.input(k));
    if (!t || t->data_type() != ::onnx::TensorProto::FLOAT) return std::nullopt;  // computed bounds may change
    const std::vector<float> v = to_tensor(*t, std::string(kWho) + ": Clip bound '" + clip.input(k) + "'").to_vector<float>();
    if (v.size() != 1) return std::nullopt;
    return double(v[0]);
  };
  const std::optional<double> lo = bound(1, -INFINITY), hi = bound(2, INFINITY);
  return lo && hi && *lo <= 0 && *hi >= 0;
}

// ONNX Runtime's static QDQ form: the activations in and out of every contraction, Add and
// pooling are quantized (u8, per tensor), so that a runtime fuses each group into an integer
// kernel and the values between them stay 8-bit; a Relu (or a Clip around 0) right after a
// contraction or an Add is the clamp of the quantized output (its zero point is 0) and goes.
Plan plan_of(const ::onnx::GraphProto& g) {
  Plan plan;
  std::map<std::string, int> consumers, producer;
  std::set<std::string> outputs;
  for (const ::onnx::ValueInfoProto& o : g.output()) outputs.insert(o.name());
  for (int i = 0; i < g.node_size(); ++i) {
    for (const std::string& in : g.node(i).input()) ++consumers[in];
    for (const std::string& out : g.node(i).output()) producer[out] = i;
  }
  // Activations are f32 values the graph computes (shape arithmetic in i64 is not quantized).
  std::set<std::string> floats;
  for (const auto* list : {&g.value_info(), &g.input(), &g.output()})
    for (const ::onnx::ValueInfoProto& v : *list)
      if (v.type().tensor_type().elem_type() == ::onnx::TensorProto::FLOAT) floats.insert(v.name());
  auto activation = [&](const std::string& name) { return !name.empty() && floats.count(name) && !initializer(g, name); };
  std::set<int> contractions;  // and Adds: what a removed Relu may follow
  std::vector<std::string> marked;
  for (int i = 0; i < g.node_size(); ++i) {
    const ::onnx::NodeProto& n = g.node(i);
    if (!n.domain().empty() || n.input_size() < 1 || n.output_size() < 1 || !activation(n.input(0))) continue;
    const std::string& op = n.op_type();
    std::vector<std::string> ins{n.input(0)};
    if (std::optional<Site> site = weight_site(g, i)) {
      plan.weights.push_back(*site);
      contractions.insert(i);
    } else if ((op == "MatMul" || op == "Add") && n.input_size() == 2 && activation(n.input(1))) {
      ins.push_back(n.input(1));  // a product of two activations (attention), a residual connection
      contractions.insert(i);
    } else if (op != "MaxPool" && op != "AveragePool" && op != "GlobalAveragePool") {
      continue;
    }
    for (const std::string& in : ins) marked.push_back(in);
    if (activation(n.output(0))) marked.push_back(n.output(0));
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const ::onnx::NodeProto& r = g.node(i);
    const bool relu = r.op_type() == "Relu" && r.input_size() == 1;
    if (!r.domain().empty() || r.output_size() != 1 || !(relu || clamps_to_a_range_around_0(g, r))) continue;
    const std::string &x = r.input(0), &y = r.output(0);
    auto p = producer.find(x);
    if (p == producer.end() || !contractions.count(p->second) || consumers[x] != 1 || outputs.count(x) || outputs.count(y)) continue;
    plan.removed.insert(i);
    plan.alias[y] = x;
    plan.range_of[x] = y;
  }
  for (const std::string& name : marked) {
    auto a = plan.alias.find(name);
    const std::string& n = a == plan.alias.end() ? name : a->second;
    if (plan.quantized.insert(n).second) plan.activations.push_back(n);
  }
  return plan;
}

std::map<std::string, ActivationRange> calibrate(const ::onnx::ModelProto& model, const Plan& plan,
                                                 const std::vector<std::vector<Tensor>>& batches, const QuantizeOptions& o) {
  // The model with every activation to calibrate as an extra output, run eagerly on each batch.
  // (A graph output needs its type: the one ONNX's shape inference gave the value, or the input's.)
  ::onnx::ModelProto probe = model;
  std::map<std::string, const ::onnx::ValueInfoProto*> typed;
  for (const ::onnx::ValueInfoProto& v : model.graph().value_info()) typed[v.name()] = &v;
  for (const ::onnx::ValueInfoProto& v : model.graph().input()) typed[v.name()] = &v;
  std::map<std::string, size_t> output_of;  // activation -> its index among the probe's outputs
  for (int k = 0; k < probe.graph().output_size(); ++k) output_of.emplace(probe.graph().output(k).name(), size_t(k));
  std::vector<std::string> names;
  for (const std::string& activation : plan.activations) {
    auto source = plan.range_of.find(activation);
    const std::string& value = source == plan.range_of.end() ? activation : source->second;
    names.push_back(value);
    if (output_of.count(value)) continue;
    auto t = typed.find(value);
    if (t == typed.end()) throw ValueError(std::string(kWho) + ": ONNX's shape inference gives no type for '" + value + "'");
    output_of[value] = size_t(probe.graph().output_size());
    *probe.mutable_graph()->add_output() = *t->second;
  }
  const Model m = Model::parse(probe.SerializeAsString());
  std::map<std::string, ActivationRange> ranges;  // by activation
  for (const std::string& name : plan.activations) ranges.emplace(name, ActivationRange(o));
  for (const std::vector<Tensor>& batch : batches) {
    const std::vector<Tensor> outs = m(batch);
    for (size_t k = 0; k < names.size(); ++k)
      ranges.at(plan.activations[k]).observe(outs.at(output_of.at(names[k])), "'" + names[k] + "'");
  }
  return ranges;
}

// A model quantize() has already been through (or any quantized model): quantizing it again would
// quantize the dequantized values a second time; it takes the float model.
void refuse_quantized(const ::onnx::GraphProto& g) {
  static const std::set<std::string> quantized_ops{"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv",
                                                   "QLinearMatMul",  "ConvInteger",      "MatMulInteger"};
  for (const ::onnx::NodeProto& n : g.node())
    if (n.domain().empty() && quantized_ops.count(n.op_type()))
      throw ValueError(std::string(kWho) + ": the model is already quantized (node '" + n.name() + "' is a " + n.op_type() +
                       "); quantize the float model it came from");
}

// Names the model does not use yet: the pairs' and weights' names are made from the values',
// which a model may already hold under the same spelling.
class FreshNames {
 public:
  explicit FreshNames(const ::onnx::GraphProto& g) {
    for (const auto* list : {&g.input(), &g.output(), &g.value_info()})
      for (const ::onnx::ValueInfoProto& v : *list) taken_.insert(v.name());
    for (const ::onnx::TensorProto& t : g.initializer()) taken_.insert(t.name());
    for (const ::onnx::NodeProto& n : g.node()) {
      taken_.insert(n.name());
      for (const std::string& o : n.output()) taken_.insert(o);
    }
  }
  // base, or base_1, base_2, ... where taken; each suffix the caller appends is reserved with it.
  std::string operator()(const std::string& base, const std::vector<std::string>& suffixes) {
    for (int k = 0;; ++k) {
      const std::string b = k == 0 ? base : base + "_" + std::to_string(k);
      bool free = true;
      for (const std::string& s : suffixes) free = free && !taken_.count(b + s);
      if (!free) continue;
      for (const std::string& s : suffixes) taken_.insert(b + s);
      return b;
    }
  }

 private:
  std::set<std::string> taken_;
};

void add_node(::onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& in, const std::string& out, int64_t axis = -1000) {
  ::onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out + "_" + op);
  for (const std::string& i : in) n->add_input(i);
  n->add_output(out);
  if (axis != -1000) {
    ::onnx::AttributeProto* a = n->add_attribute();
    a->set_name("axis");
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(axis);
  }
}

}  // namespace

void quantize(const std::string& path, const std::string& out_path, const std::vector<std::vector<Tensor>>& calibration,
              const QuantizeOptions& options) {
  if (calibration.empty()) throw ValueError(std::string(kWho) + ": needs at least one batch of calibration inputs");
  options.check(kWho);
  const std::string dir = std::filesystem::path(path).parent_path().string();
  ::onnx::ModelProto model = onnx_import::read_model(onnx_import::read_file(path, kWho), dir.empty() ? "." : dir, kWho);
  const int64_t opset = onnx_import::default_opset(model, kWho);
  if (opset < 13)
    throw ValueError(std::string(kWho) + ": the model imports opset " + std::to_string(opset) +
                     "; per-channel DequantizeLinear needs 13 or later (convert the model first)");
  refuse_quantized(model.graph());
  const Plan plan = plan_of(model.graph());
  FreshNames fresh(model.graph());
  const std::map<std::string, ActivationRange> ranges = calibrate(model, plan, calibration, options);

  ::onnx::GraphProto* g = model.mutable_graph();
  const ::onnx::GraphProto original = *g;
  g->clear_node();
  std::map<std::string, std::string> dequantized;  // activation or weight -> its DequantizeLinear output
  auto quantize_activation = [&](const std::string& name) {
    const auto [scale, zp] = ranges.at(name).scale_and_zero_point();
    const std::string base = fresh(name + "_qdq", {"_scale", "_zp", "_q", "_dq", "_q_QuantizeLinear", "_dq_DequantizeLinear"});
    *g->add_initializer() = to_proto(Tensor::scalar(scale), base + "_scale");
    *g->add_initializer() = to_proto(Tensor::scalar(zp, DType::U8), base + "_zp");
    add_node(g, "QuantizeLinear", {name, base + "_scale", base + "_zp"}, base + "_q");
    add_node(g, "DequantizeLinear", {base + "_q", base + "_scale", base + "_zp"}, base + "_dq");
    dequantized[name] = base + "_dq";
  };
  for (const ::onnx::ValueInfoProto& in : original.input())
    if (plan.quantized.count(in.name())) quantize_activation(in.name());
  std::map<int, const Site*> site_at;
  for (const Site& s : plan.weights) site_at[s.node] = &s;
  for (int i = 0; i < original.node_size(); ++i) {
    if (plan.removed.count(i)) continue;
    ::onnx::NodeProto node = original.node(i);
    for (int k = 0; k < node.input_size(); ++k) {
      auto a = plan.alias.find(node.input(k));
      const std::string name = a == plan.alias.end() ? node.input(k) : a->second;
      if (plan.quantized.count(name)) node.set_input(k, dequantized.at(name));
    }
    if (auto it = site_at.find(i); it != site_at.end()) {
      const Site& s = *it->second;
      if (!dequantized.count(s.weight)) {
        // i8, symmetric, one scale per output channel (or one, with per_channel false).
        const Tensor w = to_tensor(*initializer(original, s.weight), std::string(kWho) + ": initializer '" + s.weight + "'");
        const QuantizedWeight q = quantize_weight(w, int(s.channel_axis), options);
        const std::string base = fresh(s.weight + "_q", {"", "_scale", "_zp", "_dq", "_dq_DequantizeLinear"});
        *g->add_initializer() = to_proto(q.q, base);
        *g->add_initializer() = to_proto(q.scale, base + "_scale");
        *g->add_initializer() = to_proto(Tensor::zeros(q.scale.shape(), DType::I8), base + "_zp");
        add_node(g, "DequantizeLinear", {base, base + "_scale", base + "_zp"}, base + "_dq", options.per_channel ? s.channel_axis : -1000);
        dequantized[s.weight] = base + "_dq";
      }
      node.set_input(1, dequantized[s.weight]);
    }
    *g->add_node() = node;
    for (const std::string& out : node.output())
      if (plan.quantized.count(out)) quantize_activation(out);
  }
  // Weights no node reads as floats any more are dropped.
  std::set<std::string> read;
  for (const ::onnx::NodeProto& n : g->node())
    for (const std::string& in : n.input()) read.insert(in);
  for (const ::onnx::ValueInfoProto& o : g->output()) read.insert(o.name());
  ::onnx::GraphProto kept = *g;
  kept.clear_initializer();
  for (const ::onnx::TensorProto& t : g->initializer())
    if (read.count(t.name())) *kept.add_initializer() = t;
  *g = kept;
  errno = 0;
  std::ofstream out(out_path, std::ios::binary);
  if (!out || !model.SerializeToOstream(&out) || !out.flush())
    throw ValueError(std::string(kWho) + ": cannot write " + out_path + (errno ? std::string(": ") + std::strerror(errno) : ""));
}

}  // namespace hjit::onnx
