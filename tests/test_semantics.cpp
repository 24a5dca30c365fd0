// The rules a user relies on without reading the source: what aliases what, what assign writes,
// what happens to a captured tensor that is rebound or a tracer that escapes, how static
// arguments are keyed, PyTorch's Adam, and the small contracts around them (str(), HJIT_LOG).
#include <array>
#include <cmath>
#include <cstdio>
#include <thread>
#include <limits>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>

#include "support/cpu_caches.h"
#include "support/log.h"
#include "support/thread_pool.h"
#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;
using test::f32;
using test::vals;

TEST_CASE("op results never alias their operands under assign, whether or not the op had work to do") {
  Tensor w = f32({1, 2, 3, 4}, {2, 2});
  // No-op ops hand back a new handle on the same value...
  Tensor same = w.reshape({2, 2}), cast = w.astype(DType::F32), bcast = hjit::broadcast_to(w, {2, 2});
  Tensor floor_int = hjit::floor(w.astype(DType::I32)), squeezed = hjit::squeeze(w);
  CHECK(vals(same) == vals(w));
  // ...whose first assign copies: the operand keeps its values.
  same.assign(Tensor::zeros({2, 2}));
  cast.assign(Tensor::ones({2, 2}));
  bcast.assign(Tensor::full({2, 2}, 7));
  squeezed.assign(Tensor::full({2, 2}, 9));
  CHECK(vals(w) == std::vector<float>{1, 2, 3, 4});
  CHECK(vals(same) == std::vector<float>{0, 0, 0, 0});
  CHECK(vals(cast) == std::vector<float>{1, 1, 1, 1});
  // Ops that computed something never shared storage in the first place.
  Tensor part = hjit::slice(w, 0, 0, 1);
  part.assign(Tensor::zeros({1, 2}));
  CHECK(vals(w) == std::vector<float>{1, 2, 3, 4});
  // Handles are shared: a copy of a handle is the same tensor.
  Tensor alias = w;
  alias.assign(Tensor::zeros({2, 2}));
  CHECK(vals(w) == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("clone, slice_update and assign_slice, eagerly and jitted") {
  Tensor w = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor c = w.clone();
  CHECK(!c.same_storage(w));
  c.assign(Tensor::zeros({2, 3}));
  CHECK(vals(w) == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(vals(hjit::slice_update(w, Tensor::full({2, 1}, 9), 1, 1, 2)) == std::vector<float>{1, 9, 3, 4, 9, 6});
  CHECK(vals(hjit::slice_update(w, Tensor::scalar(0), 1, std::nullopt, std::nullopt, 2)) == std::vector<float>{0, 2, 0, 0, 5, 0});
  CHECK_THROWS_AS(hjit::slice_update(w, Tensor::zeros({3}), 1, 0, 2), hjit::ShapeError);
  auto update = [](const Tensor& x, const Tensor& v) { return hjit::slice_update(x, v, 0, -1, std::nullopt); };
  auto jitted = hjit::jit(update);
  Tensor v = f32({7, 8, 9}, {1, 3});
  CHECK(vals(jitted(w, v)) == vals(update(w, v)));
  CHECK(vals(jitted(w, v)) == std::vector<float>{1, 2, 3, 7, 8, 9});
  // In place: x[0, 1:] = 0 on a parameter, eagerly and inside a jitted step.
  Tensor p = w.clone();
  p.assign_slice(1, 1, std::nullopt, Tensor::scalar(0));
  CHECK(vals(p) == std::vector<float>{1, 0, 0, 4, 0, 0});
  Tensor q = w.clone();
  auto zero_first_row = hjit::jit([&](const Tensor& s) { q.assign_slice(0, 0, 1, s); });
  zero_first_row(Tensor::scalar(-1));
  zero_first_row(Tensor::scalar(-2));
  CHECK(vals(q) == std::vector<float>{-2, -2, -2, 4, 5, 6});
  // The gradient of slice_update: zero where overwritten, the slice for the value.
  Tensor x = Tensor::randn({3, 4}, 1, DType::F64), val = Tensor::randn({3, 2}, 2, DType::F64);
  auto loss = [](const Tensor& x, const Tensor& val) { return hjit::sum(hjit::slice_update(x, val, 1, 1, 3) * 3.0); };
  std::vector<Tensor> g = hjit::grad(loss, {0, 1})(x, val);
  CHECK(g[0].to_vector<double>() == std::vector<double>{3, 0, 0, 3, 3, 0, 0, 3, 3, 0, 0, 3});
  CHECK(g[1].to_vector<double>() == std::vector<double>(6, 3.0));
}

TEST_CASE("assign to an argument inside jit writes the caller's tensor, as eagerly") {
  auto bump = [](const Tensor& counter, const Tensor& by) {
    Tensor c = counter;  // a handle copy is the same tensor
    c.assign(c + by);
    return c * 10;
  };
  Tensor eager_counter = f32({1, 2}, {2});
  Tensor r = bump(eager_counter, Tensor::ones({2}));
  CHECK(vals(eager_counter) == std::vector<float>{2, 3});
  auto jitted = hjit::jit(bump);
  Tensor counter = f32({1, 2}, {2});
  CHECK(vals(jitted(counter, Tensor::ones({2}))) == vals(r));
  CHECK(vals(counter) == std::vector<float>{2, 3});
  jitted(counter, Tensor::ones({2}));
  CHECK(vals(counter) == std::vector<float>{3, 4});
  CHECK(jitted.stats().traces == 1);
  // An argument that is a no-op op's result writes its own storage, not the operand's.
  Tensor base = f32({0, 0}, {2});
  Tensor view = base.reshape({2});
  jitted(view, Tensor::ones({2}));
  CHECK(vals(view) == std::vector<float>{1, 1});
  CHECK(vals(base) == std::vector<float>{0, 0});
  // check_trace compares the argument's update too, and leaves it written once.
  hjit::JitOptions o;
  o.check_trace = true;
  Tensor once = f32({5}, {1});
  hjit::jit(bump, o)(once, Tensor::ones({1}));
  CHECK(vals(once) == std::vector<float>{6});
}

TEST_CASE("a tracer that escapes its trace is an error at the end of the trace") {
  Tensor w = f32({1, 2}, {2});
  auto rebinding_step = hjit::jit([&](const Tensor& g) {
    w = w - 0.5 * g;  // the PyTorch habit; w now holds a tracer
    return hjit::sum(w);
  });
  CHECK_THROWS_WITH_AS(rebinding_step(Tensor::ones({2})), doctest::Contains("w.assign(w - lr * g)"), hjit::ValueError);
  CHECK(w.is_traced());
  CHECK_THROWS_AS(w + 1, hjit::ValueError);  // and using it later says so again
  // The fix works and keeps training on every call.
  Tensor v = f32({1, 2}, {2});
  auto step = hjit::jit([&](const Tensor& g) {
    v.assign(v - 0.5 * g);
    return hjit::sum(v);
  });
  step(Tensor::ones({2}));
  step(Tensor::ones({2}));
  CHECK(vals(v) == std::vector<float>{0, 1});
  CHECK(step.stats().cache_hits == 1);
}

TEST_CASE("rebinding a captured tensor after jit traced it is an error, not a stale read") {
  Tensor w = f32({1, 2}, {2});
  auto f = hjit::jit([&](const Tensor& x) { return x * w; });
  CHECK(vals(f(Tensor::ones({2}))) == std::vector<float>{1, 2});
  w = w * 3;  // the old storage is now held by the compiled function alone
  CHECK_THROWS_WITH_AS(f(Tensor::ones({2})), doctest::Contains("no longer held"), hjit::ValueError);
  // Captured by value, the tensor stays alive with the function: nothing to report.
  Tensor u = f32({4}, {1});
  auto g = hjit::jit([u](const Tensor& x) { return x + u; });
  g(Tensor::ones({1}));
  u = Tensor::zeros({1});
  CHECK(vals(g(Tensor::ones({1}))) == std::vector<float>{5});
}

TEST_CASE("static floating point arguments are keyed by their bits") {
  auto scale = hjit::jit([](const Tensor& x, double s) { return x * s; });
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = Tensor::ones({2});
  scale(x, nan);
  scale(x, nan);
  CHECK(scale.stats().traces == 1);  // NaN finds its own entry again
  Tensor zero = scale(x, 0.0), negative_zero = scale(x, -0.0);
  CHECK(scale.stats().traces == 3);  // -0.0 is not 0.0
  CHECK(!std::signbit(zero.to_vector<float>()[0]));
  CHECK(std::signbit(negative_zero.to_vector<float>()[0]));
}

TEST_CASE("check_trace checks every new compilation, not only the first") {
  hjit::JitOptions o;
  o.check_trace = true;
  // Correct for rank 1, wrong (when traced) for rank 2: only the second signature can catch it.
  auto f = hjit::jit([](const Tensor& x) { return x.ndim() == 2 && x.is_traced() ? x * 2 : x; }, o);
  CHECK_NOTHROW(f(Tensor::ones({3})));
  CHECK_THROWS_AS(f(Tensor::ones({2, 2})), hjit::CompileError);
  CHECK_THROWS_AS(f(Tensor::ones({2, 2})), hjit::CompileError);  // a failed check is not cached
}

TEST_CASE("grad of a std::vector<Tensor> argument returns every gradient") {
  std::vector<Tensor> ws = {Tensor::randn({3}, 1, DType::F64), Tensor::randn({2}, 2, DType::F64)};
  auto loss = [](const std::vector<Tensor>& ws) { return hjit::sum(ws[0] * ws[0]) + hjit::sum(ws[1] * 3.0); };
  std::vector<Tensor> g = hjit::grad(loss)(ws);
  REQUIRE(g.size() == 2);
  CHECK_CLOSE(g[0], ws[0] * 2.0);
  CHECK(g[1].to_vector<double>() == std::vector<double>{3, 3});
  auto loss2 = [](const Tensor& x, const std::vector<Tensor>& ws) { return hjit::sum(x * ws[0]) + hjit::sum(ws[1]); };
  Tensor x = Tensor::ones({3}, DType::F64);
  std::vector<Tensor> g2 = hjit::grad<1>(loss2)(x, ws);
  REQUIRE(g2.size() == 2);
  CHECK_CLOSE(g2[0], x);
  Tensor gx = hjit::grad(loss2)(x, ws);
  CHECK_CLOSE(gx, ws[0]);
  // With the argument chosen at run time, a list cannot come back as one Tensor: an error, not ws[0]'s.
  CHECK_THROWS_WITH_AS(hjit::grad(loss2, 1)(x, ws), doctest::Contains("grad<N>"), hjit::ValueError);
  auto [value, grads] = hjit::value_and_grad(loss)(ws);
  CHECK(grads.size() == 2);
  CHECK(value.ndim() == 0);
}

TEST_CASE("clamp's gradient is 1 at its bounds, as PyTorch's") {
  Tensor x = Tensor::from_vector<double>({-1, 0, 0.5, 1, 2}, {5});
  Tensor g = hjit::grad([](const Tensor& x) { return hjit::sum(hjit::clamp(x, 0.0, 1.0)); })(x);
  CHECK(g.to_vector<double>() == std::vector<double>{0, 1, 1, 1, 0});
}

namespace {

// PyTorch 1.13's single-tensor Adam, written out in the order of its operations (f32 tensors,
// Python-float scalars).
struct ReferenceAdam {
  std::vector<float> m, v;
  double lr, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  int step = 0;
  void update(std::vector<float>& p, const std::vector<float>& g) {
    if (m.empty()) m.assign(p.size(), 0), v.assign(p.size(), 0);
    ++step;
    const double c1 = 1 - std::pow(b1, step), c2 = 1 - std::pow(b2, step);
    const float step_size = float(lr / c1), c2_sqrt = float(std::sqrt(c2));
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = m[i] * float(b1) + g[i] * float(1 - b1);
      v[i] = v[i] * float(b2) + (float(1 - b2) * g[i]) * g[i];
      const float denom = std::sqrt(v[i]) / c2_sqrt + float(eps);
      p[i] = p[i] + (-step_size * m[i]) / denom;
    }
  }
};

}  // namespace

TEST_CASE("Adam follows PyTorch's arithmetic over many steps, eagerly and jitted") {
  // A quadratic bowl with gradients that shrink as training converges: where f32 bias
  // corrections used to drift (2e-6 by step 25, 5e-3 by step 30).
  std::vector<float> start = {0.5f, -1.5f, 2.0f, 1e-3f};
  Tensor target = f32({0.1f, 0.2f, -0.3f, 0.0f}, {4});
  auto grad_of = [&](const Tensor& p) { return (p - target) * 2.0; };
  ReferenceAdam ref{{}, {}, 0.05};
  std::vector<float> expected = start;
  Tensor eager_p = f32(start, {4}), jit_p = f32(start, {4});
  hjit::optim::Adam eager_opt({eager_p}, 0.05), jit_opt({jit_p}, 0.05);
  auto jit_step = hjit::jit([&]() { jit_opt.step({grad_of(jit_p)}); });
  for (int step = 0; step < 60; ++step) {
    std::vector<float> g = vals(grad_of(f32(expected, {4})));
    ref.update(expected, g);
    eager_opt.step({grad_of(eager_p)});
    jit_step();
  }
  CHECK_CLOSE_TOL(eager_p, f32(expected, {4}), 1e-6);
  CHECK_CLOSE_TOL(jit_p, eager_p, 1e-6);
}

TEST_CASE("str() prints integers exactly") {
  CHECK(Tensor::from_vector<uint64_t>({uint64_t(1) << 63, 18446744073709551615ull}).str() ==
        "[ 9223372036854775808 18446744073709551615]");
  CHECK(Tensor::from_vector<int64_t>({(int64_t(1) << 62) + 1}).str() == "[4611686018427387905]");
}

TEST_CASE("HJIT_LOG: known levels are taken, others are reported") {
  spdlog::level::level_enum level{};
  CHECK(hjit::parse_log_level("debug", &level));
  CHECK(level == spdlog::level::debug);
  CHECK(hjit::parse_log_level("off", &level));
  CHECK(!hjit::parse_log_level("verbose", &level));
  CHECK(!hjit::parse_log_level("", &level));
}

TEST_CASE("an autoscheduler that ends the process is run in a child first, and its failure falls back") {
  // Halide 14's Adams2019 calls std::terminate on a gather indexed by a 0-d tensor.
  hjit::JitOptions o;
  o.opt_level = 2;
  o.autoscheduler = "Adams2019";
  auto pick = [](const Tensor& x, const Tensor& i) { return hjit::take(x, i, 1); };
  Tensor x = Tensor::randn({5, 7}, 1), i = Tensor::scalar(-3, DType::I64);
  auto f = hjit::jit(pick, o);
  CHECK(vals(f(x, i)) == vals(pick(x, i)));
  CHECK(f.stats().schedule.find("Adams2019") != std::string::npos);  // used, or named with why it was not
}

// Halide 14 folded select(c, INT64_MIN, cast<int64>(x)) < k to false: a float converted to i64 (or
// compared after a where on it) compared wrongly once fused (eager was right).
TEST_CASE("floats converted to integers and compared give eager's answer once compiled") {
  const Tensor x = Tensor::from_vector<float>({-1, 0, 1, 2, -3.5f, 1e30f, -1e30f}, {7});
  for (hjit::DType to : {hjit::DType::I64, hjit::DType::I32, hjit::DType::I16, hjit::DType::U64, hjit::DType::U8}) {
    for (hjit::DType from : {hjit::DType::F32, hjit::DType::F64, hjit::DType::F16}) {
      auto f = [to](const Tensor& v) {
        const Tensor i = hjit::astype(v, to);
        return std::make_pair(hjit::astype(i < Tensor::scalar(1, to), hjit::DType::I64), hjit::where(i < Tensor::scalar(0, to), i + Tensor::scalar(10, to), i));
      };
      const Tensor in = hjit::astype(x, from);
      const auto [want_lt, want_where] = f(in);
      const auto [got_lt, got_where] = hjit::jit(f)(in);
      INFO(std::string(hjit::dtype_name(from)) << " -> " << hjit::dtype_name(to) << ": " << got_where.str() << " where eagerly " << want_where.str());
      CHECK(got_lt.to_vector<int64_t>() == want_lt.to_vector<int64_t>());
      CHECK(got_where.to_vector<int64_t>() == want_where.to_vector<int64_t>());
    }
  }
}

// A gather from a stage computed in tiles (a matmul's rows) needs one row; the tile around it was
// shifted below row 0 and read the matmul's input out of bounds (Halide error -4 at the call).
TEST_CASE("a gather of one row, or a slice, of a tiled matmul, compiled, reads inside the matmul's inputs") {
  const Tensor x = test::random({1, 64, 16}, hjit::DType::F32, 3), w = test::random({16, 16}, hjit::DType::F32, 4);
  auto f = [&](const Tensor& xx, const Tensor& pos) { return hjit::take(hjit::matmul(xx, w), pos, 1).reshape({-1}); };
  for (int32_t p : {0, 5, 63, -1}) {
    const Tensor pos = Tensor::from_vector<int32_t>({p}, {1});
    CHECK_CLOSE(hjit::jit(f)(x, pos), f(x, pos));
  }
  // The same for a slice narrower than the tile (a GRU's gates cut from one matmul).
  const Tensor w3 = test::random({16, 18}, hjit::DType::F32, 5);
  auto gates = [&](const Tensor& xx) { return hjit::sigmoid(hjit::slice(hjit::matmul(xx, w3), -1, 12, 18)); };
  CHECK_CLOSE(hjit::jit(gates)(x), gates(x));
}

// A matmul stored at root (a column softmax reads every row of it), its rows in blocks of whole
// tiles, one block per thread: where the rows are not a multiple of a block's, the last block must
// stop at the end (a split of the tiles into blocks, shifted inwards, was rounded up by Halide and
// a stage of 24 rows computed 32, reading its inputs past their ends: MobileNet's 1x1 convolutions
// as matmuls), and the kernel is compiled once, not once for the full blocks and once for a last
// one guarded (a GPT step's matmuls of 1024 rows, 171 tiles of 6).
TEST_CASE("a blocked matmul of any row count stays inside its inputs, its kernel compiled once") {
  auto f = [](const Tensor& x, const Tensor& y) { return hjit::softmax(hjit::matmul(x, y), 0) + hjit::matmul(x, y); };
  const Tensor w = test::random({40, 70}, hjit::DType::F32, 7);
  // (Columns in whole tiles: a last column panel shifted inwards has a kernel of its own.)
  const Tensor w64 = test::random({40, 64}, hjit::DType::F32, 8);
  for (int64_t rows : {9, 17, 24, 40, 57, 1024}) {
    CAPTURE(rows);
    const Tensor a = test::random({rows, 40}, hjit::DType::F32, 6);
    CHECK_CLOSE(hjit::jit(f, {.opt_level = 1})(a, w), f(a, w));
    auto jitted = hjit::jit(f, {.opt_level = 1});
    CHECK_CLOSE(jitted(a, w64), f(a, w64));
    const std::string plan = jitted.explain(a, w64);
    if (plan.find("in blocks of") == std::string::npos) continue;
    const std::string stmt = plan.substr(plan.find("lowered statement:"));
    size_t kernels = 0;
    for (size_t at = stmt.find("produce n2_matmul_acc"); at != std::string::npos; at = stmt.find("produce n2_matmul_acc", at + 1)) ++kernels;
    CHECK(kernels == 1);
  }
}

// A Linear layer on one row or a few (a decode step): its weight [N, K] read along its rows, each
// output a dot product along K in vector lanes (TileSpec::lanes_along_k). Every lane count (K a
// multiple of 16, 8, 4, or none: the column tiles), batches, odd and short N, and a bias epilogue.
TEST_CASE("a matrix-vector product with a weight read along its rows is exact in every shape") {
  struct Case {
    hjit::Shape x;
    int64_t n;
    bool along_k;
  };
  for (const Case& c : std::vector<Case>{{{1, 768}, 300, true}, {{3, 24}, 67, true}, {{2, 4, 20}, 64, true},
                                         {{1, 1, 36}, 129, true}, {{1, 18}, 80, false}, {{9, 32}, 64, false},
                                         {{1, 32}, 40, false}, {{1, 256}, 70, true}, {{2, 64}, 65, true}, {{1, 64}, 64, true}}) {
    CAPTURE(c.n);
    CAPTURE(c.x.back());
    const Tensor x = test::random(c.x, hjit::DType::F32, 1), w = test::random({c.n, c.x.back()}, hjit::DType::F32, 2),
                 b = test::random({c.n}, hjit::DType::F32, 3);
    auto f = [&](const Tensor& x, const Tensor& w, const Tensor& b) { return hjit::matmul(x, hjit::transpose(w)) + b; };
    auto jitted = hjit::jit(f);
    CHECK_CLOSE(jitted(x, w, b), f(x, w, b));
    CHECK((jitted.explain(x, w, b).find("along k") != std::string::npos) == c.along_k);
  }
}

TEST_CASE("a matrix-vector product across a weight the threads' L2 caches hold together keeps its sums in registers") {
  // [K, 768] weights of 1.5 L2 caches: each thread's share of the columns stays in its own L2 and
  // its sums in registers; of 3 caches a thread, the reduction in parts (each thread's rows one run
  // of memory) with its row of sums in memory.
  const int threads = hjit::machine_threads();
  const int64_t l2 = int64_t(hjit::cpu_caches().l2), n = 768;
  uint64_t seed = 20;
  for (const double caches : {1.5, 3.0 * threads}) {
    CAPTURE(caches);
    const int64_t k = int64_t(caches * double(l2) / double(4 * n));
    const Tensor x = test::random({1, k}, hjit::DType::F32, seed++), w = test::random({k, n}, hjit::DType::F32, seed++);
    auto f = [](const Tensor& x, const Tensor& w) { return hjit::tanh(hjit::matmul(x, w)); };
    auto jitted = hjit::jit(f);
    CHECK_CLOSE_TOL(jitted(x, w), f(x, w), 1e-4);
    const bool parts = jitted.explain(x, w).find("the reduction outermost in") != std::string::npos;
    if (threads >= 2) CHECK(parts == (caches > threads));  // (one thread: no columns in parallel, neither)
  }
}

TEST_CASE("a matmul's constant right operand is packed in panels when compiling, in a scan's body too, equal to eager") {
  // A constant is made while tracing (a frozen weight). Columns a vector divides (16: AVX2's and
  // AVX-512's) are packed; 12 are not, on either.
  auto constant_of = [](const Tensor& t) { return Tensor::from_vector<float>(t.to_vector<float>(), t.shape()); };
  const std::vector<std::array<int64_t, 3>> shapes{{1, 64, 32}, {8, 256, 1024}, {2, 7, 48}, {13, 33, 16}, {64, 64, 80}, {5, 9, 12}, {0, 8, 16}};
  uint64_t seed = 50;
  for (const auto& [m, k, n] : shapes) {
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    const Tensor x = test::random({m, k}, hjit::DType::F32, seed++), w = test::random({k, n}, hjit::DType::F32, seed++);
    auto jitted = hjit::jit([&](const Tensor& x) { return hjit::matmul(x, constant_of(w)); });
    CHECK_CLOSE_TOL(jitted(x), hjit::matmul(x, w), 1e-5);
    if (m > 0) CHECK((jitted.explain(x).find("right operand packed when compiling") != std::string::npos) == (n % 16 == 0));
  }
  // A row over a weight larger than the threads' L2 caches keeps the weight's rows, which the
  // threads split (each thread's rows one run of memory; panels would cut it into one per panel).
  {
    const int threads = hjit::machine_threads();
    const int64_t n = 768, k = 3 * threads * int64_t(hjit::cpu_caches().l2) / (4 * n);
    const Tensor x = test::random({1, k}, hjit::DType::F32, seed++), w = test::random({k, n}, hjit::DType::F32, seed++);
    auto jitted = hjit::jit([&](const Tensor& x) { return hjit::matmul(x, constant_of(w)); });
    CHECK_CLOSE_TOL(jitted(x), hjit::matmul(x, w), 1e-4);
    const std::string plan = jitted.explain(x);
    CHECK(plan.find("right operand packed when compiling") == std::string::npos);
    if (threads >= 2) CHECK(plan.find("the reduction outermost in") != std::string::npos);
  }
  // A recurrent step: its weight, the same at every step and a constant outside, is read as a
  // constant by the compiled body.
  const Tensor x = test::random({6, 4, 32}, hjit::DType::F32, 60), r = test::random({32, 64}, hjit::DType::F32, 61) * 0.2;
  auto recurrent = [&](const Tensor& x, const Tensor& r) {
    auto step = [&](const hjit::Tensors& c, const hjit::Tensors& s) {
      const Tensor h = hjit::tanh(hjit::slice(hjit::matmul(c[0], r), 1, 0, 32) + s[0]);
      return std::make_pair(hjit::Tensors{h}, hjit::Tensors{h});
    };
    return hjit::scan(step, {Tensor::zeros({4, 32})}, {x}).ys[0];
  };
  auto stepped = hjit::jit([&](const Tensor& x) { return recurrent(x, constant_of(r)); });
  CHECK_CLOSE_TOL(stepped(x), recurrent(x, r), 1e-5);
  const std::string plan = stepped.explain(x);
  const size_t body = plan.find("--- body:");
  REQUIRE(body != std::string::npos);
  CHECK(plan.find("right operand packed when compiling", body) != std::string::npos);
}

TEST_CASE("an element-wise nest of few points runs in parallel where each point is costly") {
  // An LSTM's gates over a batch of 8 (2048 points, three sigmoids and two tanh each) in parallel;
  // an add of the same points, below the grain, on one thread. Both equal their eager values.
  const Tensor x = test::random({8, 1024}, hjit::DType::F32, 41), c = test::random({8, 256}, hjit::DType::F32, 42);
  auto gates = [](const Tensor& x, const Tensor& c) {
    auto block = [&](int k) { return hjit::slice(x, 1, 256 * k, 256 * (k + 1)); };
    const Tensor next = hjit::sigmoid(block(1)) * c + hjit::sigmoid(block(0)) * hjit::tanh(block(2));
    return hjit::sigmoid(block(3)) * hjit::tanh(next);
  };
  auto cheap = [](const Tensor& x, const Tensor& c) { return hjit::slice(x, 1, 0, 256) + c; };
  auto costly_jit = hjit::jit(gates);
  auto cheap_jit = hjit::jit(cheap);
  CHECK_CLOSE_TOL(costly_jit(x, c), gates(x, c), 1e-6);
  CHECK_CLOSE_TOL(cheap_jit(x, c), cheap(x, c), 0);
  if (hjit::machine_threads() >= 2) {
    CHECK(costly_jit.explain(x, c).find(" par(") != std::string::npos);
    CHECK(cheap_jit.explain(x, c).find(" par") == std::string::npos);
  }
}

TEST_CASE("a matmul of between one and two row tiles takes the tile rows that compute the fewest twice") {
  // The kernel's rows, read off a tall product's plan; then every row count up to twice them.
  auto product = hjit::jit([](const Tensor& a, const Tensor& b) { return hjit::matmul(a, b); });
  const Tensor b = test::random({64, 256}, hjit::DType::F32, 31);
  auto tile_rows = [&](const Tensor& a) {
    const std::string plan = product.explain(a, b);
    const size_t at = plan.find("tiles ");
    int cols = 0, rows = 0;
    REQUIRE(at != std::string::npos);
    REQUIRE(std::sscanf(plan.c_str() + at, "tiles %dx%d", &cols, &rows) == 2);
    return int64_t(rows);
  };
  const int64_t kernel = tile_rows(test::random({64, 64}, hjit::DType::F32, 32));
  auto twice = [](int64_t n, int64_t k) { return (n + k - 1) / k * k - n; };
  for (int64_t rows = kernel + 1; rows < 2 * kernel; ++rows) {
    CAPTURE(rows);
    const Tensor a = test::random({rows, 64}, hjit::DType::F32, uint64_t(33 + rows));
    CHECK_CLOSE_TOL(product(a, b), hjit::matmul(a, b), 1e-4);
    const int64_t t = tile_rows(a);
    CAPTURE(t);
    int64_t least = twice(rows, kernel);
    for (int64_t r = kernel; 2 * r >= kernel; --r) least = std::min(least, twice(rows, r));
    CHECK(2 * t >= kernel);
    CHECK(twice(rows, t) == least);
  }
}

TEST_CASE("a matmul whose rows vary with a dynamic size runs its packed column panels in parallel, exact at every size") {
  const Tensor w = test::random({64, 320}, hjit::DType::F32, 2), b = test::random({320}, hjit::DType::F32, 3);
  auto f = [&](const Tensor& x) { return hjit::matmul(x, w) + b; };
  auto jitted = hjit::jit(f, {.dynamic_dims = {{0, 0}}});
  for (int64_t rows : {40, 8, 9, 17, 100, 41}) {
    CAPTURE(rows);
    const Tensor x = test::random({rows, 64}, hjit::DType::F32, uint64_t(rows));
    CHECK_CLOSE(jitted(x), f(x));
  }
  CHECK(jitted.stats().dynamic_entries == 1);
  const std::string plan = jitted.explain(test::random({40, 64}, hjit::DType::F32, 1));
  if (std::thread::hardware_concurrency() > 1) CHECK(plan.find("over column panels") != std::string::npos);
  CHECK(plan.find("right operand packed per panel") != std::string::npos);
}

// A matmul of few row tiles and many columns (a 1x1 convolution of few output channels at batch
// 1): its column panels run in parallel, each packed once for every row tile (tile_spec). Rows in
// part of a tile, columns a last panel shifted inwards over the one before, a bias and a relu
// read after it, and the 1x1 convolution itself.
TEST_CASE("a matmul of few row tiles runs its packed column panels in parallel, exact at every shape") {
  for (int64_t rows : {24, 64, 100, 128})
    for (int64_t cols : {1000, 3136}) {
      CAPTURE(rows);
      CAPTURE(cols);
      const Tensor w = test::random({rows, 40}, hjit::DType::F32, 1), x = test::random({40, cols}, hjit::DType::F32, 2),
                   b = test::random({rows, 1}, hjit::DType::F32, 3);
      auto f = [](const Tensor& w, const Tensor& x, const Tensor& b) { return hjit::relu(hjit::matmul(w, x) + b); };
      auto jitted = hjit::jit(f, {.opt_level = 1});
      CHECK_CLOSE(jitted(w, x, b), f(w, x, b));
      if (std::thread::hardware_concurrency() > 1) CHECK(jitted.explain(w, x, b).find("over column panels") != std::string::npos);
    }
  const Tensor x = test::random({1, 64, 56, 56}, hjit::DType::F32, 4), w = test::random({64, 64, 1, 1}, hjit::DType::F32, 5);
  auto conv = [](const Tensor& x, const Tensor& w) { return hjit::conv2d(x, w); };
  CHECK_CLOSE(hjit::jit(conv, {.opt_level = 1})(x, w), conv(x, w));
}

// Residual blocks as a ResNet's bottlenecks end: a 3x3 convolution's bias and relu read as the
// matrix of a 1x1 convolution, whose bias, residual add and relu follow, read by the next block's
// 1x1 convolution and residual add. Each contraction computes its epilogue per tile (the 1x1
// product's moved before its reshape by simplify, the 3x3's stored and read through the reshape):
// no pass of its own over memory for a reshape or an epilogue. (The last block's product is read
// through the reshape that is the pipeline's output, and stored whole.)
TEST_CASE("a convolution's epilogue read as a matrix, and a product's epilogue, run in the contractions' tiles") {
  for (int64_t batch : {1, 2}) {
    CAPTURE(batch);
    const Tensor x = test::random({batch, 16, 14, 14}, hjit::DType::F32, 1), w3 = test::random({32, 16, 3, 3}, hjit::DType::F32, 2),
                 b3 = test::random({1, 32, 1, 1}, hjit::DType::F32, 3), w1 = test::random({48, 32, 1, 1}, hjit::DType::F32, 4),
                 b1 = test::random({48, 1, 1}, hjit::DType::F32, 5), r = test::random({batch, 48, 14, 14}, hjit::DType::F32, 6),
                 w2 = test::random({48, 48, 1, 1}, hjit::DType::F32, 7);
    auto blocks = [](const Tensor& x, const Tensor& w3, const Tensor& b3, const Tensor& w1, const Tensor& b1, const Tensor& r,
                     const Tensor& w2) {
      const Tensor h = hjit::relu(hjit::conv2d(x, w3, std::nullopt, {1, 1}, {1, 1}) + b3);
      const Tensor y = hjit::relu(hjit::conv2d(h, w1) + b1 + r);
      return hjit::relu(hjit::conv2d(y, w2) + y);
    };
    auto jitted = hjit::jit(blocks, {.opt_level = 1});
    // (Three sums of hundreds of products in a row: the sanitized build's plain eager kernels sum
    // in another order, 4e-5 apart at values near 1.)
    CHECK_CLOSE_TOL(jitted(x, w3, b3, w1, b1, r, w2), blocks(x, w3, b3, w1, b1, r, w2), 1e-4);
    std::string plan = jitted.explain(x, w3, b3, w1, b1, r, w2);
    plan = plan.substr(0, plan.find("lowered statement:"));
    CAPTURE(plan);
    CHECK(plan.find("reshape: root") == std::string::npos);
    const size_t conv = plan.find("conv2d_acc: per tile of n");
    REQUIRE(conv != std::string::npos);
    CHECK(plan.substr(conv, plan.find('\n', conv) - conv).find("_relu,") != std::string::npos);
    const size_t product = plan.find("matmul_acc: per tile of n");
    REQUIRE(product != std::string::npos);
    CHECK(plan.substr(product, plan.find('\n', product) - product).find("_relu,") != std::string::npos);
  }
}

// An MLP over a batch of tokens as ONNX writes it (ConvNeXt's, a transformer's): each product
// [B*S, D] viewed as [B, S, D], its bias and GELU on the view, and the view flattened again for the
// next product. The bias and GELU run in the first product's tiles, the second reads them as they
// lie: no pass copying the hidden activation into the next product's operand. A residual sum keeps
// its place after the view (a first block's input is no product).
TEST_CASE("an MLP's bias and GELU over a batch of tokens run in the first product's tiles") {
  const Tensor x = test::random({2, 12, 16}, hjit::DType::F32, 31), w1 = test::random({16, 64}, hjit::DType::F32, 32),
               b1 = test::random({64}, hjit::DType::F32, 33), w2 = test::random({64, 16}, hjit::DType::F32, 34);
  auto mlp = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
    const Tensor h = hjit::matmul(x.reshape({24, 16}), w1).reshape({2, 12, 64}) + b1;
    const Tensor g = h * 0.5 * (hjit::erf(h * 0.7071067811865476) + 1.0);
    return hjit::matmul(g.reshape({24, 64}), w2).reshape({2, 12, 16}) + x;
  };
  auto jitted = hjit::jit(mlp, {.opt_level = 1});
  CHECK_CLOSE(jitted(x, w1, b1, w2), mlp(x, w1, b1, w2));
  std::string plan = jitted.explain(x, w1, b1, w2);
  plan = plan.substr(0, plan.find("lowered statement:"));
  CAPTURE(plan);
  CHECK(test::occurrences(plan, "reshape: root") <= 1);  // (the input's view as rows, also read by the residual sum)
  const size_t first = plan.find("matmul_acc: per tile of n");
  REQUIRE(first != std::string::npos);
  CHECK(plan.substr(first, plan.find('\n', first) - first).find("_mul,") != std::string::npos);
}

// A pool of a 3x3 window is one expression of its nine taps, stored: its rows are whole vectors
// whatever their length (55 and 27 columns, as SqueezeNet's), where an accumulator's update took
// one lane at a time, and a 1x1 convolution after it reads it as rows without gathering the taps.
// A maximum is eager's to the bit (a NaN is a NaN); a 7x7 window keeps its accumulator.
TEST_CASE("a small pooling window is one stored expression of its taps, its rows vectorized") {
  for (const int64_t side : {111, 55}) {
    CAPTURE(side);
    Tensor x = test::random({1, 16, side, side}, hjit::DType::F32, 41);
    std::vector<float> v = x.to_vector<float>();
    v[5 * size_t(side) + 7] = std::numeric_limits<float>::quiet_NaN();
    x = Tensor::from_vector(v, x.shape());
    const Tensor w = test::random({24, 16, 1, 1}, hjit::DType::F32, 42);
    auto net = [](const Tensor& x, const Tensor& w) {
      const Tensor m = hjit::max_pool2d(hjit::relu(x), {3, 3}, {2, 2});
      return std::vector<Tensor>{m, hjit::conv2d(hjit::max_pool2d(x, {3, 3}, {2, 2}), w),
                                 hjit::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, false), hjit::avg_pool2d(x, {7, 7}, {7, 7})};
    };
    auto jitted = hjit::jit(net, {.opt_level = 1});
    const std::vector<Tensor> got = jitted(x, w), want = net(x, w);
    const std::vector<float> g = got[0].to_vector<float>(), e = want[0].to_vector<float>();
    REQUIRE(g.size() == e.size());
    size_t same = 0;
    for (size_t i = 0; i < g.size(); ++i) same += (std::isnan(g[i]) && std::isnan(e[i])) || g[i] == e[i];
    CHECK(same == g.size());
    for (size_t i = 1; i < want.size(); ++i) CHECK_CLOSE(got[i], want[i]);
    std::string plan = jitted.explain(x, w);
    plan = plan.substr(0, plan.find("lowered statement:"));
    CAPTURE(plan);
    CHECK(test::occurrences(plan, "max_pool2d: root vec16") == 1);  // (the one the convolution reads; the other an output)
    CHECK(plan.find("max_pool2d_acc") == std::string::npos);
    CHECK(test::occurrences(plan, "avg_pool2d_acc: per row") == 1);  // the 7x7 window's
  }
}

