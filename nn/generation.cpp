#include <hjit/nn/generation.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>

#include <hjit/jit.h>
#include <hjit/ops.h>
#include <hjit/random.h>

#include "nn/symmetric_levels.h"

namespace hjit::nn {

namespace {

void check_cacheable(DType dtype, const std::string& who) {
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16 && dtype != DType::I8)
    throw ValueError(who + ": a key/value cache is f32, bf16, f16 or i8, given " + dtype_name(dtype));
}

// i8 levels of x [..., D] and an f32 scale a run of D ([..., 1]), as weight-only i8 weights.
std::pair<Tensor, Tensor> to_levels(const Tensor& x) {
  const Tensor f = x.astype(DType::F32);
  const auto [levels, scale] = symmetric_levels(f, f.ndim() - 1, 127);
  return {levels.astype(DType::I8), scale};
}

}  // namespace

std::vector<LayerCache> stored_columns(const std::vector<Tensor>& fresh, DType dtype) {
  check_cacheable(dtype, "nn::stored_columns");
  if (fresh.size() % 2 != 0)
    throw ValueError("nn::stored_columns: " + std::to_string(fresh.size()) + " fresh tensors: keys and values of each layer, in pairs");
  std::vector<LayerCache> out;
  for (size_t l = 0; l < fresh.size(); l += 2) {
    if (fresh[l].ndim() != 4)
      throw ShapeError("nn::stored_columns: keys and values are [B, H, S, D], given " + shape_str(fresh[l].shape()));
    if (dtype != DType::I8) {
      out.push_back({transpose(fresh[l], {0, 1, 3, 2}).astype(dtype), fresh[l + 1].astype(dtype)});
      continue;
    }
    auto [k, ks] = to_levels(fresh[l]);
    auto [v, vs] = to_levels(fresh[l + 1]);
    out.push_back({transpose(k, {0, 1, 3, 2}), v, transpose(ks, {0, 1, 3, 2}), vs});
  }
  return out;
}

std::vector<Tensor> cache_tensors(const std::vector<LayerCache>& layers) {
  std::vector<Tensor> all;
  for (const LayerCache& c : layers) {
    all.push_back(c.keys), all.push_back(c.values);
    if (c.key_scales.defined()) all.push_back(c.key_scales), all.push_back(c.value_scales);
  }
  return all;
}

std::vector<LayerCache> cache_layers(const std::vector<Tensor>& tensors) {
  const size_t each = !tensors.empty() && tensors[0].dtype() == DType::I8 ? 4 : 2;
  if (tensors.size() % each != 0)
    throw ValueError("nn::cache_layers: " + std::to_string(tensors.size()) + " tensors are not layers of " + std::to_string(each) +
                     (each == 4 ? " (i8 keys, values and their scales)" : " (keys and values)"));
  std::vector<LayerCache> layers;
  for (size_t i = 0; i < tensors.size(); i += each) {
    layers.push_back({tensors[i], tensors[i + 1]});
    if (each == 4) layers.back().key_scales = tensors[i + 2], layers.back().value_scales = tensors[i + 3];
  }
  return layers;
}

KVCache KVCache::zeros(const CacheShape& shape, int64_t batch, DType dtype) {
  check_cacheable(dtype, "nn::KVCache::zeros");
  KVCache c;
  const Shape keys{batch, shape.heads, shape.head_dim, shape.max_context}, values{batch, shape.heads, shape.max_context, shape.head_dim};
  for (int64_t l = 0; l < shape.layers; ++l) {
    c.layers.push_back({Tensor::zeros(keys, dtype), Tensor::zeros(values, dtype)});
    if (dtype == DType::I8) {
      // (scale 1, as stored_columns gives zeros: a column not yet written reads as zeros)
      c.layers.back().key_scales = Tensor::ones({batch, shape.heads, 1, shape.max_context});
      c.layers.back().value_scales = Tensor::ones({batch, shape.heads, shape.max_context, 1});
    }
  }
  return c;
}

