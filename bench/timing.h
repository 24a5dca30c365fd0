// Timing for the hjit-bench sections that run in child processes (models, small CNN).
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>
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

}  // namespace bench
