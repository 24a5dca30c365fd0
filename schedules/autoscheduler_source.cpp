// A reader for the small subset of C++ Halide's autoschedulers write: declarations of Funcs, Vars
// and RVars, and chains of scheduling calls ending in ';'. Not a C++ parser: anything else is an
// error, so a schedule is either read completely or not used.
#include "schedules/autoscheduler_source.h"

#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "halide_backend/scheduling/apply_schedule.h"

namespace hjit::schedules {
namespace {

using backend::Directive;

struct Token {
  enum Kind { Ident, Number, String, Punct, End } kind;
  std::string text;
};

std::vector<Token> tokenize(const std::string& s) {
  std::vector<Token> out;
  size_t i = 0;
  auto ident_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; };
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
    if (s.compare(i, 2, "//") == 0 || c == '#') { i = s.find('\n', i); if (i == std::string::npos) break; continue; }
    if (s.compare(i, 2, "/*") == 0) { i = s.find("*/", i); if (i == std::string::npos) break; i += 2; continue; }
    if (c == '"') {
      const size_t end = s.find('"', i + 1);
      if (end == std::string::npos) throw ValueError("hjit: autoscheduler source: unterminated string");
      out.push_back({Token::String, s.substr(i + 1, end - i - 1)});
      i = end + 1;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '.')) ++j;
      out.push_back({Token::Number, s.substr(i, j - i)});
      i = j;
    } else if (ident_char(c)) {
      size_t j = i;
      while (j < s.size() && ident_char(s[j])) ++j;
      out.push_back({Token::Ident, s.substr(i, j - i)});
      i = j;
    } else if (s.compare(i, 2, "::") == 0) {
      out.push_back({Token::Punct, "::"});
      i += 2;
    } else {
      out.push_back({Token::Punct, std::string(1, c)});
      ++i;
    }
  }
  out.push_back({Token::End, ""});
  return out;
}

// An argument of a scheduling call, once read.
struct Arg {
  std::vector<std::string> names;  // a name, or a {braced list} of names
  std::string func;                // set when the argument names a Func
};

class Reader {
 public:
  Reader(const std::string& source, const backend::LoweredPipeline& p)
      : t_(tokenize(source)), funcs_(backend::funcs_by_canonical_name(p)) {
    for (const Halide::Func& f : p.outputs)
      if (f.defined()) outputs_.push_back(f);
  }

  backend::Schedule read() {
    while (peek().kind != Token::End) statement();
    return std::move(out_);
  }

