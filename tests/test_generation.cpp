// Token generation: a GPT-2's cached steps against its full forward pass (the oracle: every
// position recomputed), left-padded batches of different lengths, the Generator's greedy tokens
// against a loop that recomputes everything, one compile for every position, sampling's filters,
// and the in-place writes the cache takes.
#include <algorithm>
#include <cmath>
#include <map>

#include <hjit/nn.h>

#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;
namespace nn = hjit::nn;

namespace {

nn::GPT2Config tiny() { return {.vocab_size = 37, .n_positions = 24, .n_embd = 16, .n_head = 2, .n_layer = 2}; }

double max_rel_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(double(x[i]) - y[i]) / (1 + std::abs(double(y[i]))));
  return worst;
}

bool same(const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && a.to_vector<float>() == b.to_vector<float>(); }

Tensor ids_of(const std::vector<int64_t>& v) { return Tensor::from_vector(v, {1, int64_t(v.size())}); }

// The greedy continuation of a prompt recomputed from scratch at every token (eager).
std::vector<int64_t> greedy_by_recomputing(nn::GPT2& model, std::vector<int64_t> ids, int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    const Tensor logits = model(ids_of(ids));
    const int64_t next = hjit::argmax(hjit::slice(logits, 1, -1, std::nullopt).reshape({-1}), 0).item<int64_t>();
    out.push_back(next);
    ids.push_back(next);
  }
  return out;
}

}  // namespace

TEST_CASE("a GPT-2's cached steps (prefill, then one column at a time) equal its full forward pass") {
  nn::manual_seed(3);
  nn::GPT2 model(tiny());
  const Tensor ids = test::random({2, 10}, DType::U8, 1).astype(DType::I64) * int64_t(3);  // ids in [0, 30]
  const Tensor full = model(ids);
  nn::KVCache cache = nn::KVCache::zeros(model.cache_shape(), 2);
  const Tensor starts = Tensor::zeros({2}, DType::I64);
  std::vector<Tensor> fresh;
  const Tensor first =
      model.step(hjit::slice(ids, 1, 0, 6), Tensor::scalar(0, DType::I64), starts, nn::KVCache::empty(model.cache_shape(), 2).layers, fresh);
  CHECK(max_rel_diff(first, hjit::slice(full, 1, 0, 6)) < 1e-5);
  cache.write(0, nn::stored_columns(fresh, DType::F32));
  for (int64_t c = 6; c < 10; ++c) {
    fresh.clear();
    const Tensor logits = model.step(hjit::slice(ids, 1, c, c + 1), Tensor::scalar(double(c), DType::I64), starts, cache.layers, fresh);
    CHECK(max_rel_diff(logits, hjit::slice(full, 1, c, c + 1)) < 1e-5);
    cache.write(c, nn::stored_columns(fresh, DType::F32));
  }
  // The same steps compiled: one trace for every column.
  auto step = hjit::jit([&](const Tensor& x, const Tensor& at, const std::vector<Tensor>& kv) {
    std::vector<Tensor> f;
    return model.step(x, at, starts, nn::cache_layers(kv), f);
  });
  for (int64_t c = 6; c < 10; ++c)
    CHECK(max_rel_diff(step(hjit::slice(ids, 1, c, c + 1), Tensor::scalar(double(c), DType::I64), cache.tensors()), hjit::slice(full, 1, c, c + 1)) <
          1e-5);
  CHECK(step.stats().traces == 1);
}

