// W9: forward and backward of the ResNet BasicBlock in training form (batch statistics; the
// running statistics are updated too), mean of the output as the loss, gradients of every weight.
#include <iostream>

#include "resnet_block.h"
#include "compare.h"
#include "timing.h"

using hjit::Tensor;

int main() {
  BasicBlock block(64);
  Tensor x = Tensor::randn({4, 64, 56, 56}, 1);
  auto loss = [&](const Tensor& x) { return hjit::mean(block(x, /*training=*/true)); };
  auto forward_backward = hjit::value_and_grad(loss, block.parameters());
  auto compiled = hjit::jit(forward_backward, hjit::JitOptions{.name = "resnet_block_train"});

  double prepare = median_ms([&] { compiled(x); }, 1);
  auto [eager_loss, eager_grads] = forward_backward(x);
  auto [jit_loss, jit_grads] = compiled(x);
  double worst = worst_relative_difference(jit_grads, eager_grads);
  double eager_ms = median_ms([&] { forward_backward(x); }, 3), jit_ms = median_ms([&] { compiled(x); }, 10);
  std::cout << "loss " << jit_loss.item<double>() << " (eager " << eager_loss.item<double>() << ")\n"
            << "prepare (trace + differentiate + compile + run): " << prepare << " ms; schedule: " << compiled.stats().schedule << "\n"
            << "steady forward+backward: eager " << eager_ms << " ms, jit " << jit_ms << " ms (" << eager_ms / jit_ms << "x)\n"
            << "largest gradient difference, relative to the gradient's size: " << worst << "\n";
  bool ok = worst < 1e-3;
  std::cout << (ok ? "train_resnet_block: compiled gradients match eager\n" : "train_resnet_block: MISMATCH\n");
  return ok ? 0 : 1;
}
