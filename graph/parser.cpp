// Text → Graph. Grammar (whitespace separates tokens):
//   graph   := '{' 'lambda' param* ';' param* '.' 'let' line* 'in' '(' operands ')'
//              ['updates' '(' name '<-' operand (',' name '<-' operand)* ')'] '}'
//   param   := name ':' type            type := dtype '[' ints ']'
//   line    := name ':' type '=' op ['[' attr* ']'] operand*
//   attr    := key '=' (int | float | '(' ints ')' | dtype | '"' text '"' | hex data | graph)
//   operand := name | number ':' dtype  (a 0-d full)
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>

#include <hjit/graph.h>

#include "graph/op_def.h"

namespace hjit {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& text, size_t pos = 0, int depth = 0) : s_(text), pos_(pos), depth_(depth) {}
  size_t pos() const { return pos_; }

  Graph parse() {
    // Graphs nest (control flow bodies); a bound keeps hostile text from exhausting the stack.
    if (depth_ > kMaxDepth) fail("graphs nested more than " + std::to_string(kMaxDepth) + " deep");
    expect("{");
    expect("lambda");
    bool captured = true;
    std::vector<std::pair<std::string, TensorType>> cap, args;
    while (true) {
      skip_ws();
      if (peek() == ';') { ++pos_; captured = false; continue; }
      if (peek() == '.') { ++pos_; break; }
      std::string name = ident();
      expect(":");
      TensorType t = type();
      (captured ? cap : args).emplace_back(name, t);
    }
    if (captured) fail("expected ';' between captured inputs and arguments");
    for (auto& [name, t] : args) define(name, g_.add_parameter(t, false));
    for (auto& [name, t] : cap) define(name, g_.add_parameter(t, true));
    expect("let");
    while (!try_word("in")) line();
    expect("(");
    skip_ws();
    if (peek() != ')') {
      do g_.outputs.push_back(operand()); while (try_char(','));
    }
    expect(")");
    if (try_word("updates")) {
      expect("(");
      do {
        int target = lookup(ident());
        expect("<-");
        g_.updates.push_back(Update{target, operand()});
      } while (try_char(','));
      expect(")");
    }
    expect("}");
    return std::move(g_);
  }

 private:
  void line() {
    std::string name = ident();
    expect(":");
    Node n;
    n.type = type();
    expect("=");
    std::string opname = ident();
    try {
      n.op = op_from_name(opname);
    } catch (const ValueError&) {
      fail("unknown op '" + opname + "'");
    }
    std::string data;
    if (try_char('[')) {
      while (!try_char(']')) {
        std::string key = ident();
        expect("=");
        if (key == "data") data = word();
        else n.attrs.set(key, attr_value());
      }
    }
    while (!at_line_end()) n.inputs.push_back(operand());
    if (n.op == OpKind::Constant) {
      auto bytes = std::make_shared<std::vector<unsigned char>>(decode_hex(data));
      ConstData c{bytes, bytes->data(), bytes->size()};
      define(name, g_.add_constant(n.type, c));
      return;
    }
    TensorType declared = n.type;
    int id = -1;
    try {
      id = g_.add(std::move(n));
    } catch (const Error& e) {
      fail(std::string("in the definition of '") + name + "': " + e.what());
    }
    if (!(g_.type(id) == declared))
      fail("'" + name + "' is declared " + declared.str() + " but " + opname + " gives " + g_.type(id).str());
    define(name, id);
  }

  int operand() {
    std::string w = word();
    size_t colon = w.find(':');
    if (colon == std::string::npos) return lookup(w);
    double v = number(w.substr(0, colon));
    return g_.add_full(TensorType{parse_dtype(w.substr(colon + 1)), {}}, v);
  }

  AttrValue attr_value() {
    skip_ws();
    if (peek() == '{') {
      Parser nested(s_, pos_, depth_ + 1);
      auto g = std::make_shared<Graph>(nested.parse());
      pos_ = nested.pos();
      return std::shared_ptr<const Graph>(std::move(g));
    }
    if (try_char('(')) {
      std::vector<int64_t> list;
      skip_ws();
      if (!try_char(')')) {
        do list.push_back(int64_t(integer())); while (try_char(','));
        expect(")");
      }
      return list;
    }
    if (try_char('"')) {
      std::string text;
      while (peek() != '"') {
        if (pos_ >= s_.size()) fail("unterminated text attribute");
        char c = s_[pos_++];
        if (c == '\\' && pos_ < s_.size()) c = s_[pos_++] == 'n' ? '\n' : s_[pos_ - 1];
        text += c;
      }
      ++pos_;
      return text;
    }
    std::string w = word();
    if (!w.empty() && std::isalpha(static_cast<unsigned char>(w[0])) && w != "inf" && w != "nan")
      return parse_dtype(w);
    if (w.find_first_of(".en") != std::string::npos) return number(w);
    int64_t v = 0;
    auto r = std::from_chars(w.data(), w.data() + w.size(), v);
    if (r.ec != std::errc() || r.ptr != w.data() + w.size()) fail("bad attribute value '" + w + "'");
    return v;
  }

  TensorType type() {
    skip_ws();
    size_t start = pos_;
    while (pos_ < s_.size() && std::isalnum(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    TensorType t;
    t.dtype = parse_dtype(s_.substr(start, pos_ - start));
    expect("[");
    skip_ws();
    if (!try_char(']')) {
      do t.shape.push_back(integer()); while (try_char(','));
      expect("]");
    }
    return t;
  }

  DType parse_dtype(const std::string& w) {
    try {
      return dtype_from_name(w);
    } catch (const DTypeError&) {
      fail("unknown dtype '" + w + "'");
    }
  }

  double number(const std::string& w) {
    if (w == "inf") return HUGE_VAL;
    if (w == "-inf") return -HUGE_VAL;
    if (w == "nan") return NAN;
    double v = 0;
    auto r = std::from_chars(w.data(), w.data() + w.size(), v);
    if (r.ec != std::errc() || r.ptr != w.data() + w.size()) fail("bad number '" + w + "'");
    return v;
  }

  int64_t integer() {
    skip_ws();
    int64_t v = 0;
    auto r = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), v);
    if (r.ec != std::errc()) fail("expected an integer");
    pos_ = size_t(r.ptr - s_.data());
    return v;
  }

  static std::vector<unsigned char> decode_hex(const std::string& h) {
    std::vector<unsigned char> out(h.size() / 2);
    auto nib = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    for (size_t i = 0; i < out.size(); ++i) out[i] = (unsigned char)(nib(h[2 * i]) << 4 | nib(h[2 * i + 1]));
    return out;
  }

  void define(const std::string& name, int id) {
    if (!names_.emplace(name, id).second) fail("'" + name + "' is defined twice");
  }
  int lookup(const std::string& name) {
    auto it = names_.find(name);
    if (it == names_.end()) fail("'" + name + "' is used before it is defined");
    return it->second;
  }

  // A word: letters, digits and the characters of numbers and literals ("1.5e-3:f32", "-inf").
  std::string word() {
    skip_ws();
    size_t start = pos_;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '+' || c == ':') ++pos_;
      else break;
    }
    if (start == pos_) fail("unexpected character");
    return s_.substr(start, pos_ - start);
  }
  std::string ident() {
    skip_ws();
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    if (start == pos_) fail("expected a name");
    return s_.substr(start, pos_ - start);
  }
  bool at_line_end() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
    return pos_ >= s_.size() || s_[pos_] == '\n';
  }
  void skip_ws() { while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_; }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool try_char(char c) {
    skip_ws();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  bool try_word(const std::string& w) {
    skip_ws();
    if (s_.compare(pos_, w.size(), w) != 0) return false;
    size_t end = pos_ + w.size();
    if (end < s_.size() && std::isalnum(static_cast<unsigned char>(s_[end]))) return false;
    pos_ = end;
    return true;
  }
  void expect(const std::string& w) {
    skip_ws();
    if (s_.compare(pos_, w.size(), w) != 0) fail("expected '" + w + "'");
    pos_ += w.size();
  }
  [[noreturn]] void fail(const std::string& what) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) s_[i] == '\n' ? (++line, col = 1) : ++col;
    throw ValueError("Graph::parse: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }

  static constexpr int kMaxDepth = 32;
  const std::string& s_;
  size_t pos_ = 0;
  int depth_ = 0;
  Graph g_;
  std::map<std::string, int> names_;
};

}  // namespace

Graph Graph::parse(const std::string& text) { return Parser(text).parse(); }

}  // namespace hjit
