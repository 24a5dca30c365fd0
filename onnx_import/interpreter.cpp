#include "onnx_import/interpreter.h"

#include <hjit/error.h>

#include <algorithm>
#include <stdexcept>

#include "onnx_import/model_file.h"
#include "onnx_import/node_context.h"
#include "onnx_import/tensor_proto.h"

namespace hjit::onnx_import {

namespace {

// An error an hjit op raised while converting a node, with the node named in front (the type kept).
template <class E>
[[noreturn]] void rethrow_at(const E& e, const std::string& where) {
  const std::string what = e.what();
  if (what.rfind("hjit::onnx:", 0) == 0) throw e;
  throw E("hjit::onnx: " + where + ": " + what);
}

template <class C>
auto convert_node(const NodeContext& ctx, C convert) {
  try {
    return convert(ctx);
  } catch (const ShapeError& e) {
    rethrow_at(e, ctx.where());
  } catch (const DTypeError& e) {
    rethrow_at(e, ctx.where());
  } catch (const IndexError& e) {
    rethrow_at(e, ctx.where());
  } catch (const ConcretizationError& e) {
    rethrow_at(e, ctx.where());
  } catch (const ValueError& e) {
    rethrow_at(e, ctx.where());
  } catch (const ResourceError& e) {
    rethrow_at(e, ctx.where());
  } catch (const std::out_of_range& e) {
    // A converter read a value past the end of an input or attribute that holds fewer than the op
    // needs (a constant_value with no element): the model's fault, said as such.
    throw ValueError("hjit::onnx: " + ctx.where() + ": an input or attribute holds fewer values than the op reads (" + e.what() + ")");
  }
}

// Every name a node reads, its subgraphs' reads included (a superset: names a subgraph defines
// itself as well).
void reads_of(const ::onnx::NodeProto& node, std::vector<std::string>& out) {
  for (const std::string& name : node.input())
    if (!name.empty()) out.push_back(name);
  for (const ::onnx::AttributeProto& a : node.attribute()) {
    auto sub = [&](const ::onnx::GraphProto& g) {
      for (const ::onnx::NodeProto& n : g.node()) reads_of(n, out);
      for (const ::onnx::ValueInfoProto& v : g.output()) out.push_back(v.name());
    };
    if (a.has_g()) sub(a.g());
    for (const ::onnx::GraphProto& g : a.graphs()) sub(g);
  }
}

// For each node, the values its nodes made that nothing after it reads: dropped once it has run,
// so that an eager run holds only the live values, and a graph break (JitOptions::fullgraph =
// false) computes only those the rest of the model needs. The graph's outputs are kept, and what
// DequantizeLinear nodes read (Interpreter::dequantized looks back at them).
std::vector<std::vector<std::string>> dead_after(const ::onnx::GraphProto& graph) {
  std::map<std::string, int> last;
  std::vector<std::string> reads;
  for (int i = 0; i < graph.node_size(); ++i) {
    reads.clear();
    reads_of(graph.node(i), reads);
    for (const std::string& name : reads) last[name] = graph.node(i).op_type() == "DequantizeLinear" ? graph.node_size() : i;
  }
  for (const ::onnx::ValueInfoProto& v : graph.output()) last[v.name()] = graph.node_size();
  std::vector<std::vector<std::string>> dead(size_t(graph.node_size()));
  for (int i = 0; i < graph.node_size(); ++i)
    for (const std::string& name : graph.node(i).output()) {
      if (name.empty()) continue;
      auto it = last.find(name);
      const int at = it == last.end() ? i : std::max(i, it->second);
      if (at < graph.node_size()) dead[size_t(at)].push_back(name);
    }
  return dead;
}

}  // namespace

std::optional<Value> Interpreter::lookup(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  if (outer_)
    if (auto it = outer_->find(name); it != outer_->end()) return it->second;
  return std::nullopt;
}

Scope Interpreter::visible() const {
  Scope all = values_;
  if (outer_) all.insert(outer_->begin(), outer_->end());  // inner names shadow outer ones
  return all;
}

Value Interpreter::recompute(const std::string& name, const Scope& replaced) const {
  Interpreter again(opset_, outer_, limits_);
  again.drop_dead_ = false;
  again.values_ = values_;
  for (const auto& [k, v] : replaced) again.values_[k] = v;
  again.run_nodes(*graph_, node_);
  std::optional<Value> v = again.lookup(name);
  if (!v) throw ValueError("hjit::onnx: '" + name + "' is not computed before node " + std::to_string(node_));
  return *v;
}

std::optional<Dequantized> Interpreter::dequantized(const std::string& name) const {
  if (!graph_) return std::nullopt;
  for (int i = node_ - 1; i >= 0; --i) {
    const ::onnx::NodeProto& node = graph_->node(i);
    if (node.output_size() == 0 || node.output(0) != name) continue;
    if (node.op_type() != "DequantizeLinear" || !node.domain().empty() || node.input_size() < 2) return std::nullopt;
    auto tensor = [&](int k) -> std::optional<Tensor> {
      if (k >= node.input_size() || node.input(k).empty()) return std::nullopt;
      std::optional<Value> v = lookup(node.input(k));
      if (!v || !v->is_tensor()) return std::nullopt;
      return v->tensor();
    };
    std::optional<Tensor> x = tensor(0), scale = tensor(1);
    if (!x || !scale) return std::nullopt;
    Dequantized d{*x, *scale, tensor(2), 1};
    for (const ::onnx::AttributeProto& a : node.attribute())
      if (a.name() == "axis") d.axis = a.i();
    return d;
  }
  return std::nullopt;
}

std::optional<Factored> Interpreter::factored(const std::string& name) const {
  const auto it = factored_.find(name);
  if (it == factored_.end()) return std::nullopt;
  return it->second;
}

std::vector<Value> Interpreter::run(const ::onnx::GraphProto& graph, const Scope& bound) const {
  // The converters rebind local handles of the model's parameters, which a module made from the
  // model also holds: dataflow, not the mistake the report is for.
  const detail::QuietRebinds quiet;
  values_ = bound;
  factored_.clear();
  for (const ::onnx::TensorProto& init : graph.initializer())
    if (!values_.count(init.name())) values_[init.name()] = to_tensor(init, "hjit::onnx: initializer '" + init.name() + "'");
  run_nodes(graph, graph.node_size());
  std::vector<Value> outputs;
  for (const ::onnx::ValueInfoProto& out : graph.output()) {
    std::optional<Value> v = lookup(out.name());
    if (!v) throw ValueError("hjit::onnx: the graph's output '" + out.name() + "' is not computed by any node");
    outputs.push_back(std::move(*v));
  }
  return outputs;
}

void Interpreter::run_nodes(const ::onnx::GraphProto& graph, int stop) const {
  graph_ = &graph;
  const std::vector<std::vector<std::string>> dead = drop_dead_ ? dead_after(graph) : std::vector<std::vector<std::string>>{};
  for (node_ = 0; node_ < stop; ++node_) {
    const ::onnx::NodeProto& node = graph.node(node_);
    std::vector<std::optional<Value>> inputs;
    for (const std::string& name : node.input()) {
      if (name.empty()) {
        inputs.emplace_back();
        continue;
      }
      std::optional<Value> v = lookup(name);
      if (!v)
        throw ValueError("hjit::onnx: node '" + node.name() + "' (" + node.op_type() + ") reads '" + name +
                         "', which no node, input or initializer before it defines");
      inputs.push_back(std::move(v));
    }
    // (A value named again, which a valid model never does, drops what its first writer noted.)
    for (const std::string& name : node.output()) factored_.erase(name);
    NodeContext ctx(node, std::move(inputs), *this);
    const bool training = node.domain() == kTrainingDomain;
    if (!(node.domain().empty() || node.domain() == "ai.onnx" || training))
      ctx.fail("the domain '" + node.domain() + "' is not one hjit reads (ONNX's default domain, and " + kTrainingDomain +
               "'s optimizers)");
    std::vector<Value> outs;
    if (const ValueConverter values = training ? nullptr : find_value_converter(node.op_type())) {
      outs = convert_node(ctx, values);
    } else {
      const Converter convert = training ? find_training_converter(node.op_type()) : find_converter(node.op_type());
      if (!convert) ctx.fail("hjit does not convert the op " + node.op_type());
      for (Tensor& t : convert_node(ctx, convert)) outs.emplace_back(std::move(t));
    }
    if (outs.size() < size_t(node.output_size()))
      ctx.fail("gives " + std::to_string(outs.size()) + " outputs where the model names " + std::to_string(node.output_size()));
    for (int k = 0; k < node.output_size(); ++k)
      if (!node.output(k).empty()) values_[node.output(k)] = std::move(outs[size_t(k)]);
    if (!dead.empty())
      for (const std::string& name : dead[size_t(node_)]) values_.erase(name), factored_.erase(name);
  }
}

}  // namespace hjit::onnx_import
