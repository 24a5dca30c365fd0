#include "support/settings.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include <hjit/error.h>
#include <hjit/settings.h>

namespace hjit::setting {
namespace {

constexpr Row kRows[] = {
#define HJIT_SETTING_ROW(id, name, kind, fallback, takes, scope, secret, meaning) \
  {Id::id, name, Kind::kind, fallback, takes, Scope::scope, secret, meaning},
    HJIT_SETTINGS(HJIT_SETTING_ROW)
#undef HJIT_SETTING_ROW
};

bool computed(const char* fallback) { return fallback[0] == '('; }

[[noreturn]] void bad(const Row& r, const std::string& value, const std::string& wants) {
  throw ValueError(std::string(r.name) + " is '" + value + "'; it takes " + wants + " (docs/settings.md)");
}

// The value to read: the environment's, else the default (nullopt where that is computed).
std::optional<std::string> value_or_default(const Row& r) {
  if (std::optional<std::string> v = raw(r.id)) return v;
  if (computed(r.fallback)) return std::nullopt;
  return std::string(r.fallback);
}

void expect(const Row& r, Kind k) {
  if (r.kind != k)
    throw InternalError(std::string("hjit: ") + r.name + " is a " + kind_name(r.kind) + " setting, read as a " + kind_name(k));
}

}  // namespace

std::span<const Row> rows() { return kRows; }

const Row& row(Id id) { return kRows[size_t(id)]; }

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Text: return "text";
    case Kind::Path: return "path";
    case Kind::Count: return "count";
    case Kind::Seconds: return "seconds";
    case Kind::Flag: return "flag";
    case Kind::Choice: return "choice";
  }
  return "?";
}

const char* scope_name(Scope s) {
  switch (s) {
    case Scope::Library: return "library";
    case Scope::Tools: return "tools";
    case Scope::Tests: return "tests";
  }
  return "?";
}

std::optional<std::string> raw(Id id) {
  const char* v = std::getenv(row(id).name);
  if (!v) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> text(Id id) { return value_or_default(row(id)); }

std::optional<int64_t> count(Id id) {
  const Row& r = row(id);
  expect(r, Kind::Count);
  std::optional<std::string> v = value_or_default(r);
  if (!v) return std::nullopt;
  if (v->empty() && raw(id)) {  // set and empty: as unset
    if (computed(r.fallback)) return std::nullopt;
    v = r.fallback;
  }
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end || errno || n < 0) bad(r, *v, std::string("a whole number of ") + r.takes + ", 0 or more");
  return int64_t(n);
}

std::optional<double> seconds(Id id) {
  const Row& r = row(id);
  expect(r, Kind::Seconds);
  std::optional<std::string> v = value_or_default(r);
  if (!v || (v->empty() && raw(id))) return computed(r.fallback) ? std::nullopt : std::optional<double>(std::atof(r.fallback));
  char* end = nullptr;
  const double s = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end || !(s > 0) || !std::isfinite(s) || s > 1e7) bad(r, *v, "a positive number of seconds");
  return s;
}

bool flag(Id id) {
  const Row& r = row(id);
  expect(r, Kind::Flag);
  const std::optional<std::string> v = value_or_default(r);
  if (!v || v->empty() || *v == "0") return false;
  if (*v == "1") return true;
  bad(r, *v, "1 or 0");
}

std::string choice(Id id) {
  const Row& r = row(id);
  expect(r, Kind::Choice);
  std::optional<std::string> v = raw(id);
  if (!v || v->empty()) return r.fallback;
  std::stringstream words(r.takes);
  std::string listed;
  for (std::string w; std::getline(words, w, '|');) {
    if (w == *v) return w;
    listed += (listed.empty() ? "" : ", ") + w;
  }
  bad(r, *v, "one of " + listed);
}

}  // namespace hjit::setting

namespace hjit {

std::vector<Setting> settings() {
  std::vector<Setting> out;
  for (const setting::Row& r : setting::rows()) {
    Setting s{r.name, setting::kind_name(r.kind), r.fallback, r.takes, setting::scope_name(r.scope), r.meaning};
    if (std::optional<std::string> v = setting::raw(r.id)) {
      s.set = true;
      s.value = r.secret ? "(hidden)" : *v;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string settings_table() {
  std::ostringstream os;
  size_t width = 0;
  for (const Setting& s : settings()) width = std::max(width, s.name.size());
  std::string scope;
  for (const Setting& s : settings()) {
    if (s.scope != scope) os << (scope.empty() ? "" : "\n") << "read by the " << (scope = s.scope) << ":\n";
    os << "  " << s.name << std::string(width - s.name.size() + 2, ' ');
    if (s.set) os << "= '" << s.value << "'";
    else os << "unset (default " << (s.fallback.empty() ? "none" : s.fallback) << ")";
    os << "\n  " << std::string(width + 2, ' ') << s.kind << ": " << s.takes << ". " << s.meaning << "\n";
  }
  return os.str();
}

std::string settings_markdown() {
  std::ostringstream os;
  os << "| variable | read by | type | default | takes | what it does |\n|---|---|---|---|---|---|\n";
  for (const Setting& s : settings()) {
    std::string takes = s.takes;
    for (size_t at = 0; (at = takes.find('|', at)) != std::string::npos; at += 2) takes.replace(at, 1, "\\|");
    os << "| `" << s.name << "` | " << s.scope << " | " << s.kind << " | " << (s.fallback.empty() ? "none" : s.fallback)
       << " | " << takes << " | " << s.meaning << " |\n";
  }
  return os.str();
}

}  // namespace hjit
