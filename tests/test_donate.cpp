// JitOptions::donate: a result computed element by element from a donated argument is written into
// its storage, where every element is provably read before it is overwritten; a donated argument
// holds nothing after the call. Every result is checked against the same function run eagerly, on
// sizes that are and are not multiples of the vector width (the loop tails are where a shifted
// vector would read elements already overwritten).
#include <functional>

#include "frontend/tensor/tensor_impl.h"
#include "tests/support.h"

using hjit::Tensor;

TEST_CASE("donate: an element-wise result takes the donated argument's storage, at any size") {
  auto fn = [](const Tensor& x, const Tensor& a) { return hjit::tanh(x * a + 0.5) * 2.0 - x; };
  for (const hjit::Shape& shape : {hjit::Shape{1}, hjit::Shape{7}, hjit::Shape{16}, hjit::Shape{33}, hjit::Shape{5, 67},
                                   hjit::Shape{3, 64, 65}, hjit::Shape{2, 1000}}) {
    auto f = hjit::jit(fn, {.name = "donate_pointwise", .opt_level = 1, .donate = {0}});
    Tensor a = test::random(shape, hjit::DType::F32, 2);
    for (int call = 0; call < 3; ++call) {  // the first call traces and compiles, the others find it
      Tensor x = test::random(shape, hjit::DType::F32, uint64_t(10 + call));
      const Tensor want = fn(x, a);
      const void* bytes = x.data();
      const int64_t allocations = hjit::detail::storage_allocations();
      Tensor y = f(x, a);
      const int64_t allocated = hjit::detail::storage_allocations() - allocations;
      INFO("shape " << hjit::shape_str(shape) << ", call " << call);
      CHECK_CLOSE(y, want);
      CHECK(y.data() == bytes);                      // written over x
      if (call > 0) CHECK(allocated == 0);           // nothing new
      CHECK_THROWS_AS(x.data(), hjit::ValueError);  // x holds nothing now
    }
    CHECK(f.stats().donated_bytes_reused == 3 * int64_t(a.numel()) * 4);
  }
}

TEST_CASE("donate: x = f(x) in a loop needs one buffer; other dtypes and opt levels") {
  for (int opt : {0, 1, 2}) {
    auto f = hjit::jit([](const Tensor& x) { return x * 0.5 + 1.0; }, {.name = "donate_loop", .opt_level = opt, .donate = {0}});
    Tensor x = Tensor::full({4, 100}, 0.0), want = Tensor::full({4, 100}, 0.0);
    for (int i = 0; i < 20; ++i) {
      x = f(x);
      want = want * 0.5 + 1.0;
    }
    CHECK_CLOSE(x, want);
  }
  for (hjit::DType dt : {hjit::DType::F64, hjit::DType::I32, hjit::DType::F16, hjit::DType::BF16}) {
    auto f = hjit::jit([](const Tensor& x, const Tensor& y) { return x * 3 + y; }, {.name = "donate_dtypes", .opt_level = 1, .donate = {0}});
    Tensor y = test::random({3, 41}, dt, 7);
    for (int call = 0; call < 2; ++call) {
      Tensor x = test::random({3, 41}, dt, 8);
      const Tensor want = x * 3 + y;
      CHECK_CLOSE(f(x, y), want);
    }
  }
}

TEST_CASE("donate: where the storage cannot be reused, results are right and nothing is written over") {
  struct Case {
    const char* what;
    std::function<std::vector<Tensor>(const Tensor&, const Tensor&)> fn;
    hjit::Shape x, y;
  };
  const std::vector<Case> cases = {
      {"a reduction reads it", [](const Tensor& x, const Tensor& y) { return std::vector<Tensor>{x - hjit::sum(x) + y}; }, {6, 35}, {6, 35}},
      {"a softmax of it", [](const Tensor& x, const Tensor&) { return std::vector<Tensor>{hjit::softmax(x, -1)}; }, {6, 35}, {1}},
      {"it is transposed", [](const Tensor& x, const Tensor&) { return std::vector<Tensor>{hjit::transpose(x, {1, 0}) * 2.0}; }, {17, 17}, {1}},
      {"it is broadcast", [](const Tensor& x, const Tensor& y) { return std::vector<Tensor>{x + y}; }, {1, 35}, {6, 35}},
      {"a matmul reads it", [](const Tensor& x, const Tensor& y) { return std::vector<Tensor>{hjit::matmul(x, y) + 1.0}; }, {16, 16}, {16, 16}},
      {"two results read it", [](const Tensor& x, const Tensor& y) { return std::vector<Tensor>{x * 2.0, x + y}; }, {6, 35}, {6, 35}},
      {"it is returned itself", [](const Tensor& x, const Tensor& y) { return std::vector<Tensor>{x, x * y}; }, {6, 35}, {6, 35}},
      {"the result has another dtype", [](const Tensor& x, const Tensor&) { return std::vector<Tensor>{x > 0.0}; }, {6, 35}, {1}},
      {"it is padded", [](const Tensor& x, const Tensor&) { return std::vector<Tensor>{hjit::pad(x, {{0, 0}, {1, 0}}, 0.5) * 3.0}; }, {6, 35}, {1}},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    auto f = hjit::jit(c.fn, {.name = std::string("donate_not_") + c.what, .opt_level = 1, .donate = {0}});
    Tensor y = test::random(c.y, hjit::DType::F32, 3);
    for (int call = 0; call < 2; ++call) {
      Tensor x = test::random(c.x, hjit::DType::F32, uint64_t(4 + call));
      std::vector<Tensor> want = c.fn(x, y);
      for (Tensor& w : want) w = w.clone();  // (a result may be x itself, which the call consumes)
      const std::vector<Tensor> got = f(x, y);
      REQUIRE(got.size() == want.size());
      for (size_t k = 0; k < got.size(); ++k) CHECK_CLOSE(got[k], want[k]);
    }
    CHECK(f.stats().donated_bytes_reused == 0);
  }
}

