#include "tuning/candidates.h"

#include <algorithm>

namespace hjit::tuning {
namespace {

using backend::Auto;
using backend::AutoParams;
using backend::Autoscheduler;
using backend::BuiltIn;
using backend::BuiltinParams;

// The values each built-in knob takes in a tuning run.
const std::vector<int> kCols{1, 2, 3, 4}, kRows{2, 4, 6, 8, 12, 16}, kVec{0, 1, 2, 4, 8}, kTasks{2, 4, 8, 16, 32},
    kGrain{10, 12, 14, 16, 18}, kRuns{0, 1, 2, 4}, kAhead{-1, 0, 1, 2, 4};

template <class R>
int pick(const std::vector<int>& values, R& rng) {
  return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
}

ScheduleRequest autoscheduled(Autoscheduler a, AutoParams params = {}) { return {Auto{a, std::move(params)}}; }

// The Mullapudi2016 grid: parallelism x last-level cache x balance, in a fixed shuffled order.
std::vector<ScheduleRequest> mullapudi_grid_points() {
  std::vector<ScheduleRequest> out;
  for (int par : {2, 4, 8, 16, 32})
    for (int64_t cache_kb : {256, 1024, 8192, 32768})
      for (int balance : {5, 20, 40, 100}) {
        AutoParams p;
        p.parallelism = par, p.cache = cache_kb * 1024, p.balance = balance;
        out.push_back(autoscheduled(Autoscheduler::Mullapudi2016, p));
      }
  std::shuffle(out.begin(), out.end(), std::mt19937_64(2016));
  return out;
}

}  // namespace

std::string scheduler_of(const std::string& origin) { return origin.substr(0, origin.find(' ')); }

Candidates::Candidates(std::vector<std::string> schedulers, std::set<std::string> tried, uint64_t seed, bool extern_gemm,
                       bool extern_conv, bool extern_int_conv)
    : schedulers_(std::move(schedulers)), tried_(std::move(tried)), rng_(seed), extern_gemm_(extern_gemm),
      extern_conv_(extern_conv), extern_int_conv_(extern_int_conv) {
  // Seeds of earlier runs' Adams2019 samples are not drawn again.
  for (const std::string& r : tried_)
    if (scheduler_of(r) == "Adams2019") ++adams_seed_;
}

bool Candidates::uses(const std::string& scheduler) const {
  return schedulers_.empty() || std::find(schedulers_.begin(), schedulers_.end(), scheduler) != schedulers_.end();
}

std::optional<ScheduleRequest> Candidates::fresh(const ScheduleRequest& request) {
  const std::string origin = request.str();
  if (!uses(scheduler_of(origin)) || tried_.count(origin)) return std::nullopt;
  return request;
}

std::optional<ScheduleRequest> Candidates::builtin_local(const std::string& best) {
  BuiltinParams p;
  try {  // the best so far, when it is a point of the built-in space
    const ScheduleRequest r = ScheduleRequest::parse(best);
    if (const BuiltIn* b = r.as<BuiltIn>()) p = b->params;
  } catch (const ValueError&) {
  }
  switch (std::uniform_int_distribution<int>(0, 7)(rng_)) {
    case 0: p.cols = pick(kCols, rng_); break;
    case 1: p.rows = pick(kRows, rng_); break;
    case 2: p.vec = pick(kVec, rng_); break;
    case 3: p.tasks = pick(kTasks, rng_); break;
    case 4: p.grain = pick(kGrain, rng_); break;
    case 5: p.store_expensive = !p.store_expensive; break;
    case 6: p.runs = pick(kRuns, rng_); break;
    case 7: p.ahead = pick(kAhead, rng_); break;
  }
  if (extern_gemm_ && std::uniform_int_distribution<int>(0, 5)(rng_) == 0) p.extern_gemm = !p.extern_gemm;
  if (extern_conv_ && std::uniform_int_distribution<int>(0, 5)(rng_) == 0) p.extern_conv = !p.extern_conv;
  if (extern_int_conv_ && std::uniform_int_distribution<int>(0, 5)(rng_) == 0) p.extern_int_conv = !p.extern_int_conv;
  return fresh({BuiltIn{p}});
}

std::optional<ScheduleRequest> Candidates::builtin_random() {
  BuiltinParams p;
  p.cols = pick(kCols, rng_), p.rows = pick(kRows, rng_), p.vec = pick(kVec, rng_), p.tasks = pick(kTasks, rng_);
  p.grain = pick(kGrain, rng_), p.runs = pick(kRuns, rng_), p.ahead = pick(kAhead, rng_);
  p.store_expensive = std::uniform_int_distribution<int>(0, 1)(rng_) == 1;
  p.extern_gemm = extern_gemm_ && std::uniform_int_distribution<int>(0, 1)(rng_) == 1;
  p.extern_conv = extern_conv_ && std::uniform_int_distribution<int>(0, 1)(rng_) == 1;
  p.extern_int_conv = extern_int_conv_ && std::uniform_int_distribution<int>(0, 1)(rng_) == 1;
  return fresh({BuiltIn{p}});
}

std::optional<ScheduleRequest> Candidates::adams_sample() {
  // Halide's autotune loop: beam size 1 with random dropout gives a new sample for every seed.
  AutoParams p;
  const int seed = ++adams_seed_;
  p.max_funcs = 0, p.beam = 1, p.seed = seed;
  p.dropout = seed % 2 ? 1 : 50;  // 1: autotune_loop.sh's random probes
  // Two samples in three search with the retrained cost model, one with Halide's own: the report
  // sets the two against each other on the same pipeline.
  if (!weights_.empty() && seed % 3 != 0) p.weights = weights_;
  return fresh(autoscheduled(Autoscheduler::Adams2019, p));
}

std::optional<ScheduleRequest> Candidates::mullapudi_grid() {
  static const std::vector<ScheduleRequest> grid = mullapudi_grid_points();
  while (mullapudi_ < grid.size())
    if (std::optional<ScheduleRequest> r = fresh(grid[mullapudi_++])) return r;
  return std::nullopt;
}

std::optional<ScheduleRequest> Candidates::li_variant() {
  while (li_ < 3) {
    AutoParams p;
    p.parallelism = int64_t(4) << (2 * li_++);  // 4, 16, 64
    if (std::optional<ScheduleRequest> r = fresh(autoscheduled(Autoscheduler::Li2018, p))) return r;
  }
  return std::nullopt;
}

std::optional<ScheduleRequest> Candidates::next(const std::string& best) {
  // First each scheduler's own choice: the built-in schedule is the baseline every speed-up is over.
  AutoParams adams_unbounded;
  adams_unbounded.max_funcs = 0;
  const std::vector<ScheduleRequest> firsts{{BuiltIn{}}, autoscheduled(Autoscheduler::Li2018),
                                            autoscheduled(Autoscheduler::Mullapudi2016),
                                            autoscheduled(Autoscheduler::Adams2019, adams_unbounded)};
  while (firsts_ < firsts.size())
    if (std::optional<ScheduleRequest> r = fresh(firsts[firsts_++])) return r;
  // The libraries' matmuls and convolutions, the rest fused around them: alone and together; and
  // the integer convolutions on AMX.
  std::vector<ScheduleRequest> externs;
  BuiltinParams gemm, conv, both, int_conv;
  gemm.extern_gemm = both.extern_gemm = true;
  conv.extern_conv = both.extern_conv = true;
  int_conv.extern_int_conv = true;
  if (extern_gemm_) externs.push_back({BuiltIn{gemm}});
  if (extern_conv_) externs.push_back({BuiltIn{conv}});
  if (extern_gemm_ && extern_conv_) externs.push_back({BuiltIn{both}});
  if (extern_int_conv_) externs.push_back({BuiltIn{int_conv}});
  while (externs_ < externs.size())
    if (std::optional<ScheduleRequest> r = fresh(externs[externs_++])) return r;
  if (!weights_.empty()) {  // the retrained model's own choice
    AutoParams retrained = adams_unbounded;
    retrained.weights = weights_;
    if (std::optional<ScheduleRequest> r = fresh(autoscheduled(Autoscheduler::Adams2019, retrained))) return r;
  }
  // Then a round: local, random, Adams2019 sample, local, Mullapudi2016, Li2018; what a scheduler
  // not in use or an exhausted space cannot give, the next kind gives. A few misses in a row
  // (random draws of points tried before) are allowed before the space counts as exhausted.
  for (int misses = 0; misses < 200; ++misses) {
    std::optional<ScheduleRequest> r;
    switch (step_++ % 6) {
      case 0: case 3: r = uses("built-in") ? builtin_local(best) : std::nullopt; break;
      case 1: r = uses("built-in") ? builtin_random() : std::nullopt; break;
      case 2: r = uses("Adams2019") ? adams_sample() : std::nullopt; break;
      case 4: r = mullapudi_grid(); break;
      default: r = li_variant(); break;
    }
    if (r) return r;
  }
  return std::nullopt;
}

}  // namespace hjit::tuning