// Bilinear upsampling as ONNX's Resize is imported: two taps along the rows (takes along the
// innermost axis, gathers), then two taps of whole rows. The rows' interpolation is stored and
// gathered once: inlined into the output, every output element gathered four times.
TEST_CASE("an upsampled image's rows are interpolated once, then picked whole") {
  auto taps = [](int64_t in, int64_t out, int k) {
    std::vector<int64_t> index;
    std::vector<float> weight;
    for (int64_t o = 0; o < out; ++o) {
      const double c = std::max(0.0, (double(o) + 0.5) * double(in) / double(out) - 0.5), base = std::floor(c);
      index.push_back(std::min<int64_t>(int64_t(base) + k, in - 1));
      weight.push_back(float(k == 0 ? 1 - (c - base) : c - base));
    }
    return std::pair{Tensor::from_vector(index, {out}), Tensor::from_vector(weight, {out})};
  };
  const Tensor x = test::random({2, 5, 7, 9}, hjit::DType::F32, 21);
  const auto [w0i, w0w] = taps(9, 36, 0);
  const auto [w1i, w1w] = taps(9, 36, 1);
  const auto [h0i, h0w] = taps(7, 28, 0);
  const auto [h1i, h1w] = taps(7, 28, 1);
  auto upsample = [&](const Tensor& x) {
    const Tensor rows = hjit::take(x, w0i, 3) * w0w + hjit::take(x, w1i, 3) * w1w;
    return hjit::take(rows, h0i, 2) * h0w.reshape({28, 1}) + hjit::take(rows, h1i, 2) * h1w.reshape({28, 1});
  };
  auto jitted = hjit::jit(upsample, {.opt_level = 1});
  CHECK_CLOSE(jitted(x), upsample(x));
  std::string plan = jitted.explain(x);
  plan = plan.substr(0, plan.find("lowered statement:"));
  CAPTURE(plan);
  CHECK(plan.find("add: root") != std::string::npos);
}

