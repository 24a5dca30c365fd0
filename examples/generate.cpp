// Generates tokens from a GPT-2 (nn::GPT2: the 124M-parameter architecture by default), printing
// each as it comes: prefill of the prompts, then one compiled decode step per token, the key/value
// cache written in place, sampling compiled into the step.
//   generate [--checkpoint FILE] [--save FILE] [--layers N] [--embd N] [--heads N] [--vocab N]
//            [--context N] [--prompt 464,2068,7586] [--batch B] [--tokens N] [--temperature T]
//            [--top-k K] [--top-p P] [--repetition-penalty R] [--seed S]
//            [--weights f32|int8|int4] [--group-size G] [--cache f32|bf16|f16|int8]
// Weights: hjit's checkpoint (--checkpoint, as nn::save_checkpoint writes it: a model trained or
// converted in hjit), else Hugging Face's initialization drawn from --seed. Token ids are printed
// (a byte-level vocabulary of at most 256 as characters); the default prompt is GPT-2's ids of
// "The quick brown fox". --weights int8 or int4 quantizes the weights (nn::quantize_weights: one
// scale a row, or per --group-size input features; int4 groups of 32 unless given); --cache bf16
// or f16 halves the key/value cache a step reads, int8 (a scale a column of each head) quarters it. The last line
// gives prefill and decode speed and the bytes a decode step reads per second (weights and cache).
#include <hjit/nn.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
using namespace hjit;

namespace {

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) ids.push_back(std::stoll(item));
  return ids;
}

}  // namespace

int main(int argc, char** argv) try {
  nn::GPT2Config config = nn::GPT2Config::gpt2();
  nn::GenerateOptions options{.max_new_tokens = 20, .sampling = {.temperature = 0.8, .top_k = 40}};
  std::string checkpoint, save, prompt, weights = "f32";
  int64_t group_size = -1;
  int64_t batch = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw ValueError("generate: " + a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--checkpoint") checkpoint = v;
    else if (a == "--save") save = v;
    else if (a == "--layers") config.n_layer = std::stoll(v);
    else if (a == "--embd") config.n_embd = std::stoll(v);
    else if (a == "--heads") config.n_head = std::stoll(v);
    else if (a == "--vocab") config.vocab_size = std::stoll(v);
    else if (a == "--context") config.n_positions = std::stoll(v);
    else if (a == "--prompt") prompt = v;
    else if (a == "--batch") batch = std::stoll(v);
    else if (a == "--tokens") options.max_new_tokens = std::stoll(v);
    else if (a == "--temperature") options.sampling.temperature = std::stod(v);
    else if (a == "--top-k") options.sampling.top_k = std::stoll(v);
    else if (a == "--top-p") options.sampling.top_p = std::stod(v);
    else if (a == "--repetition-penalty") options.sampling.repetition_penalty = std::stod(v);
    else if (a == "--seed") options.seed = std::stoull(v);
    else if (a == "--weights" && (v == "f32" || v == "int8" || v == "int4")) weights = v;
    else if (a == "--group-size") group_size = std::stoll(v);
    else if (a == "--cache" && (v == "f32" || v == "bf16" || v == "f16" || v == "int8"))
      options.cache_dtype = v == "f32" ? DType::F32 : v == "bf16" ? DType::BF16 : v == "f16" ? DType::F16 : DType::I8;
    else throw ValueError("generate: unknown option " + a);
  }
  nn::manual_seed(options.seed);
  nn::GPT2 model(config);
  if (!checkpoint.empty()) nn::load_checkpoint(checkpoint, model);
  if (!save.empty()) nn::save_checkpoint(save, model);
  model.eval();
  int64_t parameters = 0;
  for (const Tensor& p : model.parameters()) parameters += p.numel();
  if (weights != "f32") {
    const int bits = weights == "int8" ? 8 : 4;
    nn::quantize_weights(model, {.bits = bits, .group_size = group_size >= 0 ? group_size : bits == 4 ? 32 : 0});
  }
  // Row b continues the prompt without its first b tokens: a batch of different lengths.
  std::vector<int64_t> ids = parse_ids(prompt.empty() ? "464,2068,7586,21831" : prompt);  // "The quick brown fox"
  if (prompt.empty())
    for (int64_t& id : ids) id %= config.vocab_size;  // (a smaller vocabulary's own ids)
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t b = 0; b < batch; ++b) prompts.emplace_back(ids.begin() + std::min<int64_t>(b, int64_t(ids.size()) - 1), ids.end());

  size_t prompt_tokens = 0;
  for (const auto& p : prompts) prompt_tokens += p.size();
  nn::Generator gen(model, options);
  const bool bytes = config.vocab_size <= 256;
  gen.generate(prompts, [&](const std::vector<int64_t>& tokens) {
    for (size_t b = 0; b < tokens.size(); ++b) {
      if (tokens[b] < 0) std::printf(b ? " ." : ".");
      else if (bytes) std::printf(b ? " %c" : "%c", char(tokens[b]));
      else std::printf(b ? " %lld" : "%lld", static_cast<long long>(tokens[b]));
    }
    std::printf(tokens.size() > 1 ? "\n" : " ");
    std::fflush(stdout);
  });
  const nn::GenerationStats s = gen.stats();
  const double step_ms = s.decode_steps ? s.decode_ms / double(s.decode_steps) : 0;
  std::printf("\n%lld parameters (%s); prefill %.1f ms (%lld tokens, compiles %lld, loaded %lld); decode %.2f ms a step, %.1f tokens/s, "
              "%.1f GB/s of weights and cache (compiles %lld, loaded %lld)\n",
              static_cast<long long>(parameters), weights.c_str(), s.prefill_ms, static_cast<long long>(prompt_tokens),
              static_cast<long long>(s.prefill.compiles), static_cast<long long>(s.prefill.loaded), step_ms, step_ms > 0 ? 1000.0 * double(batch) / step_ms : 0.0,
              step_ms > 0 ? double(s.step_bytes) / step_ms / 1e6 : 0.0, static_cast<long long>(s.decode.compiles),
              static_cast<long long>(s.decode.loaded));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
