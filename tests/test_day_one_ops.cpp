// Ops a new user reaches for first: split and chunk (torch.split, torch.chunk), one_hot, the keyed
// draws of hjit::random (bernoulli, categorical), gathers, sort and topk, and Python's indexing,
// eagerly and jitted, against values worked out by hand (PyTorch's and numpy's).
#include <cmath>
#include <limits>
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

TEST_CASE("sort and argsort: torch.sort's stable order, NaN last (first descending), eagerly and jitted") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Tensor x = Tensor::from_vector<float>({3, nan, 1, -0.0f, 0.0f, 1, -inf}, {7});
  for (bool jitted : {false, true}) {
    CAPTURE(jitted);
    auto run = [&](bool descending) {
      auto fn = [descending](const Tensor& x) {
        auto [v, i] = hjit::sort(x, -1, descending);
        return std::vector<Tensor>{v, i};
      };
      return jitted ? hjit::jit(fn)(x) : fn(x);
    };
    // torch.sort(x, stable=True) and torch.sort(x, descending=True, stable=True).
    std::vector<Tensor> up = run(false), down = run(true);
    CHECK(up[1].to_vector<int64_t>() == std::vector<int64_t>{6, 3, 4, 2, 5, 0, 1});
    CHECK(down[1].to_vector<int64_t>() == std::vector<int64_t>{1, 0, 2, 5, 3, 4, 6});
    const std::vector<float> v = vals(up[0]);
    CHECK(v[0] == -inf);
    CHECK(std::signbit(v[1]));  // the -0.0 came first, so it stays first
    CHECK(v[5] == 3);
    CHECK(std::isnan(v[6]));
    CHECK(std::isnan(vals(down[0])[0]));
  }
  // Along an inner axis, and a 0-d tensor.
  const Tensor m = Tensor::from_vector<int32_t>({5, 1, 4, 2, 2, 8}, {2, 3});
  CHECK(hjit::argsort(m, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 0, 1, 1});
  CHECK(hjit::jit([](const Tensor& m) { return hjit::argsort(m, 0, true); })(m).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 1, 1, 0, 0});
  CHECK(hjit::argsort(Tensor::scalar(2)).shape() == hjit::Shape{});
  CHECK_THROWS_AS(hjit::argsort(m, 2), hjit::ShapeError);
}

TEST_CASE("argsort compiled equals the plain kernel: every dtype, lengths around powers of two, both orders") {
  for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::I32, DType::U8, DType::I64, DType::Bool}) {
    for (int64_t n : {1, 2, 3, 5, 8, 17, 100}) {  // (17 and 100: padded to 32 and 128)
      CAPTURE(hjit::dtype_name(dtype));
      CAPTURE(n);
      // Few distinct values, so that ties test the stable order; specials among the floats.
      Tensor x = hjit::floor(Tensor::uniform({3, n}, uint64_t(n), -4, 4, DType::F32)).astype(dtype);
      if (hjit::is_floating(dtype) && n >= 5) x = test::specials({3, n}, dtype, size_t(n));
      // The four orders in one pipeline: one compile per dtype and length.
      auto orders = [](const Tensor& x) {
        std::vector<Tensor> out;
        for (bool descending : {false, true})
          for (int axis : {1, 0}) out.push_back(hjit::argsort(x, axis, descending));
        return out;
      };
      const std::vector<Tensor> want = orders(x), got = hjit::jit(orders)(x);
      REQUIRE(got.size() == want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        CAPTURE(k);  // descending = k / 2, axis = 1 - k % 2
        CHECK(got[k].to_vector<int64_t>() == want[k].to_vector<int64_t>());
      }
    }
  }
}

