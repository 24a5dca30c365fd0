#include "bench/generation_rows.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include <hjit/nn.h>

#include "bench/machine_limits.h"

namespace bench {

int generation_rows(bool quick) {
  const MachineLimits limits = measure_machine_limits();
  std::printf("machine (%d threads): memory bandwidth %.1f GB/s (triad)\n", limits.threads, limits.gbps);
  hjit::nn::manual_seed(0);
  hjit::nn::GPT2 model(hjit::nn::GPT2Config::gpt2());
  model.eval();
  const int64_t prompt = 32, new_tokens = quick ? 16 : 64;
  std::printf("GPT-2 124M, greedy, a %lld-token prompt, %lld new tokens; median of %d runs\n", static_cast<long long>(prompt),
              static_cast<long long>(new_tokens), quick ? 2 : 5);
  std::printf("%-8s %12s %14s %12s %14s %12s %10s %14s\n", "batch", "prefill ms", "prefill tok/s", "decode ms", "decode tok/s", "GB/s read",
              "of memory", "compile s");
  for (int64_t batch : {int64_t(1), int64_t(4)}) {
    std::vector<std::vector<int64_t>> prompts;
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<int64_t> ids;
      for (int64_t t = 0; t < prompt - b; ++t) ids.push_back((t * 7919 + b * 104729) % 50257);
      prompts.push_back(ids);
    }
    hjit::nn::Generator gen(model, {.max_new_tokens = new_tokens, .sampling = {.temperature = 0}});
    double compile_s = 0;
    std::vector<double> prefill, decode;
    for (int run = 0; run < (quick ? 3 : 6); ++run) {
      gen.generate(prompts);
      const hjit::nn::GenerationStats s = gen.stats();
      if (run == 0) {
        compile_s = (s.prefill_compile_ms + s.decode_compile_ms) / 1000;
        continue;  // (the first run's steps wait on compiled code being loaded)
      }
      prefill.push_back(s.prefill_ms);
      decode.push_back(s.decode_ms / double(std::max<int64_t>(1, s.decode_steps)));
    }
    std::sort(prefill.begin(), prefill.end());
    std::sort(decode.begin(), decode.end());
    const double p = prefill[prefill.size() / 2], d = decode[decode.size() / 2];
    const double gbps = double(gen.stats().step_bytes) / d / 1e6;
    std::printf("%-8lld %12.1f %14.0f %12.2f %14.1f %12.1f %9.0f%% %14.1f\n", static_cast<long long>(batch), p,
                1000.0 * double(batch * prompt) / p, d, 1000.0 * double(batch) / d, gbps, limits.gbps > 0 ? 100 * gbps / limits.gbps : 0.0,
                compile_s);
  }
  return 0;
}

}  // namespace bench
