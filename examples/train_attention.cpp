// W11: forward and backward of the Llama-style attention block, mean of the output as the loss,
// gradients of the four projection weights.
#include "llama_attention.h"
#include "compare.h"

using hjit::Tensor;

int main() {
  LlamaAttention attn(512, 8, 256);
  Tensor x = Tensor::randn({1, 256, 512}, 1);
  auto loss = [&](const Tensor& x) { return hjit::mean(attn(x)); };
  auto forward_backward = hjit::value_and_grad(loss, attn.parameters());
  auto compiled = hjit::jit(forward_backward, hjit::JitOptions{.name = "attention_train"});

  return report_forward_backward("train_attention", forward_backward, compiled, x, 5, 20);
}