TEST_CASE("donate: storage another tensor shares is not reused; the donated tensor can be assigned again") {
  auto f = hjit::jit([](const Tensor& x) { return x + 1.0; }, {.name = "donate_shared", .opt_level = 1, .donate = {0}});
  f(Tensor::zeros({64}));  // traced
  Tensor x = test::random({64}, hjit::DType::F32, 5);
  const hjit::detail::TensorImpl& im = hjit::detail::impl_of(x, "test");
  Tensor alias = hjit::detail::alias_tensor(im.storage, im.type);  // another tensor on x's bytes
  const Tensor want = x + 1.0, before = x.clone();
  const int64_t reused = f.stats().donated_bytes_reused;
  CHECK_CLOSE(f(x), want);
  CHECK(f.stats().donated_bytes_reused == reused);
  CHECK_CLOSE(alias, before);  // not written over
  // Another handle of the donated tensor is that tensor: donated too.
  Tensor same = test::random({64}, hjit::DType::F32, 9), handle = same;
  f(same);
  CHECK_THROWS_AS(handle.data(), hjit::ValueError);
  // Passed twice, once donated: not reused (the other argument reads it to the end).
  auto g = hjit::jit([](const Tensor& a, const Tensor& b) { return a * b; }, {.name = "donate_twice", .opt_level = 1, .donate = {0}});
  Tensor z = test::random({40}, hjit::DType::F32, 6);
  g(z.clone(), z.clone());
  Tensor z2 = z.clone();
  const int64_t reused_before = g.stats().donated_bytes_reused;
  CHECK_CLOSE(g(z2, z2), z * z);
  CHECK(g.stats().donated_bytes_reused == reused_before);
  // A donated tensor takes a value again with assign(), and can be donated again.
  z2.assign(Tensor::full({40}, 2.0));
  CHECK_CLOSE(g(z2, Tensor::full({40}, 3.0)), Tensor::full({40}, 6.0));
}

TEST_CASE("donate: bad uses are ValueErrors") {
  auto f = hjit::jit([](const Tensor& x) { return x + 1.0; }, {.name = "donate_errors", .opt_level = 1, .donate = {0}});
  Tensor x = Tensor::zeros({8});
  f(x);
  CHECK_THROWS_AS(f(x), hjit::ValueError);            // donated already
  CHECK_THROWS_AS(x + 1.0, hjit::ValueError);         // an op on it
  CHECK_THROWS_AS(x.to_vector<float>(), hjit::ValueError);
  CHECK(x.shape() == hjit::Shape{8});                 // its type stays
  auto out_of_range = hjit::jit([](const Tensor& x) { return x + 1.0; }, {.name = "donate_range", .donate = {1}});
  CHECK_THROWS_AS(out_of_range(Tensor::zeros({8})), hjit::ValueError);
  auto twice = hjit::jit([](const Tensor& x, const Tensor& y) { return x + y; }, {.name = "donate_dup", .donate = {0, 0}});
  CHECK_THROWS_AS(twice(Tensor::zeros({8}), Tensor::zeros({8})), hjit::ValueError);
  // A tensor the function captures cannot be donated as an argument too.
  Tensor w = Tensor::ones({8});
  auto captures = hjit::jit([&w](const Tensor& x) { return x * w; }, {.name = "donate_captured", .opt_level = 1, .donate = {0}});
  CHECK_THROWS_AS(captures(w), hjit::ValueError);
  CHECK_CLOSE(w, Tensor::ones({8}));  // and it still holds its value
  try {
    f(x);
  } catch (const hjit::ValueError& e) {
    CHECK(std::string(e.what()).find("donated") != std::string::npos);
  }
}