void KVCache::write(int64_t at, const std::vector<LayerCache>& columns) {
  if (columns.size() != layers.size())
    throw ValueError("nn::KVCache::write: columns of " + std::to_string(columns.size()) + " layers for a cache of " +
                     std::to_string(layers.size()));
  for (size_t l = 0; l < layers.size(); ++l) {
    LayerCache& to = layers[l];
    const LayerCache& from = columns[l];
    if (from.keys.dtype() != to.keys.dtype() || from.values.dtype() != to.values.dtype() || from.key_scales.defined() != to.key_scales.defined())
      throw ValueError(std::string("nn::KVCache::write: columns of ") + dtype_name(from.keys.dtype()) + " for a cache of " +
                       dtype_name(to.keys.dtype()) + " (nn::stored_columns gives a cache's form)");
    // (A slice past the end would be clipped, and a column silently dropped.)
    const Shape& vs = to.values.shape();
    const int64_t s = from.values.ndim() == 4 ? from.values.dim(2) : -1, T = vs[2];
    if (s < 0 || from.values.shape() != Shape{vs[0], vs[1], s, vs[3]} || from.keys.shape() != Shape{vs[0], vs[1], vs[3], s})
      throw ShapeError("nn::KVCache::write: columns' keys must be [" + std::to_string(vs[0]) + ", " + std::to_string(vs[1]) + ", " +
                       std::to_string(vs[3]) + ", S] (transposed, as nn::stored_columns gives them) and their values [" +
                       std::to_string(vs[0]) + ", " + std::to_string(vs[1]) + ", S, " + std::to_string(vs[3]) + "], given " +
                       shape_str(from.keys.shape()) + " and " + shape_str(from.values.shape()));
    if (at < 0 || at + s > T)
      throw IndexError("nn::KVCache::write: columns [" + std::to_string(at) + ", " + std::to_string(at + s) + ") of a cache of " +
                       std::to_string(T) + " columns");
    to.keys.assign_slice(3, at, at + s, from.keys);
    to.values.assign_slice(2, at, at + s, from.values);
    if (to.key_scales.defined()) {
      to.key_scales.assign_slice(3, at, at + s, from.key_scales);
      to.value_scales.assign_slice(2, at, at + s, from.value_scales);
    }
  }
}

Tensor cached_attention(const Tensor& q, const Tensor& k, const Tensor& v, const LayerCache& cache, const Tensor& at,
                        const Tensor& starts) {
  if (q.ndim() != 4 || k.shape() != q.shape() || v.shape() != q.shape())
    throw ShapeError("nn::cached_attention: q, k and v must be [B, H, S, D] alike, given " + shape_str(q.shape()) + ", " +
                     shape_str(k.shape()) + ", " + shape_str(v.shape()));
  const int64_t B = q.dim(0), H = q.dim(1), S = q.dim(2), D = q.dim(3);
  const Shape vs = cache.values.shape();
  const int64_t T = vs.size() == 4 ? vs[2] : 0;
  if (vs.size() != 4 || vs[0] != B || vs[1] != H || vs[3] != D || cache.keys.shape() != Shape{B, H, D, T})
    throw ShapeError("nn::cached_attention: the cache's keys must be [" + std::to_string(B) + ", " + std::to_string(H) + ", " +
                     std::to_string(D) + ", T] (transposed) and its values [" + std::to_string(B) + ", " + std::to_string(H) + ", T, " +
                     std::to_string(D) + "], given " + shape_str(cache.keys.shape()) + " and " + shape_str(vs));
  const bool levels = cache.keys.dtype() == DType::I8;
  if (levels != cache.key_scales.defined() || cache.key_scales.defined() != cache.value_scales.defined())
    throw ValueError("nn::cached_attention: an i8 cache needs key_scales and value_scales, and only an i8 cache has them");
  const Shape key_scales{B, H, 1, T}, value_scales{B, H, T, 1};
  if (levels && (cache.key_scales.shape() != key_scales || cache.value_scales.shape() != value_scales))
    throw ShapeError("nn::cached_attention: an i8 cache's scales must be " + shape_str(key_scales) + " (keys) and " +
                     shape_str(value_scales) + " (values), given " + shape_str(cache.key_scales.shape()) + " and " +
                     shape_str(cache.value_scales.shape()));
  if (at.ndim() != 0 || starts.shape() != Shape{B})
    throw ShapeError("nn::cached_attention: at must be a scalar and starts [" + std::to_string(B) + "], given " + shape_str(at.shape()) +
                     " and " + shape_str(starts.shape()));
  const double scale = 1 / std::sqrt(double(D));
  // A narrower cache is widened as it is read (inside the products' loads, not copied).
  const Tensor keys = cache.keys.astype(q.dtype()), values = cache.values.astype(q.dtype());
  const float minus_inf = -std::numeric_limits<float>::infinity();
  const Tensor first = starts.astype(DType::I64).reshape({B, 1, 1, 1});
  const Tensor at64 = at.astype(DType::I64);
  const Tensor i = iota({1, 1, S, 1}, 2, DType::I64), j = iota({1, 1, 1, S}, 3, DType::I64);
  // Own columns: causal, from the row's first real column; a padding column sees itself only (its
  // output is never used, and a row of -inf would make it NaN).
  const Tensor own_ok = (j <= i && at64 + j >= first) || j == i;
  const Tensor own = where(own_ok, matmul(q, transpose(k, {0, 1, 3, 2})) * scale, minus_inf);
  if (T == 0) return matmul(softmax(own, 3), v);
  const Tensor t = iota({1, 1, 1, T}, 3, DType::I64);
  const Tensor cached_ok = t >= first && t < at64 && at64 + i >= first;
  // An i8 column's scale multiplies its score (q . (levels * s) = (q . levels) * s) and its
  // probability (the weighted sum of values * s is that of values with the weights times s).
  auto by_column = [&](const Tensor& x, const Tensor& column_scales) { return levels ? x * column_scales.astype(q.dtype()) : x; };
  const Tensor cached = where(cached_ok, by_column(matmul(q, keys), cache.key_scales) * scale, minus_inf);
  // One softmax over both, its division after the weighted sums (one per output, not one per
  // column): the exponentials feed the products directly, with no pass that normalizes them
  // and no concatenation. Every row has its own column (j == i), so its maximum is finite.
  const Tensor top = maximum(max(cached, {3}, true), max(own, {3}, true));
  const Tensor e_cached = exp(cached - top), e_own = exp(own - top);
  const Tensor total = sum(e_cached, {3}, true) + sum(e_own, {3}, true);
  const Tensor column_value_scales = levels ? transpose(cache.value_scales, {0, 1, 3, 2}) : Tensor();  // [B, H, 1, T]
  return (matmul(by_column(e_cached, column_value_scales), values) + matmul(e_own, v)) / total;
}

