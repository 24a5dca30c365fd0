// Trace semantics beyond a frozen trace: traced random keys, guarded concrete tracing, graph
// breaks with host code at every call, control flow ops, and dynamic dimensions. Every example
// runs compiled and eagerly and the two are compared.
#include <cmath>

#include "graph/threefry.h"
#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;
using test::f32;

namespace {

Tensor u32(std::vector<uint32_t> v) { return Tensor::from_vector(v); }

}  // namespace

TEST_CASE("Threefry-2x32: the known answers of Random123, and JAX's split of PRNGKey(0)") {
  using hjit::threefry::threefry2x32;
  CHECK(threefry2x32(0, 0, 0, 0) == std::pair<uint32_t, uint32_t>{0x6b200159u, 0x99ba4efeu});
  CHECK(threefry2x32(~0u, ~0u, ~0u, ~0u) == std::pair<uint32_t, uint32_t>{0x1cb996fcu, 0xbb002be7u});
  CHECK(threefry2x32(0x13198a2eu, 0x03707344u, 0x243f6a88u, 0x85a308d3u) ==
        std::pair<uint32_t, uint32_t>{0xc4923a9cu, 0x483df7a0u});
  // jax.random.split(jax.random.PRNGKey(0)) is [[4146024105, 967050713], [2718843009, 1272950319]].
  Tensor keys = hjit::random::split(hjit::random::key(0), 2);
  CHECK(keys.shape() == Shape{2, 2});
  CHECK(keys.to_vector<uint32_t>() == std::vector<uint32_t>{4146024105u, 967050713u, 2718843009u, 1272950319u});
  auto [a, b] = hjit::random::split(hjit::random::key(0));
  CHECK(a.to_vector<uint32_t>() == std::vector<uint32_t>{4146024105u, 967050713u});
  CHECK(b.to_vector<uint32_t>() == std::vector<uint32_t>{2718843009u, 1272950319u});
  CHECK(hjit::random::key((uint64_t(7) << 32) | 9).to_vector<uint32_t>() == std::vector<uint32_t>{7, 9});
}

TEST_CASE("random draws: compiled equals eager for every shape, a new key draws anew without re-tracing") {
  for (int opt : {0, 1, 2}) {
    hjit::JitOptions o;
    o.opt_level = opt;
    auto draw = hjit::jit([](const Tensor& key, const Tensor& x) {
      return std::make_tuple(hjit::random::bits(key, x.shape()), hjit::random::uniform(key, x.shape()),
                             hjit::random::normal(key, x.shape(), DType::F64), hjit::dropout(key, x, 0.25));
    }, o);
    for (Shape s : {Shape{}, Shape{0}, Shape{1}, Shape{7}, Shape{3, 5}, Shape{2, 1}, Shape{1, 1, 17}, Shape{2, 3, 33}}) {
      CAPTURE(hjit::shape_str(s));
      Tensor x = test::random(s, DType::F32, 3);
      for (uint64_t seed : {0ull, 1ull, 0xfedcba9876543210ull}) {
        Tensor key = hjit::random::key(seed);
        auto [bits, u, n, d] = draw(key, x);
        CHECK(bits.to_vector<uint32_t>() == hjit::random::bits(key, s).to_vector<uint32_t>());
        CHECK(u.to_vector<float>() == hjit::random::uniform(key, s).to_vector<float>());
        CHECK_CLOSE(n, hjit::random::normal(key, s, DType::F64));
        CHECK(d.to_vector<float>() == hjit::dropout(key, x, 0.25).to_vector<float>());
      }
    }
    CHECK(draw.stats().traces == 8);  // one per shape: keys are arguments, not constants
  }
}

TEST_CASE("random draws have the right distribution, and keys from split are independent") {
  const int64_t n = 1 << 16;
  Tensor u = hjit::random::uniform(hjit::random::key(42), {n});
  std::vector<float> uv = u.to_vector<float>();
  double mean = 0, lo = 1, hi = 0;
  for (float v : uv) mean += v, lo = std::min<double>(lo, v), hi = std::max<double>(hi, v);
  mean /= double(n);
  CHECK(mean == doctest::Approx(0.5).epsilon(0.01));
  CHECK(lo >= 0);
  CHECK(hi < 1);
  std::vector<double> z = hjit::random::normal(hjit::random::key(42), {n}, DType::F64).to_vector<double>();
  double m = 0, v2 = 0;
  for (double x : z) m += x, v2 += x * x;
  m /= double(n), v2 = v2 / double(n) - m * m;
  CHECK(std::fabs(m) < 0.02);
  CHECK(v2 == doctest::Approx(1.0).epsilon(0.03));
  Tensor r = hjit::random::uniform(hjit::random::key(1), {1000}, DType::F32, -3, 5);
  for (float x : r.to_vector<float>()) CHECK((x >= -3 && x < 5));
  auto [k1, k2] = hjit::random::split(hjit::random::key(42));
  CHECK(hjit::random::bits(k1, {8}).to_vector<uint32_t>() != hjit::random::bits(k2, {8}).to_vector<uint32_t>());
  // dropout keeps about 1 - p and scales by 1 / (1 - p)
  std::vector<float> d = hjit::dropout(hjit::random::key(5), Tensor::ones({n}), 0.3).to_vector<float>();
  int64_t kept = 0;
  for (float x : d) {
    CHECK_MESSAGE((x == 0 || std::fabs(x - 1 / 0.7f) < 1e-6), x);
    kept += x != 0;
  }
  CHECK(double(kept) / double(n) == doctest::Approx(0.7).epsilon(0.02));
}