TEST_CASE("a cache in bf16, f16 or i8: steps within the type's rounding of the f32 cache's, half or a quarter the bytes a step reads") {
  nn::manual_seed(8);
  nn::GPT2 model(tiny());
  const std::vector<std::vector<int64_t>> prompts{{1, 2, 3, 4, 5}, {7, 9}};
  nn::Generator exact(model, {.max_new_tokens = 6, .sampling = {.temperature = 0}});
  const auto want = exact.generate(prompts);
  for (DType dt : {DType::BF16, DType::F16, DType::I8}) {
    CAPTURE(hjit::dtype_name(dt));
    // The steps' logits against the full forward pass, the cache rounded once.
    const Tensor ids = Tensor::from_vector<int64_t>({3, 1, 4, 1, 5, 9, 2, 6}, {1, 8});
    const Tensor full = model(ids);
    nn::KVCache cache = nn::KVCache::zeros(model.cache_shape(), 1, dt);
    const Tensor starts = Tensor::zeros({1}, DType::I64);
    std::vector<Tensor> fresh;
    model.step(hjit::slice(ids, 1, 0, 4), Tensor::scalar(0, DType::I64), starts, nn::KVCache::empty(model.cache_shape(), 1, dt).layers, fresh);
    cache.write(0, nn::stored_columns(fresh, dt));
    for (int64_t c = 4; c < 8; ++c) {
      fresh.clear();
      const Tensor logits = model.step(hjit::slice(ids, 1, c, c + 1), Tensor::scalar(double(c), DType::I64), starts, cache.layers, fresh);
      const double off = max_rel_diff(logits, hjit::slice(full, 1, c, c + 1));
      CHECK(off > 0);
      CHECK(off < (dt == DType::F16 ? 3e-3 : 2e-2));
      cache.write(c, nn::stored_columns(fresh, dt));
    }
    nn::Generator gen(model, {.max_new_tokens = 6, .sampling = {.temperature = 0}, .cache_dtype = dt});
    CHECK(gen.generate(prompts) == want);  // (the rounding moves none of this model's greedy choices)
    CHECK(gen.stats().step_bytes < exact.stats().step_bytes);
    int64_t weights = 0;
    for (const auto& [n, t] : model.state()) weights += t.numel() * 4;
    const int64_t f32_cache = exact.stats().step_bytes - weights;  // 16 columns of 2 layers, 2 heads of 8
    // (i8: a byte a value and an f32 scale a column of each head: 8 + 4 bytes for 32)
    CHECK(gen.stats().step_bytes - weights == (dt == DType::I8 ? f32_cache * 12 / 32 : f32_cache / 2));
  }
  CHECK_THROWS_WITH_AS(nn::Generator(model, {.cache_dtype = DType::I64}), doctest::Contains("a key/value cache is f32, bf16, f16 or i8"),
                       hjit::ValueError);
}

