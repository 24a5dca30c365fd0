// jit(): the cache, static arguments, result structures, captured tensors and assign, reading
// traced values, concurrency, check_trace and the concrete trace mode.
#include <chrono>
#include <array>
#include <atomic>
#include <thread>

#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;

namespace {

Tensor f32(std::vector<float> v, Shape s) { return Tensor::from_vector(v, s); }

enum class Act { Relu, Tanh };

struct Config {
  int heads;
  bool operator==(const Config&) const = default;
};

}  // namespace

template <>
struct std::hash<Config> {
  size_t operator()(const Config& c) const { return std::hash<int>{}(c.heads); }
};

TEST_CASE("a jitted function equals eager, and a second call traces and compiles nothing") {
  Tensor a = Tensor::randn({2, 3}, 1), b = Tensor::randn({2, 3}, 2), c = Tensor::randn({2, 3}, 3);
  auto f = hjit::jit([](const Tensor& a, const Tensor& b, const Tensor& c) { return a * b + c; });
  CHECK_CLOSE(f(a, b, c), a * b + c);
  CHECK(f.stats().traces == 1);
  CHECK(f.stats().compiles + f.stats().loaded == 1);
  CHECK(f.stats().compile_ms > 0);
  CHECK_CLOSE(f(a, b, c), a * b + c);
  CHECK(f.stats().traces == 1);
  CHECK(f.stats().compiles + f.stats().loaded == 1);
  CHECK(f.stats().cache_hits == 1);
  // New values with the same signature: still cached.
  Tensor d = Tensor::randn({2, 3}, 4);
  CHECK_CLOSE(f(d, b, c), d * b + c);
  CHECK(f.stats().traces == 1);
  // A new shape or dtype compiles once more, then hits.
  Tensor e = Tensor::randn({4, 3}, 5);
  CHECK_CLOSE(f(e, e, e), e * e + e);
  CHECK(f.stats().traces == 2);
  f(e, e, e);
  CHECK(f.stats().traces == 2);
  Tensor ed = e.astype(DType::F64);
  CHECK_CLOSE(f(ed, ed, ed), ed * ed + ed);
  CHECK(f.stats().traces == 3);
  CHECK(f.stats().cache_hits == 3);
}

TEST_CASE("static arguments are part of the cache key") {
  auto f = hjit::jit([](const Tensor& x, int n, double scale, bool negate, Act act, const std::string& tag) {
    Tensor y = x * scale;
    for (int i = 0; i < n; ++i) y = y + 1;  // C++ control flow on a static value: resolved at trace time
    if (negate) y = -y;
    y = act == Act::Relu ? hjit::relu(y) : hjit::tanh(y);
    return tag == "double" ? y * 2 : y;
  });
  Tensor x = Tensor::randn({5}, 1);
  CHECK_CLOSE(f(x, 3, 0.5, false, Act::Relu, std::string("plain")), hjit::relu(x * 0.5 + 3));
  CHECK_CLOSE(f(x, 3, 0.5, false, Act::Relu, std::string("plain")), hjit::relu(x * 0.5 + 3));
  CHECK(f.stats().traces == 1);
  CHECK_CLOSE(f(x, 2, 0.5, false, Act::Relu, std::string("plain")), hjit::relu(x * 0.5 + 2));
  CHECK_CLOSE(f(x, 2, 0.5, true, Act::Tanh, std::string("double")), hjit::tanh(-(x * 0.5 + 2)) * 2);
  CHECK(f.stats().traces == 3);
  // A user type with std::hash and operator== is a static argument too.
  auto g = hjit::jit([](const Tensor& x, Config c) { return x * double(c.heads); });
  CHECK_CLOSE(g(x, Config{4}), x * 4);
  CHECK_CLOSE(g(x, Config{4}), x * 4);
  CHECK_CLOSE(g(x, Config{8}), x * 8);
  CHECK(g.stats().traces == 2);
  // Types that cannot be hashed and compared are rejected at compile time.
  struct Opaque {};
  static_assert(!hjit::detail::HashableStatic<Opaque>);
  static_assert(hjit::detail::HashableStatic<Config>);
}

