// Weight-only quantization (nn::quantize_weights): the rounding and the i4 layout, every layer's
// quantized forward against its f32 forward over the dequantized weight (eager and compiled, the
// matrix-vector products that stream the narrow weight included), checkpoints, a GPT-2's tokens
// against recomputing every position, and every refusal.
#include <cmath>

#include <hjit/jit.h>
#include <hjit/nn.h>

#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;
namespace nn = hjit::nn;

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(double(x[i]) - y[i]));
  return worst;
}

double max_abs(const Tensor& a) {
  double m = 0;
  for (float v : a.to_vector<float>()) m = std::max(m, std::abs(double(v)));
  return m;
}

const nn::WeightOnlyOptions kConfigs[] = {{.bits = 8}, {.bits = 8, .group_size = 16}, {.bits = 4, .group_size = 32}, {.bits = 4, .group_size = 64}};

std::string name(const nn::WeightOnlyOptions& o) { return "int" + std::to_string(o.bits) + " groups of " + std::to_string(o.group_size); }

}  // namespace

TEST_CASE("weights round to the nearest level of their row's or group's scale, i4 two to a byte") {
  // A row of multiples of its scale (3.5 / 7) comes back exactly.
  std::vector<float> v(32);
  for (size_t j = 0; j < 32; ++j) v[j] = 0.5f * float(int(j * 7 % 15) - 7);  // levels -7..7, each twice or more
  const Tensor w = test::f32(v, {1, 32});
  const nn::WeightOnlyState s4 = nn::WeightOnlyState::of(w, 1, {.bits = 4, .group_size = 32}, "w");
  CHECK(s4.scale.shape() == Shape{1, 1, 1});
  CHECK(s4.scale.item<float>() == 0.5f);
  CHECK(s4.q.dtype() == DType::U8);
  REQUIRE(s4.q.shape() == Shape{1, 1, 16});
  const std::vector<uint8_t> bytes = s4.q.to_vector<uint8_t>();
  for (size_t j = 0; j < 16; ++j) {
    CAPTURE(j);
    CHECK(bytes[j] == uint8_t(int(j * 7 % 15) + 1 + 16 * (int((j + 16) * 7 % 15) + 1)));  // level + 8, low half first
  }
  CHECK(max_abs_diff(s4.weight(), w) == 0);
  // [in, out] weights are stored [out, in] and come back in their own layout.
  const nn::WeightOnlyState t4 = nn::WeightOnlyState::of(hjit::transpose(w), 0, {.bits = 4, .group_size = 32}, "w");
  CHECK(t4.q.shape() == Shape{1, 1, 16});
  CHECK(t4.q.to_vector<uint8_t>() == bytes);
  CHECK(max_abs_diff(t4.weight(), hjit::transpose(w)) == 0);

  const Tensor r = test::random({6, 64}, DType::F32, 3) * 4.0;
  for (const nn::WeightOnlyOptions& o : kConfigs) {
    CAPTURE(name(o));
    for (int axis : {1, 0}) {
      const Tensor wt = axis == 1 ? r : hjit::transpose(r);
      const nn::WeightOnlyState s = nn::WeightOnlyState::of(wt, axis, o, "r");
      CHECK(s.q.dtype() == (o.bits == 8 ? DType::I8 : DType::U8));
      // Within half a level of the scale of its row or group, and at most one level off
      // the largest magnitude (which is exact).
      const Tensor back = s.weight();
      REQUIRE(back.shape() == wt.shape());
      const double top = o.bits == 8 ? 127 : 7;
      const int64_t g = o.group_size ? o.group_size : 64;
      for (int64_t row = 0; row < 6; ++row)
        for (int64_t k0 = 0; k0 < 64; k0 += g) {
          const Tensor part = hjit::slice(hjit::slice(r, 0, row, row + 1), 1, k0, k0 + g);
          const Tensor mine = hjit::slice(hjit::slice(axis == 1 ? back : hjit::transpose(back), 0, row, row + 1), 1, k0, k0 + g);
          CHECK(max_abs_diff(mine, part) <= max_abs(part) / top / 2 * 1.0001);
          CHECK(max_abs(mine) == doctest::Approx(max_abs(part)));
        }
    }
  }
  // A zero row has scale 1 and levels 0.
  const nn::WeightOnlyState z = nn::WeightOnlyState::of(Tensor::zeros({2, 4}), 1, {}, "z");
  CHECK(z.scale.to_vector<float>() == std::vector<float>{1, 1});
  CHECK(max_abs(z.weight()) == 0);
}