void SamplingOptions::check(const std::string& who) const {
  if (!std::isfinite(temperature) || temperature < 0)
    throw ValueError(who + ": temperature must be 0 (greedy) or positive, given " + std::to_string(temperature));
  if (top_k < 0) throw ValueError(who + ": top_k must be 0 (every token) or positive, given " + std::to_string(top_k));
  if (!(top_p > 0 && top_p <= 1)) throw ValueError(who + ": top_p must be in (0, 1], given " + std::to_string(top_p));
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0)
    throw ValueError(who + ": repetition_penalty must be positive, given " + std::to_string(repetition_penalty));
}

namespace {

// The k largest values of each row of x [B, V], largest first (topk's values). A long row is cut in
// blocks, and the k largest of the blocks' k largest are the row's (every one of the row's k
// largest is among its own block's): sorting networks over blocks of 1024 and the candidates
// instead of one over the whole row rounded up to a power of two (GPT-2's 50,257 logits: 65,536
// positions, 136 passes, against 55 over each block).
Tensor largest(const Tensor& x, int64_t k) {
  constexpr int64_t kBlock = 1024;
  const int64_t B = x.dim(0), V = x.dim(1);
  if (V < 4 * kBlock || k > kBlock / 4) return topk(x, k, 1).first;
  const int64_t blocks = (V + kBlock - 1) / kBlock;
  const Tensor padded = pad(x, {{0, 0}, {0, blocks * kBlock - V}}, -std::numeric_limits<double>::infinity());
  const Tensor candidates = topk(padded.reshape({B, blocks, kBlock}), k, 2).first.reshape({B, blocks * k});
  return topk(candidates, k, 1).first;
}

}  // namespace

