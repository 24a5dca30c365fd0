// W8: a ResNet BasicBlock in inference, eager and compiled.
#include <iostream>

#include "resnet_block.h"
#include "timing.h"

using hjit::Tensor;

int main() {
  BasicBlock block(64);
  Tensor x = Tensor::randn({4, 64, 56, 56}, 1);
  auto forward = hjit::jit([&](const Tensor& x) { return block(x); }, hjit::JitOptions{.name = "resnet_block"});

  std::cout << "traced graph:\n" << forward.graph(x).str() << "\n";
  double prepare = median_ms([&] { forward(x); }, 1);
  Tensor compiled = forward(x), eager = block(x);
  double diff = hjit::max(hjit::abs(compiled - eager)).item<double>();
  double eager_ms = median_ms([&] { block(x); }, 5), jit_ms = median_ms([&] { forward(x); }, 20);
  const double gflop = 2 * 2.0 * 4 * 64 * 56 * 56 * 64 * 9 / 1e9;
  std::cout << "prepare (trace + compile + run): " << prepare << " ms; schedule: " << forward.stats().schedule << "\n"
            << "steady: eager " << eager_ms << " ms, jit " << jit_ms << " ms (" << eager_ms / jit_ms << "x, "
            << gflop / jit_ms * 1e3 << " GFLOP/s)\n"
            << "max |jit - eager| = " << diff << "\n";
  bool ok = diff < 1e-3;
  std::cout << (ok ? "resnet_block: compiled matches eager\n" : "resnet_block: MISMATCH\n");
  return ok ? 0 : 1;
}
