// MultiheadAttention and the transformer layers, as torch.nn computes them.
#include <cmath>
#include <limits>
#include <string>

#include <hjit/error.h>
#include <hjit/nn/init.h>
#include <hjit/nn/transformer.h>

namespace hjit::nn {

namespace {

Tensor batch_major(const Tensor& x, bool batch_first) { return batch_first ? x : transpose(x, {1, 0, 2}); }

// [N, T, E] -> [N, heads, T, E / heads]
Tensor heads_of(const Tensor& x, int64_t heads) {
  const Shape& s = x.shape();
  return transpose(x.reshape({s[0], s[1], heads, s[2] / heads}), {0, 2, 1, 3});
}

Tensor masked(const Tensor& scores, const Tensor& mask) {
  if (mask.dtype() == DType::Bool) return where(mask, -std::numeric_limits<double>::infinity(), scores);
  return scores + mask.astype(scores.dtype());
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim_, int64_t num_heads_, double dropout_, bool bias, bool batch_first_)
    : out_proj(embed_dim_, embed_dim_, bias), embed_dim(embed_dim_), num_heads(num_heads_), dropout(dropout_), batch_first(batch_first_),
      attn_drop_(dropout_) {
  if (embed_dim < 1 || num_heads < 1 || embed_dim % num_heads != 0)
    throw ValueError("nn::MultiheadAttention: embed_dim " + std::to_string(embed_dim) + " must split in " + std::to_string(num_heads) + " heads");
  in_proj_weight = Tensor::empty({3 * embed_dim, embed_dim});
  init::xavier_uniform_(in_proj_weight);
  if (bias) {
    in_proj_bias = Tensor::zeros({3 * embed_dim});
    init::zeros_(out_proj.bias);
  }
  register_parameter("in_proj_weight", in_proj_weight);
  register_parameter("in_proj_bias", in_proj_bias);
  register_module("out_proj", out_proj);
}

Tensor MultiheadAttention::operator()(const Tensor& query, const Tensor& key, const Tensor& value, const AttentionMasks& masks) {
  for (const Tensor* t : {&query, &key, &value})
    if (t->ndim() != 3 || t->shape()[2] != embed_dim)
      throw ShapeError("nn::MultiheadAttention: takes query, key and value [" + std::string(batch_first ? "N, L" : "L, N") + ", " +
                       std::to_string(embed_dim) + "], given " + shape_str(query.shape()) + ", " + shape_str(key.shape()) + " and " +
                       shape_str(value.shape()));
  const Tensor q = batch_major(query, batch_first), k = batch_major(key, batch_first), v = batch_major(value, batch_first);
  if (k.shape() != v.shape() || k.shape()[0] != q.shape()[0])
    throw ShapeError("nn::MultiheadAttention: key " + shape_str(key.shape()) + " and value " + shape_str(value.shape()) +
                     " must agree with each other and with the query's batch " + shape_str(query.shape()));
  const int64_t N = q.shape()[0], L = q.shape()[1], S = k.shape()[1], E = embed_dim;
  const std::vector<Tensor> w = split(in_proj_weight, E, 0);
  std::vector<Tensor> b;
  if (in_proj_bias.defined()) b = split(in_proj_bias, E, 0);
  auto project = [&](const Tensor& x, size_t i) {
    Tensor y = matmul(x, transpose(w[i]));
    return heads_of(b.empty() ? y : y + b[i], num_heads);
  };
  const Tensor Q = project(q, 0), K = project(k, 1), V = project(v, 2);
  const bool drop = training() && dropout > 0;
  Tensor out;
  if (!masks.attn_mask && !masks.key_padding_mask && !drop) {
    out = scaled_dot_product_attention(Q, K, V, masks.is_causal);
  } else {
    Tensor scores = matmul(Q, transpose(K, {0, 1, 3, 2})) * (1.0 / std::sqrt(double(E / num_heads)));  // [N, H, L, S]
    if (masks.attn_mask) {
      const Tensor& m = *masks.attn_mask;
      const bool per_head = m.ndim() == 3 && m.shape() == Shape{N * num_heads, L, S};
      if (!(m.ndim() == 2 && m.shape() == Shape{L, S}) && !per_head)
        throw ShapeError("nn::MultiheadAttention: attn_mask must be [" + std::to_string(L) + ", " + std::to_string(S) + "] or [" +
                         std::to_string(N * num_heads) + ", " + std::to_string(L) + ", " + std::to_string(S) + "], given " + shape_str(m.shape()));
      scores = masked(scores, per_head ? m.reshape({N, num_heads, L, S}) : m);
    } else if (masks.is_causal) {
      scores = masked(scores, triu(Tensor::ones({L, S}, DType::Bool), 1));
    }
    if (masks.key_padding_mask) {
      const Tensor& m = *masks.key_padding_mask;
      if (m.shape() != Shape{N, S})
        throw ShapeError("nn::MultiheadAttention: key_padding_mask must be [" + std::to_string(N) + ", " + std::to_string(S) + "], given " +
                         shape_str(m.shape()));
      scores = masked(scores, m.reshape({N, 1, 1, S}));
    }
    Tensor p = softmax(scores, -1);
    if (drop) p = attn_drop_(p);
    out = matmul(p, V);
  }
  out = transpose(out, {0, 2, 1, 3}).reshape({N, L, E});
  return batch_major(out_proj(out), batch_first);
}

namespace {
Tensor activate(const Tensor& x, Activation a) { return a == Activation::Gelu ? gelu(x) : relu(x); }
}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerOptions o)
    : self_attn(d_model, nhead, o.dropout, true, o.batch_first), linear1(d_model, o.dim_feedforward), linear2(o.dim_feedforward, d_model),
      norm1(Shape{d_model}, o.layer_norm_eps), norm2(Shape{d_model}, o.layer_norm_eps), dropout(o.dropout), dropout1(o.dropout),
      dropout2(o.dropout), options_(o) {
  register_module("self_attn", self_attn);
  register_module("linear1", linear1);
  register_module("dropout", dropout);
  register_module("linear2", linear2);
  register_module("norm1", norm1);
  register_module("norm2", norm2);
  register_module("dropout1", dropout1);
  register_module("dropout2", dropout2);
}

Tensor TransformerEncoderLayer::feed_forward(const Tensor& x) {
  return dropout2(linear2(dropout(activate(linear1(x), options_.activation))));
}

Tensor TransformerEncoderLayer::operator()(const Tensor& src, const AttentionMasks& m) {
  auto attend = [&](const Tensor& x) { return dropout1(self_attn(x, x, x, m)); };
  if (options_.norm_first) {
    const Tensor x = src + attend(norm1(src));
    return x + feed_forward(norm2(x));
  }
  const Tensor x = norm1(src + attend(src));
  return norm2(x + feed_forward(x));
}

TransformerDecoderLayer::TransformerDecoderLayer(int64_t d_model, int64_t nhead, TransformerOptions o)
    : self_attn(d_model, nhead, o.dropout, true, o.batch_first), multihead_attn(d_model, nhead, o.dropout, true, o.batch_first),
      linear1(d_model, o.dim_feedforward), linear2(o.dim_feedforward, d_model), norm1(Shape{d_model}, o.layer_norm_eps),
      norm2(Shape{d_model}, o.layer_norm_eps), norm3(Shape{d_model}, o.layer_norm_eps), dropout(o.dropout), dropout1(o.dropout),
      dropout2(o.dropout), dropout3(o.dropout), options_(o) {
  register_module("self_attn", self_attn);
  register_module("multihead_attn", multihead_attn);
  register_module("linear1", linear1);
  register_module("dropout", dropout);
  register_module("linear2", linear2);
  register_module("norm1", norm1);
  register_module("norm2", norm2);
  register_module("norm3", norm3);
  register_module("dropout1", dropout1);
  register_module("dropout2", dropout2);
  register_module("dropout3", dropout3);
}

Tensor TransformerDecoderLayer::feed_forward(const Tensor& x) {
  return dropout3(linear2(dropout(activate(linear1(x), options_.activation))));
}

Tensor TransformerDecoderLayer::operator()(const Tensor& tgt, const Tensor& memory, const AttentionMasks& tm, const AttentionMasks& mm) {
  auto self_block = [&](const Tensor& x) { return dropout1(self_attn(x, x, x, tm)); };
  auto cross_block = [&](const Tensor& x) { return dropout2(multihead_attn(x, memory, memory, mm)); };
  if (options_.norm_first) {
    Tensor x = tgt + self_block(norm1(tgt));
    x = x + cross_block(norm2(x));
    return x + feed_forward(norm3(x));
  }
  Tensor x = norm1(tgt + self_block(tgt));
  x = norm2(x + cross_block(x));
  return norm3(x + feed_forward(x));
}

}  // namespace hjit::nn