TEST_CASE("results: Tensor, vector, pair, tuple, nothing; vector<Tensor> arguments") {
  Tensor x = Tensor::randn({3}, 1);
  auto vec = hjit::jit([](const std::vector<Tensor>& xs) {
    std::vector<Tensor> out;
    for (const Tensor& t : xs) out.push_back(t * 2);
    return out;
  });
  std::vector<Tensor> r = vec(std::vector<Tensor>{x, x + 1});
  REQUIRE(r.size() == 2);
  CHECK_CLOSE(r[1], (x + 1) * 2);
  CHECK(vec(std::vector<Tensor>{x, x, x}).size() == 3);  // another length: another signature
  CHECK(vec.stats().traces == 2);
  auto pair = hjit::jit([](const Tensor& x) { return std::make_pair(x + 1, std::vector<Tensor>{x, -x}); });
  auto [p1, p2] = pair(x);
  CHECK_CLOSE(p1, x + 1);
  CHECK_CLOSE(p2[1], -x);
  auto tup = hjit::jit([](const Tensor& a, const Tensor& b) { return std::make_tuple(a + b, a - b, hjit::sum(a)); });
  auto [s, d, total] = tup(x, x);
  CHECK_CLOSE(d, x - x);
  CHECK(total.shape() == Shape{});
  Tensor counter = Tensor::zeros({});
  auto side_effect_only = hjit::jit([&](const Tensor& step) { counter.assign(counter + step); });
  side_effect_only(Tensor::scalar(2));
  side_effect_only(Tensor::scalar(3));
  CHECK(counter.item<float>() == 5);
  // Returning an input, a constant, or the same value twice works too.
  auto odd = hjit::jit([](const Tensor& a) { return std::make_tuple(a, Tensor::ones({2}), a * 2, a * 2); });
  auto [o1, o2, o3, o4] = odd(x);
  CHECK_CLOSE(o1, x);
  CHECK(o2.to_vector<float>() == std::vector<float>{1, 1});
  CHECK_CLOSE(o4, x * 2);
  CHECK(!o3.same_storage(o4));
  CHECK(!o1.same_storage(x));
}

TEST_CASE("captured tensors are inputs read at every call, never constants") {
  Tensor w = f32({1, 2, 3}, {3});
  auto f = hjit::jit([&](const Tensor& x) { return x * w; });
  Tensor x = Tensor::ones({3});
  CHECK(f(x).to_vector<float>() == std::vector<float>{1, 2, 3});
  w.assign(f32({10, 20, 30}, {3}));
  CHECK(f(x).to_vector<float>() == std::vector<float>{10, 20, 30});
  CHECK(f.stats().traces == 1);
  // Ops on captured tensors alone are recorded too (not folded into constants at trace time).
  auto g = hjit::jit([&](const Tensor& x) { return x + w.transpose() * 2; });
  g(x);
  w.assign(f32({0, 0, 0}, {3}));
  CHECK(g(x).to_vector<float>() == std::vector<float>{1, 1, 1});
  // Tensors made inside the traced function are constants of the graph.
  Tensor y = Tensor::randn({3}, 9);
  auto h = hjit::jit([](const Tensor& x) { return x + Tensor::from_vector<float>({1, 2, 3}); });
  CHECK(h.graph(y).str().find("constant") != std::string::npos);
  CHECK(h.graph(y).num_captured() == 0);
  CHECK(f.graph(y).num_captured() == 1);
}

TEST_CASE("assign inside a traced function updates parameters in place after every call") {
  Tensor w = f32({1, 1}, {2}), step = Tensor::zeros({}, DType::I64);
  const void* storage = w.data();
  auto train = hjit::jit([&](const Tensor& g) {
    Tensor loss = hjit::sum(w * w);
    w.assign(w - 0.5 * g);
    step.assign(step + 1);
    return loss;
  });
  Tensor g = f32({1, 2}, {2});
  CHECK(train(g).item<float>() == 2);
  CHECK(w.to_vector<float>() == std::vector<float>{0.5, 0});
  CHECK(train(g).item<float>() == 0.25);
  CHECK(w.to_vector<float>() == std::vector<float>{0, -1});
  CHECK(step.item<int64_t>() == 2);
  CHECK(w.data() == storage);
  CHECK(train.stats().traces == 1);
  // Reads after an assign in the same trace see the new value.
  Tensor v = f32({2}, {1});
  auto twice = hjit::jit([&]() {
    v.assign(v * 3);
    return v + 0;
  });
  CHECK(twice().item<float>() == 6);
  CHECK(v.item<float>() == 6);
}

