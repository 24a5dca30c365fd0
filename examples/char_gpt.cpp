// A character-level GPT (pre-norm transformer blocks, causal attention, a GELU MLP) trained on a
// text file with AdamW in one jitted step, checkpointed, resumable, and sampled with one compile
// for every length; examples/torch/char_gpt.py is the same program in PyTorch. Its linear layers
// are then quantized to int8 (nn::quantize), which must keep the perplexity within 2%.
//   char_gpt [text] [steps] [checkpoint to resume]
#include <hjit/nn.h>  // layers, and with them all of hjit: ops, jit, grad, optimizers, data

#include "char_gpt_model.h"

#include <cmath>
#include <cstdio>
using namespace hjit;

int main(int argc, char** argv) {
  nn::manual_seed(0);
  const std::string text = data::read_text(argc > 1 ? argv[1] : "/usr/share/common-licenses/GPL-3");
  const data::Vocabulary vocab(text);
  const Tensor ids = vocab.encode(text);

  GPT model(vocab.size());
  const int64_t V = model.V, T = model.T, B = 16;
  optim::AdamW opt(model.parameters(), 1e-3);
  const int steps = argc > 2 ? std::stoi(argv[2]) : 1000;
  if (argc > 3) nn::load_checkpoint(argv[3], model, &opt);  // resumes at the step it was saved at
  auto loss_of = [&](const Tensor& x, const Tensor& y) { return cross_entropy(model(x).reshape({-1, V}), y.reshape({-1})); };
  auto step = jit([&](const Tensor& x, const Tensor& y) {
    auto [loss, grads] = value_and_grad(loss_of, opt.params())(x, y);
    opt.step(grads);
    return loss;
  });
  for (int s = int(opt.steps()); s < steps; ++s) {
    const Tensor at = floor(random::uniform(random::key(uint64_t(s)), {B, 1}, DType::F64, 0, double(ids.dim(0) - T - 1))).astype(DType::I64) + iota({B, T}, 1, DType::I64);
    const Tensor loss = step(take(ids, at, 0), take(ids, at + int64_t(1), 0));
    if (s % 100 == 0 || s == steps - 1) std::printf("step %d: loss %.4f\n", s, loss.item<float>());
  }
  nn::save_checkpoint("char_gpt.hjit", model, &opt);

  model.eval();
  // 300 characters sampled, with one compile for every length.
  auto sample = [&] {
    auto next_logits = jit([&](const Tensor& x) { return slice(model(x), 1, -1, std::nullopt).reshape({V}); }, {.dynamic_dims = {{0, 1}}});
    std::vector<int64_t> out{vocab.id('\n')};
    for (int i = 0; i < 300; ++i) {
      const std::vector<int64_t> context(out.end() - std::min<ptrdiff_t>(ptrdiff_t(out.size()), T), out.end());
      const Tensor logits = next_logits(Tensor::from_vector(context, {1, int64_t(context.size())}));
      out.push_back(random::categorical(random::key(uint64_t(i)), logits).item<int64_t>());
    }
    std::printf("%s\n", vocab.decode(out).c_str());
  };
  // Perplexity on 8 fixed batches, then again with the linear layers in int8 (nn::quantize,
  // calibrated eagerly on 4 other batches): it must stay within 2%. (A resumed run samples only:
  // the run it resumes checked this.)
  auto batch = [&](uint64_t k) {
    return floor(random::uniform(random::key(k), {B, 1}, DType::F64, 0, double(ids.dim(0) - T - 1))).astype(DType::I64) + iota({B, T}, 1, DType::I64);
  };
  auto perplexity = [&] {
    // Jitted anew each time: a trace keeps the layers as they were when it was made.
    auto eval_loss = jit([&](const Tensor& x, const Tensor& y) { return loss_of(x, y); });
    double sum = 0;
    for (uint64_t k = 0; k < 8; ++k) sum += eval_loss(take(ids, batch(1000000 + k), 0), take(ids, batch(1000000 + k) + int64_t(1), 0)).item<float>();
    return std::exp(sum / 8);
  };
  if (argc > 3) {
    sample();
    return 0;
  }
  const double f32_ppl = perplexity();
  const int layers = nn::quantize(model, [&] {
    for (uint64_t k = 0; k < 4; ++k) model(take(ids, batch(2000000 + k), 0));
  });
  const double int8_ppl = perplexity();
  std::printf("perplexity: f32 %.4f, int8 %.4f (%+.2f%%, %d linear layers quantized)\n", f32_ppl, int8_ppl, 100 * (int8_ppl / f32_ppl - 1), layers);
  if (!(int8_ppl <= 1.02 * f32_ppl)) return 1;
  sample();
}