// Where a contraction's and a pool's operands live (schedules/builtin.cpp), at SqueezeNet's shapes:
// a 1x1 convolution as the ONNX importer writes it reads its reshaped weight in place (stored, it
// was a copy of the weight every call), its 169 outputs of 384-term sums run in parallel (counted
// as points they ran on one thread), and a pool without padding reads the relu the convolution's
// tiles stored (no padded copy, a pass over memory of its own).
TEST_CASE("views of inputs are read in place, long sums run in parallel, pools read stored values") {
  const Tensor x = test::random({1, 384, 13, 13}, hjit::DType::F32, 3), w = test::random({64, 384, 1, 1}, hjit::DType::F32, 4);
  auto pointwise = [](const Tensor& x, const Tensor& w) {
    return hjit::relu(hjit::matmul(hjit::reshape(w, {64, 384}), hjit::reshape(x, {1, 384, 169})));
  };
  auto jitted = hjit::jit(pointwise, {.opt_level = 1});
  CHECK_CLOSE(jitted(x, w), pointwise(x, w));
  std::string plan = jitted.explain(x, w);
  plan = plan.substr(0, plan.find("lowered statement:"));
  // (The image's reshape merges rows and columns, an index that divides: that one is stored.)
  size_t stored_reshapes = 0;
  for (size_t at = plan.find("reshape: root"); at != std::string::npos; at = plan.find("reshape: root", at + 1)) ++stored_reshapes;
  CHECK(stored_reshapes == 1);
  const size_t tiles = plan.find("matmul: root tiles ");
  REQUIRE(tiles != std::string::npos);
  if (std::thread::hardware_concurrency() > 1) CHECK(plan.substr(tiles, plan.find('\n', tiles) - tiles).find(" par") != std::string::npos);

  for (int64_t pad : {0, 1}) {
    CAPTURE(pad);
    const Tensor img = test::random({2, 3, 23, 23}, hjit::DType::F32, 5), k = test::random({16, 3, 3, 3}, hjit::DType::F32, 6);
    auto stem = [pad](const Tensor& img, const Tensor& k) {
      return hjit::max_pool2d(hjit::relu(hjit::conv2d(img, k, std::nullopt, {2, 2})), {3, 3}, {2, 2}, {pad, pad});
    };
    auto pooled = hjit::jit(stem, {.opt_level = 1});
    CHECK_CLOSE(pooled(img, k), stem(img, k));
    std::string notes = pooled.explain(img, k);
    notes = notes.substr(0, notes.find("lowered statement:"));
    // (A 3x3 window is one expression of its taps, its padded copy a step of its own.)
    CAPTURE(notes);
    CHECK(notes.find("max_pool2d: ") != std::string::npos);
    CHECK((notes.find("max_pool2d steps: padded") != std::string::npos) == (pad != 0));
    if (pad == 0) CHECK(notes.find("relu: root tiles") != std::string::npos);
  }
}