TEST_CASE("random: bad keys and arguments are typed errors") {
  Tensor x = Tensor::ones({4});
  CHECK_THROWS_AS(hjit::random::bits(Tensor::ones({2}), {3}), hjit::DTypeError);
  CHECK_THROWS_AS(hjit::random::bits(u32({1, 2, 3}), {3}), hjit::DTypeError);
  CHECK_THROWS_AS(hjit::random::bits(Tensor(), {3}), hjit::ValueError);
  CHECK_THROWS_AS(hjit::random::uniform(hjit::random::key(0), {3}, DType::I32), hjit::DTypeError);
  CHECK_THROWS_AS(hjit::random::uniform(hjit::random::key(0), {3}, DType::F32, 2, 1), hjit::ValueError);
  CHECK_THROWS_AS(hjit::dropout(hjit::random::key(0), x, 1.0), hjit::ValueError);
  CHECK_THROWS_AS(hjit::dropout(hjit::random::key(0), x.astype(DType::I32), 0.5), hjit::DTypeError);
  CHECK_THROWS_AS(hjit::random::split(hjit::random::key(0), -1), hjit::ValueError);
  CHECK_THROWS_AS(hjit::random::bits(hjit::random::key(0), {1 << 17, 1 << 16}), hjit::ValueError);
}

TEST_CASE("dropout in a jitted training step: a new key every step, one trace, the same as eager") {
  // A linear model trained with dropout on its input; the key is threaded through the step.
  auto step = [](const Tensor& w, const Tensor& key, const Tensor& x, const Tensor& y) {
    auto [next, sub] = hjit::random::split(key);
    Tensor loss_grad = hjit::grad([&](const Tensor& w) {
      Tensor pred = hjit::matmul(hjit::dropout(sub, x, 0.2), w);
      return hjit::mean((pred - y) * (pred - y));
    })(w);
    return std::make_pair(w - loss_grad * 0.1, next);
  };
  auto jitted = hjit::jit(step);
  Tensor x = Tensor::randn({16, 4}, 1), y = Tensor::randn({16, 1}, 2);
  Tensor w_e = Tensor::zeros({4, 1}), w_c = Tensor::zeros({4, 1});
  Tensor k_e = hjit::random::key(7), k_c = hjit::random::key(7);
  for (int i = 0; i < 5; ++i) {
    std::tie(w_e, k_e) = step(w_e, k_e, x, y);
    std::tie(w_c, k_c) = jitted(w_c, k_c, x, y);
    CHECK(k_c.to_vector<uint32_t>() == k_e.to_vector<uint32_t>());
    CHECK_CLOSE(w_c, w_e);
  }
  CHECK(jitted.stats().traces == 1);
}

// torch.jit.trace's documented pitfall: the branch taken by the example input is recorded, and a
// later input that would take the other branch silently gets the wrong one. Guarded, it re-traces.
TEST_CASE("concrete tracing: a value read is a guard, and a changed value traces another version") {
  int runs = 0;
  auto branchy = [&](const Tensor& x) {
    ++runs;
    if (hjit::sum(x) > 0.0) return x * 2.0;
    return -x;
  };
  auto f = hjit::jit(branchy, {.trace_mode = hjit::TraceMode::Concrete});
  Tensor pos = f32({1, 2}, {2}), neg = f32({-3, 1}, {2});
  CHECK(test::vals(f(pos)) == std::vector<float>{2, 4});
  CHECK(test::vals(f(neg)) == std::vector<float>{3, -1});  // frozen tracing would give -6, 2
  CHECK(f.stats().traces == 2);
  CHECK(f.stats().guard_failures == 1);
  runs = 0;
  CHECK(test::vals(f(f32({5, 5}, {2}))) == std::vector<float>{10, 10});   // version 1, compiled
  CHECK(test::vals(f(f32({-1, -1}, {2}))) == std::vector<float>{1, 1});   // version 2, compiled
  CHECK(runs == 0);
  CHECK(f.stats().traces == 2);
}