TEST_CASE("reading a traced value throws ConcretizationError naming the function and the fix") {
  hjit::JitOptions o;
  o.name = "branchy";
  auto f = hjit::jit([](const Tensor& x) { return x.item<float>() > 0 ? x : -x; }, o);
  try {
    f(Tensor::scalar(1));
    FAIL("no exception");
  } catch (const hjit::ConcretizationError& e) {
    std::string m = e.what();
    CHECK(m.find("branchy") != std::string::npos);
    CHECK(m.find("static") != std::string::npos);
    CHECK(m.find("where") != std::string::npos);
  }
  CHECK_THROWS_AS(hjit::jit([](const Tensor& x) { return bool(x) ? x : x; })(Tensor::scalar(1)), hjit::ConcretizationError);
  CHECK_THROWS_AS(hjit::jit([](const Tensor& x) { x.to_vector<float>(); return x; })(Tensor::scalar(1)),
                  hjit::ConcretizationError);
  // The fix: select inside the graph.
  auto fixed = hjit::jit([](const Tensor& x) { return hjit::where(x > 0, x, -x); });
  CHECK(fixed(Tensor::scalar(-2)).item<float>() == 2);
  // Tracers print as what they are, without throwing.
  auto printer = hjit::jit([](const Tensor& x) {
    CHECK(x.str() == "Traced<f32[2]>");
    return x;
  });
  printer(Tensor::zeros({2}));
}

TEST_CASE("concurrent calls are safe and compile once") {
  auto f = hjit::jit([](const Tensor& x) { return hjit::exp(x) * 2 + 1; });
  Tensor x = Tensor::randn({1000}, 1);
  Tensor want = hjit::exp(x) * 2 + 1;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i)
        if (!test::compare(f(x), want, 1e-6).empty()) ++bad;
    });
  for (auto& t : threads) t.join();
  CHECK(bad == 0);
  CHECK(f.stats().traces == 1);
  CHECK(f.stats().compiles + f.stats().loaded == 1);
  CHECK(f.stats().cache_hits == 199);
}

TEST_CASE("stats tell pipelines compiled here from those the disk cache held") {
  // A graph no earlier run made (a constant of this run's clock): compiled here, none loaded.
  const float unique = float(std::chrono::steady_clock::now().time_since_epoch().count() % 1000003) + 0.5f;
  auto f = hjit::jit([unique](const Tensor& x) { return hjit::exp(x) * unique; });
  const Tensor x = Tensor::randn({9}, 5);
  f(x);
  CHECK(f.stats().compiles == 1);
  CHECK(f.stats().loaded == 0);
  // The same graph in another function: found in this process's memory, neither compiled nor loaded.
  auto g = hjit::jit([unique](const Tensor& x) { return hjit::exp(x) * unique; });
  g(x);
  CHECK(g.stats().compiles + g.stats().loaded == 0);
}

TEST_CASE("functions that trace to the same graph share one compiled pipeline") {
  auto f = hjit::jit([](const Tensor& x) { return hjit::tanh(x) * 3 - 7; });
  auto g = hjit::jit([](const Tensor& x) { return hjit::tanh(x) * 3 - 7; });
  Tensor x = Tensor::randn({17}, 2);
  f(x);
  g(x);
  CHECK(f.stats().compiles + f.stats().loaded == 1);
  CHECK(g.stats().traces == 1);
  CHECK(g.stats().compiles + g.stats().loaded == 0);
}

TEST_CASE("a jitted function called while tracing another is inlined") {
  auto inner = hjit::jit([](const Tensor& x) { return x * 2; });
  auto outer = hjit::jit([&](const Tensor& x) { return inner(x) + 1; });
  Tensor x = f32({1, 2}, {2});
  CHECK(outer(x).to_vector<float>() == std::vector<float>{3, 5});
  CHECK(inner.stats().traces == 0);
  CHECK(outer.graph(x).str().find("mul") != std::string::npos);
}

TEST_CASE("a traced value that escapes its function is an error, at the end of the trace and when used later") {
  Tensor leaked;
  auto f = hjit::jit([&](const Tensor& x) {
    leaked = x * 2;
    return x;
  });
  CHECK_THROWS_WITH_AS(f(Tensor::ones({2})), doctest::Contains("escaped"), hjit::ValueError);
  CHECK(leaked.is_traced());
  CHECK_THROWS_AS(leaked + 1, hjit::ValueError);
}

