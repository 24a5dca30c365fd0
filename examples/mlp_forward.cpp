// W6: the forward pass of a two-layer MLP, relu(x @ w1 + b1) @ w2 + b2, with its parameters held
// by the model and captured by the jitted function (read at every call, never baked in).
#include <hjit/hjit.h>

#include "mlp.h"
#include "timing.h"

#include <algorithm>
#include <chrono>
#include <iostream>

using hjit::Tensor;

int main() {
  Mlp model;
  Tensor x = Tensor::randn({64, 784}, 1);
  auto forward = hjit::jit([&](const Tensor& x) { return model(x); }, hjit::JitOptions{.name = "mlp_forward"});

  std::cout << "traced graph (parameters are the captured inputs before ';'):\n" << forward.graph(x).str() << "\n";
  auto t0 = std::chrono::steady_clock::now();
  Tensor compiled = forward(x);
  double prepare = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Tensor eager = model(x);
  double diff = hjit::max(hjit::abs(compiled - eager)).item<double>();

  double eager_ms = median_ms([&] { model(x); }), jit_ms = median_ms([&] { forward(x); });
  std::cout << "prepare (trace + compile + run): " << prepare << " ms\n"
            << "steady: eager " << eager_ms << " ms, jit " << jit_ms << " ms (" << eager_ms / jit_ms << "x)\n"
            << "max |jit - eager| = " << diff << "\n";

  // Parameters are inputs: changing them changes the result without recompiling.
  model.b2.assign(Tensor::ones({10}));
  double shift = hjit::max(hjit::abs(forward(x) - compiled - 1)).item<double>();
  std::cout << "after b2 += 1, output moved by 1 (max error " << shift << "), traces: " << forward.stats().traces << "\n";

  bool ok = diff < 1e-4 && shift < 1e-4 && forward.stats().traces == 1;
  std::cout << (ok ? "mlp_forward: compiled matches eager\n" : "mlp_forward: MISMATCH\n");
  return ok ? 0 : 1;
}
