// Attention and transformer layers with torch.nn's arguments and parameter names.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <hjit/nn/layers.h>

namespace hjit::nn {

// torch.nn.MultiheadAttention: in_proj_weight [3E, E] (xavier uniform), in_proj_bias [3E]
// (zeros), out_proj (a Linear, its bias zeros). Inputs [L, N, E] ([N, L, E] with batch_first).
// attn_mask: [L, S] or [N * heads, L, S], bool (true: not attended) or additive floats;
// key_padding_mask: [N, S] bool (true: padding). Without masks or dropout the scores run through
// scaled_dot_product_attention, which never holds the [L, S] matrix.
struct AttentionMasks {
  std::optional<Tensor> attn_mask{};
  std::optional<Tensor> key_padding_mask{};
  bool is_causal = false;  // a causal mask (with no attn_mask)
};

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0, bool bias = true, bool batch_first = false);
  Tensor operator()(const Tensor& query, const Tensor& key, const Tensor& value, const AttentionMasks& masks = {});
  Tensor in_proj_weight, in_proj_bias;
  Linear out_proj;
  int64_t embed_dim, num_heads;
  double dropout;
  bool batch_first;

 private:
  Dropout attn_drop_;
};

enum class Activation { Relu, Gelu };

struct TransformerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  Activation activation = Activation::Relu;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;  // pre-norm (GPT-2's) instead of post-norm
};

// torch.nn.TransformerEncoderLayer: self_attn, linear1, dropout, linear2, norm1, norm2,
// dropout1, dropout2.
class TransformerEncoderLayer : public Layer {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerOptions options = {});
  Tensor forward(const Tensor& src) override { return (*this)(src, {}); }
  Tensor operator()(const Tensor& src, const AttentionMasks& src_masks = {});
  MultiheadAttention self_attn;
  Linear linear1, linear2;
  LayerNorm norm1, norm2;
  Dropout dropout, dropout1, dropout2;

 private:
  Tensor feed_forward(const Tensor& x);
  TransformerOptions options_;
};

// torch.nn.TransformerDecoderLayer: self_attn, multihead_attn (over the encoder's memory),
// linear1, linear2, norm1..3, dropout, dropout1..3.
class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer(int64_t d_model, int64_t nhead, TransformerOptions options = {});
  Tensor operator()(const Tensor& tgt, const Tensor& memory, const AttentionMasks& tgt_masks = {},
                    const AttentionMasks& memory_masks = {});
  MultiheadAttention self_attn, multihead_attn;
  Linear linear1, linear2;
  LayerNorm norm1, norm2, norm3;
  Dropout dropout, dropout1, dropout2, dropout3;

 private:
  Tensor feed_forward(const Tensor& x);
  TransformerOptions options_;
};

}  // namespace hjit::nn
