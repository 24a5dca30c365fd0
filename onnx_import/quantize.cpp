// Post-training static quantization of an ONNX model into the QDQ form ONNX Runtime's quantizer
// writes: calibrate the activations that feed Conv, MatMul and Gemm on the caller's batches, then
// put a QuantizeLinear/DequantizeLinear pair in front of each (u8, per tensor) and store each
// weight as i8 (per output channel, symmetric) behind a DequantizeLinear. hjit::onnx::load computes
// those groups on integer kernels (onnx_import/ops/quantized.cpp).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
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

// A node quantize() rewrites: its activation (input 0) and weight (input 1, an f32 initializer),
// and the weight's axis of output channels.
struct Site {
  int node = -1;
  std::string activation, weight;
  int64_t channel_axis = 0;
};

const ::onnx::TensorProto* initializer(const ::onnx::GraphProto& g, const std::string& name) {
  for (const ::onnx::TensorProto& t : g.initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

std::vector<Site> sites_of(const ::onnx::GraphProto& g) {
  std::vector<Site> sites;
  for (int i = 0; i < g.node_size(); ++i) {
    const ::onnx::NodeProto& n = g.node(i);
    if (!n.domain().empty() || n.input_size() < 2 || n.input(0).empty()) continue;
    const bool conv = n.op_type() == "Conv", matmul = n.op_type() == "MatMul", gemm = n.op_type() == "Gemm";
    if (!conv && !matmul && !gemm) continue;
    const ::onnx::TensorProto* w = initializer(g, n.input(1));
    if (!w || w->data_type() != ::onnx::TensorProto::FLOAT) continue;
    int64_t axis = 0;
    if (conv) {
      if (w->dims_size() != 4) continue;  // 2-d convolutions: int_conv2d's
    } else {
      if (w->dims_size() != 2) continue;
      bool trans_a = false, trans_b = false;
      for (const ::onnx::AttributeProto& a : n.attribute()) {
        if (a.name() == "transA") trans_a = a.i() != 0;
        if (a.name() == "transB") trans_b = a.i() != 0;
      }
      if (trans_a) continue;  // the product's rows are then the activation's columns
      axis = matmul || !trans_b ? 1 : 0;
    }
    sites.push_back(Site{i, n.input(0), n.input(1), axis});
  }
  return sites;
}

std::map<std::string, ActivationRange> calibrate(const ::onnx::ModelProto& model, const std::vector<Site>& sites,
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
  for (const Site& s : sites) {
    if (std::find(names.begin(), names.end(), s.activation) != names.end()) continue;
    names.push_back(s.activation);
    if (output_of.count(s.activation)) continue;
    auto t = typed.find(s.activation);
    if (t == typed.end()) throw ValueError(std::string(kWho) + ": ONNX's shape inference gives no type for '" + s.activation + "'");
    output_of[s.activation] = size_t(probe.graph().output_size());
    *probe.mutable_graph()->add_output() = *t->second;
  }
  const Model m = Model::parse(probe.SerializeAsString());
  std::map<std::string, ActivationRange> ranges;
  for (const std::string& name : names) ranges.emplace(name, ActivationRange(o));
  for (const std::vector<Tensor>& batch : batches) {
    const std::vector<Tensor> outs = m(batch);
    for (const std::string& name : names) ranges.at(name).observe(outs.at(output_of.at(name)), "'" + name + "'");
  }
  return ranges;
}

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
  const std::vector<Site> sites = sites_of(model.graph());
  const std::map<std::string, ActivationRange> ranges = calibrate(model, sites, calibration, options);

  ::onnx::GraphProto* g = model.mutable_graph();
  const ::onnx::GraphProto original = *g;
  g->clear_node();
  std::map<std::string, std::string> dequantized;  // activation or weight -> its DequantizeLinear output
  std::map<int, const Site*> site_at;
  for (const Site& s : sites) site_at[s.node] = &s;
  for (int i = 0; i < original.node_size(); ++i) {
    ::onnx::NodeProto node = original.node(i);
    auto it = site_at.find(i);
    if (it != site_at.end()) {
      const Site& s = *it->second;
      if (!dequantized.count(s.activation)) {
        const auto [scale, zp] = ranges.at(s.activation).scale_and_zero_point();
        const std::string base = s.activation + "_qdq";
        *g->add_initializer() = to_proto(Tensor::scalar(scale), base + "_scale");
        *g->add_initializer() = to_proto(Tensor::scalar(zp, DType::U8), base + "_zp");
        add_node(g, "QuantizeLinear", {s.activation, base + "_scale", base + "_zp"}, base + "_q");
        add_node(g, "DequantizeLinear", {base + "_q", base + "_scale", base + "_zp"}, base + "_dq");
        dequantized[s.activation] = base + "_dq";
      }
      if (!dequantized.count(s.weight)) {
        // i8, symmetric, one scale per output channel (or one, with per_channel false).
        const Tensor w = to_tensor(*initializer(original, s.weight), std::string(kWho) + ": initializer '" + s.weight + "'");
        std::vector<int> reduce;
        for (int d = 0; d < w.ndim(); ++d)
          if (d != s.channel_axis || !options.per_channel) reduce.push_back(d);
        Tensor amax = hjit::max(hjit::abs(w), reduce, true);
        Tensor scale = hjit::where(amax > 0, amax / 127.0, Tensor::scalar(1.0));
        const Tensor q = hjit::clamp(hjit::round(w / scale), -127, 127).astype(DType::I8);
        const int64_t channels = options.per_channel ? w.shape()[size_t(s.channel_axis)] : 1;
        const std::string base = s.weight + "_q";
        *g->add_initializer() = to_proto(q, base);
        *g->add_initializer() = to_proto(options.per_channel ? hjit::reshape(scale, {channels}) : hjit::reshape(scale, {}), base + "_scale");
        *g->add_initializer() = to_proto(options.per_channel ? Tensor::zeros({channels}, DType::I8) : Tensor::scalar(0, DType::I8), base + "_zp");
        add_node(g, "DequantizeLinear", {base, base + "_scale", base + "_zp"}, base + "_dq", options.per_channel ? s.channel_axis : -1000);
        dequantized[s.weight] = base + "_dq";
      }
      node.set_input(0, dequantized[s.activation]);
      node.set_input(1, dequantized[s.weight]);
    }
    *g->add_node() = node;
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
  std::ofstream out(out_path, std::ios::binary);
  if (!out || !model.SerializeToOstream(&out) || !out.flush())
    throw ValueError(std::string(kWho) + ": cannot write " + out_path);
}

}  // namespace hjit::onnx