// A sum along rows that drops the summed axis has an innermost output dimension that is not
// contiguous in its input: it is summed along the rows in vector lanes (a vector of outputs a row
// apart gathered every element: 20x slower), the rows in parallel chunks, and short rows keep the
// vectors across outputs.
TEST_CASE("sums and searches along rows read rows, whether or not they keep the axis") {
  const Tensor x = test::random({64, 256}, hjit::DType::F32, 7), narrow = test::random({64, 3}, hjit::DType::F32, 8);
  const Tensor odd = test::random({37, 520}, hjit::DType::F32, 9);  // rows in parallel chunks of 4, the last one short
  for (bool keep : {false, true}) {
    CAPTURE(keep);
    auto rows = [keep](const Tensor& x) { return hjit::sum(x, std::vector<int>{-1}, keep) + hjit::mean(x * x, std::vector<int>{1}, keep); };
    auto jitted = hjit::jit(rows, {.opt_level = 1});
    CHECK_CLOSE(jitted(x), rows(x));
    CHECK_CLOSE(jitted(narrow), rows(narrow));
    CHECK_CLOSE(jitted(odd), rows(odd));
    std::string plan = jitted.explain(x);
    plan = plan.substr(0, plan.find("lowered statement:"));
    size_t along = 0;
    for (size_t at = plan.find("rfactor("); at != std::string::npos; at = plan.find("rfactor(", at + 1)) ++along;
    CHECK(along == 2);
    auto first_max = [keep](const Tensor& x) { return hjit::argmax(x, -1, keep); };
    auto searched = hjit::jit(first_max, {.opt_level = 1});
    for (const Tensor& t : {x, odd, narrow}) CHECK(searched(t).to_vector<int64_t>() == first_max(t).to_vector<int64_t>());
    std::string short_plan = jitted.explain(narrow);
    CHECK(short_plan.substr(0, short_plan.find("lowered statement:")).find("rfactor(") == std::string::npos);
  }
}