TEST_CASE("an i8 cache: levels and a scale a column of each head, read as the f32 cache of their products") {
  // Keys of 3 columns of 2 heads, one column all zeros.
  Tensor x = test::random({1, 2, 3, 8}, DType::F32, 21) * 3.0;
  x = hjit::where(hjit::iota({1, 1, 3, 1}, 2, DType::I64) == int64_t(1), 0.0, x);
  const std::vector<nn::LayerCache> stored = nn::stored_columns({x, x * -0.5}, DType::I8);
  REQUIRE(stored.size() == 1);
  const nn::LayerCache& c = stored[0];
  CHECK(c.keys.dtype() == DType::I8);
  // (keys stored transposed, [B, H, D, S], and their scales [B, H, 1, S]; values as they come)
  CHECK(c.keys.shape() == Shape{1, 2, 8, 3});
  CHECK(c.key_scales.shape() == Shape{1, 2, 1, 3});
  CHECK(c.value_scales.shape() == Shape{1, 2, 3, 1});
  const std::vector<float> xs = x.to_vector<float>(), ks = c.key_scales.to_vector<float>();
  const std::vector<int8_t> levels = hjit::transpose(c.keys, {0, 1, 3, 2}).to_vector<int8_t>();
  for (size_t col = 0; col < 6; ++col) {
    float top = 0;
    for (size_t d = 0; d < 8; ++d) top = std::max(top, std::abs(xs[col * 8 + d]));
    CHECK(ks[col] == doctest::Approx(top > 0 ? top / 127 : 1).epsilon(1e-6));
    int most = 0;
    for (size_t d = 0; d < 8; ++d) {
      const int level = levels[col * 8 + d];
      most = std::max(most, std::abs(level));
      CHECK(std::abs(level * ks[col] - xs[col * 8 + d]) <= ks[col] * 0.5f * 1.0001f);  // the nearest level
    }
    CHECK(most == (top > 0 ? 127 : 0));
  }
  // The attention over it equals the attention over its levels times their scales in f32, eager
  // and compiled (the scales multiply the scores and probabilities, not a copy of the cache).
  const Tensor q = test::random({1, 2, 1, 8}, DType::F32, 22), k = test::random({1, 2, 1, 8}, DType::F32, 23),
               v = test::random({1, 2, 1, 8}, DType::F32, 24);
  const Tensor at = Tensor::scalar(3, DType::I64), starts = Tensor::zeros({1}, DType::I64);
  const nn::LayerCache widened{c.keys.astype(DType::F32) * c.key_scales, c.values.astype(DType::F32) * c.value_scales};
  const Tensor want = nn::cached_attention(q, k, v, widened, at, starts);
  CHECK(max_rel_diff(nn::cached_attention(q, k, v, c, at, starts), want) < 1e-6);
  auto compiled = hjit::jit([&](const Tensor& a, const std::vector<Tensor>& kv) { return nn::cached_attention(q, k, v, nn::cache_layers(kv)[0], a, starts); });
  CHECK(max_rel_diff(compiled(at, nn::cache_tensors(stored)), want) < 1e-6);

  // What it refuses.
  CHECK_THROWS_AS(nn::cache_layers({c.keys, c.values, c.key_scales}), hjit::ValueError);
  CHECK_THROWS_AS(nn::cached_attention(q, k, v, nn::LayerCache{c.keys, c.values}, at, starts), hjit::ValueError);
  CHECK_THROWS_AS(nn::cached_attention(q, k, v, nn::LayerCache{widened.keys, widened.values, c.key_scales, c.value_scales}, at, starts),
                  hjit::ValueError);
  CHECK_THROWS_AS(nn::cached_attention(q, k, v, nn::LayerCache{c.keys, c.values, c.key_scales.reshape({1, 2, 3, 1}), c.value_scales}, at, starts),
                  hjit::ShapeError);
  CHECK_THROWS_WITH_AS(nn::cached_attention(q, k, v, nn::LayerCache{hjit::transpose(widened.keys, {0, 1, 3, 2}), widened.values}, at, starts),
                       doctest::Contains("[1, 2, 8, T] (transposed)"), hjit::ShapeError);
  CHECK_THROWS_AS(nn::stored_columns({x}, DType::I8), hjit::ValueError);
  CHECK_THROWS_AS(nn::stored_columns({x, x}, DType::I32), hjit::ValueError);
  CHECK_THROWS_AS(nn::KVCache::zeros({1, 2, 8, 4}, 1, DType::U8), hjit::ValueError);
  nn::KVCache f32 = nn::KVCache::zeros({1, 2, 8, 4}, 1);
  CHECK_THROWS_WITH_AS(f32.write(0, stored), doctest::Contains("columns of i8 for a cache of f32"), hjit::ValueError);
  CHECK_THROWS_AS(f32.write(0, {}), hjit::ValueError);
  // Columns not yet written read as zeros; written ones as stored.
  nn::KVCache i8 = nn::KVCache::zeros({1, 2, 8, 6}, 1, DType::I8);
  i8.write(2, stored);
  CHECK(same(hjit::slice(i8.layers[0].key_scales, 3, 2, 5), c.key_scales));
  CHECK(same(hjit::slice(i8.layers[0].value_scales, 2, 2, 5), c.value_scales));
  CHECK(same(hjit::slice(i8.layers[0].keys, 3, 2, 5).astype(DType::F32), c.keys.astype(DType::F32)));
  CHECK(same(hjit::slice(i8.layers[0].values, 2, 2, 5).astype(DType::F32), c.values.astype(DType::F32)));
  CHECK(same(hjit::slice(i8.layers[0].keys, 3, 0, 2).astype(DType::F32), Tensor::zeros({1, 2, 8, 2})));
  CHECK(same(hjit::slice(i8.layers[0].keys, 3, 5, 6).astype(DType::F32), Tensor::zeros({1, 2, 8, 1})));
  // Columns past either end, or keys not transposed, are refused (never clipped or broadcast).
  CHECK_THROWS_WITH_AS(i8.write(4, stored), doctest::Contains("columns [4, 7) of a cache of 6 columns"), hjit::IndexError);
  CHECK_THROWS_AS(i8.write(-1, stored), hjit::IndexError);
  nn::LayerCache untransposed = c;
  untransposed.keys = hjit::transpose(c.keys, {0, 1, 3, 2});
  CHECK_THROWS_WITH_AS(i8.write(0, {untransposed}), doctest::Contains("(transposed, as nn::stored_columns gives them)"), hjit::ShapeError);
  untransposed.values = c.values.reshape({2, 3, 8});
  CHECK_THROWS_AS(i8.write(0, {untransposed}), hjit::ShapeError);
}

