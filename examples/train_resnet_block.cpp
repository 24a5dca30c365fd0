// W9: forward and backward of the ResNet BasicBlock in training form (batch statistics; the
// running statistics are updated too), mean of the output as the loss, gradients of every weight.
#include "resnet_block.h"
#include "compare.h"

using hjit::Tensor;

int main() {
  BasicBlock block(64);
  Tensor x = Tensor::randn({4, 64, 56, 56}, 1);
  auto loss = [&](const Tensor& x) { return hjit::mean(block(x, /*training=*/true)); };
  auto forward_backward = hjit::value_and_grad(loss, block.parameters());
  auto compiled = hjit::jit(forward_backward, hjit::JitOptions{.name = "resnet_block_train"});

  return report_forward_backward("train_resnet_block", forward_backward, compiled, x, 3, 10);
}