// A reduction over several innermost axes whose innermost is shorter than two vectors (a
// convolution weight's sums over [C, 3, 3], a pool over a 7x7 window) reads them as one contiguous
// row: the domain's variables fused, summed in vector lanes. Looped over as they were, each vector
// of outputs gathered its lanes a whole row apart (8-16 ms for a 512 x 512 x 3 x 3 weight on Zen 3,
// 0.1 ms fused).
TEST_CASE("reductions over several short innermost axes read them as one row") {
  const Tensor w = test::random({24, 16, 3, 3}, hjit::DType::F32, 21), odd = test::random({5, 7, 3, 3}, hjit::DType::F32, 22);
  const Tensor maps = test::random({4, 6, 7, 7}, hjit::DType::F32, 23);
  const Tensor levels = hjit::floor(Tensor::uniform({24, 16, 3, 3}, 24, -128, 128)).astype(DType::I8);
  auto plan_of = [](auto& jitted, const Tensor& x) {
    const std::string plan = jitted.explain(x);
    return plan.substr(0, plan.find("lowered statement:"));
  };
  for (bool keep : {false, true}) {
    CAPTURE(keep);
    auto window_sums = [keep](const Tensor& x) {
      return hjit::sum(x, std::vector<int>{1, 2, 3}, keep) + hjit::max(x, std::vector<int>{1, 2, 3}, keep) - hjit::min(x, std::vector<int>{1, 2, 3}, keep);
    };
    auto jitted = hjit::jit(window_sums, {.opt_level = 1});
    CHECK_CLOSE(jitted(w), window_sums(w));
    CHECK_CLOSE(jitted(odd), window_sums(odd));  // 63 elements a row: lanes that do not divide it
    const std::string plan = plan_of(jitted, w);
    CAPTURE(plan);
    CHECK(plan.find("fused 3 axes") != std::string::npos);
    CHECK(plan.find("rfactor(") != std::string::npos);
    // The innermost two of three reduced axes, the outermost looped around them.
    auto pooled = [keep](const Tensor& x) { return hjit::mean(x, std::vector<int>{0, 2, 3}, keep); };
    auto jitted_pooled = hjit::jit(pooled, {.opt_level = 1});
    CHECK_CLOSE(jitted_pooled(maps), pooled(maps));
    CHECK(plan_of(jitted_pooled, maps).find("fused 2 axes") != std::string::npos);
  }
  auto all = [](const Tensor& x) { return hjit::sum(x); };
  auto jitted_all = hjit::jit(all, {.opt_level = 1});
  CHECK_CLOSE(jitted_all(w), all(w));
  auto integer_sums = [](const Tensor& x) { return hjit::sum(x.astype(DType::I32), std::vector<int>{1, 2, 3}); };
  auto jitted_integer = hjit::jit(integer_sums, {.opt_level = 1});
  CHECK(jitted_integer(levels).to_vector<int64_t>() == integer_sums(levels).to_vector<int64_t>());
  CHECK(plan_of(jitted_integer, levels).find("fused 3 axes") != std::string::npos);
  // Over a transposed value, the reduced axes are not contiguous in memory, and the output's axis
  // is: the vectors stay across the outputs.
  const Tensor stored = test::random({6, 7, 64}, hjit::DType::F32, 26);  // [A, B, C], read as [C, A, B]
  auto of_transposed = [](const Tensor& x) { return hjit::sum(hjit::transpose(x, {2, 0, 1}), std::vector<int>{1, 2}); };
  auto jitted_transposed = hjit::jit(of_transposed, {.opt_level = 1});
  CHECK_CLOSE(jitted_transposed(stored), of_transposed(stored));
  CHECK(plan_of(jitted_transposed, stored).find("fused") == std::string::npos);
  // A row of two vectors or more is summed along it as it is.
  const Tensor wide = test::random({8, 4, 40}, hjit::DType::F32, 25);
  auto rows = [](const Tensor& x) { return hjit::sum(x, std::vector<int>{1, 2}); };
  auto jitted_rows = hjit::jit(rows, {.opt_level = 1});
  CHECK_CLOSE(jitted_rows(wide), rows(wide));
  CHECK(plan_of(jitted_rows, wide).find("fused") == std::string::npos);
}