Tensor sample_tokens(const Tensor& key, const Tensor& logits, const Tensor& seen, const SamplingOptions& o) {
  o.check("nn::sample_tokens");
  if (logits.ndim() != 2 || seen.shape() != logits.shape())
    throw ShapeError("nn::sample_tokens: takes logits [B, V] and seen of the same shape, given " + shape_str(logits.shape()) + " and " +
                     shape_str(seen.shape()));
  const float minus_inf = -std::numeric_limits<float>::infinity();
  Tensor x = logits.astype(DType::F32);
  if (o.repetition_penalty != 1) {
    const double p = o.repetition_penalty;
    x = where(seen.astype(DType::Bool), where(x > 0.0, x / p, x * p), x);
  }
  if (o.temperature == 0) return argmax(x, 1);
  x = x / o.temperature;
  const int64_t V = x.dim(1);
  const bool top_k = o.top_k > 0 && o.top_k < V;
  Tensor ranked;  // the candidates' logits, largest first
  if (top_k) {
    ranked = largest(x, o.top_k);
    x = where(x >= slice(ranked, 1, o.top_k - 1, o.top_k), x, minus_inf);
  }
  if (o.top_p < 1) {
    if (!top_k) ranked = sort(x, 1, true).first;
    const Tensor probs = softmax(ranked, 1);
    // A token stays while the tokens more likely than it hold less than top_p: the first always.
    const Tensor kept = sum((cumsum(probs, 1) - probs < o.top_p).astype(DType::I64), {1}, true);
    x = where(x >= gather(ranked, 1, kept - int64_t(1)), x, minus_inf);
  }
  return random::categorical(key, x, 1);
}

struct Generator::Impl {
  using Step = std::function<std::vector<Tensor>(const Tensor& ids, const Tensor& at, const Tensor& starts, const Tensor& seen,
                                                 const Tensor& key, const std::vector<Tensor>& cache)>;
  CausalLM& model;
  GenerateOptions options;
  Step body;
  Jitted<Step> prefill, decode;
  double prefill_ms = 0, decode_ms = 0, prefill_compile_ms = 0, decode_compile_ms = 0;
  int64_t steps = 0, step_bytes = 0;

  Impl(CausalLM& m, GenerateOptions o)
      : model(m),
        options(std::move(o)),
        body([this](const Tensor& ids, const Tensor& at, const Tensor& starts, const Tensor& seen, const Tensor& key,
                    const std::vector<Tensor>& cache) {
          std::vector<Tensor> fresh;
          const Tensor logits = model.step(ids, at, starts, cache_layers(cache), fresh, true);
          const int64_t B = ids.dim(0), V = logits.dim(2);
          const Tensor next = sample_tokens(key, slice(logits, 1, -1, std::nullopt).reshape({B, V}), seen, options.sampling);
          std::vector<Tensor> out{next, seen || iota({B, V}, 1, DType::I64) == unsqueeze(next, 1)};
          const std::vector<Tensor> stored = cache_tensors(stored_columns(fresh, options.cache_dtype));
          out.insert(out.end(), stored.begin(), stored.end());
          return out;
        }),
        // Every prompt length with one compile; the decode step's seen tokens written in place.
        prefill(body, JitOptions{.name = "generate_prefill", .dynamic_dims = {{0, 1}}}),
        decode(body, JitOptions{.name = "generate_decode", .donate = {3}}) {}
};

Generator::Generator(CausalLM& model, GenerateOptions options) {
  options.sampling.check("nn::Generator");
  check_cacheable(options.cache_dtype, "nn::Generator: cache_dtype");
  if (options.max_new_tokens < 1) throw ValueError("nn::Generator: max_new_tokens must be at least 1, given " + std::to_string(options.max_new_tokens));
  impl_ = std::make_unique<Impl>(model, std::move(options));
}

Generator::~Generator() = default;