TEST_CASE("rows padded on the left see only their own tokens") {
  nn::manual_seed(4);
  nn::GPT2 model(tiny());
  const std::vector<int64_t> a{5, 9, 2, 30, 7, 11, 4}, b{8, 1, 19, 6};
  std::vector<int64_t> padded(a);
  padded.insert(padded.end(), {0, 0, 0});
  padded.insert(padded.end(), b.begin(), b.end());
  std::vector<Tensor> fresh;
  const Tensor starts = Tensor::from_vector(std::vector<int64_t>{0, 3}, {2});
  const Tensor logits =
      model.step(Tensor::from_vector(padded, {2, 7}), Tensor::scalar(0, DType::I64), starts, nn::KVCache::empty(model.cache_shape(), 2).layers, fresh);
  CHECK(max_rel_diff(hjit::slice(logits, 0, 0, 1), model(ids_of(a))) < 1e-5);
  CHECK(max_rel_diff(hjit::slice(hjit::slice(logits, 0, 1, 2), 1, 3, 7), model(ids_of(b))) < 1e-5);
  // A decode step after both: row b's next column is its fifth token.
  nn::KVCache cache = nn::KVCache::zeros(model.cache_shape(), 2);
  cache.write(0, nn::stored_columns(fresh, DType::F32));
  fresh.clear();
  const Tensor next = model.step(Tensor::from_vector(std::vector<int64_t>{3, 12}, {2, 1}), Tensor::scalar(7, DType::I64), starts,
                                 cache.layers, fresh);
  std::vector<int64_t> a2(a), b2(b);
  a2.push_back(3), b2.push_back(12);
  CHECK(max_rel_diff(hjit::slice(next, 0, 0, 1), hjit::slice(model(ids_of(a2)), 1, -1, std::nullopt)) < 1e-5);
  CHECK(max_rel_diff(hjit::slice(next, 0, 1, 2), hjit::slice(model(ids_of(b2)), 1, -1, std::nullopt)) < 1e-5);
}

TEST_CASE("the Generator's greedy tokens are those of recomputing every position, with one compile for every position") {
  nn::manual_seed(5);
  nn::GPT2 model(tiny());
  const std::vector<std::vector<int64_t>> prompts{{1, 2, 3, 4, 5}, {7}, {30, 20, 10, 0}};
  nn::Generator gen(model, {.max_new_tokens = 8, .sampling = {.temperature = 0}});
  std::vector<std::vector<int64_t>> streamed;
  const auto out = gen.generate(prompts, [&](const std::vector<int64_t>& t) { streamed.push_back(t); });
  REQUIRE(out.size() == 3);
  for (size_t b = 0; b < prompts.size(); ++b) {
    CHECK(out[b] == greedy_by_recomputing(model, prompts[b], 8));
    for (size_t i = 0; i < 8; ++i) CHECK(streamed.at(i).at(b) == out[b][i]);
  }
  CHECK(streamed.size() == 8);
  // Other prompt lengths and positions (the batch's size is part of the signature): no new decode
  // step, one prefill pipeline for every length.
  const std::vector<std::vector<int64_t>> longer{{3, 3, 3, 3, 3, 3, 3, 3, 3}, {4, 4}, {9, 8, 7}};
  const auto again = gen.generate(longer);
  for (size_t b = 0; b < longer.size(); ++b) CHECK(again[b] == greedy_by_recomputing(model, longer[b], 8));
  const nn::GenerationStats s = gen.stats();
  CHECK(s.decode.traces == 1);
  CHECK(s.decode.compiles <= 1);  // (0 where the disk cache had it)
  CHECK(s.decode.cache_hits == 13);  // 7 steps a call, the first traced
  CHECK(s.decode_steps == 7);
  CHECK(s.prefill.dynamic_entries == 1);
  MESSAGE("prefill: " << s.prefill.traces << " traces, " << s.prefill.entries << " entries; " << s.prefill.recompile_warning);
}

