#include "halide_backend/scheduling/schedule_value.h"

#include <cctype>
#include <sstream>

#include <hjit/error.h>

namespace hjit::backend {

namespace {
constexpr const char* kHeader = "hjit-schedule 1";

bool is_token(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (std::isspace(static_cast<unsigned char>(c)) || !std::isprint(static_cast<unsigned char>(c))) return false;
  return true;
}
}  // namespace

const std::vector<VerbArity>& schedule_verbs() {
  constexpr bool kFunc = true;
  static const std::vector<VerbArity> verbs = {
      {"compute_root", 0, 0, kFunc}, {"compute_inline", 0, 0, kFunc}, {"store_root", 0, 0, kFunc},
      {"compute_at", 2, 2, kFunc},   {"store_at", 2, 2, kFunc},       {"split", 5, 5},
      {"fuse", 3, 3},                {"reorder", 1, 64},              {"vectorize", 1, 3},
      {"unroll", 1, 3},              {"parallel", 1, 3},              {"serial", 1, 1},
      {"rfactor", 2, 2},             {"reorder_storage", 1, 64, kFunc}, {"bound", 3, 3, kFunc},
      {"bound_extent", 2, 2, kFunc}, {"fold_storage", 2, 3, kFunc},   {"store_in", 1, 1, kFunc},
      {"align_storage", 2, 2, kFunc}, {"extern", 1, 1, kFunc},     {"atomic", 0, 0},
      {"gpu_blocks", 1, 3},          {"gpu_threads", 1, 3},           {"gpu_single_thread", 0, 0},
      {"in", 2, 2, kFunc},           {"prefetch", 4, 4},              {"allow_race_conditions", 0, 0},
  };
  return verbs;
}

const VerbArity* find_verb(const std::string& verb) {
  for (const VerbArity& v : schedule_verbs())
    if (verb == v.verb) return &v;
  return nullptr;
}


std::string Schedule::str() const {
  std::ostringstream os;
  os << kHeader << "\nsource " << source << "\n";
  for (const std::string& n : notes) os << "note " << n << "\n";
  for (const Directive& d : directives) {
    os << d.func;
    if (d.update >= 0) os << ".update(" << d.update << ")";
    os << " " << d.verb;
    for (const std::string& a : d.args) os << " " << a;
    os << "\n";
  }
  return os.str();
}

Schedule Schedule::parse(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  auto fail = [&](const std::string& why) -> ValueError {
    return ValueError("hjit: schedule text, line " + std::to_string(line_no) + ": " + why + " ('" + line + "')");
  };
  Schedule s;
  if (!std::getline(in, line) || (++line_no, line != kHeader)) throw fail("expected the header '" + std::string(kHeader) + "'");
  if (!std::getline(in, line) || (++line_no, line.rfind("source ", 0) != 0)) throw fail("expected 'source <who>'");
  s.source = line.substr(7);
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    if (line.rfind("note ", 0) == 0) {
      s.notes.push_back(line.substr(5));
      continue;
    }
    std::istringstream words(line);
    std::string target;
    Directive d;
    words >> target >> d.verb;
    for (std::string a; words >> a;) d.args.push_back(a);
    const size_t dot = target.find(".update(");
    if (dot != std::string::npos) {
      const std::string k = target.substr(dot + 8);
      if (k.size() < 2 || k.back() != ')' || k.find_first_not_of("0123456789") != k.size() - 1)
        throw fail("bad update index");
      if (k.size() > 4) throw fail("update index out of range");  // a Func has a few updates at most
      d.update = std::stoi(k.substr(0, k.size() - 1));
      target.resize(dot);
    }
    d.func = target;
    if (!is_token(d.func)) throw fail("missing Func name");
    const VerbArity* v = find_verb(d.verb);
    if (!v) throw fail("unknown scheduling directive '" + d.verb + "'");
    if (!v->takes(d.args.size()))
      throw fail("'" + d.verb + "' takes " + std::to_string(v->min_args) + " to " + std::to_string(v->max_args) +
                 " arguments");
    s.directives.push_back(std::move(d));
  }
  return s;
}

}  // namespace hjit::backend
