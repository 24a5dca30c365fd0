// How the training examples check compiled gradients against eager ones.
#pragma once
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <hjit/hjit.h>

#include "timing.h"

// The largest difference between two lists of tensors, each relative to the largest magnitude of
// its reference.

inline double worst_relative_difference(const std::vector<hjit::Tensor>& got, const std::vector<hjit::Tensor>& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double scale = hjit::max(hjit::abs(want[i])).item<double>() + 1e-12;
    worst = std::max(worst, hjit::max(hjit::abs(got[i] - want[i])).item<double>() / scale);
  }
  return worst;
}

// Times an eager forward+backward callable and its jitted form on `x`, prints loss, prepare and
// steady times, and returns the process exit code: 0 when the compiled gradients match eager.
template <class Eager, class Compiled>
int report_forward_backward(const std::string& name, Eager& eager, Compiled& compiled, const hjit::Tensor& x,
                            int eager_reps, int jit_reps) {
  double prepare = median_ms([&] { compiled(x); }, 1);
  auto [eager_loss, eager_grads] = eager(x);
  auto [jit_loss, jit_grads] = compiled(x);
  double worst = worst_relative_difference(jit_grads, eager_grads);
  double eager_ms = median_ms([&] { eager(x); }, eager_reps), jit_ms = median_ms([&] { compiled(x); }, jit_reps);
  std::cout << "loss " << jit_loss.template item<double>() << " (eager " << eager_loss.template item<double>() << ")\n"
            << "prepare (trace + differentiate + compile + run): " << prepare << " ms; schedule: " << compiled.stats().schedule << "\n"
            << "steady forward+backward: eager " << eager_ms << " ms, jit " << jit_ms << " ms (" << eager_ms / jit_ms << "x)\n"
            << "largest gradient difference, relative to the gradient's size: " << worst << "\n";
  bool ok = worst < 1e-3;
  std::cout << name << (ok ? ": compiled gradients match eager\n" : ": MISMATCH\n");
  return ok ? 0 : 1;
}