TEST_CASE("make_graph, graph() and explain()") {
  auto log2 = [](const Tensor& x) { return hjit::log(x) / hjit::log(Tensor::scalar(2.0)); };
  Tensor x = Tensor::ones({4});
  std::string raw = hjit::make_graph(log2, x).str();
  CHECK(raw.find("log") != std::string::npos);
  auto j = hjit::jit(log2);
  // The optimized graph folds log(2) into a literal.
  std::string opt = j.graph(x).str();
  CHECK(opt.find("0.6931") != std::string::npos);
  CHECK(j.stats().traces == 0);
  std::string ex = j.explain(x);
  CHECK(ex.find("schedule") != std::string::npos);
  CHECK(ex.find("produce") != std::string::npos);
}

TEST_CASE("check_trace compares a new compilation with eager execution") {
  hjit::JitOptions o;
  o.check_trace = true;
  Tensor w = f32({1, 2}, {2});
  auto good = hjit::jit([&](const Tensor& x) {
    w.assign(w * 2);
    return x + w;
  }, o);
  CHECK(good(f32({1, 1}, {2})).to_vector<float>() == std::vector<float>{3, 5});
  CHECK(w.to_vector<float>() == std::vector<float>{2, 4});  // updated once, not twice
  // A function that behaves differently when traced: caught.
  auto liar = hjit::jit([](const Tensor& x) { return x.is_traced() ? x * 2 : x * 3; }, o);
  CHECK_THROWS_AS(liar(Tensor::ones({3})), hjit::CompileError);
}

TEST_CASE("concrete tracing runs the first call eagerly and specializes to what it read") {
  hjit::JitOptions o;
  o.trace_mode = hjit::TraceMode::Concrete;
  int runs = 0;
  auto f = hjit::jit([&](const Tensor& x) {
    ++runs;
    return hjit::sum(x) > 0.0 ? x * 2 : x * -1;  // a value read: fine in this mode, and a guard
  }, o);
  CHECK(f(f32({1, 2}, {2})).to_vector<float>() == std::vector<float>{2, 4});
  CHECK(f(f32({3, 4}, {2})).to_vector<float>() == std::vector<float>{6, 8});
  CHECK(runs == 1);  // the second call read the same value: it ran the compiled graph
  CHECK(f.stats().traces == 1);
  CHECK(f(f32({-3, 1}, {2})).to_vector<float>() == std::vector<float>{3, -1});  // another value: traced again
  CHECK(f.stats().traces == 2);
}

TEST_CASE("options: every opt level and autoscheduler compiles and agrees") {
  Tensor x = Tensor::randn({64, 48}, 3), w = Tensor::randn({48, 32}, 4);
  auto fn = [](const Tensor& x, const Tensor& w) { return hjit::softmax(hjit::relu(hjit::matmul(x, w))); };
  Tensor want = fn(x, w);
  for (auto [level, sched] : std::vector<std::pair<int, std::string>>{
           {0, ""}, {1, ""}, {2, ""}, {2, "Adams2019"}, {2, "Li2018"}, {2, "Mullapudi2016"}}) {
    INFO("opt_level " << level << " " << sched);
    hjit::JitOptions o;
    o.opt_level = level;
    o.autoscheduler = sched;
    CHECK_CLOSE(hjit::jit(fn, o)(x, w), want);
  }
}

// An autoscheduler's schedule is tried on made-up inputs before it is used: those inputs must not
// make a valid call fail (ids beyond a 2-row table raised IndexError from the first call), and a
// schedule that writes outside its buffers (Adams2019's vectorized tril masks) is never used.
TEST_CASE("autoscheduled pipelines: trial inputs never fail a valid call, and schedules that write out of bounds are refused") {
  Tensor table = Tensor::randn({2, 8}, 1), ids = Tensor::from_vector<int64_t>({0, 1, 1, 0, 1});
  auto embed = [](const Tensor& t, const Tensor& i) { return hjit::relu(hjit::embedding(t, i)) * 2; };
  std::vector<Tensor> masks;
  for (hjit::DType d : {hjit::DType::Bool, hjit::DType::U8, hjit::DType::I8, hjit::DType::I16})
    masks.push_back((Tensor::randn({3, 4}, 2 + int(masks.size())) * 2).astype(d));
  auto tril_all = [](const std::vector<Tensor>& x) {
    std::vector<Tensor> r;
    for (const Tensor& t : x) r.push_back(hjit::tril(t, 0));
    return r;
  };
  for (const std::string sched : {"Adams2019", "Li2018", "Mullapudi2016"}) {
    INFO(sched);
    hjit::JitOptions o;
    o.opt_level = 2;
    o.autoscheduler = sched;
    CHECK_CLOSE(hjit::jit(embed, o)(table, ids), embed(table, ids));
    std::vector<Tensor> got = hjit::jit(tril_all, o)(masks), want = tril_all(masks);
    for (size_t k = 0; k < got.size(); ++k) CHECK(got[k].to_vector<double>() == want[k].to_vector<double>());
  }
}

