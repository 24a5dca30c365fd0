#include "onnx_import/model_checks.h"

#include <map>

#include <hjit/error.h>

#include "onnx/defs/schema.h"

namespace hjit::onnx_import {
namespace {

// Attributes that ONNX's shape inference divides by or counts with: zero or less is no size.
bool must_be_positive(const std::string& name) {
  return name == "strides" || name == "dilations" || name == "kernel_shape" || name == "blocksize" || name == "group";
}

std::string node_name(const ::onnx::NodeProto& n) {
  return n.op_type() + " node '" + (n.name().empty() ? (n.output_size() ? n.output(0) : std::string("?")) : n.name()) + "'";
}

struct Checker {
  std::map<std::string, int64_t> opsets;  // domain ("" for ONNX's) -> version
  std::string who;

  [[noreturn]] void fail(const std::string& what) const { throw ValueError(who + what); }

  void check_shape(const ::onnx::ValueInfoProto& v, const char* role) const {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
    for (const auto& d : v.type().tensor_type().shape().dim())
      if (d.has_dim_value() && d.dim_value() < 0)
        fail(std::string(role) + " '" + v.name() + "' declares dimension " + std::to_string(d.dim_value()) + ": a size is 0 or more");
  }

  void check_arity(const ::onnx::NodeProto& n) const {
    if (n.output_size() == 0) fail(node_name(n) + " has no outputs");  // every op gives one at least
    const std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
    const auto it = opsets.find(domain);
    if (it == opsets.end()) return;  // the checker names a domain the model does not import
    const ::onnx::OpSchema* s = ::onnx::OpSchemaRegistry::Schema(n.op_type(), int(it->second), domain);
    if (!s) return;  // an op unknown at this opset: the checker's error, or hjit's converter table
    const int in = n.input_size(), out = n.output_size();
    if (in < s->min_input() || in > s->max_input())
      fail(node_name(n) + " has " + std::to_string(in) + " inputs; " + n.op_type() + " of opset " + std::to_string(it->second) +
           " takes " + std::to_string(s->min_input()) + (s->max_input() == s->min_input() ? "" : " to " + std::to_string(s->max_input())));
    if (out < s->min_output() || out > s->max_output())
      fail(node_name(n) + " has " + std::to_string(out) + " outputs; " + n.op_type() + " of opset " + std::to_string(it->second) +
           " gives " + std::to_string(s->min_output()) + (s->max_output() == s->min_output() ? "" : " to " + std::to_string(s->max_output())));
  }

  void check_attributes(const ::onnx::NodeProto& n) const {
    for (const ::onnx::AttributeProto& a : n.attribute()) {
      if (must_be_positive(a.name())) {
        if (a.has_i() && a.i() <= 0) fail(node_name(n) + " has " + a.name() + " " + std::to_string(a.i()) + ": it must be positive");
        for (int64_t v : a.ints())
          if (v <= 0) fail(node_name(n) + " has " + a.name() + " containing " + std::to_string(v) + ": each must be positive");
      }
      if (a.has_g()) check_graph(a.g());
      for (const ::onnx::GraphProto& g : a.graphs()) check_graph(g);
    }
  }

  void check_graph(const ::onnx::GraphProto& g) const {
    for (const auto& v : g.input()) check_shape(v, "input");
    for (const auto& v : g.output()) check_shape(v, "output");
    for (const auto& v : g.value_info()) check_shape(v, "value");
    for (const ::onnx::NodeProto& n : g.node()) {
      check_arity(n);
      check_attributes(n);
    }
  }
};

}  // namespace

void check_structure(const ::onnx::ModelProto& model, const std::string& who) {
  Checker c;
  c.who = who;
  for (const auto& o : model.opset_import()) c.opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  c.check_graph(model.graph());
}

}  // namespace hjit::onnx_import