TEST_CASE("the Generator stops a row at its stop token, and checks what it is given") {
  nn::manual_seed(6);
  nn::GPT2 model(tiny());
  const std::vector<int64_t> greedy = greedy_by_recomputing(model, {2, 4, 6}, 6);
  nn::Generator gen(model, {.max_new_tokens = 6, .sampling = {.temperature = 0}, .stop_token = greedy[2]});
  std::vector<std::vector<int64_t>> streamed;
  const auto out = gen.generate({{2, 4, 6}}, [&](const std::vector<int64_t>& t) { streamed.push_back(t); });
  const auto stop = std::find(greedy.begin(), greedy.end(), greedy[2]);
  CHECK(out[0] == std::vector<int64_t>(greedy.begin(), stop + 1));
  CHECK(streamed.size() == out[0].size());

  CHECK_THROWS_AS(gen.generate({{}}), hjit::ValueError);
  CHECK_THROWS_AS(gen.generate({}), hjit::ValueError);
  CHECK_THROWS_AS(gen.generate({{1, 37}}), hjit::IndexError);
  CHECK_THROWS_AS(gen.generate({{-1}}), hjit::IndexError);
  CHECK_THROWS_AS(gen.generate({std::vector<int64_t>(20, 1)}), hjit::ValueError);  // 20 + 6 - 1 > 24 columns
  CHECK_NOTHROW(gen.generate({std::vector<int64_t>(19, 1)}));
  CHECK_THROWS_AS(nn::Generator(model, {.max_new_tokens = 0}), hjit::ValueError);
  CHECK_THROWS_AS(nn::Generator(model, {.sampling = {.temperature = -1}}), hjit::ValueError);
  CHECK_THROWS_AS(nn::Generator(model, {.sampling = {.top_k = -2}}), hjit::ValueError);
  CHECK_THROWS_AS(nn::Generator(model, {.sampling = {.top_p = 0}}), hjit::ValueError);
  CHECK_THROWS_AS(nn::Generator(model, {.sampling = {.top_p = 1.5}}), hjit::ValueError);
  CHECK_THROWS_AS(nn::Generator(model, {.sampling = {.repetition_penalty = 0}}), hjit::ValueError);
  CHECK_THROWS_AS(nn::GPT2({.n_embd = 10, .n_head = 3}), hjit::ValueError);
  CHECK_THROWS_AS(nn::GPT2({.n_layer = 0}), hjit::ValueError);
}

