// The two-layer perceptron of W6/W7: relu(x @ w1 + b1) @ w2 + b2, 784 -> 256 -> 10.
#pragma once
#include <cmath>

#include <hjit/hjit.h>

struct Mlp {
  hjit::Tensor w1, b1, w2, b2;
  explicit Mlp(uint64_t seed = 11, int64_t in = 784, int64_t hidden = 256, int64_t out = 10)
      : w1(hjit::Tensor::randn({in, hidden}, seed) * std::sqrt(2.0 / double(in))),
        b1(hjit::Tensor::zeros({hidden})),
        w2(hjit::Tensor::randn({hidden, out}, seed + 1) * std::sqrt(1.0 / double(hidden))),
        b2(hjit::Tensor::zeros({out})) {}

  hjit::Tensor operator()(const hjit::Tensor& x) const {
    return hjit::matmul(hjit::relu(hjit::matmul(x, w1) + b1), w2) + b2;
  }
  std::vector<hjit::Tensor> parameters() const { return {w1, b1, w2, b2}; }
};