// MegEngine's trace guide (symbolic=False): a Python loop whose trip count is read from a tensor is
// recorded unrolled for the first value; guarded, each count gets its own version.
TEST_CASE("concrete tracing: a loop bound read from a tensor, and to_vector reads") {
  auto f = hjit::jit([](const Tensor& x, const Tensor& n) {
    Tensor acc = x;
    for (int i = 0; i < n.item<int>(); ++i) acc = acc * 0.5 + 1.0;
    std::vector<float> v = hjit::max(x).reshape({1}).to_vector<float>();
    return v[0] > 10 ? acc + 100.0 : acc;
  }, {.trace_mode = hjit::TraceMode::Concrete, .warn_after_retraces = 4});
  auto eager = [](const Tensor& x, int n) {
    Tensor acc = x;
    for (int i = 0; i < n; ++i) acc = acc * 0.5 + 1.0;
    return hjit::max(x).item<float>() > 10 ? acc + 100.0 : acc;
  };
  Tensor x = f32({1, 4}, {2}), big = f32({1, 40}, {2});
  for (int round = 0; round < 2; ++round)
    for (int n : {0, 3, 1, 3}) {
      Tensor count = Tensor::scalar(n, DType::I32);
      CHECK_CLOSE(f(x, count), eager(x, n));
      CHECK_CLOSE(f(big, count), eager(big, n));
    }
  CHECK(f.stats().traces == 6);  // 3 trip counts x 2 outcomes of the max test, each traced once
  CHECK(f.stats().recompile_warning.find("re-traced 5 times") != std::string::npos);
  CHECK(f.stats().recompile_warning.find("value read 1 of 2 while tracing differs") != std::string::npos);
}

TEST_CASE("concrete tracing: guarded versions with updates, errors while tracing a new version") {
  Tensor w = f32({1, 1}, {2});
  auto f = hjit::jit([&](const Tensor& x) {
    if (hjit::sum(x) > 0.0) w.assign(w + x);  // guards on the comparison (an item() would guard the sum)
    else w.assign(w - 1.0);
    if (hjit::sum(x) > 100.0) throw hjit::ValueError("too big");
    return w * 1.0;
  }, {.trace_mode = hjit::TraceMode::Concrete});
  CHECK(test::vals(f(f32({1, 2}, {2}))) == std::vector<float>{2, 3});
  CHECK(test::vals(f(f32({-5, 0}, {2}))) == std::vector<float>{1, 2});   // new version
  CHECK(test::vals(f(f32({1, 1}, {2}))) == std::vector<float>{2, 3});    // version 1, compiled
  CHECK(test::vals(w) == std::vector<float>{2, 3});                        // updated once per call
  // A value no version read: traced by running the call eagerly, which writes and then throws,
  // exactly as the same code does without jit.
  CHECK_THROWS_AS(f(f32({200, 0}, {2})), hjit::ValueError);
  CHECK(test::vals(w) == std::vector<float>{202, 3});
  CHECK(test::vals(f(f32({-1, 0}, {2}))) == std::vector<float>{201, 2});  // version 2 still serves
  CHECK(f.stats().traces == 2);  // a trace that threw made no version
}

// MegEngine's exclude_from_trace and a PyTorch-style graph break: a value read in the middle of
// the function ends a compiled segment; host code runs at every call.
// A break computes what the code after it still holds, once: the segment after a read starts from
// those values, not from the arguments again.
TEST_CASE("fullgraph = false: values held across a break are computed once, small segments run eagerly") {
  Tensor w = hjit::random::normal(hjit::random::key(3), {256, 256}, DType::F32);
  auto fn = [&](const Tensor& x) {
    Tensor h = hjit::relu(hjit::matmul(hjit::matmul(x, w), w));  // held across the read
    const float s = hjit::sum(h).item<float>();
    return h * double(s > 0 ? 1.0 / s : 1.0);
  };
  auto f = hjit::jit(fn, {.name = "held", .fullgraph = false});
  Tensor x = hjit::random::normal(hjit::random::key(4), {256, 256}, DType::F32);
  CHECK_CLOSE(f(x), fn(x));
  const std::string ex = f.explain(x);
  INFO(ex);
  // The last segment scales h: its graph reads h (an input), no matmul.
  const size_t last = ex.find("(results and updates)");
  REQUIRE(last != std::string::npos);
  CHECK(ex.find("matmul", last) == std::string::npos);

  // A segment this small runs on the eager kernels at first (a detector's steps between reads
  // change size with every input), and is compiled once the same graph keeps coming back.
  auto small = hjit::jit([](const Tensor& v) {
    Tensor y = v * 2.0 + 1.0;
    const int64_t n = hjit::sum((y > 3.0).astype(DType::I64)).item<int64_t>();  // a count read: a break
    return hjit::sum(y) * double(n);
  }, {.name = "small", .fullgraph = false});
  Tensor v = f32({1, 2, 3}, {3});
  for (int call = 1; call <= 3; ++call) {
    CHECK(test::vals(small(v)) == std::vector<float>{30});  // (2 values above 3) x (3 + 5 + 7)
    CHECK(small.stats().compiles == 0);
  }
  CHECK(test::vals(small(v)) == std::vector<float>{30});
  CHECK(small.stats().compiles + small.stats().loaded > 0);
  CHECK(test::vals(small(f32({5, 0}, {2}))) == std::vector<float>{12});  // a new size: eager again
}

