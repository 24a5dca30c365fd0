// Graph → text (jaxpr-like) and → Graphviz. The grammar is in graph/parser.cpp.
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include <hjit/graph.h>

#include "graph/op_def.h"
#include "graph/text_format.h"

namespace hjit {

std::string format_number(double v, DType dtype) {
  if (v != v) return "nan";
  if (v == HUGE_VAL) return "inf";
  if (v == -HUGE_VAL) return "-inf";
  char buf[64];
  // The shortest text that reads back as the same value of the dtype (f32: 0.6931472, not the
  // 17 digits of the double that holds it).
  auto res = dtype == DType::F64 ? std::to_chars(buf, buf + sizeof(buf), v)
                                 : std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v));
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";  // stays a float when parsed back
  return s;
}

std::string value_name(int index) {
  std::string s;
  for (int i = index;; i = i / 26 - 1) {
    s.insert(s.begin(), char('a' + i % 26));
    if (i < 26) break;
  }
  return s;
}

bool is_inlined_literal(const Node& n) { return n.op == OpKind::Full && n.type.rank() == 0; }

namespace {

std::string print(const Graph& g, bool with_data);

// A graph attribute: the graph's own text, indented under the line that holds it.
std::string format_graph(const Graph& g, bool with_data) {
  std::string text = print(g, with_data), out;
  if (!text.empty() && text.back() == '\n') text.pop_back();
  for (char c : text) {
    out += c;
    if (c == '\n') out += "      ";
  }
  return out;
}

std::string format_attr(const AttrValue& v, DType node_dtype, bool with_data) {
  if (const auto* g = std::get_if<std::shared_ptr<const Graph>>(&v)) return *g ? format_graph(**g, with_data) : "{}";
  if (const int64_t* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const double* d = std::get_if<double>(&v)) return format_number(*d, node_dtype);
  if (const DType* t = std::get_if<DType>(&v)) return dtype_name(*t);
  if (const std::string* text = std::get_if<std::string>(&v)) {
    std::string q = "\"";
    for (char c : *text) q += (c == '"' || c == '\\') ? std::string("\\") + c : c == '\n' ? std::string("\\n") : std::string(1, c);
    return q + "\"";
  }
  const auto& list = std::get<std::vector<int64_t>>(v);
  std::string s = "(";
  for (size_t i = 0; i < list.size(); ++i) s += (i ? "," : "") + std::to_string(list[i]);
  return s + ")";
}

std::string hex_bytes(const ConstData& c) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(c.nbytes * 2);
  const auto* p = static_cast<const unsigned char*>(c.data);
  for (size_t i = 0; i < c.nbytes; ++i) s += digits[p[i] >> 4], s += digits[p[i] & 15];
  return s;
}

std::string print(const Graph& g, bool with_data) {
  std::vector<std::string> names(g.nodes.size());
  int next = 0;
  for (bool captured : {true, false})
    for (int id : g.inputs)
      if (g.is_captured(id) == captured) names[size_t(id)] = value_name(next++);
  for (size_t id = 0; id < g.nodes.size(); ++id)
    if (g.nodes[id].op != OpKind::Parameter && !is_inlined_literal(g.nodes[id]))
      names[id] = value_name(next++);

  auto operand = [&](int id) {
    const Node& n = g.node(id);
    if (is_inlined_literal(n)) return format_number(n.attrs.f("value"), n.type.dtype) + ":" + dtype_name(n.type.dtype);
    return names[size_t(id)];
  };
  std::ostringstream os;
  os << "{ lambda";
  for (bool captured : {true, false}) {
    if (!captured) os << " ;";
    for (int id : g.inputs)
      if (g.is_captured(id) == captured) os << " " << names[size_t(id)] << ":" << g.type(id).str();
  }
  os << ". let\n";
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    if (n.op == OpKind::Parameter || is_inlined_literal(n)) continue;
    os << "    " << names[id] << ":" << n.type.str() << " = " << op_name(n.op);
    std::vector<std::string> attrs;
    for (const auto& [key, value] : n.attrs.items()) attrs.push_back(key + "=" + format_attr(value, n.type.dtype, with_data));
    if (n.op == OpKind::Constant)
      attrs.push_back(with_data ? "data=" + hex_bytes(g.constants[size_t(n.constant)]) : "data=...");
    if (!attrs.empty()) {
      os << "[";
      for (size_t i = 0; i < attrs.size(); ++i) os << (i ? " " : "") << attrs[i];
      os << "]";
    }
    for (int in : n.inputs) os << " " << operand(in);
    os << "\n";
  }
  os << "  in (";
  for (size_t i = 0; i < g.outputs.size(); ++i) os << (i ? ", " : "") << operand(g.outputs[i]);
  os << ")";
  if (!g.updates.empty()) {
    os << " updates (";
    for (size_t i = 0; i < g.updates.size(); ++i)
      os << (i ? ", " : "") << names[size_t(g.updates[i].target)] << " <- " << operand(g.updates[i].value);
    os << ")";
  }
  os << " }\n";
  return os.str();
}

}  // namespace

std::string Graph::str() const { return print(*this, false); }
std::string Graph::to_text() const { return print(*this, true); }

std::string Graph::to_dot() const {
  std::ostringstream os;
  os << "digraph \"" << (name.empty() ? "hjit" : name) << "\" {\n  node [shape=box, fontname=monospace];\n";
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    os << "  n" << id << " [label=\"" << op_name(n.op);
    if (n.op == OpKind::Full) os << " " << format_number(n.attrs.f("value"), n.type.dtype);
    os << "\\n" << n.type.str() << "\"";
    if (n.op == OpKind::Parameter) os << ", shape=ellipse";
    os << "];\n";
    for (int in : n.inputs) os << "  n" << in << " -> n" << id << ";\n";
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    os << "  out" << i << " [label=\"out " << i << "\", shape=plaintext];\n  n" << outputs[i] << " -> out" << i << ";\n";
  os << "}\n";
  return os.str();
}

void Graph::save(const std::string& path) const {
  std::ofstream f(path);
  if (!f) throw ValueError("Graph::save: cannot open '" + path + "' for writing");
  f << to_text();
  if (!f) throw ValueError("Graph::save: writing '" + path + "' failed");
}

Graph Graph::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw ValueError("Graph::load: cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse(ss.str());
}

}  // namespace hjit