TEST_CASE("sort's values are differentiable; topk beyond a few rounds sorts") {
  const Tensor x = Tensor::from_vector<float>({4, 1, 3, 2}, {4});
  const Tensor w = Tensor::from_vector<float>({1, 10, 100, 1000}, {4});
  // sort puts x[1], x[3], x[2], x[0] at 0..3: each gets the weight of its place.
  for (bool jitted : {false, true}) {
    auto loss = [&](const Tensor& x) { return hjit::sum(hjit::sort(x).first * w); };
    const Tensor g = jitted ? hjit::jit(hjit::grad(loss))(x) : hjit::grad(loss)(x);
    CHECK(vals(g) == std::vector<float>{1000, 1, 100, 10});
  }
  const Tensor y = Tensor::from_vector<float>({0, 9, 3, 9, 7, 1, 8, 2, 6, 5}, {2, 5});
  auto [v, i] = hjit::topk(y, 5, 1);
  CHECK(vals(v) == std::vector<float>{9, 9, 7, 3, 0, 8, 6, 5, 2, 1});
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 4, 2, 0, 1, 3, 4, 2, 0});
  const std::vector<Tensor> small = hjit::jit([](const Tensor& y) {
    auto [v, i] = hjit::topk(y, 2, 1, false);
    return std::vector<Tensor>{v, i};
  })(y);
  CHECK(vals(small[0]) == std::vector<float>{0, 3, 1, 2});
  CHECK(small[1].to_vector<int64_t>() == std::vector<int64_t>{0, 2, 0, 2});
  // Rows longer than a parallel chunk, the k-th value read by the rest (a sampler's threshold):
  // Halide 14 failed to compile this when the network's steps ran in guarded chunks, and a long
  // row's steps on one thread overflowed the stack (a GPT-2's 50257 logits). On the CPU the
  // network's steps are one loop (its 136 steps unrolled took 70 s to compile), each step's pairs
  // in parallel chunks where the row is long (65,536 padded; 16,384 runs its steps on one thread).
  for (int64_t n : {9000, 50257}) {
    const Tensor logits = test::random({1, n}, hjit::DType::F32, 5);
    auto kept = [](const Tensor& l) { return hjit::argmin(hjit::where(l >= hjit::slice(hjit::topk(l, 40, 1).first, 1, 39, 40), l, 1e30f), 1); };
    CHECK(hjit::jit(kept)(logits).item<int64_t>() == kept(logits).item<int64_t>());
    auto sorted = [](const Tensor& l) { return hjit::sort(l, 1, true).first; };
    auto jitted = hjit::jit(sorted);
    CHECK(vals(jitted(logits)) == vals(sorted(logits)));
    const std::string plan = jitted.explain(logits);
    CAPTURE(plan);
    CHECK(plan.find("sort network: root, steps in a loop") != std::string::npos);
    if (hjit::num_threads() > 1) CHECK((plan.find("par(exact chunks of") != std::string::npos) == (n > 16384));
  }
  // A sampler's top-k of GPT-2's logits in blocks of 1,024 (nn::sample_tokens): the blocks in
  // parallel, each task running every step of its rows; a parallel loop a step of each block was
  // 2,750 barriers a token.
  {
    const Tensor blocks = test::random({1, 50, 1024}, hjit::DType::F32, 7);
    auto largest = [](const Tensor& x) { return hjit::topk(x, 40, 2).first; };
    auto jitted = hjit::jit(largest);
    CHECK(vals(jitted(blocks)) == vals(largest(blocks)));
    const std::string plan = jitted.explain(blocks);
    CAPTURE(plan);
    const size_t at = plan.find("sort network: root, steps in a loop");
    REQUIRE(at != std::string::npos);
    const std::string line = plan.substr(at, plan.find('\n', at) - at);
    CHECK(line.find("exact chunks") == std::string::npos);
    if (hjit::num_threads() > 1) CHECK(line.find(" par(") != std::string::npos);
  }
  // Many rows (in parallel), and rows along an outer axis (the inner one vectorized in each step).
  const Tensor rows = test::random({64, 300}, hjit::DType::F32, 6);
  for (int axis : {1, 0}) {
    CAPTURE(axis);
    auto sorted = [axis](const Tensor& x) { return hjit::argsort(x, axis, axis == 0); };
    CHECK(hjit::jit(sorted)(rows).to_vector<int64_t>() == sorted(rows).to_vector<int64_t>());
  }
}

