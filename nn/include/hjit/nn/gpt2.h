// GPT-2 (Radford et al. 2019; Hugging Face's GPT2LMHeadModel): token and position embeddings,
// pre-norm blocks of causal self-attention and a tanh-GELU MLP, a final layer norm, and logits
// through the token embedding (tied). Parameters named as Hugging Face names them without its
// "transformer." prefix (wte, wpe, h.0.ln_1, h.0.attn.c_attn, h.0.attn.c_proj, h.0.mlp.c_fc, ...,
// ln_f), in its layouts: a Hugging Face checkpoint's tensors load as they are.
// Initialized as Hugging Face initializes it: normal(0, 0.02) weights (the residual projections
// scaled by 1/sqrt(2 * n_layer)), zero biases. Inference and fine-tuning (no dropout).
#pragma once
#include <cstdint>
#include <string>

#include <hjit/nn/generation.h>
#include <hjit/nn/layers.h>

namespace hjit::nn {

// Hugging Face's Conv1D: a linear layer whose weight is [in, out], y = x W + b. Its products read
// the weight along its rows whatever the number of tokens (a prompt's few rows included), where
// a [out, in] weight is read transposed.
class GPT2Conv1D : public Layer {
 public:
  GPT2Conv1D(int64_t in_features, int64_t out_features);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;          // [in, out], [out]
  WeightOnlyState weight_only;  // set by nn::quantize_weights (quantize.h)
};

struct GPT2Config {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;  // the longest sequence (the key/value cache's length)
  int64_t n_embd = 768;
  int64_t n_head = 12;
  int64_t n_layer = 12;
  double layer_norm_epsilon = 1e-5;
  // The 124M-parameter model of the paper (the defaults).
  static GPT2Config gpt2() { return {}; }
  // ValueError naming `who` for a size not positive or n_embd not a multiple of n_head.
  void check(const std::string& who) const;
};

class GPT2Attention : public Module {
 public:
  GPT2Attention(int64_t n_embd, int64_t n_head);
  GPT2Conv1D c_attn, c_proj;  // [n_embd, 3 * n_embd] (queries, keys, values), [n_embd, n_embd]
  int64_t n_head;
};

class GPT2MLP : public Module {
 public:
  explicit GPT2MLP(int64_t n_embd);
  Tensor operator()(const Tensor& x) { return c_proj(gelu(c_fc(x), true)); }
  GPT2Conv1D c_fc, c_proj;
};

class GPT2Block : public Module {
 public:
  GPT2Block(int64_t n_embd, int64_t n_head, double eps);
  LayerNorm ln_1;
  GPT2Attention attn;
  LayerNorm ln_2;
  GPT2MLP mlp;
};

class GPT2 : public CausalLM {
 public:
  explicit GPT2(GPT2Config config = {});
  // Logits [B, S, vocab] of ids [B, S] (i64) at positions 0..S-1, causally: the forward pass of
  // training and of evaluation.
  Tensor operator()(const Tensor& ids);
  Tensor step(const Tensor& ids, const Tensor& at, const Tensor& starts, const std::vector<LayerCache>& cache,
              std::vector<Tensor>& fresh, bool last_only = false) override;
  CacheShape cache_shape() const override;
  int64_t vocab_size() const override { return config.vocab_size; }

  GPT2Config config;
  Embedding wte, wpe;
  ModuleList<GPT2Block> h;
  LayerNorm ln_f;
};

}  // namespace hjit::nn