TEST_CASE("quantized Linear, Embedding and GPT2Conv1D equal their f32 forward over the dequantized weight, eager and compiled") {
  for (const nn::WeightOnlyOptions& o : kConfigs) {
    CAPTURE(name(o));
    nn::manual_seed(7);
    nn::Linear lin(64, 96);
    nn::GPT2Conv1D conv(64, 80);
    nn::init::normal_(conv.weight, 0, 0.5), nn::init::normal_(conv.bias, 0, 0.5);
    nn::Embedding emb(50, 64, 3);
    CHECK(nn::quantize_weights(lin, o) == 1);
    CHECK(nn::quantize_weights(conv, o) == 1);
    CHECK(nn::quantize_weights(emb, o) == 1);
    CHECK(!lin.weight.defined());
    CHECK(lin.parameters().size() == 1);  // the bias; the weight is buffers now
    CHECK(lin.buffers().size() == 2);
    const Tensor lw = lin.weight_only.weight(), cw = conv.weight_only.weight(), ew = emb.weight_only.weight();
    auto lin_jit = hjit::jit([&](const Tensor& x) { return lin(x); });
    auto conv_jit = hjit::jit([&](const Tensor& x) { return conv(x); });
    // Rows: a matrix-vector product (the narrow weight streamed), a few, many, none, batched.
    for (const Shape& shape : {Shape{1, 64}, Shape{3, 64}, Shape{8, 64}, Shape{33, 64}, Shape{0, 64}, Shape{2, 3, 64}, Shape{64}}) {
      CAPTURE(hjit::shape_str(shape));
      const Tensor x = test::random(shape, DType::F32, 11);
      const Tensor lin_ref = hjit::matmul(x, hjit::transpose(lw)) + lin.bias;
      const Tensor conv_ref = hjit::matmul(x, cw) + conv.bias;
      CHECK(max_abs_diff(lin(x), lin_ref) < 1e-4);
      CHECK(max_abs_diff(lin_jit(x), lin_ref) < 1e-4);
      CHECK(max_abs_diff(conv(x), conv_ref) < 1e-4);
      CHECK(max_abs_diff(conv_jit(x), conv_ref) < 1e-4);
      if (shape == Shape{1, 64}) {  // one row: dot products along K that read the narrow weight
        const std::string plan = lin_jit.explain(x);
        CHECK(plan.find("along k") != std::string::npos);
        CHECK(plan.find(": root") == std::string::npos);  // no f32 copy of the weight
      }
    }
    const Tensor ids = Tensor::from_vector<int64_t>({0, 3, 49, 7, 7, 12}, {2, 3});
    const Tensor rows = emb(ids);
    CHECK(rows.shape() == Shape{2, 3, 64});
    CHECK(max_abs_diff(rows, hjit::embedding(ew, ids) * hjit::unsqueeze(ids != int64_t(3), -1).astype(DType::F32)) == 0);
    auto emb_jit = hjit::jit([&](const Tensor& i) { return emb(i); });
    CHECK(max_abs_diff(emb_jit(ids), rows) == 0);
    CHECK_THROWS_AS(emb(Tensor::from_vector<int64_t>({50}, {1})), hjit::IndexError);
    CHECK_THROWS_AS(lin(Tensor::zeros({2, 63})), hjit::ShapeError);
    CHECK_THROWS_AS(conv(Tensor::zeros({2, 65})), hjit::ShapeError);
  }
}