// A sum over an axis of a transposed value that is the innermost of the value it transposes (the
// sums of K^T along its rows, a quantized attention's zero-point correction, with K stored row by
// row): summed along those rows in lanes, as a row reduction is (its vectors across the outputs
// gathered each element from another row: 8% of an int8 encoder).
TEST_CASE("sums over a transposed value's rows read its rows") {
  const Tensor k = test::random({6, 64, 32}, hjit::DType::F32, 11), levels = hjit::floor(Tensor::uniform({6, 64, 32}, 12, 0, 256)).astype(hjit::DType::U8);
  auto of_transposed = [](const Tensor& k) { return hjit::sum(hjit::transpose(k * 2.0f + 1.0f, {0, 2, 1}), std::vector<int>{1}, true); };
  auto of_levels = [](const Tensor& q) { return hjit::sum(hjit::transpose(q, {0, 2, 1}).astype(hjit::DType::I32), std::vector<int>{1}, true); };
  auto jitted = hjit::jit(of_transposed, {.opt_level = 1});
  auto jitted_levels = hjit::jit(of_levels, {.opt_level = 1});
  CHECK_CLOSE(jitted(k), of_transposed(k));
  CHECK(jitted_levels(levels).to_vector<int64_t>() == of_levels(levels).to_vector<int64_t>());
  for (const std::string& plan : {jitted.explain(k), jitted_levels.explain(levels)}) {
    CAPTURE(plan);
    CHECK(plan.substr(0, plan.find("lowered statement:")).find("rfactor(") != std::string::npos);
  }
  // A transposed axis that is not the innermost of what it reads keeps the vectors across outputs.
  auto across = [](const Tensor& k) { return hjit::sum(hjit::transpose(k, {1, 0, 2}), std::vector<int>{1}, true); };
  auto jitted_across = hjit::jit(across, {.opt_level = 1});
  CHECK_CLOSE(jitted_across(k), across(k));
  const std::string plan = jitted_across.explain(k);
  CHECK(plan.substr(0, plan.find("lowered statement:")).find("rfactor(") == std::string::npos);
}

