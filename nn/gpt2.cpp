#include <hjit/nn/gpt2.h>

#include <cmath>

#include <hjit/nn/init.h>

namespace hjit::nn {

void GPT2Config::check(const std::string& who) const {
  auto positive = [&](int64_t v, const char* name) {
    if (v < 1) throw ValueError(who + ": " + name + " must be positive, given " + std::to_string(v));
  };
  positive(vocab_size, "vocab_size"), positive(n_positions, "n_positions"), positive(n_embd, "n_embd");
  positive(n_head, "n_head"), positive(n_layer, "n_layer");
  if (n_embd % n_head != 0)
    throw ValueError(who + ": n_embd " + std::to_string(n_embd) + " is not a multiple of n_head " + std::to_string(n_head));
  if (!(layer_norm_epsilon > 0)) throw ValueError(who + ": layer_norm_epsilon must be positive");
}

GPT2Conv1D::GPT2Conv1D(int64_t in_features, int64_t out_features)
    : weight(Tensor::zeros({in_features, out_features})), bias(Tensor::zeros({out_features})) {
  register_parameter("weight", weight), register_parameter("bias", bias);
  register_buffer("weight_q", weight_only.q), register_buffer("weight_scale", weight_only.scale);
}

Tensor GPT2Conv1D::forward(const Tensor& x) {
  if (weight_only.on()) return weight_only.matmul(x) + bias;
  if (x.ndim() == 0 || x.shape().back() != weight.dim(0))
    throw ShapeError("nn::GPT2Conv1D: takes inputs [..., " + std::to_string(weight.dim(0)) + "], given " + shape_str(x.shape()));
  // Every token a row of one matrix: a batch's rows share each pass over the weight (as [B, S, in]
  // against a broadcast weight, each sequence would read all of it).
  Shape out = x.shape();
  out.back() = weight.dim(1);
  return (matmul(x.reshape({-1, weight.dim(0)}), weight) + bias).reshape(out);
}

GPT2Attention::GPT2Attention(int64_t n_embd, int64_t n_head_) : c_attn(n_embd, 3 * n_embd), c_proj(n_embd, n_embd), n_head(n_head_) {
  register_module("c_attn", c_attn), register_module("c_proj", c_proj);
}

GPT2MLP::GPT2MLP(int64_t n_embd) : c_fc(n_embd, 4 * n_embd), c_proj(4 * n_embd, n_embd) {
  register_module("c_fc", c_fc), register_module("c_proj", c_proj);
}

GPT2Block::GPT2Block(int64_t n_embd, int64_t n_head, double eps) : ln_1({n_embd}, eps), attn(n_embd, n_head), ln_2({n_embd}, eps), mlp(n_embd) {
  register_module("ln_1", ln_1), register_module("attn", attn), register_module("ln_2", ln_2), register_module("mlp", mlp);
}

namespace {
GPT2Config checked(GPT2Config c) {
  c.check("nn::GPT2");
  return c;
}
}  // namespace

GPT2::GPT2(GPT2Config c)
    : config(checked(c)), wte(c.vocab_size, c.n_embd), wpe(c.n_positions, c.n_embd), ln_f({c.n_embd}, c.layer_norm_epsilon) {
  for (int64_t l = 0; l < c.n_layer; ++l) h.add(c.n_embd, c.n_head, c.layer_norm_epsilon);
  register_module("wte", wte), register_module("wpe", wpe), register_module("h", h), register_module("ln_f", ln_f);
  // Hugging Face's _init_weights, and GPT-2's scaled residual projections.
  init::normal_(wte.weight, 0, 0.02), init::normal_(wpe.weight, 0, 0.02);
  const double residual = 0.02 / std::sqrt(2.0 * double(c.n_layer));
  for (const auto& block : h) {
    for (GPT2Conv1D* l : {&block->attn.c_attn, &block->attn.c_proj, &block->mlp.c_fc, &block->mlp.c_proj}) {
      init::normal_(l->weight, 0, l == &block->attn.c_proj || l == &block->mlp.c_proj ? residual : 0.02);
      init::zeros_(l->bias);
    }
  }
}

Tensor GPT2::operator()(const Tensor& ids) {
  if (ids.ndim() != 2) throw ShapeError("nn::GPT2: takes ids [B, S], given " + shape_str(ids.shape()));
  std::vector<Tensor> fresh;
  return step(ids, Tensor::scalar(0, DType::I64), Tensor::zeros({ids.dim(0)}, DType::I64), KVCache::empty(cache_shape(), ids.dim(0)).layers,
              fresh);
}

Tensor GPT2::step(const Tensor& ids, const Tensor& at, const Tensor& starts, const std::vector<LayerCache>& cache,
                  std::vector<Tensor>& fresh, bool last_only) {
  if (ids.ndim() != 2) throw ShapeError("nn::GPT2::step: takes ids [B, S], given " + shape_str(ids.shape()));
  if (cache.size() != size_t(config.n_layer))
    throw ValueError("nn::GPT2::step: a cache of " + std::to_string(cache.size()) + " layers for a model of " + std::to_string(config.n_layer));
  const int64_t B = ids.dim(0), S = ids.dim(1), C = config.n_embd, H = config.n_head, D = C / H;
  // Each row's positions count from its first real column (padding columns at 0).
  const Tensor positions =
      clamp(at.astype(DType::I64) + iota({1, S}, 1, DType::I64) - starts.astype(DType::I64).reshape({B, 1}), int64_t(0), config.n_positions - 1);
  Tensor x = wte(ids) + wpe(positions);
  auto heads = [&](const Tensor& t) { return transpose(t.reshape({B, S, H, D}), {0, 2, 1, 3}); };
  for (size_t l = 0; l < h.size(); ++l) {
    GPT2Block& block = h[l];
    const std::vector<Tensor> qkv = split(block.attn.c_attn(block.ln_1(x)), {C, C, C}, 2);
    const Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
    const Tensor a = cached_attention(q, k, v, cache[l], at, starts);
    x = x + block.attn.c_proj(transpose(a, {0, 2, 1, 3}).reshape({B, S, C}));
    x = x + block.mlp(block.ln_2(x));
    fresh.push_back(k), fresh.push_back(v);
  }
  if (last_only) x = slice(x, 1, -1, std::nullopt);
  const Tensor rows = ln_f(x).reshape({-1, C});  // (one pass over the vocabulary for the batch)
  const Tensor logits = wte.weight_only.on() ? wte.weight_only.matmul(rows) : matmul(rows, transpose(wte.weight));
  return logits.reshape({B, -1, config.vocab_size});
}

CacheShape GPT2::cache_shape() const { return {config.n_layer, config.n_head, config.n_embd / config.n_head, config.n_positions}; }

}  // namespace hjit::nn