TEST_CASE("sampling: filters keep only their tokens, draws follow the distribution, eager and compiled alike") {
  // Probabilities 0.4, 0.3, 0.2, 0.1 (and nothing else) in every row.
  const int64_t rows = 4000;
  const Tensor logits = hjit::broadcast_to(hjit::log(test::f32({0.4f, 0.3f, 0.2f, 0.1f, 1e-30f}, {1, 5})), {rows, 5});
  const Tensor none = Tensor::zeros({rows, 5}, DType::Bool);
  const Tensor key = hjit::random::key(11);
  auto counts = [&](const Tensor& tokens) {
    std::map<int64_t, int64_t> c;
    for (int64_t t : tokens.to_vector<int64_t>()) ++c[t];
    return c;
  };
  auto c = counts(nn::sample_tokens(key, logits, none, {}));
  for (auto [token, p] : std::vector<std::pair<int64_t, double>>{{0, 0.4}, {1, 0.3}, {2, 0.2}, {3, 0.1}})
    CHECK(std::abs(double(c[token]) / rows - p) < 0.03);
  c = counts(nn::sample_tokens(key, logits, none, {.top_k = 2}));
  CHECK(c.size() == 2);
  CHECK(std::abs(double(c[0]) / rows - 4.0 / 7) < 0.03);
  c = counts(nn::sample_tokens(key, logits, none, {.top_p = 0.65}));  // 0.4 + 0.3 reach it
  CHECK(c.size() == 2);
  CHECK(c.count(0) == 1);
  CHECK(c.count(1) == 1);
  c = counts(nn::sample_tokens(key, logits, none, {.top_k = 3, .top_p = 0.35}));  // the first alone reaches it
  CHECK(c == std::map<int64_t, int64_t>{{0, rows}});
  CHECK(counts(nn::sample_tokens(key, logits, none, {.top_k = 1})) == std::map<int64_t, int64_t>{{0, rows}});
  CHECK(counts(nn::sample_tokens(key, logits, none, {.temperature = 0})) == std::map<int64_t, int64_t>{{0, rows}});
  // A low temperature sharpens: the most likely token nearly always.
  CHECK(counts(nn::sample_tokens(key, logits, none, {.temperature = 0.05}))[0] > rows * 0.99);
  // The repetition penalty: token 0 seen, divided by 100 (its logit is negative: multiplied).
  const Tensor seen0 = hjit::broadcast_to(test::f32({1, 0, 0, 0, 0}, {1, 5}) != 0.0, {rows, 5});
  CHECK(counts(nn::sample_tokens(key, logits, seen0, {.temperature = 0, .repetition_penalty = 100}))[1] == rows);
  const Tensor positive = test::f32({2.0f, 1.5f, -1, -1, -1}, {1, 5}), seen_first = test::f32({1, 0, 0, 0, 0}, {1, 5}) != 0.0;
  CHECK(nn::sample_tokens(key, positive, seen_first, {.temperature = 0, .repetition_penalty = 2}).item<int64_t>() == 1);  // 2/2 < 1.5
  CHECK(nn::sample_tokens(key, positive, seen_first, {.temperature = 0, .repetition_penalty = 1.2}).item<int64_t>() == 0);

  // A vocabulary of 9000 (cut in blocks for top-k): every draw among the 40 largest, most of them
  // drawn (the logits nearly equal), eager and compiled alike.
  const Tensor flat = hjit::broadcast_to(test::random({1, 9000}, DType::F32, 4) * 0.01, {400, 9000});
  const Tensor unseen = Tensor::zeros({400, 9000}, DType::Bool);
  const float fortieth = hjit::topk(hjit::slice(flat, 0, 0, 1), 40, 1).first.to_vector<float>().back();
  const std::vector<float> row = hjit::slice(flat, 0, 0, 1).to_vector<float>();
  auto top40 = hjit::jit([&](const Tensor& k, const Tensor& l, const Tensor& s) { return nn::sample_tokens(k, l, s, {.top_k = 40}); });
  const Tensor drawn = top40(key, flat, unseen);
  CHECK(drawn.to_vector<int64_t>() == nn::sample_tokens(key, flat, unseen, {.top_k = 40}).to_vector<int64_t>());
  const auto picked = counts(drawn);
  for (auto [token, n] : picked) CHECK(row.at(size_t(token)) >= fortieth);
  CHECK(picked.size() > 30);

  // Compiled, the same tokens for the same keys.
  const nn::SamplingOptions o{.temperature = 0.7, .top_k = 3, .top_p = 0.9, .repetition_penalty = 1.3};
  auto f = hjit::jit([&](const Tensor& k, const Tensor& l, const Tensor& s) { return nn::sample_tokens(k, l, s, o); });
  const Tensor wide = test::random({6, 50}, DType::F32, 2), seen = test::random({6, 50}, DType::Bool, 3);
  for (uint64_t k = 0; k < 4; ++k) {
    const Tensor key_k = hjit::random::key(k);
    CHECK(f(key_k, wide, seen).to_vector<int64_t>() == nn::sample_tokens(key_k, wide, seen, o).to_vector<int64_t>());
  }
  CHECK_THROWS_AS(nn::sample_tokens(key, wide, Tensor::zeros({6, 49}, DType::Bool), {}), hjit::ShapeError);
}