TEST_CASE("indexing reads like Python's: integers, slices of any step, ..., None and index tensors (numpy's rules)") {
  using hjit::ellipsis;
  using hjit::none;
  using hjit::Slice;
  const Tensor x = arange_f32({2, 3, 4});  // x[a, b, c] = 12a + 4b + c
  const Tensor pick = Tensor::from_vector<int64_t>({1, 0, -1}, {3});
  const Tensor two = Tensor::from_vector<int64_t>({2, 0}, {1, 2});
  const Tensor at_a = Tensor::from_vector<int64_t>({0, 1}, {2}), at_c = Tensor::from_vector<int32_t>({3, 0}, {2});
  for (bool jitted : {false, true}) {
    CAPTURE(jitted);
    auto run = [&](auto fn) { return jitted ? hjit::jit(fn)(x) : fn(x); };
    auto check = [&](auto fn, hjit::Shape shape, std::vector<float> want) {
      const Tensor got = run(fn);
      CHECK(got.shape() == shape);
      CHECK(vals(got) == want);
    };
    check([](const Tensor& x) { return x[1][{-1, 2}]; }, {}, {22});
    check([](const Tensor& x) { return x[{-1, Slice(none, none, 2)}]; }, {2, 4}, {12, 13, 14, 15, 20, 21, 22, 23});
    check([](const Tensor& x) { return x[{ellipsis, 1}]; }, {2, 3}, {1, 5, 9, 13, 17, 21});
    check([](const Tensor& x) { return x[{none, 0, Slice(1), none}]; }, {1, 2, 1, 4}, {4, 5, 6, 7, 8, 9, 10, 11});
    check([](const Tensor& x) { return x[{0, Slice(none, none, -2), Slice(3, 0, -1)}]; }, {2, 3}, {11, 10, 9, 3, 2, 1});
    check([](const Tensor& x) { return x[{1, Slice(5, -10), 0}]; }, {0}, {});
    check([](const Tensor& x) { return x[{1, Slice(-2, 100), Slice(-1, -100, -3)}]; }, {2, 2}, {19, 16, 23, 20});
    // Index tensors: along one axis; adjacent to an integer (their block stays in place); apart
    // (their block goes first, as numpy's x[0, :, [3, 0]] has shape (2, 3)).
    check([&](const Tensor& x) { return x[{Slice(), pick, 0}]; }, {2, 3}, {4, 0, 8, 16, 12, 20});
    check([&](const Tensor& x) { return x[{Slice(), two, 0}]; }, {2, 1, 2}, {8, 0, 20, 12});
    check([&](const Tensor& x) { return x[{at_a, Slice(), at_c}]; }, {2, 3}, {3, 7, 11, 12, 16, 20});
    check([&](const Tensor& x) { return x[{0, Slice(), at_c}]; }, {2, 3}, {3, 7, 11, 0, 4, 8});
    check([&](const Tensor& x) { return hjit::sum(x[pick]); }, {}, {2 * 210 + 66});  // x[1] twice and x[0]
  }
  // The gradient of a read is the slice's place in x.
  const Tensor g = hjit::grad([](const Tensor& x) { return hjit::sum(x[{0, Slice(none, none, -2), 1}] * 2.0); })(x);
  CHECK(vals(g)[1] == 2);
  CHECK(vals(g)[9] == 2);
  CHECK(vals(hjit::sum(g)) == std::vector<float>{4});
  // Mistakes, in the user's terms.
  CHECK_THROWS_AS((x[{0, 0, 0, 0}]), hjit::IndexError);
  CHECK_THROWS_AS(x[2], hjit::IndexError);
  CHECK_THROWS_AS((x[{ellipsis, 0, ellipsis}]), hjit::ValueError);
  CHECK_THROWS_AS((x[{Slice(0, 2, 0)}]), hjit::ValueError);
  CHECK_THROWS_AS(x[x > 3.0], hjit::DTypeError);
  CHECK_THROWS_AS((x[Tensor::from_vector<float>({0}, {1})]), hjit::DTypeError);
  CHECK_THROWS_AS((x[Tensor::from_vector<int64_t>({2}, {1})]), hjit::IndexError);
  CHECK_THROWS_AS((x[{at_a, Slice(), Tensor::from_vector<int64_t>({0, 1, 2}, {3})}]), hjit::IndexError);
}

TEST_CASE("assigning through an index: x[at] = value in place, and index_update as a function") {
  using hjit::ellipsis;
  using hjit::none;
  using hjit::Slice;
  Tensor y = arange_f32({2, 3, 4});
  y.assign({0, Slice(none, none, -1), 1}, Tensor::from_vector<float>({100, 200, 300}, {3}));  // y[0, ::-1, 1] = ...
  std::vector<float> v = vals(y);
  CHECK(v[1] == 300);
  CHECK(v[5] == 200);
  CHECK(v[9] == 100);
  y.assign({ellipsis, 0}, -1.0);  // y[..., 0] = -1
  v = vals(y);
  CHECK(v[0] == -1);
  CHECK(v[12] == -1);
  CHECK(v[13] == 13);
  // Inside jit, on a captured tensor, with None in the expression.
  Tensor z = arange_f32({2, 3});
  hjit::jit([&](const Tensor& r) {
    z.assign({none, 1, Slice(1)}, r);  // z[None, 1, 1:] = r
    return r;
  })(Tensor::from_vector<float>({7, 8}, {1, 2}));
  CHECK(vals(z) == std::vector<float>{0, 1, 2, 3, 7, 8});
  const Tensor u = hjit::index_update(arange_f32({4}), {Slice(1, none, 2)}, Tensor::scalar(0));
  CHECK(vals(u) == std::vector<float>{0, 0, 2, 0});
  CHECK_THROWS_AS((z.assign({0}, Tensor::ones({2}))), hjit::ShapeError);
  CHECK_THROWS_AS((z.assign({Tensor::from_vector<int64_t>({0}, {1})}, 1.0)), hjit::ValueError);
}
