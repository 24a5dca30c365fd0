// W10: Llama-style attention (rotary embedding, causal, 8 heads of 64), eager and compiled.
#include <iostream>

#include "llama_attention.h"
#include "timing.h"

using hjit::Tensor;

int main() {
  LlamaAttention attn(512, 8, 256);
  Tensor x = Tensor::randn({1, 256, 512}, 1);
  auto forward = hjit::jit([&](const Tensor& x) { return attn(x); }, hjit::JitOptions{.name = "llama_attention"});

  std::cout << "traced graph:\n" << forward.graph(x).str() << "\n";
  double prepare = median_ms([&] { forward(x); }, 1);
  Tensor compiled = forward(x), eager = attn(x);
  double diff = hjit::max(hjit::abs(compiled - eager)).item<double>();
  double eager_ms = median_ms([&] { attn(x); }, 10), jit_ms = median_ms([&] { forward(x); }, 30);
  std::cout << "prepare (trace + compile + run): " << prepare << " ms; schedule: " << forward.stats().schedule << "\n"
            << "steady: eager " << eager_ms << " ms, jit " << jit_ms << " ms (" << eager_ms / jit_ms << "x)\n"
            << "max |jit - eager| = " << diff << "\n";
  bool ok = diff < 1e-4;
  std::cout << (ok ? "llama_attention: compiled matches eager\n" : "llama_attention: MISMATCH\n");
  return ok ? 0 : 1;
}
