#include "halide_backend/schedule_request.h"

#include <cstdlib>
#include <sstream>

#include <hjit/error.h>

#include "halide_backend/devices.h"
#include "support/overloaded.h"
#include "support/settings.h"

namespace hjit::backend {
namespace {

constexpr const char* kAutoschedulerNames[] = {"Adams2019", "Li2018", "Mullapudi2016"};

// "key=value" words, in order; ValueError (prefixed by `what`) for a word without '='.
template <class OnWord>
void for_each_word(const std::string& what, const std::string& words, OnWord on_word) {
  std::istringstream in(words);
  for (std::string w; in >> w;) {
    const size_t eq = w.find('=');
    if (eq == std::string::npos) throw ValueError(what + ": '" + w + "' is not key=value");
    on_word(w.substr(0, eq), w.substr(eq + 1));
  }
}

int64_t non_negative(const std::string& what, const std::string& key, const std::string& value) {
  try {
    size_t used = 0;
    const long long v = std::stoll(value, &used);
    if (used == value.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw ValueError(what + ": " + key + " must be a non-negative integer, got '" + value + "'");
}

}  // namespace

const char* autoscheduler_name(Autoscheduler a) { return kAutoschedulerNames[int(a)]; }

std::optional<Autoscheduler> autoscheduler_from_name(const std::string& name) {
  for (int i = 0; i < 3; ++i)
    if (name == kAutoschedulerNames[i]) return Autoscheduler(i);
  return std::nullopt;
}

std::string AutoParams::str() const {
  std::string s;
  auto word = [&](const char* key, const std::string& value) { s += (s.empty() ? "" : " ") + std::string(key) + "=" + value; };
  auto number = [&](const char* key, const std::optional<int64_t>& v) {
    if (v) word(key, std::to_string(*v));
  };
  number("parallelism", parallelism), number("cache", cache), number("balance", balance);
  number("max_funcs", max_funcs), number("beam", beam), number("dropout", dropout), number("seed", seed);
  if (!weights.empty()) word("weights", weights);
  if (!features.empty()) word("features", features);
  return s;
}

AutoParams AutoParams::parse(Autoscheduler a, const std::string& words) {
  const std::string name = autoscheduler_name(a), what = name + " parameters";
  const bool adams = a == Autoscheduler::Adams2019;
  AutoParams p;
  for_each_word(what, words, [&](const std::string& key, const std::string& value) {
    auto number = [&] { return non_negative(what, key, value); };
    if (key == "parallelism") p.parallelism = number();
    else if (key == "cache") p.cache = number();
    else if (key == "balance") p.balance = number();
    else if (adams && key == "max_funcs") p.max_funcs = number();
    else if (adams && key == "beam") p.beam = number();
    else if (adams && key == "dropout") p.dropout = number();
    else if (adams && key == "seed") p.seed = number();
    else if (adams && key == "weights") p.weights = value;
    else if (adams && key == "features") p.features = value;
    else throw ValueError(what + ": unknown '" + key + "'");
  });
  return p;
}

std::string ScheduleRequest::str() const {
  auto with = [](std::string head, const std::string& words) { return words.empty() ? head : head + " " + words; };
  return std::visit(Overloaded{
                        [](const Unfused&) { return std::string("unfused"); },
                        [&](const BuiltIn& b) { return with("built-in", b.params.str()); },
                        [&](const Auto& a) { return with(autoscheduler_name(a.scheduler), a.params.str()); },
                        [](const Given&) { return std::string("given"); },
                    },
                    choice);
}

ScheduleRequest ScheduleRequest::parse(const std::string& text) {
  const size_t space = text.find(' ');
  const std::string head = text.substr(0, space), words = space == std::string::npos ? "" : text.substr(space + 1);
  if (head == "unfused" && words.empty()) return {Unfused{}};
  if (head == "built-in") return {BuiltIn{BuiltinParams::parse(words)}};
  if (const std::optional<Autoscheduler> a = autoscheduler_from_name(head)) return {Auto{*a, AutoParams::parse(*a, words)}};
  throw ValueError("a schedule request is 'unfused', 'built-in [key=value...]' or an autoscheduler's name (Adams2019, "
                   "Li2018, Mullapudi2016) with its parameters; got '" + text + "'");
}

ScheduleRequest ScheduleRequest::at_every_size() const {
  // (Every kind but the unfused one is the built-in schedule at every size.)
  const bool unfused = std::visit(Overloaded{
                                      [](const Unfused&) { return true; },
                                      [](const BuiltIn&) { return false; },
                                      [](const Auto&) { return false; },
                                      [](const Given&) { return false; },
                                  },
                                  choice);
  return unfused ? ScheduleRequest{Unfused{}} : ScheduleRequest{BuiltIn{}};
}

ScheduleRequest schedule_request(const std::string& who, const ScheduleOptions& o) {
  if (o.opt_level < 0 || o.opt_level > 2)
    throw ValueError(who + ": opt_level must be 0, 1 or 2, got " + std::to_string(o.opt_level));
  ScheduleRequest r;
  if (o.opt_level == 0) r.choice = Unfused{};
  if (!o.autoscheduler.empty()) {
    const std::optional<Autoscheduler> a = autoscheduler_from_name(o.autoscheduler);
    if (!a) throw ValueError(who + ": unknown autoscheduler '" + o.autoscheduler + "'; choose Adams2019, Li2018 or Mullapudi2016");
    if (o.opt_level != 2)
      throw ValueError(who + ": an autoscheduler needs opt_level 2, got " + std::to_string(o.opt_level));
    if (const char* only = device_kind(o.device).only_autoscheduler(); only && o.autoscheduler != only)
      throw ValueError(who + ": " + o.autoscheduler + " schedules CPUs only (Halide 14's autoscheduler for " + device_name(o.device) +
                       " is " + only + "); choose " + only + ", or none for the built-in GPU schedule");
    r.choice = Auto{*a, {}};
  }
  if (!o.tuning_db.empty() && o.opt_level == 0)
    throw ValueError(who + ": a tuning database replaces the schedules of opt_level 1 and 2; opt_level 0 is the unfused "
                     "baseline they are measured against");
  r.tuning_db = o.tuning_db;
  if (r.tuning_db.empty() && o.tuning_db_from_environment && o.opt_level > 0)
    r.tuning_db = setting::text(setting::Id::TuningDb).value_or("");
  return r;
}

}  // namespace hjit::backend