TEST_CASE("compiled attention holds the scores of a tile of query rows, never an [S, T] matrix") {
  const int64_t heads = 8, seq = 256, dim = 64;
  Tensor q = Tensor::randn({1, heads, seq, dim}, 1), k = Tensor::randn({1, heads, seq, dim}, 2), v = Tensor::randn({1, heads, seq, dim}, 3);
  auto attn = hjit::jit([](const Tensor& q, const Tensor& k, const Tensor& v) { return hjit::scaled_dot_product_attention(q, k, v, true); });
  CHECK_CLOSE(attn(q, k, v), hjit::scaled_dot_product_attention(q, k, v, true));
  // Every buffer the lowered statement allocates, and its size in elements.
  std::string stmt = attn.explain(q, k, v);
  int64_t largest_scores = 0;
  for (size_t at = stmt.find("allocate "); at != std::string::npos; at = stmt.find("allocate ", at + 1)) {
    size_t open = stmt.find('[', at), close = stmt.find(']', at);
    std::string name = stmt.substr(at + 9, open - at - 9), dims = stmt.substr(open + 1, close - open - 1);
    int64_t elements = 1;
    for (size_t star = dims.find('*'); star != std::string::npos; star = dims.find('*', star + 1)) {
      size_t end = dims.find_first_of(" *", star + 2);
      elements *= std::stoll(dims.substr(star + 2, end == std::string::npos ? std::string::npos : end - star - 2));
    }
    if (name.find("scores") != std::string::npos || name.find("probs") != std::string::npos)
      largest_scores = std::max(largest_scores, elements);
  }
  CHECK(largest_scores > 0);
  CHECK(largest_scores <= seq * 8);  // at most a few query rows of one head at a time
}

TEST_CASE("re-tracing past the threshold warns with what changed; the cache keeps the most recently used") {
  hjit::JitOptions o;
  o.warn_after_retraces = 3;
  o.max_cache_entries = 4;
  o.opt_level = 0;
  auto f = hjit::jit([](const Tensor& x, int k) { return x + double(k); }, o);
  Tensor x = Tensor::ones({2});
  for (int k = 0; k < 4; ++k) CHECK(f(x, k).to_vector<float>() == std::vector<float>{1.f + k, 1.f + k});
  CHECK(f.stats().traces == 4);
  CHECK(f.stats().recompile_warning.empty());  // 3 re-traces: at the threshold, not past it
  CHECK(f(x, 4).to_vector<float>() == std::vector<float>{5, 5});
  const std::string w = f.stats().recompile_warning;
  CHECK(w.find("re-traced 4 times") != std::string::npos);
  CHECK(w.find("static argument 1: 3 -> 4") != std::string::npos);
  // Bounded: 4 versions; k = 0 was the least recently used and was dropped, k = 4 is kept.
  CHECK(f.stats().entries == 4);
  CHECK(f.stats().evictions == 1);
  f(x, 4);
  CHECK(f.stats().traces == 5);
  f(x, 1);  // used, so it stays
  f(x, 0);  // traced again, evicting k = 2 (the least recently used now)
  CHECK(f.stats().traces == 6);
  f(x, 1);
  CHECK(f.stats().traces == 6);
  CHECK(f(x, 2).to_vector<float>() == std::vector<float>{3, 3});
  CHECK(f.stats().traces == 7);
  CHECK(f.stats().entries == 4);
}

TEST_CASE("a bad index in every parallel task is one IndexError with one message") {
  // Each row's task fails on its own thread at about the same time; the call reports the first.
  auto f = hjit::jit([](const Tensor& table, const Tensor& idx) { return hjit::embedding(table, idx); });
  Tensor table = Tensor::randn({4, 64}, 1);
  Tensor good = Tensor::full({1 << 14}, 3, DType::I32);
  CHECK(test::compare(f(table, good), hjit::embedding(table, good), 0).empty());
  Tensor bad = Tensor::full({1 << 14}, 7, DType::I32);
  for (int i = 0; i < 20; ++i) {
    try {
      f(table, bad);
      FAIL("no error for index 7 of 4 rows");
    } catch (const hjit::IndexError& e) {
      const std::string msg = e.what();
      CHECK(msg == "embedding: id 7 is out of range [0, 4)");
    }
  }
  CHECK(f.stats().compiles + f.stats().loaded == 1);
}

