// Ops a new user reaches for first: split and chunk (torch.split, torch.chunk), one_hot, and the
// keyed draws of hjit::random (bernoulli, categorical), eagerly and jitted, against values worked
// out by hand.
#include <cmath>
#include <vector>

#include "tests/support.h"

using hjit::DType;
using hjit::Tensor;
using test::vals;

namespace {

Tensor arange_f32(hjit::Shape shape) {
  return Tensor::arange(hjit::shape_numel(shape)).astype(DType::F32).reshape(shape);
}

}  // namespace

TEST_CASE("split and chunk: pieces along an axis, as PyTorch cuts them") {
  const Tensor x = arange_f32({2, 7});
  for (bool jitted : {false, true}) {
    CAPTURE(jitted);
    auto run = [&](auto fn) { return jitted ? hjit::jit(fn)(x) : fn(x); };
    std::vector<Tensor> p = run([](const Tensor& x) { return hjit::split(x, std::vector<int64_t>{2, 0, 5}, -1); });
    REQUIRE(p.size() == 3);
    CHECK(p[0].shape() == hjit::Shape{2, 2});
    CHECK(p[1].shape() == hjit::Shape{2, 0});
    CHECK(vals(p[0]) == std::vector<float>{0, 1, 7, 8});
    CHECK(vals(p[2]) == std::vector<float>{2, 3, 4, 5, 6, 9, 10, 11, 12, 13});
    // torch.split(x, 3, 1): 3, 3, 1.
    p = run([](const Tensor& x) { return hjit::split(x, int64_t(3), 1); });
    REQUIRE(p.size() == 3);
    CHECK(vals(p[2]) == std::vector<float>{6, 13});
    // torch.chunk(x, 3, 1): ceil(7 / 3) = 3 each: 3, 3, 1; chunk(x, 4, 1): 2, 2, 2, 1.
    p = run([](const Tensor& x) { return hjit::chunk(x, 3, 1); });
    CHECK(p.size() == 3);
    p = run([](const Tensor& x) { return hjit::chunk(x, 4, 1); });
    REQUIRE(p.size() == 4);
    CHECK(vals(p[3]) == std::vector<float>{6, 13});
    // torch.chunk(arange(6), 4): 2, 2, 2 (three pieces: 6 runs out).
    CHECK(hjit::chunk(Tensor::arange(6), 4).size() == 3);
    // Rows: and the pieces concatenate back.
    p = run([](const Tensor& x) { return hjit::chunk(x, 2, 0); });
    REQUIRE(p.size() == 2);
    CHECK(vals(hjit::concat(p, 0)) == vals(x));
  }
  // Gradients flow through the pieces back to the whole.
  auto grad = hjit::grad([](const Tensor& x) {
    auto p = hjit::split(x, std::vector<int64_t>{3, 4}, 1);
    return hjit::sum(p[0] * 2.0) + hjit::sum(p[1] * 3.0);
  })(x);
  CHECK(vals(grad) == std::vector<float>{2, 2, 2, 3, 3, 3, 3, 2, 2, 2, 3, 3, 3, 3});
  CHECK_THROWS_AS(hjit::split(x, std::vector<int64_t>{2, 2}, 1), hjit::ShapeError);
  CHECK_THROWS_AS(hjit::split(x, std::vector<int64_t>{8, -1}, 1), hjit::ValueError);
  CHECK_THROWS_AS(hjit::split(x, int64_t(0), 1), hjit::ValueError);
  CHECK_THROWS_AS(hjit::chunk(x, 0, 1), hjit::ValueError);
  CHECK_THROWS_AS(hjit::chunk(x, 2, 2), hjit::ShapeError);
  CHECK_THROWS_AS(hjit::chunk(Tensor::scalar(1), 2), hjit::ShapeError);
}

