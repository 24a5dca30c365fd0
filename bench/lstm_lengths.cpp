// Issue 53's sequence case, timed: a character LSTM language model (embedding 64, one LSTM layer of
// 256, vocabulary 65, batch 16) trained with AdamW on 40 batches of random lengths 16-128, jitted
// with the length dynamic and without (a compile per length). It prints, for each, the first pass
// (traces and compiles included), a second pass over the same lengths (steady), and the counts.
// Public headers only. Run it with an empty disk cache for cold compiles:
//   HJIT_CACHE_DIR= build/bench/hjit-lstm-lengths            (both, per length first)
//   HJIT_CACHE_DIR= build/bench/hjit-lstm-lengths dynamic    (one)
#include <hjit/nn.h>
#include <hjit/optim.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>

using namespace hjit;

namespace {

struct CharLSTM : nn::Module {
  static constexpr int64_t kVocab = 65;
  nn::Embedding emb{kVocab, 64};
  nn::LSTM lstm{64, 256, {.batch_first = true}};
  nn::Linear head{256, kVocab};
  CharLSTM() {
    register_module("emb", emb);
    register_module("lstm", lstm);
    register_module("head", head);
  }
  Tensor operator()(const Tensor& ids) { return head(lstm(emb(ids)).output).reshape({-1, kVocab}); }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run(bool dynamic_length) {
  nn::manual_seed(1);
  CharLSTM lm;
  optim::AdamW opt(lm.parameters(), 1e-3);
  JitOptions o;
  if (dynamic_length) o.dynamic_dims = {{0, 1}, {1, 1}};
  o.warn_after_retraces = 0;
  auto step = jit([&](const Tensor& x, const Tensor& y) {
    auto loss = [&](const Tensor& x, const Tensor& y) { return cross_entropy(lm(x), y.reshape({-1})); };
    auto [l, g] = value_and_grad(loss, opt.params())(x, y);
    opt.step(g);
    return l;
  }, o);
  std::mt19937 rng(3);
  std::vector<int64_t> lengths;
  for (int i = 0; i < 40; ++i) lengths.push_back(16 + int64_t(rng() % 113));
  auto pass = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t t : lengths) {
      std::vector<int64_t> ids, next;
      for (int64_t i = 0; i < 16 * t; ++i) ids.push_back(rng() % CharLSTM::kVocab), next.push_back(rng() % CharLSTM::kVocab);
      step(Tensor::from_vector(ids, {16, t}), Tensor::from_vector(next, {16, t})).item<float>();
    }
    return seconds_since(t0);
  };
  const double first = pass(), steady = pass();
  std::printf("%-10s first pass %7.2f s, steady pass %6.2f s (40 steps), %lld traces, %lld compiled, %lld loaded\n",
              dynamic_length ? "dynamic" : "per length", first, steady, (long long)step.stats().traces,
              (long long)step.stats().compiles, (long long)step.stats().loaded);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  if (only.empty() || only == "per-length") run(false);
  if (only.empty() || only == "dynamic") run(true);
}