TEST_CASE("matrix-vector products over weights larger than the L2 cache compile as eager, at any width") {
  // Along rows ([out, in] read transposed: each thread's outputs as interleaved runs) and across
  // them ([in, out], the reduction outermost: each thread a part of the reduction over every
  // column, or, where the vectors do not divide the columns, its share of the columns), with
  // widths that the threads, runs and vectors do not divide.
  uint64_t seed = 300;
  auto along_rows = hjit::jit([](const Tensor& x, const Tensor& w) { return hjit::matmul(x, hjit::transpose(w)); });
  auto across = hjit::jit([](const Tensor& x, const Tensor& w) { return hjit::matmul(x, w); });
  for (auto [rows, in, out] : {std::array<int64_t, 3>{1, 768, 1024}, {2, 3072, 768}, {1, 769, 1024}, {2, 1024, 1100}, {1, 3000, 701}, {1, 768, 1999}}) {
    CAPTURE(rows);
    CAPTURE(in);
    CAPTURE(out);
    const Tensor x = test::random({rows, in}, DType::F32, seed++);
    const Tensor w_out_in = test::random({out, in}, DType::F32, seed++), w_in_out = test::random({in, out}, DType::F32, seed++);
    CHECK_CLOSE_TOL(along_rows(x, w_out_in), hjit::matmul(x, hjit::transpose(w_out_in)), 1e-4);
    CHECK_CLOSE_TOL(across(x, w_in_out), hjit::matmul(x, w_in_out), 1e-4);
  }
}

TEST_CASE("1x1 convolutions compile as matmuls: strided, batched, with bias and gradients, equal to eager") {
  // simplify turns them into products of the weight with each image's (subsampled) pixels.
  uint64_t seed = 400;
  for (auto [batch, stride_h, stride_w, size] : {std::array<int64_t, 4>{1, 1, 1, 9}, {3, 2, 2, 9}, {2, 2, 3, 7}, {1, 1, 1, 1}}) {
    CAPTURE(batch);
    CAPTURE(stride_h);
    CAPTURE(stride_w);
    const Tensor x = test::random({batch, 5, size, size + 2}, DType::F32, seed++);
    const Tensor w = test::random({6, 5, 1, 1}, DType::F32, seed++), b = test::random({6}, DType::F32, seed++);
    const hjit::Pair stride{stride_h, stride_w};
    auto conv = [stride](const Tensor& x, const Tensor& w, const Tensor& b) { return hjit::relu(hjit::conv2d(x, w, b, stride)); };
    auto f = hjit::jit(conv, {.name = "pointwise_conv"});
    CHECK(f.explain(x, w, b).find("matmul") != std::string::npos);
    CHECK_CLOSE_TOL(f(x, w, b), conv(x, w, b), 1e-5);
    auto loss = [conv](const Tensor& x, const Tensor& w, const Tensor& b) { return hjit::sum(conv(x, w, b) * conv(x, w, b)); };
    auto grads = hjit::jit(hjit::grad(loss, std::vector<int>{0, 1, 2}), {.name = "pointwise_conv_grad"});
    const std::vector<Tensor> got = grads(x, w, b), want = hjit::grad(loss, std::vector<int>{0, 1, 2})(x, w, b);
    REQUIRE(got.size() == 3);
    for (size_t i = 0; i < 3; ++i) CHECK_CLOSE_TOL(got[i], want[i], 1e-4);
  }
  // A dynamic batch: one pipeline serves every batch, 1 included (one image's product is of two
  // matrices, as the batched one's becomes at a batch of 1).
  const Tensor w = test::random({6, 5, 1, 1}, DType::F32, seed++);
  auto conv = [&](const Tensor& x) { return hjit::relu(hjit::conv2d(x, w, std::nullopt, {2, 2})); };
  auto dynamic = hjit::jit(conv, {.name = "pointwise_conv_dynamic", .dynamic_dims = {{0, 0}}});
  for (int64_t batch : {2, 3, 1, 4}) {
    CAPTURE(batch);
    const Tensor x = test::random({batch, 5, 9, 8}, DType::F32, seed++);
    CHECK_CLOSE_TOL(dynamic(x), conv(x), 1e-5);
  }
  CHECK(dynamic.stats().compiles + dynamic.stats().loaded == 1);
}
