#include "tuning/candidates.h"

#include <algorithm>

#include "schedules/builtin_params.h"

namespace hjit::tuning {
namespace {

using schedules::BuiltinParams;

// The values each built-in knob takes in a tuning run.
const std::vector<int> kCols{1, 2, 3, 4}, kRows{2, 4, 6, 8, 12, 16}, kVec{0, 1, 2, 4, 8}, kTasks{2, 4, 8, 16, 32},
    kGrain{10, 12, 14, 16, 18};

std::string builtin_request(const BuiltinParams& p) {
  const std::string words = p.str();
  return words.empty() ? "built-in" : "built-in " + words;
}

template <class R>
int pick(const std::vector<int>& values, R& rng) {
  return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
}

// The Mullapudi2016 grid: parallelism x last-level cache x balance, in a fixed shuffled order.
std::vector<std::string> mullapudi_grid_points() {
  std::vector<std::string> out;
  for (int par : {2, 4, 8, 16, 32})
    for (long long cache_kb : {256LL, 1024LL, 8192LL, 32768LL})
      for (int balance : {5, 20, 40, 100})
        out.push_back("Mullapudi2016 parallelism=" + std::to_string(par) + " cache=" + std::to_string(cache_kb * 1024) +
                      " balance=" + std::to_string(balance));
  std::shuffle(out.begin(), out.end(), std::mt19937_64(2016));
  return out;
}

}  // namespace

std::string scheduler_of(const std::string& request) { return request.substr(0, request.find(' ')); }

Candidates::Candidates(std::vector<std::string> schedulers, std::set<std::string> tried, uint64_t seed, bool extern_gemm,
                       bool extern_conv)
    : schedulers_(std::move(schedulers)), tried_(std::move(tried)), rng_(seed), extern_gemm_(extern_gemm),
      extern_conv_(extern_conv) {
  // Seeds of earlier runs' Adams2019 samples are not drawn again.
  for (const std::string& r : tried_)
    if (scheduler_of(r) == "Adams2019") ++adams_seed_;
}

bool Candidates::uses(const std::string& scheduler) const {
  return schedulers_.empty() || std::find(schedulers_.begin(), schedulers_.end(), scheduler) != schedulers_.end();
}

std::string Candidates::fresh(const std::string& request) {
  if (request.empty() || !uses(scheduler_of(request)) || tried_.count(request)) return "";
  return request;
}

std::string Candidates::builtin_local(const std::string& best) {
  BuiltinParams p;
  if (scheduler_of(best) == "built-in" && best.size() > 9) p = BuiltinParams::parse(best.substr(9));
  switch (std::uniform_int_distribution<int>(0, 5)(rng_)) {
    case 0: p.cols = pick(kCols, rng_); break;
    case 1: p.rows = pick(kRows, rng_); break;
    case 2: p.vec = pick(kVec, rng_); break;
    case 3: p.tasks = pick(kTasks, rng_); break;
    case 4: p.grain = pick(kGrain, rng_); break;
    case 5: p.store_expensive = !p.store_expensive; break;
  }
  if (extern_gemm_ && std::uniform_int_distribution<int>(0, 5)(rng_) == 0) p.extern_gemm = !p.extern_gemm;
  if (extern_conv_ && std::uniform_int_distribution<int>(0, 5)(rng_) == 0) p.extern_conv = !p.extern_conv;
  return fresh(builtin_request(p));
}

std::string Candidates::builtin_random() {
  BuiltinParams p;
  p.cols = pick(kCols, rng_), p.rows = pick(kRows, rng_), p.vec = pick(kVec, rng_), p.tasks = pick(kTasks, rng_);
  p.grain = pick(kGrain, rng_), p.store_expensive = std::uniform_int_distribution<int>(0, 1)(rng_) == 1;
  p.extern_gemm = extern_gemm_ && std::uniform_int_distribution<int>(0, 1)(rng_) == 1;
  p.extern_conv = extern_conv_ && std::uniform_int_distribution<int>(0, 1)(rng_) == 1;
  return fresh(builtin_request(p));
}

std::string Candidates::adams_sample() {
  // Halide's autotune loop: beam size 1 with random dropout gives a new sample for every seed.
  const int seed = ++adams_seed_;
  const int dropout = seed % 2 ? 1 : 50;  // 1: autotune_loop.sh's random probes
  std::string r = "Adams2019 max_funcs=0 beam=1 dropout=" + std::to_string(dropout) + " seed=" + std::to_string(seed);
  // Two samples in three search with the retrained cost model, one with Halide's own: the report
  // sets the two against each other on the same pipeline.
  if (!weights_.empty() && seed % 3 != 0) r += " weights=" + weights_;
  return fresh(r);
}

std::string Candidates::mullapudi_grid() {
  static const std::vector<std::string> grid = mullapudi_grid_points();
  while (mullapudi_ < grid.size()) {
    std::string r = fresh(grid[mullapudi_++]);
    if (!r.empty()) return r;
  }
  return "";
}

std::string Candidates::li_variant() {
  static const std::vector<std::string> variants{"Li2018 parallelism=4", "Li2018 parallelism=16", "Li2018 parallelism=64"};
  while (li_ < variants.size()) {
    std::string r = fresh(variants[li_++]);
    if (!r.empty()) return r;
  }
  return "";
}

std::string Candidates::next(const std::string& best) {
  // First each scheduler's own choice: the built-in schedule is the baseline every speed-up is over.
  static const std::vector<std::string> firsts{"built-in", "Li2018", "Mullapudi2016", "Adams2019 max_funcs=0"};
  while (firsts_ < firsts.size()) {
    std::string r = fresh(firsts[firsts_++]);
    if (!r.empty()) return r;
  }
  // The libraries' matmuls and convolutions, the rest fused around them: alone and together.
  std::vector<std::string> externs;
  if (extern_gemm_) externs.push_back("built-in extern_gemm=1");
  if (extern_conv_) externs.push_back("built-in extern_conv=1");
  if (extern_gemm_ && extern_conv_) externs.push_back("built-in extern_gemm=1 extern_conv=1");
  while (externs_ < externs.size()) {
    std::string r = fresh(externs[externs_++]);
    if (!r.empty()) return r;
  }
  if (!weights_.empty()) {
    std::string r = fresh("Adams2019 max_funcs=0 weights=" + weights_);  // the retrained model's own choice
    if (!r.empty()) return r;
  }
  // Then a round: local, random, Adams2019 sample, local, Mullapudi2016, Li2018; what a scheduler
  // not in use or an exhausted space cannot give, the next kind gives. A few misses in a row
  // (random draws of points tried before) are allowed before the space counts as exhausted.
  for (int misses = 0; misses < 200; ++misses) {
    std::string r;
    switch (step_++ % 6) {
      case 0: case 3: r = uses("built-in") ? builtin_local(best) : ""; break;
      case 1: r = uses("built-in") ? builtin_random() : ""; break;
      case 2: r = uses("Adams2019") ? adams_sample() : ""; break;
      case 4: r = mullapudi_grid(); break;
      default: r = li_variant(); break;
    }
    if (!r.empty()) return r;
  }
  return "";
}

}  // namespace hjit::tuning