// Integer sums are i64 (PyTorch's rule); one of values of 16 bits or fewer accumulates in i32 where no
// partial sum can leave it (at most 2^15 terms), twice the lanes a vector, and is exact either way.
TEST_CASE("sums of narrow integers accumulate in i32 where they cannot overflow it: exact at the types' extremes") {
  // The lanes of a plan's rfactor, 0 without one: the narrow sums take a vector of i32 lanes (16
  // with AVX-512, 8 with AVX2); the others fewer (i64's), or none.
  auto lanes_of = [](const std::string& plan) {
    const std::string key = "rfactor(";
    const size_t at = plan.find(key);
    return at == std::string::npos ? 0 : std::stoi(plan.substr(at + key.size()));
  };
  for (DType t : {DType::U8, DType::I8, DType::I16, DType::U16}) {
    int narrow_lanes = 0, wide_lanes = 0;
    for (int64_t n : {int64_t(37), int64_t(1) << 15, (int64_t(1) << 15) + 1}) {
      CAPTURE(hjit::dtype_name(t));
      CAPTURE(n);
      const double lo = t == DType::U8 || t == DType::U16 ? 0 : t == DType::I8 ? -128 : -32768;
      const double hi = t == DType::U8 ? 255 : t == DType::I8 ? 127 : t == DType::I16 ? 32767 : 65535;
      // Rows of the lowest value, of the highest, and of both alternating.
      std::vector<double> v;
      for (int64_t i = 0; i < n; ++i) v.push_back(lo);
      for (int64_t i = 0; i < n; ++i) v.push_back(hi);
      for (int64_t i = 0; i < n; ++i) v.push_back(i % 2 ? lo : hi);
      const Tensor x = Tensor::from_vector(v, {3, n}).astype(t);
      auto sums = [](const Tensor& x) { return hjit::sum(x.astype(DType::I32), std::vector<int>{1}); };
      auto jitted = hjit::jit(sums, {.opt_level = 1});
      const std::vector<int64_t> got = jitted(x).to_vector<int64_t>(), want = sums(x).to_vector<int64_t>();
      CHECK(got == want);
      CHECK(want[1] == int64_t(hi) * n);
      if (n == 37) continue;
      const std::string plan = jitted.explain(x);
      CAPTURE(plan);
      (n <= (int64_t(1) << 15) ? narrow_lanes : wide_lanes) = lanes_of(plan);
    }
    CAPTURE(hjit::dtype_name(t));
    CHECK(narrow_lanes >= 8);
    CHECK(wide_lanes < narrow_lanes);
  }
}

TEST_CASE("a convolution tiled over channels (narrow, strided or windowed) computes what eager computes at every edge") {
  // Narrow outputs (width under two vectors), strides and windows wider than 1 with channels to
  // spare take channel tiles: channel counts that are no multiple of the tile, widths of 1 and
  // odd, strides, a batch, a stem (batch 1, few channel tiles: its rows in parallel blocks, the last
  // shifted inwards), a weight that is itself computed (a folded batch norm), and the bias and ReLU
  // fused after it.
  struct Case { int64_t n, ci, co, side, k, stride; };
  for (Case c : {Case{1, 8, 64, 7, 3, 1}, Case{2, 5, 40, 5, 3, 2}, Case{1, 16, 96, 14, 1, 1}, Case{3, 4, 33, 1, 3, 1},
                 Case{1, 12, 48, 9, 5, 1}, Case{2, 3, 130, 11, 3, 2}, Case{1, 3, 32, 23, 7, 2}, Case{1, 3, 32, 21, 7, 2},
                 Case{2, 16, 40, 40, 3, 1}, Case{2, 16, 48, 32, 3, 1}}) {
    CAPTURE(c.co);
    CAPTURE(c.side);
    CAPTURE(c.k);
    CAPTURE(c.stride);
    const Tensor x = test::random({c.n, c.ci, c.side, c.side}, hjit::DType::F32, 8);
    const Tensor w = test::random({c.co, c.ci, c.k, c.k}, hjit::DType::F32, 9), b = test::random({c.co}, hjit::DType::F32, 10);
    const Tensor scale = test::random({c.co, 1, 1, 1}, hjit::DType::F32, 11);
    auto f = [&](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& s) {
      const int64_t pad = c.k / 2;
      return hjit::relu(hjit::conv2d(x, w * s, b, {c.stride, c.stride}, {pad, pad}));
    };
    auto jitted = hjit::jit(f, {.opt_level = 1});
    CHECK_CLOSE(jitted(x, w, b, scale), f(x, w, b, scale));
    if (c.co < 40) continue;
    const std::string plan = jitted.explain(x, w, b, scale);
    if (c.k == 1 && c.stride == 1) {  // a product (graph/passes/simplify.cpp)
      CHECK(plan.find("matmul") != std::string::npos);
      continue;
    }
    const size_t at = plan.find("tiles ");
    REQUIRE(at != std::string::npos);
    CHECK(plan.find("over channels") != std::string::npos);
    // A tile of 4, 8 or 16 columns stores a column vector per channel: channel vectors of one
    // column are a plane apart, and planes of 32 columns are 4 KiB (one cache set for every lane).
    int lanes = 0, columns = 0;
    REQUIRE(std::sscanf(plan.c_str() + at, "tiles %dx%d", &lanes, &columns) == 2);
    const bool by_columns = columns >= 4 && (columns & (columns - 1)) == 0;
    CHECK((plan.find("stored by columns") != std::string::npos) == by_columns);
    if (c.side == 32) CHECK(by_columns);
  }
  // The tile keeps enough FMA chains: a 7-wide row takes 7 columns of a channel vector at least
  // (cut with the least recomputed, AVX2's tile was 2 vectors by 1 column: two chains).
  const Tensor x = test::random({1, 256, 7, 7}, hjit::DType::F32, 8), w = test::random({128, 256, 3, 3}, hjit::DType::F32, 9);
  auto conv = [](const Tensor& x, const Tensor& w) { return hjit::relu(hjit::conv2d(x, w, std::nullopt, {1, 1}, {1, 1})); };
  auto jitted = hjit::jit(conv, {.opt_level = 1});
  // Sums of 2304 products of values near 1, some of them near 0: their absolute rounding is what
  // the tolerance bounds (the sanitized build's plain kernel sums in another order).
  CHECK_CLOSE_TOL(jitted(x, w), conv(x, w), 1e-4);
  const std::string plan = jitted.explain(x, w);
  const size_t at = plan.find("tiles ");
  REQUIRE(at != std::string::npos);
  int lanes = 0, columns = 0;
  REQUIRE(std::sscanf(plan.c_str() + at, "tiles %dx%d over channels", &lanes, &columns) == 2);
  CHECK(lanes * columns >= 8 * 7);

  // A tile's weights, read again at every column tile, fit half the L2 cache: 512 input channels
  // by a 3x3 window are 295 KiB a vector of 16 channels, so one vector where L2 is 1 MiB (Zen 4),
  // where three took 40% longer (from L3 at every column tile), and up to three where it is 2 MiB.
  for (int64_t stride : {1, 2}) {
    CAPTURE(stride);
    const Tensor x = test::random({1, 512, 7 * stride, 7 * stride}, hjit::DType::F32, 10), w = test::random({32, 512, 3, 3}, hjit::DType::F32, 11);
    auto wide = [stride](const Tensor& x, const Tensor& w) { return hjit::conv2d(x, w, std::nullopt, {stride, stride}, {1, 1}); };
    auto jitted = hjit::jit(wide, {.opt_level = 1});
    CHECK_CLOSE_TOL(jitted(x, w), wide(x, w), 1e-3);
    const std::string plan = jitted.explain(x, w);
    const size_t tiles = plan.find("tiles "), vec = plan.find(" vec", plan.find("conv2d_acc:"));
    REQUIRE(tiles != std::string::npos);
    REQUIRE(vec != std::string::npos);
    REQUIRE(std::sscanf(plan.c_str() + tiles, "tiles %dx%d over channels", &lanes, &columns) == 2);
    const int64_t lanes_a_vector = std::atoi(plan.c_str() + vec + 4), panel = 512 * 9 * 4;
    CAPTURE(lanes_a_vector);
    CHECK((lanes == lanes_a_vector || lanes * panel <= int64_t(hjit::cpu_caches().l2) / 2));
  }
}

