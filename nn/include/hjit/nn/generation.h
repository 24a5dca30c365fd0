// Generating tokens from a causal language model: a key/value cache that lives across calls, one
// compiled decode step for every position, sampling compiled into that step, batches of prompts of
// different lengths, tokens handed over as they come.
//
//   hjit::nn::GPT2 model(hjit::nn::GPT2Config::gpt2());            // or a smaller config
//   hjit::nn::load_checkpoint("gpt2.hjit", model);
//   model.eval();
//   hjit::nn::Generator gen(model, {.max_new_tokens = 40, .sampling = {.temperature = 0.8, .top_k = 40}});
//   gen.generate({prompt_ids}, [](const std::vector<int64_t>& tokens) { print(tokens[0]); });
//
// How it runs. Prompts are padded on the left to one length, so every row's next token sits in
// one column: `at`, a runtime value of the compiled step, which therefore serves every position up
// to the cache's length with one compile. Prefill runs the padded prompts against an empty cache
// (one compile for every prompt length: the length is a dynamic size); each decode step runs one
// column. A step returns the keys and values of the columns it ran, and the generator writes
// those rows into the cache in place (Tensor::assign_slice on host memory writes only the rows):
// the cache is never copied, and the step reads it where it lies. The step's attention covers the
// cache's columns before `at` (masked from each row's first real column) and its own columns
// causally, as one softmax.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <hjit/jit_options.h>
#include <hjit/nn/module.h>
#include <hjit/tensor.h>

namespace hjit::nn {

// What a causal language model's attention layers keep: layers, heads and head_dim of each layer's
// keys and values, and the most columns (tokens) a sequence may reach.
struct CacheShape {
  int64_t layers = 0, heads = 0, head_dim = 0, max_context = 0;
};

// One layer's cached keys, [B, H, D, T], and values, [B, H, T, D]. The keys are stored transposed so
// that a step's scores (q . K^T, one per column) run along the columns in vector lanes: as [T, D]
// rows, each score was a dot product of 64 lanes summed across its vector, and the scores took
// three times the weighted sum's time over the same bytes. Of a floating type (f32, bf16, f16),
// read in the queries' type; or i8 levels with an f32 scale for each column of each head
// (key_scales [B, H, 1, T] and value_scales [B, H, T, 1]; a key is keys * key_scales), a quarter of
// f32's bytes: a column's keys of a head are rounded to the nearest of 255 levels spread over their
// largest magnitude.
struct LayerCache {
  Tensor keys, values;
  Tensor key_scales{}, value_scales{};  // i8 caches only
};

// The form a cache of `dtype` stores: a step's keys and values ([B, H, S, D] each, layer by layer:
// k0, v0, k1, v1, ...) rounded to the type, or to i8 levels and their scales, the keys transposed
// ([B, H, D, S], as LayerCache). Traced like any op (a generator's step computes it compiled). ValueError for a type other than f32, bf16, f16, i8.
std::vector<LayerCache> stored_columns(const std::vector<Tensor>& fresh, DType dtype);

// A cache's layers as one list and back: keys, values, then (i8) key_scales and value_scales of
// each layer in turn; what a jitted step takes and returns.
std::vector<Tensor> cache_tensors(const std::vector<LayerCache>& layers);
std::vector<LayerCache> cache_layers(const std::vector<Tensor>& tensors);  // i8 keys: four a layer

// Keys and values of every layer, in host memory: keys [batch, heads, head_dim, max_context], values
// [batch, heads, max_context, head_dim] (LayerCache).
struct KVCache {
  std::vector<LayerCache> layers;
  // dtype f32, bf16, f16 or i8 (ValueError otherwise); zero keys and values.
  static KVCache zeros(const CacheShape& shape, int64_t batch, DType dtype = DType::F32);
  // No columns at all: what a prompt's first step attends to besides itself.
  static KVCache empty(CacheShape shape, int64_t batch, DType dtype = DType::F32) {
    shape.max_context = 0;
    return zeros(shape, batch, dtype);
  }
  // Columns [at, at + S) of every layer written in place from columns in this cache's form
  // (stored_columns: one entry a layer, [B, H, D, S] keys and [B, H, S, D] values).
  void write(int64_t at, const std::vector<LayerCache>& columns);
  std::vector<Tensor> tensors() const { return cache_tensors(layers); }
};

// One step of a causal language model's attention with a cache: queries q [B, H, S, D] of columns
// at + i; keys and values k, v [B, H, S, D] of the same columns; the cache's keys and values
// of earlier columns (LayerCache: keys [B, H, D, T], values [B, H, T, D]; T may be 0); starts [B] (i64) each row's first real column
// (left padding before it). Column at + i attends to the cache's columns [starts[b], at) and to its
// own columns j <= i from starts[b] on; a padding column attends to itself only. softmax over both
// at once (scaled by 1/sqrt(D)), then the weighted sum of values: [B, H, S, D]. A cache of another
// floating type (bf16) is read in q's; an i8 cache's scales multiply the scores and the
// probabilities (never a dequantized copy of the cache).
Tensor cached_attention(const Tensor& q, const Tensor& k, const Tensor& v, const LayerCache& cache, const Tensor& at,
                        const Tensor& starts);

// How the next token is drawn from a row of logits, in HF transformers' order: the repetition
// penalty on tokens seen (a positive logit divided by it, a negative one multiplied), then the
// temperature, top-k (the k largest logits, ties at the k-th kept), top-p (the fewest most likely
// tokens whose probabilities reach top_p, at least one), then a draw (random::categorical).
// temperature 0 is greedy: the argmax after the penalty, no draw.
struct SamplingOptions {
  double temperature = 1.0;
  int64_t top_k = 0;    // 0: every token
  double top_p = 1.0;   // 1: every token
  double repetition_penalty = 1.0;
  // ValueError naming `who` for a negative or non-finite temperature, a negative top_k, top_p
  // outside (0, 1], a repetition penalty not positive or not finite.
  void check(const std::string& who) const;
};

// One token per row of logits [B, V] (i64 [B]), drawn with key (u32[2]); seen [B, V] (bool) marks
// the tokens the repetition penalty applies to. Traced like any op: compiled into a jitted step.
Tensor sample_tokens(const Tensor& key, const Tensor& logits, const Tensor& seen, const SamplingOptions& options);

// A model the Generator drives.
class CausalLM : public Module {
 public:
  // Logits [B, S, vocab] of ids [B, S] (i64) in columns at + i (at an i64 scalar tensor), rows
  // starting at starts [B] (left padding before), attending to `cache` (one entry a layer, [B, H,
  // T, D], columns before at valid); the step's own keys and values ([B, H, S, D], k0, v0, k1, ...)
  // are appended to `fresh` in the model's type. last_only: the last column's logits only, [B, 1,
  // vocab] (what generation reads: a prompt's other columns skip the vocabulary's projection).
  virtual Tensor step(const Tensor& ids, const Tensor& at, const Tensor& starts, const std::vector<LayerCache>& cache,
                      std::vector<Tensor>& fresh, bool last_only = false) = 0;
  virtual CacheShape cache_shape() const = 0;
  virtual int64_t vocab_size() const = 0;
};

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  SamplingOptions sampling{};
  uint64_t seed = 0;                      // the keys of the draws: one run's tokens for a seed
  std::optional<int64_t> stop_token{};    // a row that produced it produces nothing more
  // The key/value cache's type: F32, BF16 / F16 to halve the bytes each step reads, or I8 (a scale
  // a column of each head) to quarter them. The attention still computes in f32; the keys and
  // values are rounded once, when stored.
  DType cache_dtype = DType::F32;
};