TEST_CASE("a model with quantized weights saves and loads them, and quantize_weights refuses what it cannot do") {
  const std::string path = test::scratch_dir("weight_only") + "/model.hjit";
  nn::manual_seed(2);
  nn::Linear a(32, 8);
  nn::quantize_weights(a, {.bits = 4, .group_size = 32});
  nn::save_checkpoint(path, a);
  nn::manual_seed(3);
  nn::Linear b(32, 8);
  nn::quantize_weights(b, {.bits = 4, .group_size = 32});
  const Tensor x = test::random({2, 32}, DType::F32, 1);
  CHECK(max_abs_diff(b(x), a(x)) > 0);
  nn::load_checkpoint(path, b);
  CHECK(max_abs_diff(b(x), a(x)) == 0);

  nn::Linear c(32, 8);
  CHECK_THROWS_WITH_AS(nn::quantize_weights(c, {.bits = 3}), doctest::Contains("bits must be 8 or 4"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(nn::quantize_weights(c, {.bits = 4}), doctest::Contains("4-bit weights need groups of a multiple of 32"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(nn::quantize_weights(c, {.bits = 4, .group_size = 48}), doctest::Contains("a multiple of 32"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(nn::quantize_weights(c, {.group_size = -2}), doctest::Contains("or positive"), hjit::ValueError);
  struct Two : nn::Module {
    nn::Linear first{64, 8}, second{96, 8};
    Two() { register_module("first", first), register_module("second", second); }
  } two;
  CHECK_THROWS_WITH_AS(nn::quantize_weights(two, {.group_size = 64}), doctest::Contains("layer 'second' has 96 input features"), hjit::ValueError);
  CHECK(two.first.weight.defined());  // a refusal changes nothing
  CHECK(!two.first.weight_only.on());
  CHECK(nn::quantize_weights(two, {.group_size = 32, .keep_float = true}) == 2);
  CHECK(two.first.weight.defined());
  CHECK(nn::quantize_weights(two, {.bits = 4, .group_size = 32}) == 2);  // again, from the float weights
  CHECK(two.first.weight_only.bits == 4);
  CHECK_THROWS_WITH_AS(nn::quantize_weights(two), doctest::Contains("its float weight was released"), hjit::ValueError);
  nn::Linear d(16, 4);
  nn::quantize(d, [&] { d(test::random({4, 16}, DType::F32, 1)); });
  CHECK_THROWS_WITH_AS(nn::quantize_weights(d), doctest::Contains("quantized to int8 already"), hjit::ValueError);
}

TEST_CASE("a GPT-2 with int8 and int4 weights generates the tokens of recomputing every position, near its f32 logits") {
  const nn::GPT2Config config{.vocab_size = 64, .n_positions = 24, .n_embd = 64, .n_head = 4, .n_layer = 2};
  nn::manual_seed(4);
  nn::GPT2 f32(config);
  const Tensor ids = Tensor::from_vector<int64_t>({5, 9, 2, 33, 63, 0, 17, 8}, {2, 4});
  const Tensor exact = f32(ids);
  for (const nn::WeightOnlyOptions& o : {nn::WeightOnlyOptions{.bits = 8}, nn::WeightOnlyOptions{.bits = 4, .group_size = 32}}) {
    CAPTURE(name(o));
    nn::manual_seed(4);
    nn::GPT2 model(config);
    CHECK(nn::quantize_weights(model, o) == 1 + 1 + 4 * 2);  // wte, wpe, four projections a block
    // Logits near the f32 model's: a few percent of their range for int8.
    const double off = max_abs_diff(model(ids), exact) / max_abs(exact);
    MESSAGE(name(o) << ": logits off by " << off << " of their largest");
    CHECK(off < (o.bits == 8 ? 0.02 : 0.2));
    nn::Generator gen(model, {.max_new_tokens = 6, .sampling = {.temperature = 0}});
    const std::vector<std::vector<int64_t>> prompts{{1, 2, 3}, {40, 41}};
    const auto out = gen.generate(prompts);
    for (size_t b = 0; b < prompts.size(); ++b) {
      std::vector<int64_t> seq = prompts[b];
      for (int i = 0; i < 6; ++i) {
        const Tensor logits = model(Tensor::from_vector(seq, {1, int64_t(seq.size())}));
        seq.push_back(hjit::argmax(hjit::slice(logits, 1, -1, std::nullopt).reshape({-1}), 0).item<int64_t>());
      }
      CHECK(std::vector<int64_t>(seq.begin() + int64_t(prompts[b].size()), seq.end()) == out[b]);
    }
    // Bytes a step reads: the narrow weights, not the released f32 ones.
    int64_t narrow = 0;
    for (const auto& [n, t] : model.state()) narrow += t.numel() * int64_t(hjit::dtype_size(t.dtype()));
    CHECK(gen.stats().step_bytes > narrow);  // and the cache
    CHECK(gen.stats().step_bytes < narrow + 2 * 2 * 2 * 24 * 64 * 4 + 1);
  }
}