std::vector<std::vector<int64_t>> Generator::generate(const std::vector<std::vector<int64_t>>& prompts,
                                                      const std::function<void(const std::vector<int64_t>&)>& on_token) {
  Impl& g = *impl_;
  const GenerateOptions& o = g.options;
  const CacheShape shape = g.model.cache_shape();
  const int64_t V = g.model.vocab_size(), B = int64_t(prompts.size());
  if (B == 0) throw ValueError("nn::Generator::generate: no prompts");
  int64_t P = 0;
  for (size_t b = 0; b < prompts.size(); ++b) {
    if (prompts[b].empty()) throw ValueError("nn::Generator::generate: prompt " + std::to_string(b) + " is empty");
    for (int64_t id : prompts[b])
      if (id < 0 || id >= V)
        throw IndexError("nn::Generator::generate: token " + std::to_string(id) + " of prompt " + std::to_string(b) +
                         " is out of range [0, " + std::to_string(V) + ")");
    P = std::max(P, int64_t(prompts[b].size()));
  }
  if (P + o.max_new_tokens - 1 > shape.max_context)
    throw ValueError("nn::Generator::generate: a prompt of " + std::to_string(P) + " tokens and " + std::to_string(o.max_new_tokens) +
                     " new ones exceed the model's context of " + std::to_string(shape.max_context));
  // Prompts padded on the left: every row's last token in column P - 1.
  const size_t rows = static_cast<size_t>(B);
  std::vector<int64_t> ids(rows * size_t(P), 0), starts(rows), seen(rows * size_t(V), 0);
  for (int64_t b = 0; b < B; ++b) {
    const auto& p = prompts[size_t(b)];
    starts[size_t(b)] = P - int64_t(p.size());
    for (size_t t = 0; t < p.size(); ++t) {
      ids[size_t(b * P + starts[size_t(b)]) + t] = p[t];
      seen[size_t(b * V + p[t])] = 1;
    }
  }
  const Tensor start_cols = Tensor::from_vector(starts, {B});
  const Tensor keys = random::split(random::key(o.seed), o.max_new_tokens);
  // The cache holds the columns this call writes, rounded up to a power of two (at least 64):
  // each step reads every column it holds (75 MB for GPT-2's 1024, as much as its weights in i4),
  // and the decode step compiles once for each such length.
  CacheShape columns = shape;
  columns.max_context = std::min(shape.max_context, std::max<int64_t>(64, int64_t(std::bit_ceil(uint64_t(P + o.max_new_tokens - 1)))));
  KVCache cache = KVCache::zeros(columns, B, o.cache_dtype);
  g.step_bytes = 0;
  for (const auto& [name, t] : g.model.state()) g.step_bytes += t.numel() * int64_t(dtype_size(t.dtype()));
  for (const Tensor& t : cache.tensors()) g.step_bytes += t.numel() * int64_t(dtype_size(t.dtype()));
  const std::vector<Tensor> nothing_cached = KVCache::empty(shape, B, o.cache_dtype).tensors();

  std::vector<std::vector<int64_t>> out(rows);
  std::vector<bool> stopped(rows, false);
  std::vector<int64_t> last(rows);
  Tensor seen_tokens = Tensor::from_vector(seen, {B, V}) != int64_t(0);
  // Takes a step's results: the tokens drawn, the seen marks, the fresh keys and values.
  auto take = [&](std::vector<Tensor>& r, int64_t at) {
    const std::vector<int64_t> next = r[0].to_vector<int64_t>();
    seen_tokens = r[1];
    cache.write(at, cache_layers(std::vector<Tensor>(r.begin() + 2, r.end())));
    std::vector<int64_t> shown(rows, -1);
    for (size_t b = 0; b < rows; ++b) {
      last[b] = next[b];
      if (stopped[b]) continue;
      out[b].push_back(next[b]);
      shown[b] = next[b];
      if (o.stop_token && next[b] == *o.stop_token) stopped[b] = true;
    }
    if (on_token) on_token(shown);
  };
  using clock = std::chrono::steady_clock;
  const double compiled_before[2] = {g.prefill.stats().compile_ms, g.decode.stats().compile_ms};
  auto t0 = clock::now();
  std::vector<Tensor> r = g.prefill(Tensor::from_vector(ids, {B, P}), Tensor::scalar(0, DType::I64), start_cols, seen_tokens, keys[0],
                                    nothing_cached);
  take(r, 0);
  auto t1 = clock::now();
  g.prefill_compile_ms = g.prefill.stats().compile_ms - compiled_before[0];
  g.prefill_ms = std::chrono::duration<double, std::milli>(t1 - t0).count() - g.prefill_compile_ms;
  g.steps = 0;
  for (int64_t i = 1; i < o.max_new_tokens; ++i) {
    bool all = true;
    for (bool s : stopped) all = all && s;
    if (all) break;
    const int64_t at = P + i - 1;
    r = g.decode(Tensor::from_vector(last, {B, 1}), Tensor::scalar(double(at), DType::I64), start_cols, seen_tokens, keys[i], cache.tensors());
    take(r, at);
    ++g.steps;
  }
  g.decode_compile_ms = g.decode.stats().compile_ms - compiled_before[1];
  g.decode_ms = std::chrono::duration<double, std::milli>(clock::now() - t1).count() - g.decode_compile_ms;
  return out;
}

GenerationStats Generator::stats() const {
  const Impl& g = *impl_;
  return GenerationStats{g.prefill.stats(), g.decode.stats(), g.prefill_ms, g.decode_ms, g.prefill_compile_ms, g.decode_compile_ms, g.steps, g.step_bytes};
}

}  // namespace hjit::nn