struct GenerationStats {
  JitStats prefill, decode;   // the two compiled functions
  // Of the last generate(): wall time of prefill and of the decode steps, each without the time
  // spent tracing and compiling (given apart).
  double prefill_ms = 0, decode_ms = 0, prefill_compile_ms = 0, decode_compile_ms = 0;
  int64_t decode_steps = 0;
  // What a decode step of the last generate() reads from memory at most: every parameter and
  // buffer once (a model quantized with keep_float counts float weights its steps do not read) and
  // the cache's keys and values (all its columns: the step's attention masks those not yet
  // written; generate() sizes the cache to the prompt and new tokens, rounded up to a power of
  // two of at least 64 columns). Over decode_ms / decode_steps, the step's bandwidth.
  int64_t step_bytes = 0;
};

class Generator {
 public:
  // options checked here (ValueError); the model is held by reference and must outlive this.
  Generator(CausalLM& model, GenerateOptions options = {});
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  // Each prompt (token ids in [0, vocab), at least one) continued by up to max_new_tokens; the new
  // tokens of each row are returned. on_token, when given, receives every step's tokens (one per
  // row; -1 for a row that has stopped) as soon as they are drawn. ValueError when a prompt is empty
  // or the longest prompt plus max_new_tokens exceeds the model's context; IndexError for an id out
  // of range.
  std::vector<std::vector<int64_t>> generate(const std::vector<std::vector<int64_t>>& prompts,
                                             const std::function<void(const std::vector<int64_t>&)>& on_token = {});
  GenerationStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hjit::nn