// A weight gradient in blocks of channels, each summing chunks of rows (schedules/contraction.cpp,
// weight_grad_blocks): channel counts that are no multiple of the tile or the block (the last block
// shifted inwards over the one before), 1x1 and 7x7 windows, strides, dilation, groups, heights whose
// chunk is the whole image, and a batch.
TEST_CASE("a convolution's weight gradient in blocks computes what eager computes for any channels and window") {
  struct Case { int64_t n, ci, co, side, k, stride, dilation, groups; };
  for (Case c : {Case{2, 32, 64, 12, 3, 1, 1, 1}, Case{2, 13, 40, 9, 3, 1, 1, 1}, Case{1, 20, 24, 16, 1, 2, 1, 1},
                 Case{2, 3, 64, 23, 7, 2, 1, 1}, Case{2, 16, 32, 10, 3, 1, 2, 1}, Case{2, 16, 32, 10, 3, 1, 1, 4},
                 Case{3, 17, 19, 7, 3, 1, 1, 1}}) {
    CAPTURE(c.ci);
    CAPTURE(c.co);
    CAPTURE(c.k);
    const Tensor x = test::random({c.n, c.ci, c.side, c.side}, hjit::DType::F32, 12);
    const Tensor w = test::random({c.co, c.ci / c.groups, c.k, c.k}, hjit::DType::F32, 13);
    const int64_t pad = c.k / 2 * c.dilation, out = (c.side + 2 * pad - c.dilation * (c.k - 1) - 1) / c.stride + 1;
    const Tensor g = test::random({c.n, c.co, out, out}, hjit::DType::F32, 14);
    auto f = [&](const Tensor& x, const Tensor& w, const Tensor& g) {
      auto loss = [&](const Tensor& w) {
        return hjit::sum(hjit::conv2d(x, w, std::nullopt, {c.stride, c.stride}, {pad, pad}, {c.dilation, c.dilation}, c.groups) * g);
      };
      return hjit::value_and_grad(loss)(w).second;
    };
    auto jitted = hjit::jit(f, {.opt_level = 1});
    CHECK_CLOSE(jitted(x, w, g), f(x, w, g));
    if (c.ci == 32) CHECK(jitted.explain(x, w, g).find("in chunks of") != std::string::npos);
  }
}

// argmax over (a computed value) - constant: Halide's simplifier moved the constant onto the
// running best (-inf at the first element), which LLVM's no-infinities fast math made poison, and
// the compiled argmax answered 0 (found by ONNX's Det: one step of Gaussian elimination, then the
// pivot of the next column).
TEST_CASE("argmax of a value minus a constant, fused into the reduction, gives eager's index") {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  auto pivot_after_one_step = [](const Tensor& m) {
    const Tensor rows = hjit::iota({2}, 0, hjit::DType::I64);
    Tensor a = m.reshape({1, 2, 2});
    for (int64_t k = 0;; ++k) {
      const Tensor below = hjit::astype(rows >= double(k), hjit::DType::F32);
      const Tensor column = hjit::slice(a, 2, k, k + 1).reshape({1, 2});
      const Tensor p = hjit::argmax(hjit::abs(column) * below - (1.0 - below), 1);
      if (k == 1) return p;
      const Tensor pick_p = hjit::astype(rows == p.reshape({1, 1}), hjit::DType::F32);
      const Tensor pick_k = hjit::astype(rows == double(k), hjit::DType::F32);
      const Tensor row_p = hjit::sum(a * hjit::unsqueeze(pick_p, 2), {1});
      const Tensor row_k = hjit::slice(a, 1, k, k + 1).reshape({1, 2});
      a = a + hjit::unsqueeze(pick_k - pick_p, 2) * hjit::unsqueeze(row_p - row_k, 1);  // swap rows k and p
      const Tensor pivot = hjit::slice(row_p, 1, k, k + 1);
      const Tensor factor = hjit::slice(a, 2, k, k + 1).reshape({1, 2}) / pivot * hjit::astype(rows > double(k), hjit::DType::F32);
      a = a - hjit::unsqueeze(factor, 2) * hjit::unsqueeze(row_p, 1);
    }
  };
  CHECK(pivot_after_one_step(x).to_vector<int64_t>() == std::vector<int64_t>{1});
  CHECK(hjit::jit(pivot_after_one_step)(x).to_vector<int64_t>() == std::vector<int64_t>{1});
  auto argmin_shifted = [](const Tensor& v) { return hjit::argmin(hjit::exp(v) + v - 2.0, 0); };
  const Tensor y = Tensor::from_vector<float>({0.5f, -1.0f, 3.0f}, {3});
  CHECK(hjit::jit(argmin_shifted)(y).to_vector<int64_t>() == argmin_shifted(y).to_vector<int64_t>());
}

TEST_CASE("rebinding a captured parameter's handle while an optimizer holds it is reported") {
  std::ostringstream logged;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(logged);
  hjit::log().sinks().push_back(sink);
  Tensor w = Tensor::ones({3});
  hjit::optim::SGD opt({w}, 0.1);
  auto step = hjit::jit([&](const Tensor& x) {
    auto [l, g] = hjit::value_and_grad([&](const Tensor& x) { return hjit::sum(w * x); }, std::vector<Tensor>{w})(x);
    opt.step(g);
    return l;
  });
  step(Tensor::ones({3}));
  Tensor fresh = Tensor::zeros({3});
  w.assign(fresh);  // changing the values: fine, and silent
  CHECK(logged.str().find("rebound") == std::string::npos);
  w = fresh;  // the handle now names another tensor; the step and the optimizer hold the old one
  hjit::log().sinks().pop_back();
  CHECK(logged.str().find("a handle rebound to another tensor") != std::string::npos);
  CHECK(logged.str().find("assign()") != std::string::npos);
  // A tensor nobody else holds rebinds silently (the usual `key = next` of a loop).
  Tensor key = hjit::random::key(1);
  key = hjit::random::split(key).first;
}