TEST_CASE("one_hot: classes as rows of zeros and ones, bad classes as IndexError") {
  const Tensor ids = Tensor::from_vector<int64_t>({2, 0, 3}, {3});
  for (bool jitted : {false, true}) {
    CAPTURE(jitted);
    auto f = [](const Tensor& i) { return hjit::one_hot(i, 4); };
    const Tensor h = jitted ? hjit::jit(f)(ids) : f(ids);
    CHECK(h.shape() == hjit::Shape{3, 4});
    CHECK(h.dtype() == DType::F32);
    CHECK(vals(h) == std::vector<float>{0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1});
    const Tensor bad = Tensor::from_vector<int32_t>({1, 4}, {2});
    CHECK_THROWS_AS(jitted ? hjit::jit(f)(bad) : f(bad), hjit::IndexError);
  }
  CHECK(hjit::one_hot(Tensor::from_vector<int32_t>({1}, {1, 1}), 2, DType::I64).to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK_THROWS_AS(hjit::one_hot(Tensor::ones({2}), 3), hjit::DTypeError);
  CHECK_THROWS_AS(hjit::one_hot(ids, 0), hjit::ValueError);
  // Float ids are named at embedding, not at an op the user never called.
  try {
    hjit::embedding(Tensor::ones({4, 2}), Tensor::ones({3}));
    FAIL("no error");
  } catch (const hjit::DTypeError& e) {
    CHECK(std::string(e.what()).find("embedding: ids must be integers") != std::string::npos);
  }
}

TEST_CASE("random::categorical draws classes as often as softmax(logits) says; bernoulli as p says") {
  // Probabilities 0.1, 0.2, 0.7 for each of 20000 rows.
  const int64_t n = 20000;
  const Tensor logits = hjit::broadcast_to(hjit::log(Tensor::from_vector<float>({0.1f, 0.2f, 0.7f}, {3})), {n, 3});
  const Tensor key = hjit::random::key(3);
  auto draw = [](const Tensor& key, const Tensor& logits) { return hjit::random::categorical(key, logits); };
  const Tensor eager = draw(key, logits), compiled = hjit::jit(draw)(key, logits);
  CHECK(eager.dtype() == DType::I64);
  CHECK(eager.shape() == hjit::Shape{n});
  CHECK(eager.to_vector<int64_t>() == compiled.to_vector<int64_t>());  // the same numbers, compiled
  std::vector<int64_t> counts(3);
  for (int64_t c : eager.to_vector<int64_t>()) counts[size_t(c)]++;
  // Within 4 standard deviations of n * p.
  for (auto [k, p] : std::vector<std::pair<int, double>>{{0, 0.1}, {1, 0.2}, {2, 0.7}})
    CHECK_MESSAGE(std::abs(double(counts[size_t(k)]) - n * p) < 4 * std::sqrt(n * p * (1 - p)), k << ": " << counts[size_t(k)]);
  // Another key, other draws; a class of probability 0 never comes.
  CHECK(draw(hjit::random::key(4), logits).to_vector<int64_t>() != eager.to_vector<int64_t>());
  const Tensor never = Tensor::from_vector<float>({0.f, -INFINITY, 1.f}, {1, 3});
  for (uint64_t s = 0; s < 50; ++s) CHECK(draw(hjit::random::key(s), never).item<int64_t>() != 1);
  // Bernoulli: the fraction of trues near p.
  const double frac = hjit::mean(hjit::random::bernoulli(key, 0.3, {n}).astype(DType::F64)).item<double>();
  CHECK(std::abs(frac - 0.3) < 4 * std::sqrt(0.3 * 0.7 / n));
  CHECK_THROWS_AS(hjit::random::bernoulli(key, 1.5, {2}), hjit::ValueError);
  CHECK_THROWS_AS(hjit::random::categorical(key, Tensor::zeros({3}, DType::I32)), hjit::DTypeError);
  CHECK_THROWS_AS(hjit::random::categorical(key, Tensor::scalar(1.0)), hjit::ShapeError);
}

TEST_CASE("debug_nans names the op that made a NaN, and assigns nothing") {
  // A small CNN's training step; one NaN pixel in the batch.
  Tensor w = Tensor::randn({4, 1, 3, 3}, 1) * 0.3, fc = Tensor::randn({4 * 4 * 4, 3}, 2) * 0.1;
  const std::vector<float> w_before = vals(w);
  auto loss = [&](const Tensor& x, const Tensor& y) {
    Tensor h = hjit::max_pool2d(hjit::relu(hjit::conv2d(x, w, std::nullopt, {1, 1}, {1, 1})), {2, 2});
    return hjit::cross_entropy(hjit::matmul(h.reshape({x.shape()[0], -1}), fc), y);
  };
  auto step = hjit::jit(
      [&](const Tensor& x, const Tensor& y) {
        auto [l, g] = hjit::value_and_grad(loss, std::vector<Tensor>{w, fc})(x, y);
        w.assign(w - 0.1 * g[0]);
        fc.assign(fc - 0.1 * g[1]);
        return l;
      },
      {.name = "cnn_step", .debug_nans = true});
  Tensor x = Tensor::randn({2, 1, 8, 8}, 3);
  const Tensor y = Tensor::from_vector<int32_t>({0, 2}, {2});
  step(x, y);  // finite: runs as usual
  CHECK(vals(w) != w_before);
  const std::vector<float> w_now = vals(w), fc_now = vals(fc);
  std::vector<float> pixels = vals(x);
  pixels[37] = NAN;
  try {
    step(Tensor::from_vector(pixels, {2, 1, 8, 8}), y);
    FAIL("no error");
  } catch (const hjit::FloatingPointError& e) {
    const std::string m = e.what();
    CHECK_MESSAGE(m.find("jit 'cnn_step' (debug_nans)") != std::string::npos, m);
    CHECK_MESSAGE(m.find("conv2d") != std::string::npos, m);
    CHECK_MESSAGE(m.find("made a NaN; its input 0, argument 0 (f32[2,1,8,8]), already held one") != std::string::npos, m);
    CHECK_MESSAGE(m.find("Nothing was assigned") != std::string::npos, m);
  }
  CHECK(vals(w) == w_now);  // the step's assigns were not made
  CHECK(vals(fc) == fc_now);
  // An infinity from finite inputs is named at the op that made it; an infinity made on purpose
  // (a mask) and gone by the result is no fault.
  auto overflow = hjit::jit([](const Tensor& x) { return hjit::exp(x * 2.0) + 1.0; }, {.debug_nans = true});
  try {
    overflow(Tensor::from_vector<float>({1, 60}, {2}));
    FAIL("no error");
  } catch (const hjit::FloatingPointError& e) {
    CHECK_MESSAGE(std::string(e.what()).find("made an infinity from finite inputs") != std::string::npos, e.what());
  }
  auto masked = hjit::jit(
      [](const Tensor& q) { return hjit::scaled_dot_product_attention(q, q, q, true); }, {.debug_nans = true});
  CHECK(masked(Tensor::randn({1, 2, 5, 4}, 4)).shape() == hjit::Shape{1, 2, 5, 4});
  // A NaN argument returned as it is: named as the argument.
  auto same = hjit::jit([](const Tensor& a, const Tensor& b) { return std::vector<Tensor>{a, b + 1.0}; }, {.debug_nans = true});
  CHECK_THROWS_WITH_AS(same(Tensor::full({2}, NAN), Tensor::ones({2})), doctest::Contains("argument 0 (f32[2]) holds a NaN"),
                       hjit::FloatingPointError);
}

// The report: under jit, a position taken from a matmul's rows and flattened read its
// input out of bounds (Halide error -4) where eager was right.
TEST_CASE("take of a matmul's row, flattened, as eager computes it") {
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& pos) { return hjit::take(hjit::matmul(x, w), pos, 1).reshape({-1}); };
  for (const hjit::Shape& ws : {hjit::Shape{16, 16}, hjit::Shape{2, 16, 16}}) {
    const Tensor x = Tensor::randn({ws.size() == 2 ? int64_t(1) : int64_t(2), 64, 16}, 1), w = Tensor::randn(ws, 2);
    auto f = hjit::jit(fn);
    for (int32_t p : {0, 1, 31, 62, 63, -1}) {
      CAPTURE(p);
      const Tensor pos = Tensor::from_vector<int32_t>({p}, {1});
      CHECK_CLOSE(f(x, w, pos), fn(x, w, pos));
    }
  }
}

