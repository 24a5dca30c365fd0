// The largest difference between two lists of tensors, each relative to the largest magnitude of
// its reference: how the training examples check compiled gradients against eager ones.
#pragma once
#include <algorithm>
#include <vector>

#include <hjit/hjit.h>

inline double worst_relative_difference(const std::vector<hjit::Tensor>& got, const std::vector<hjit::Tensor>& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double scale = hjit::max(hjit::abs(want[i])).item<double>() + 1e-12;
    worst = std::max(worst, hjit::max(hjit::abs(got[i] - want[i])).item<double>() / scale);
  }
  return worst;
}