 private:
  const Token& peek(size_t ahead = 0) const { return t_[std::min(pos_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(pos_++, t_.size() - 1)]; }
  bool accept(const std::string& punct) {
    if (peek().kind == Token::Punct && peek().text == punct) return ++pos_, true;
    return false;
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw ValueError("hjit: cannot read the autoscheduler's schedule: " + why + " (at '" + peek().text + "')");
  }
  void expect(const std::string& punct) {
    if (!accept(punct)) fail("expected '" + punct + "'");
  }
  std::string ident() {
    if (peek().kind != Token::Ident) fail("expected a name");
    return next().text;
  }
  int number() {
    if (peek().kind != Token::Number) fail("expected a number");
    return std::stoi(next().text);
  }

  void statement() {
    if (accept("{") || accept("}") || accept(";")) return;
    const std::string word = ident();
    if (word == "using") {  // using ::Halide::Func; and the like
      while (!accept(";")) next();
    } else if (word == "Func") {
      declare_func();
    } else if (word == "Var" || word == "RVar") {
      declare_var();
    } else if (peek().kind == Token::Punct && peek().text == "=") {
      rfactor_assignment(word);
    } else {
      chain(word);
    }
  }

  // Li2018: <intm> = <f>.update(k).rfactor({{r, v}, ...}) .method(args) ... ;
  // the calls after rfactor() schedule the new Func.
  void rfactor_assignment(const std::string& intm) {
    expect("=");
    const std::string f = func_name(ident());
    int update = 0;
    expect(".");
    if (ident() == "update") {
      expect("(");
      if (!accept(")")) update = number(), expect(")");
      expect(".");
      if (ident() != "rfactor") fail("expected .rfactor");
    }
    expect("(");
    std::string pairs;
    auto pair = [&] {
      const std::string r = var_name(ident());
      expect(",");
      pairs += (pairs.empty() ? "" : ",") + r + ":" + var_name(ident());
    };
    if (accept("{")) {
      while (!accept("}")) {
        expect("{");
        pair();
        expect("}");
        accept(",");
      }
    } else {
      pair();
    }
    expect(")");
    const std::string name = backend::canonical_name(intm);
    out_.directives.push_back(Directive{f, update, "rfactor", {pairs, name}});
    intermediates_.insert(name);
    calls(name, -1);
  }

  // Func <alias> = pipeline.get_func(<i>);
  void declare_func() {
    const std::string alias = ident();
    expect("=");
    if (ident() != "pipeline") fail("expected pipeline.get_func");
    expect(".");
    if (ident() != "get_func") fail("expected pipeline.get_func");
    expect("(");
    const int index = number();
    expect(")");
    expect(";");
    if (!pipeline_) pipeline_ = Halide::Pipeline(outputs_);
    func_alias_[alias] = backend::canonical_name(pipeline_->get_func(size_t(index)).name());
  }

  // Var <alias>("name"); Var <alias>(<f>[.update(k)].get_schedule().dims()[i].var);
  // RVar <alias>(<f>.update(k).get_schedule().rvars()[i].var); Var <alias> = <f>.args()[i];
  void declare_var() {
    const std::string alias = ident();
    if (accept("=")) {
      Halide::Func f = func(ident());
      expect(".");
      if (ident() != "args") fail("expected .args()");
      expect("(");
      expect(")");
      expect("[");
      const int i = number();
      expect("]");
      expect(";");
      if (i < 0 || i >= f.dimensions()) fail("no argument " + std::to_string(i));
      var_alias_[alias] = f.args()[size_t(i)].name();
      return;
    }
    expect("(");
    if (peek().kind == Token::String) {
      var_alias_[alias] = next().text;
    } else {
      Halide::Func f = func(ident());
      expect(".");
      std::string m = ident();
      int update = -1;
      if (m == "update") {
        expect("(");
        update = number();
        expect(")");
        expect(".");
        m = ident();
      }
      if (m != "get_schedule") fail("expected get_schedule()");
      expect("(");
      expect(")");
      expect(".");
      const std::string list = ident();
      expect("(");
      expect(")");
      expect("[");
      const size_t i = size_t(number());
      expect("]");
      expect(".");
      if (ident() != "var") fail("expected .var");
      if (update >= f.num_update_definitions()) fail("no update " + std::to_string(update));
      Halide::Stage st = update < 0 ? Halide::Stage(f) : f.update(update);
      if (list == "dims" && i < st.get_schedule().dims().size()) var_alias_[alias] = st.get_schedule().dims()[i].var;
      else if (list == "rvars" && i < st.get_schedule().rvars().size()) var_alias_[alias] = st.get_schedule().rvars()[i].var;
      else fail("no " + list + "()[" + std::to_string(i) + "]");
    }
    expect(")");
    expect(";");
  }

  Halide::Func func(const std::string& name) {
    auto alias = func_alias_.find(name);
    const std::string canonical = alias != func_alias_.end() ? alias->second : backend::canonical_name(name);
    auto it = funcs_.find(canonical);
    if (it == funcs_.end()) fail("unknown Func '" + name + "'");
    return it->second;
  }
  std::string func_name(const std::string& name) {
    if (intermediates_.count(backend::canonical_name(name))) return backend::canonical_name(name);
    return backend::canonical_name(func(name).name());
  }
  std::string var_name(const std::string& name) {
    auto it = var_alias_.find(name);
    if (it != var_alias_.end()) return it->second;
    // Li2018 names new loops v<n> from a process-wide counter: number them by first use instead,
    // so that the same pipeline reads to the same schedule text in every process.
    // The same for the RVars its splits make, r<n>.
    if (name.size() > 1 && (name[0] == 'v' || name[0] == 'r') && name.find_first_not_of("0123456789", 1) == std::string::npos) {
      auto [at, fresh] = renamed_.emplace(name, std::string(1, name[0]) + std::to_string(renamed_.size()));
      return at->second;
    }
    return name;
  }

  Arg argument() {
    Arg a;
    if (accept("{")) {
      while (!accept("}")) {
        a.names.push_back(var_name(ident()));
        accept(",");
      }
      return a;
    }
    if (peek().kind == Token::Number) return Arg{{next().text}, ""};
    std::string word = ident();
    if (accept("::")) {  // TailStrategy::ShiftInwards, MemoryType::Stack, Var::outermost()
      std::string member = ident();
      if (accept("(")) expect(")");
      if (word == "Var" && member == "outermost") return Arg{{"__outermost"}, ""};
      return Arg{{member}, ""};
    }
    if (word == "true" || word == "false") return Arg{{word == "true" ? "forward" : "backward"}, ""};
    if (func_alias_.count(word) || funcs_.count(backend::canonical_name(word)) || intermediates_.count(backend::canonical_name(word))) {
      if (!var_alias_.count(word)) return Arg{{}, func_name(word)};
    }
    return Arg{{var_name(word)}, ""};
  }

  // <f>[.update(k)] .method(args) ... ;
  void chain(const std::string& head) { calls(func_name(head), -1); }

  void calls(const std::string& f, int update) {
    while (!accept(";")) {
      // Li2018 leaves out the ';' after an rfactor intermediate's update: a name starts the next statement.
      if (peek().kind == Token::Ident) return;
      expect(".");
      const std::string method = ident();
      expect("(");
      std::vector<Arg> args;
      while (!accept(")")) {
        args.push_back(argument());
        accept(",");
      }
      if (method == "update") {  // update() is update(0)
        if (args.size() > 1) fail("update takes one index");
        update = args.empty() ? 0 : std::stoi(args[0].names.at(0));
        continue;
      }
      add(f, update, method, args);
    }
  }

  void add(const std::string& f, int update, const std::string& method, const std::vector<Arg>& args) {
    Directive d{f, update, method, {}};
    for (const Arg& a : args) {
      if (!a.func.empty()) d.args.push_back(a.func);
      else d.args.insert(d.args.end(), a.names.begin(), a.names.end());
    }
    if (method == "split" && d.args.size() == 4) d.args.push_back("Auto");
    if ((method == "vectorize" || method == "unroll" || method == "parallel") && d.args.size() == 2)
      d.args.push_back("Auto");
    const backend::VerbArity* verb = backend::find_verb(method);
    if (verb && verb->func_level) d.update = -1;  // written inside a chain that began with .update(k)
    if (!verb || !verb->takes(d.args.size())) fail("the call ." + method + "() with " + std::to_string(d.args.size()) + " arguments");
    out_.directives.push_back(std::move(d));
  }

  std::vector<Token> t_;
  size_t pos_ = 0;
  std::map<std::string, Halide::Func> funcs_;
  std::vector<Halide::Func> outputs_;
  std::optional<Halide::Pipeline> pipeline_;
  std::map<std::string, std::string> func_alias_, var_alias_, renamed_;
  std::set<std::string> intermediates_;  // Funcs an rfactor() made
  backend::Schedule out_;
};

}  // namespace

backend::Schedule parse_autoscheduler_source(const std::string& source, const backend::LoweredPipeline& unscheduled) {
  return Reader(source, unscheduled).read();
}

}  // namespace hjit::schedules
