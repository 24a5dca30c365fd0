#include "bench/generation_rows.h"

#include <algorithm>
#include <map>
#include <memory>
#include <cstdio>
#include <string>
#include <vector>

#include <hjit/nn.h>

#include "bench/machine_limits.h"
#include "bench/timing.h"

namespace bench {

namespace {

struct Run {
  int64_t batch, prompt;
  hjit::DType cache = hjit::DType::F32;  // the key/value cache's type
};

int64_t bytes_of(const hjit::nn::Module& m) {
  int64_t bytes = 0;
  for (const auto& [name, t] : m.state()) bytes += t.numel() * int64_t(hjit::dtype_size(t.dtype()));
  return bytes;
}

// The multiply-adds (two FLOPs each) of a prefill over prompts of these lengths, as the model's
// arithmetic defines them, not as the step computes them (left padding and masked scores left out):
// each token's four products (12 C^2 a layer), its attention over the tokens up to it (2 C a
// token, scores and weighted values, over every head), and the vocabulary's projection once a row
// (generation projects the last column only).
double prefill_flops(const hjit::nn::GPT2Config& c, const std::vector<std::vector<int64_t>>& prompts) {
  const double C = double(c.n_embd), layers = double(c.n_layer);
  double flops = 0;
  for (const auto& ids : prompts) {
    const double n = double(ids.size());
    flops += layers * (2 * 12 * C * C * n + 2 * 2 * C * n * (n + 1) / 2) + 2 * C * double(c.vocab_size);
  }
  return flops;
}

// The sampler a decode step ends in, alone over GPT-2's logits: the rows above decode greedily,
// and top-k's sort had cost a step 9 ms there unseen (2,750 barriers a token).
void sampler_rows(bool quick) {
  const int64_t V = hjit::nn::GPT2Config::gpt2().vocab_size;
  const hjit::Tensor logits = hjit::Tensor::randn({1, V}, 3) * 3.0, seen = hjit::Tensor::zeros({1, V}, hjit::DType::Bool);
  const hjit::Tensor key = hjit::random::key(1);
  std::printf("sampler alone over %lld logits (nn::sample_tokens, compiled), median us:", static_cast<long long>(V));
  const struct {
    const char* name;
    hjit::nn::SamplingOptions options;
  } kinds[] = {{"greedy", {.temperature = 0}},
               {"t 0.8", {.temperature = 0.8}},
               {"top-k 40", {.temperature = 0.8, .top_k = 40}},
               {"top-p 0.9", {.temperature = 0.8, .top_p = 0.9}}};
  for (const auto& kind : kinds) {
    auto sample = hjit::jit([&](const hjit::Tensor& k, const hjit::Tensor& l, const hjit::Tensor& s) {
      return hjit::nn::sample_tokens(k, l, s, kind.options);
    });
    const double ms = steady_ms([&] { sample(key, logits, seen); }, quick ? 0.3 : 1.0);
    std::printf("  %s %.0f", kind.name, 1000 * ms);
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int generation_rows(bool quick) {
  const MachineLimits limits = measure_machine_limits();
  std::printf("machine (%d threads): memory bandwidth %.1f GB/s (triad), FP32 peak %.0f GFLOP/s (%s)\n", limits.threads, limits.gbps,
              limits.gflops, limits.vectors.c_str());
  const int64_t new_tokens = quick ? 16 : 64;
  std::printf("GPT-2 124M, greedy, %lld new tokens; median of %d runs. 'read': the weights and the cache a step reads;\n"
              "'weights': the weights' bytes a step over its time (the decode limit's measure), both against 'triad', the\n"
              "triad's GB/s measured just before and after the row's runs (the host moves it within a minute);\n"
              "'prefill': the prompt's FLOPs (products, causal attention, the last column's logits) against the FP32 peak\n",
              static_cast<long long>(new_tokens), quick ? 2 : 5);
  std::printf("%-8s %6s %7s %6s %11s %14s %8s %10s %13s %9s %6s %9s %6s %10s\n", "weights", "batch", "prompt", "cache", "prefill ms", "prefill tok/s",
              "prefill", "decode ms", "decode tok/s", "read GB/s", "read", "weights", "triad", "compile s");
  const struct {
    const char* name;
    int bits;
    int64_t group;
  } kinds[] = {{"f32", 0, 0}, {"int8", 8, 0}, {"int4", 4, 32}};
  for (const auto& kind : kinds) {
    hjit::nn::manual_seed(0);
    hjit::nn::GPT2 model(hjit::nn::GPT2Config::gpt2());
    model.eval();
    if (kind.bits) hjit::nn::quantize_weights(model, {.bits = kind.bits, .group_size = kind.group});
    const int64_t weight_bytes = bytes_of(model);
    // One generator for the rows of a model and cache type: its compiled steps serve every batch
    // and length.
    std::map<hjit::DType, std::unique_ptr<hjit::nn::Generator>> generators;
    // A short prompt at batch 1 and 4, and a context of 512 (the prompt and the new tokens); there
    // the cache a step reads is a third of int8's weights in f32, and the rows with narrower caches
    // show the weights' share of the step.
    std::vector<Run> runs{Run{1, 32}, Run{4, 32}, Run{1, 512 - new_tokens}};
    if (kind.bits == 8) runs.push_back(Run{1, 512 - new_tokens, hjit::DType::BF16});
    if (kind.bits != 4) runs.push_back(Run{1, 512 - new_tokens, hjit::DType::I8});
    for (const Run& r : runs) {
      std::unique_ptr<hjit::nn::Generator>& made = generators[r.cache];
      if (!made)
        made = std::make_unique<hjit::nn::Generator>(
            model, hjit::nn::GenerateOptions{.max_new_tokens = new_tokens, .sampling = {.temperature = 0}, .cache_dtype = r.cache});
      hjit::nn::Generator& gen = *made;
      std::vector<std::vector<int64_t>> prompts;
      for (int64_t b = 0; b < r.batch; ++b) {
        std::vector<int64_t> ids;
        for (int64_t t = 0; t < r.prompt - b; ++t) ids.push_back((t * 7919 + b * 104729) % 50257);
        prompts.push_back(ids);
      }
      gen.generate(prompts);  // (its steps wait on compiled code being compiled or loaded)
      const double compile_s = (gen.stats().prefill_compile_ms + gen.stats().decode_compile_ms) / 1000;
      // The triad just before and just after the timed runs: the bandwidth this row had.
      const double triad_before = measure_triad(limits.threads);
      std::vector<double> prefill, decode;
      for (int run = 0; run < (quick ? 2 : 5); ++run) {
        gen.generate(prompts);
        const hjit::nn::GenerationStats s = gen.stats();
        prefill.push_back(s.prefill_ms);
        decode.push_back(s.decode_ms / double(std::max<int64_t>(1, s.decode_steps)));
      }
      const double triad = (triad_before + measure_triad(limits.threads)) / 2;
      std::sort(prefill.begin(), prefill.end());
      std::sort(decode.begin(), decode.end());
      const double p = prefill[prefill.size() / 2], d = decode[decode.size() / 2];
      const double read = double(gen.stats().step_bytes) / d / 1e6, weights = double(weight_bytes) / d / 1e6;
      auto of = [&](double gbps) { return triad > 0 ? 100 * gbps / triad : 0.0; };
      const double prefill_gflops = prefill_flops(model.config, prompts) / p / 1e6;
      int64_t prompt_tokens = 0;
      for (const auto& ids : prompts) prompt_tokens += int64_t(ids.size());
      std::printf("%-8s %6lld %7lld %6s %11.1f %14.0f %7.0f%% %10.2f %13.1f %9.1f %5.0f%% %8.0f%% %6.1f %10.1f\n", kind.name,
                  static_cast<long long>(r.batch), static_cast<long long>(r.prompt), hjit::dtype_name(r.cache), p,
                  1000.0 * double(prompt_tokens) / p, limits.gflops > 0 ? 100 * prefill_gflops / limits.gflops : 0.0, d,
                  1000.0 * double(r.batch) / d, read, of(read), of(weights), triad, compile_s);
      std::fflush(stdout);
    }
  }
  sampler_rows(quick);
  return 0;
}

}  // namespace bench
