// Timing for the hjit-bench sections that run in child processes (models, small CNN).
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// The median time of fn after two warm-up calls: at least 5 calls, more within the budget.
inline double steady_ms(const std::function<void()>& fn, double budget_s) {
  fn(), fn();
  std::vector<double> times;
  const auto deadline = Clock::now() + std::chrono::duration<double>(budget_s);
  while (times.size() < 5 || (times.size() < 200 && Clock::now() < deadline)) {
    const auto t = Clock::now();
    fn();
    times.push_back(ms_since(t));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Median time of `calls` calls of each function, measured in blocks that alternate between the
// functions. Between blocks the process sleeps, so that the thread pools of OpenMP, OpenBLAS and
// Halide (which spin for a while after work) do not steal a core from the next block.
inline std::vector<double> interleaved_ms(const std::vector<std::function<void()>>& fns, int calls, double budget_s) {
  std::vector<std::vector<double>> samples(fns.size());
  const int rounds = 3;
  const double block_ms = budget_s * 1000 / (rounds * double(fns.size()));
  for (const auto& f : fns) f();  // warm-up
  for (int round = 0; round < rounds; ++round)
    for (size_t i = 0; i < fns.size(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      auto block = Clock::now();
      do {
        auto t = Clock::now();
        for (int c = 0; c < calls; ++c) fns[i]();
        samples[i].push_back(ms_since(t));
      } while (ms_since(block) < block_ms || samples[i].size() < size_t(2 * (round + 1)));
    }
  std::vector<double> out;
  for (auto& s : samples) out.push_back(median_of(s));
  return out;
}

}  // namespace bench
