// The char GPT example's training step (examples/char_gpt.cpp: 2 blocks of 128 channels, 4 heads,
// batch 16 of 64 tokens of a vocabulary of 80), timed: the median ms of 5 rounds of 21 steps after
// 3 warm-up steps, on fixed batches. An embedding-heavy step: the cost of the index checks every
// call makes. It uses public headers only, so the same source builds against an older hjit:
//   hjit-char-gpt-step            (this build)
//   g++ -std=c++20 -O2 bench/char_gpt_step.cpp -I<old>/frontend/include ... -lhjit   (another)
#include <hjit/nn.h>

#include "examples/char_gpt_model.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
using namespace hjit;
int main() {
  nn::manual_seed(0);
  const int64_t V = 80, T = 64, B = 16;
  GPT model(V);
  optim::AdamW opt(model.parameters(), 1e-3);
  auto loss_of = [&](const Tensor& x, const Tensor& y) { return cross_entropy(model(x).reshape({-1, V}), y.reshape({-1})); };
  auto step = jit([&](const Tensor& x, const Tensor& y) {
    auto [loss, grads] = value_and_grad(loss_of, opt.params())(x, y);
    opt.step(grads);
    return loss;
  });
  const Tensor x = floor(random::uniform(random::key(1), {B, T}, DType::F64, 0, double(V))).astype(DType::I64);
  const Tensor y = floor(random::uniform(random::key(2), {B, T}, DType::F64, 0, double(V))).astype(DType::I64);
  for (int i = 0; i < 3; ++i) step(x, y).item<float>();
  std::vector<double> rounds;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) step(x, y);
    step(x, y).item<float>();
    rounds.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 21);
  }
  std::sort(rounds.begin(), rounds.end());
  std::printf("%.3f\n", rounds[2]);
}