TEST_CASE("conv2d names a channels-last input as such") {
  const Tensor nhwc = Tensor::zeros({2, 8, 8, 3}), w = Tensor::zeros({16, 3, 3, 3});
  CHECK_THROWS_WITH_AS(hjit::conv2d(nhwc, w), doctest::Contains("channels-last (NHWC)"), hjit::ShapeError);
  CHECK(hjit::conv2d(hjit::transpose(nhwc, {0, 3, 1, 2}), w).shape() == hjit::Shape{2, 16, 6, 6});
}

TEST_CASE("gather, scatter, scatter_add and topk: PyTorch's results, eagerly, jitted and differentiated") {
  const Tensor x = arange_f32({2, 4});  // [[0 1 2 3] [4 5 6 7]]
  const Tensor idx = Tensor::from_vector<int64_t>({3, 0, -1, 1, 1, 2}, {2, 3});
  for (bool jitted : {false, true}) {
    CAPTURE(jitted);
    auto run = [&](auto fn) { return jitted ? hjit::jit(fn)(x) : fn(x); };
    // torch.gather(x, 1, [[3, 0, 3], [1, 1, 2]]) (a negative index counts from the end).
    CHECK(vals(run([&](const Tensor& x) { return hjit::gather(x, 1, idx); })) == std::vector<float>{3, 0, 3, 5, 5, 6});
    // torch.gather along axis 0 with fewer columns than x.
    const Tensor rows = Tensor::from_vector<int32_t>({1, 0}, {1, 2});
    CHECK(vals(run([&](const Tensor& x) { return hjit::gather(x, 0, rows); })) == std::vector<float>{4, 1});
    const Tensor src = Tensor::full({2, 2}, 10.0), at = Tensor::from_vector<int64_t>({2, 2, 0, 3}, {2, 2});
    // scatter_add adds both updates of one position; scatter writes elsewhere once.
    CHECK(vals(run([&](const Tensor& x) { return hjit::scatter_add(x, 1, at, src); })) == std::vector<float>{0, 1, 22, 3, 14, 5, 6, 17});
    CHECK(vals(run([&](const Tensor& x) { return hjit::scatter(x, 1, at.reshape({2, 2}), src); })) ==
          std::vector<float>{0, 1, 20, 3, 10, 5, 6, 10});
    auto [values, where] = hjit::topk(Tensor::from_vector<float>({1, 5, 3, 5, 0}, {5}), 3);
    CHECK(vals(values) == std::vector<float>{5, 5, 3});
    CHECK(where.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 2});
    auto [low, low_at] = hjit::topk(x, 2, 1, false);
    CHECK(vals(low) == std::vector<float>{0, 1, 4, 5});
    CHECK(low_at.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0, 1});
  }
  // The gradient of gather is a scatter_add of the output's gradient.
  const Tensor g = hjit::grad([&](const Tensor& x) { return hjit::sum(hjit::gather(x, 1, idx) * 2.0); })(x);
  CHECK(vals(g) == std::vector<float>{2, 0, 0, 4, 0, 4, 2, 0});
  CHECK_THROWS_AS(hjit::gather(x, 1, Tensor::from_vector<int64_t>({4}, {1, 1})), hjit::IndexError);
  CHECK_THROWS_AS(hjit::gather(x, 1, Tensor::from_vector<float>({1}, {1, 1})), hjit::DTypeError);
  CHECK_THROWS_AS(hjit::gather(x, 1, Tensor::from_vector<int64_t>({1}, {1})), hjit::ShapeError);
  CHECK_THROWS_AS(hjit::scatter_add(x, 1, idx, Tensor::ones({2, 2})), hjit::ShapeError);
  CHECK_THROWS_AS(hjit::topk(x, 5, 1), hjit::ValueError);
}
