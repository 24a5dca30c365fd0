// W11: forward and backward of the Llama-style attention block, mean of the output as the loss,
// gradients of the four projection weights.
#include <iostream>

#include "llama_attention.h"
#include "compare.h"
#include "timing.h"

using hjit::Tensor;

int main() {
  LlamaAttention attn(512, 8, 256);
  Tensor x = Tensor::randn({1, 256, 512}, 1);
  auto loss = [&](const Tensor& x) { return hjit::mean(attn(x)); };
  auto forward_backward = hjit::value_and_grad(loss, attn.parameters());
  auto compiled = hjit::jit(forward_backward, hjit::JitOptions{.name = "attention_train"});

  double prepare = median_ms([&] { compiled(x); }, 1);
  auto [eager_loss, eager_grads] = forward_backward(x);
  auto [jit_loss, jit_grads] = compiled(x);
  double worst = worst_relative_difference(jit_grads, eager_grads);
  double eager_ms = median_ms([&] { forward_backward(x); }, 5), jit_ms = median_ms([&] { compiled(x); }, 20);
  std::cout << "loss " << jit_loss.item<double>() << " (eager " << eager_loss.item<double>() << ")\n"
            << "prepare (trace + differentiate + compile + run): " << prepare << " ms; schedule: " << compiled.stats().schedule << "\n"
            << "steady forward+backward: eager " << eager_ms << " ms, jit " << jit_ms << " ms (" << eager_ms / jit_ms << "x)\n"
            << "largest gradient difference, relative to the gradient's size: " << worst << "\n";
  bool ok = worst < 1e-3;
  std::cout << (ok ? "train_attention: compiled gradients match eager\n" : "train_attention: MISMATCH\n");
  return ok ? 0 : 1;
}
