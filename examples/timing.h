// The median wall time of a few calls, for the examples' speed lines.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

template <class F>
double median_ms(F&& f, int runs = 50) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
