// Llama-style attention (W10): x @ Wq, Wk, Wv; rotary embedding on q and k; causal scaled
// dot-product attention over heads; @ Wo. The rotary tables are computed once, like the weights.
#pragma once
#include <cmath>

#include <hjit/hjit.h>

struct LlamaAttention {
  int64_t dim, heads, head_dim, seq;
  hjit::Tensor wq, wk, wv, wo;  // [dim, dim]
  hjit::Tensor cos, sin;        // [seq, head_dim], HF-Llama's rotate_half layout

  LlamaAttention(int64_t dim = 512, int64_t heads = 8, int64_t seq = 256, uint64_t seed = 3)
      : dim(dim), heads(heads), head_dim(dim / heads), seq(seq) {
    const double scale = 1.0 / std::sqrt(double(dim));
    wq = hjit::Tensor::randn({dim, dim}, seed) * scale;
    wk = hjit::Tensor::randn({dim, dim}, seed + 1) * scale;
    wv = hjit::Tensor::randn({dim, dim}, seed + 2) * scale;
    wo = hjit::Tensor::randn({dim, dim}, seed + 3) * scale;
    // angle[t, i] = t / 10000^(2i / head_dim), repeated for both halves.
    hjit::Tensor i = hjit::Tensor::arange(head_dim / 2, hjit::DType::F64);
    hjit::Tensor inv = hjit::exp(i * (-2.0 * std::log(10000.0) / double(head_dim)));
    hjit::Tensor t = hjit::Tensor::arange(seq, hjit::DType::F64).reshape({seq, 1});
    hjit::Tensor angle = t * inv.reshape({1, head_dim / 2});
    angle = hjit::concat({angle, angle}, 1);
    cos = hjit::cos(angle).astype(hjit::DType::F32);
    sin = hjit::sin(angle).astype(hjit::DType::F32);
  }

  // [B, T, H * D] -> [B, H, T, D]
  hjit::Tensor split_heads(const hjit::Tensor& t) const {
    return t.reshape({t.dim(0), t.dim(1), heads, head_dim}).transpose({0, 2, 1, 3});
  }
  hjit::Tensor rotate_half(const hjit::Tensor& t) const {
    hjit::Tensor first = hjit::slice(t, -1, 0, head_dim / 2), second = hjit::slice(t, -1, head_dim / 2, std::nullopt);
    return hjit::concat({-second, first}, -1);
  }
  // The tables' first `len` rows: a sequence shorter than `seq` (up to seq positions are supported).
  hjit::Tensor rope(const hjit::Tensor& t) const {
    const int64_t len = t.dim(2);
    if (len == seq) return t * cos + rotate_half(t) * sin;
    return t * hjit::slice(cos, 0, 0, len) + rotate_half(t) * hjit::slice(sin, 0, 0, len);
  }

  hjit::Tensor operator()(const hjit::Tensor& x) const {
    const int64_t b = x.dim(0), t = x.dim(1);
    hjit::Tensor q = rope(split_heads(hjit::matmul(x, wq)));
    hjit::Tensor k = rope(split_heads(hjit::matmul(x, wk)));
    hjit::Tensor v = split_heads(hjit::matmul(x, wv));
    hjit::Tensor o = hjit::scaled_dot_product_attention(q, k, v, /*causal=*/true);
    return hjit::matmul(o.transpose({0, 2, 1, 3}).reshape({b, t, dim}), wo);
  }
  std::vector<hjit::Tensor> parameters() const { return {wq, wk, wv, wo}; }
};