// Jitted::into (out=): the result written into the storage of a tensor the caller keeps, so that
// the y = f(x) loop needs no new buffer per call.
TEST_CASE("into: results land in out's storage, at any size and opt level, and equal eager") {
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b) { return hjit::layer_norm(x, w, b, 1e-5) * 2.0; };
  for (int opt : {0, 1}) {
    for (const hjit::Shape& shape : {hjit::Shape{1, 1}, hjit::Shape{3, 7}, hjit::Shape{33, 64}, hjit::Shape{5, 1000}}) {
      auto f = hjit::jit(fn, {.name = "into_layer_norm", .opt_level = opt});
      const Tensor w = test::random({shape[1]}, hjit::DType::F32, 2), b = test::random({shape[1]}, hjit::DType::F32, 3);
      Tensor y = f(test::random(shape, hjit::DType::F32, 1), w, b);
      const void* bytes = y.data();
      for (int call = 0; call < 3; ++call) {
        const Tensor x = test::random(shape, hjit::DType::F32, uint64_t(10 + call));
        const int64_t allocations = hjit::detail::storage_allocations();
        Tensor& same = f.into(y, x, w, b);
        INFO("opt " << opt << ", shape " << hjit::shape_str(shape) << ", call " << call);
        CHECK(&same == &y);
        CHECK(hjit::detail::storage_allocations() == allocations);  // no result buffer
        CHECK(y.data() == bytes);
        CHECK_CLOSE(y, fn(x, w, b));
      }
    }
  }
}

TEST_CASE("into: out read by the call, shared, borrowed or of another type") {
  auto f = hjit::jit([](const Tensor& x) { return hjit::softmax(x, -1) + x; }, {.name = "into_reads_out", .opt_level = 1});
  // out is the argument itself: computed apart, then copied in (a row's softmax reads the whole row).
  Tensor x = test::random({4, 50}, hjit::DType::F32, 4);
  const Tensor want = hjit::softmax(x, -1) + x;
  f.into(x, x);
  CHECK_CLOSE(x, want);
  // A captured tensor as out.
  Tensor w = test::random({4, 50}, hjit::DType::F32, 5);
  auto g = hjit::jit([&](const Tensor& v) { return hjit::softmax(w, -1) * v; }, {.name = "into_captured", .opt_level = 1});
  const Tensor v = test::random({4, 50}, hjit::DType::F32, 6), want_g = hjit::softmax(w, -1) * v;
  g.into(w, v);
  CHECK_CLOSE(w, want_g);
  // Another handle of out's storage sees the result (in-place write, as assign); a tensor
  // borrowing an operand's storage (reshape) gets its own first, so the operand keeps its value.
  Tensor y = Tensor::zeros({4, 50}), alias = y;
  f.into(y, x);
  CHECK_CLOSE(alias, y);
  const Tensor source = test::random({200}, hjit::DType::F32, 7), before = source.clone();
  Tensor view = source.reshape({4, 50});
  f.into(view, x);
  CHECK_CLOSE(source, before);
  CHECK_CLOSE(view, hjit::softmax(x, -1) + x);
  // The result must have out's dtype and shape; out keeps its value when it does not.
  Tensor wrong_shape = Tensor::zeros({50, 4}), wrong_dtype = Tensor::zeros({4, 50}, hjit::DType::F64);
  CHECK_THROWS_AS(f.into(wrong_shape, x), hjit::ValueError);
  CHECK_THROWS_AS(f.into(wrong_dtype, x), hjit::ValueError);
  CHECK_CLOSE(wrong_shape, Tensor::zeros({50, 4}));
  // Graph breaks: computed in segments, then copied in.
  auto h = hjit::jit([](const Tensor& x) { return x * (hjit::max(x).item<float>() > 0 ? 2.0 : 3.0); },
                     {.name = "into_breaks", .opt_level = 1, .fullgraph = false});
  Tensor z = Tensor::zeros({4, 50});
  h.into(z, x);
  CHECK_CLOSE(z, x * (hjit::max(x).item<float>() > 0 ? 2.0 : 3.0));
}

TEST_CASE("into: inside a traced function it is assign") {
  auto inner = hjit::jit([](const Tensor& x) { return x * 3.0; }, {.name = "into_inner", .opt_level = 1});
  Tensor acc = Tensor::zeros({8});
  auto outer = hjit::jit([&](const Tensor& x) {
    inner.into(acc, x + 1.0);
    return acc * 1.0;
  }, {.name = "into_outer", .opt_level = 1});
  const Tensor x = test::random({8}, hjit::DType::F32, 8);
  CHECK_CLOSE(outer(x), (x + 1.0) * 3.0);
  CHECK_CLOSE(acc, (x + 1.0) * 3.0);
}