TEST_CASE("x[...] = value on a host tensor writes the region in place, as index_update computes it") {
  Tensor x = test::random({3, 4, 5}, DType::F32, 7);
  const Tensor before = x.clone();
  const void* storage = x.data();
  const Tensor v = test::random({3, 2, 5}, DType::F32, 8);
  x.assign_slice(1, 1, 3, v);
  CHECK(x.data() == storage);
  CHECK(same(x, hjit::slice_update(before, v, 1, 1, 3)));
  // Integers, strided and reversed slices, a broadcast value of another dtype.
  Tensor y = before.clone();
  y.assign({1, hjit::Slice(std::nullopt, std::nullopt, -2), hjit::Slice(1, 4)}, Tensor::scalar(5, DType::I32));
  CHECK(same(y, hjit::index_update(before, {1, hjit::Slice(std::nullopt, std::nullopt, -2), hjit::Slice(1, 4)}, Tensor::scalar(5, DType::I32))));
  Tensor z = before.clone();
  z.assign_slice(2, 0, 5, test::random({3, 4, 3}, DType::F32, 9), 2);
  CHECK(same(z, hjit::slice_update(before, test::random({3, 4, 3}, DType::F32, 9), 2, 0, 5, 2)));
  // One column of the last axis (a cache's keys stored transposed), of one and two bytes an
  // element, and a region with size-1 axes between longer ones.
  for (DType dt : {DType::I8, DType::BF16}) {
    Tensor keys = test::random({2, 3, 4, 6}, dt, 10);
    const Tensor was = keys.clone(), column = test::random({2, 3, 4, 1}, dt, 11);
    keys.assign_slice(3, 4, 5, column);
    CHECK(same(keys.astype(DType::F32), hjit::slice_update(was, column, 3, 4, 5).astype(DType::F32)));
  }
  Tensor w = before.clone();
  const Tensor corner = test::random({3, 1, 2}, DType::F32, 12);
  w.assign({hjit::Slice(), hjit::Slice(2, 3), hjit::Slice(1, 5, 3)}, corner);
  CHECK(same(w, hjit::index_update(before, {hjit::Slice(), hjit::Slice(2, 3), hjit::Slice(1, 5, 3)}, corner)));
  Tensor reversed = before.clone();  // the last axis walked backwards
  const Tensor backwards = test::random({3, 4, 3}, DType::F32, 13);
  reversed.assign({hjit::Slice(), hjit::Slice(), hjit::Slice(4, std::nullopt, -2)}, backwards);
  CHECK(same(reversed, hjit::index_update(before, {hjit::Slice(), hjit::Slice(), hjit::Slice(4, std::nullopt, -2)}, backwards)));
  // A zeros tensor written in place, then read by a jitted function: the new values.
  Tensor cache = Tensor::zeros({2, 3});
  cache.assign({0, hjit::Slice(1, 2)}, Tensor::scalar(4));
  auto twice = hjit::jit([&](const Tensor& a) { return a + cache; });
  CHECK(test::vals(twice(Tensor::zeros({2, 3}))) == std::vector<float>{0, 4, 0, 0, 0, 0});
  // Handles that share storage see the write (assign's semantics); clones do not.
  Tensor shared = x, copy = x.clone();
  x.assign({0, 0, 0}, Tensor::scalar(-9));
  CHECK(shared[{0, 0, 0}].item<float>() == -9);
  CHECK(copy[{0, 0, 0}].item<float>() != -9);
  CHECK_THROWS_AS(x.assign_slice(1, 0, 2, Tensor::zeros({3, 3, 5})), hjit::ShapeError);
  CHECK_THROWS_AS(x.assign({5}, Tensor::scalar(1)), hjit::IndexError);
}
