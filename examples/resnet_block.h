// A ResNet BasicBlock (W8): conv3x3 -> batch norm -> relu -> conv3x3 -> batch norm -> + x -> relu,
// NCHW, both convolutions without bias. Parameters are tensors the block owns; a jitted forward
// captures them (they are read at every call).
#pragma once
#include <cmath>

#include <hjit/hjit.h>

struct BatchNorm2d {
  hjit::Tensor weight, bias, running_mean, running_var;
  explicit BatchNorm2d(int64_t c, uint64_t seed)
      : weight(hjit::Tensor::uniform({c}, seed, 0.5, 1.5)), bias(hjit::Tensor::randn({c}, seed + 1) * 0.1),
        running_mean(hjit::Tensor::randn({c}, seed + 2) * 0.1), running_var(hjit::Tensor::uniform({c}, seed + 3, 0.5, 1.5)) {}
  hjit::Tensor operator()(const hjit::Tensor& x, bool training = false) const {
    return training ? hjit::batch_norm_training(x, running_mean, running_var, weight, bias)
                    : hjit::batch_norm(x, running_mean, running_var, weight, bias);
  }
};

struct BasicBlock {
  hjit::Tensor conv1, conv2;  // [C, C, 3, 3]
  BatchNorm2d bn1, bn2;
  explicit BasicBlock(int64_t c = 64, uint64_t seed = 7)
      : conv1(hjit::Tensor::randn({c, c, 3, 3}, seed) * std::sqrt(2.0 / (9.0 * double(c)))),
        conv2(hjit::Tensor::randn({c, c, 3, 3}, seed + 1) * std::sqrt(2.0 / (9.0 * double(c)))),
        bn1(c, seed + 10),
        bn2(c, seed + 20) {}

  hjit::Tensor operator()(const hjit::Tensor& x, bool training = false) const {
    hjit::Tensor y = hjit::relu(bn1(hjit::conv2d(x, conv1, std::nullopt, {1, 1}, {1, 1}), training));
    y = bn2(hjit::conv2d(y, conv2, std::nullopt, {1, 1}, {1, 1}), training);
    return hjit::relu(y + x);
  }
  std::vector<hjit::Tensor> parameters() const { return {conv1, bn1.weight, bn1.bias, conv2, bn2.weight, bn2.bias}; }
};