// A captured tensor assigned before a read and again after it: what the segments compute from it,
// and its value after each call, are eager's.
TEST_CASE("fullgraph = false: a captured tensor assigned around the reads ends each call as eagerly") {
  Tensor w_eager = f32({1, 2}, {2}), w_jit = f32({1, 2}, {2});
  auto make = [](Tensor& w) {
    return [&w](const Tensor& x) {
      w.assign(w * 2.0);
      Tensor y = x + w;
      const float s = hjit::sum(y).item<float>();
      w.assign(w + 1.0);
      Tensor z = y * double(s) + w;
      const float t = hjit::max(z).item<float>();
      return z - double(t) + y;
    };
  };
  auto eager = make(w_eager);
  auto f = hjit::jit(make(w_jit), {.fullgraph = false});
  for (int i = 0; i < 5; ++i) {
    const Tensor x = f32({float(i), 1.f - float(i)}, {2});
    const Tensor got = f(x), want = eager(x);  // (once each: CHECK_CLOSE reads its arguments twice)
    CHECK_CLOSE(got, want);
    CHECK_CLOSE(w_jit, w_eager);
  }
  CHECK(f.stats().graph_breaks == 5 * 2);
}

TEST_CASE("fullgraph = false: reads break the graph, host code runs at every call, explain() shows why") {
  std::vector<float> logged;
  Tensor scale = f32({2, 2}, {2});  // captured
  auto fn = [&](const Tensor& x, const Tensor& n) {
    Tensor loss = hjit::sum(x * scale);
    hjit::exclude_from_trace([&] { logged.push_back(loss.item<float>()); });
    Tensor acc = x;
    for (int i = 0; i < n.item<int>(); ++i) acc = acc * 0.5 + 1.0;  // a trip count read from a tensor
    if (hjit::max(acc) > 3.0) acc = acc - 3.0;
    return acc + loss;
  };
  auto f = hjit::jit(fn, {.fullgraph = false});
  for (int n : {0, 2, 5, 2}) {
    Tensor x = f32({1.f + float(n), 4}, {2}), count = Tensor::scalar(n, DType::I64);
    logged.clear();
    Tensor want = fn(x, count);
    REQUIRE(logged.size() == 1);
    const float eager_logged = logged[0];
    logged.clear();
    CHECK_CLOSE(f(x, count), want);
    REQUIRE(logged.size() == 1);  // ran at this call, with this call's value
    CHECK(logged[0] == eager_logged);
  }
  CHECK(f.stats().graph_breaks == 4 * 3);  // loss, n, the comparison: every call
  const std::string ex = f.explain(f32({1, 4}, {2}), Tensor::scalar(2, DType::I64));
  CHECK(ex.find("4 segments") != std::string::npos);
  CHECK(ex.find("ends at item of f32[] (reduce_sum)") != std::string::npos);
  CHECK(ex.find("ends at item of i64[]") != std::string::npos);
  CHECK(ex.find("ends at operator bool of bool[] (gt)") != std::string::npos);
  // The default (fullgraph) still refuses reads, and host code in a function traced once.
  auto strict = hjit::jit([](const Tensor& x) { return x * double(hjit::sum(x).item<float>()); });
  CHECK_THROWS_AS(strict(f32({1, 2}, {2})), hjit::ConcretizationError);
  auto host = hjit::jit([&](const Tensor& x) { hjit::exclude_from_trace([] {}); return x; });
  CHECK_THROWS_AS(host(f32({1, 2}, {2})), hjit::ValueError);
  auto host_concrete = hjit::jit([&](const Tensor& x) { hjit::exclude_from_trace([] {}); return x; },
                                 {.trace_mode = hjit::TraceMode::Concrete});
  CHECK_THROWS_AS(host_concrete(f32({1, 2}, {2})), hjit::ValueError);
  hjit::exclude_from_trace([&] { logged.push_back(7); });  // eagerly: just runs
  CHECK(logged.back() == 7);
  CHECK_THROWS_AS(hjit::jit([](const Tensor& x) { return x; }, {.trace_mode = hjit::TraceMode::Concrete, .fullgraph = false}),
                  hjit::ValueError);
}
