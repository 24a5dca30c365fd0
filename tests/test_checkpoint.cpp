// hjit::checkpoint: a function whose intermediate values are recomputed in the backward pass. Its
// gradients are those of the function itself, eagerly and compiled; compiled, it is a pipeline of
// its own whose temporaries are freed when it ends.
#include "examples/resnet_block.h"
#include "tests/support.h"

using hjit::Tensor;
using hjit::Tensors;

namespace {

Tensor block(const Tensor& x, const Tensor& w) { return hjit::tanh(hjit::matmul(x, w)) * 1.5 + x; }

// The most one call of f holds at once beyond what is in use before it (its result included).
template <class F>
int64_t peak_of_call(F& f, const Tensor& x) {
  hjit::reset_peak_memory();
  const int64_t base = hjit::memory_stats().current_bytes;
  f(x);
  return hjit::memory_stats().peak_bytes - base;
}

}  // namespace

TEST_CASE("checkpoint: the function itself, eagerly and traced") {
  Tensor w = test::random({16, 16}, hjit::DType::F32, 1) * 0.3, x = test::random({8, 16}, hjit::DType::F32, 2);
  auto f = [&](const Tensor& x) { return block(x, w); };
  CHECK_CLOSE(hjit::checkpoint(f)(x), f(x));
  auto jitted = hjit::jit([&](const Tensor& x) { return hjit::checkpoint(f)(x); }, {.name = "checkpoint_fwd", .opt_level = 1});
  CHECK_CLOSE(jitted(x), f(x));
  CHECK(jitted.explain(x).find("checkpoint on the host, calling compiled body") != std::string::npos);
  const std::string g = hjit::make_graph([&](const Tensor& x) { return hjit::checkpoint(f)(x); }, x).str();
  CHECK(g.find("checkpoint[body=") != std::string::npos);
  CHECK(hjit::Graph::parse(g).str() == g);
}

TEST_CASE("checkpoint: gradients identical to those without, eagerly and compiled, at every opt level") {
  Tensor w = test::random({16, 16}, hjit::DType::F32, 3) * 0.3, v = test::random({16}, hjit::DType::F32, 4);
  Tensor x = test::random({8, 16}, hjit::DType::F32, 5);
  auto layer = [&](const Tensor& x) { return block(x, w) + v; };  // reads two captured tensors
  auto plain = [&](const Tensor& x) { return hjit::sum(layer(layer(x)) * layer(x)); };
  auto saved = [&](const Tensor& x) {
    auto ck = hjit::checkpoint(layer);
    return hjit::sum(ck(ck(x)) * ck(x));
  };
  const std::vector<Tensor> params{w, v};
  auto [l0, g0] = hjit::value_and_grad(plain, params)(x);
  auto [l1, g1] = hjit::value_and_grad(saved, params)(x);
  CHECK_CLOSE(l1, l0);
  for (size_t k = 0; k < g0.size(); ++k) CHECK_CLOSE_TOL(g1[k], g0[k], 1e-5);
  for (int level : {0, 1, 2}) {
    CAPTURE(level);
    auto step = hjit::jit([&](const Tensor& x) {
      auto [l, g] = hjit::value_and_grad(saved, params)(x);
      g.insert(g.begin(), l);
      return g;
    }, {.name = "checkpoint_grad", .opt_level = level});
    const std::vector<Tensor> got = step(x);
    CHECK_CLOSE_TOL(got[0], l0, 1e-5);
    for (size_t k = 0; k < g0.size(); ++k) CHECK_CLOSE_TOL(got[k + 1], g0[k], 1e-4);
    CHECK(step.stats().schedule.find("host control flow") != std::string::npos);
  }
  // With respect to the input too, through grad(fn).
  CHECK_CLOSE_TOL(hjit::grad(saved)(x), hjit::grad(plain)(x), 1e-5);
}

TEST_CASE("checkpoint: several results, integer operands, nesting") {
  Tensor x = test::random({4, 6}, hjit::DType::F32, 6), n = Tensor::full({6}, 3, hjit::DType::I32);
  auto two = [](const Tensors& a) {
    Tensor s = hjit::exp(a[0] * 0.1) * a[1].astype(hjit::DType::F32);
    return Tensors{s, hjit::sum(s, {1})};
  };
  auto inner = hjit::checkpoint([](const Tensor& v) { return hjit::sin(v) * v; });
  auto loss_ck = [&](const Tensor& x) {
    Tensors r = hjit::checkpoint(two)({x, n});
    return hjit::sum(r[0]) + hjit::sum(inner(r[1]));
  };
  auto loss_plain = [&](const Tensor& x) {
    Tensors r = two({x, n});
    return hjit::sum(r[0]) + hjit::sum(hjit::sin(r[1]) * r[1]);
  };
  CHECK_CLOSE_TOL(hjit::grad(loss_ck)(x), hjit::grad(loss_plain)(x), 1e-5);
  auto step = hjit::jit([&](const Tensor& x) { return hjit::grad(loss_ck)(x); }, {.name = "checkpoint_nested", .opt_level = 1});
  CHECK_CLOSE_TOL(step(x), hjit::grad(loss_plain)(x), 1e-4);
}

TEST_CASE("checkpoint: a deep chain keeps less while training, compiled") {
  // Eight blocks; without checkpoints the backward pass keeps every block's activations.
  Tensor w = test::random({256, 256}, hjit::DType::F32, 7) * 0.05;
  Tensor x = test::random({256, 256}, hjit::DType::F32, 8);
  auto net = [&](bool ck) {
    return [&w, ck](const Tensor& x) {
      auto f = [&w](const Tensor& h) { return block(h, w); };
      Tensor h = x;
      for (int i = 0; i < 8; ++i) h = ck ? hjit::checkpoint(f)(h) : f(h);
      return hjit::mean(h * h);
    };
  };
  auto step = [&](bool ck) {
    return hjit::jit([&w, net, ck](const Tensor& x) { return hjit::grad(net(ck), std::vector<Tensor>{w})(x)[0]; },
                     {.name = ck ? "deep_checkpointed" : "deep_plain", .opt_level = 1});
  };
  auto plain = step(false), saved = step(true);
  CHECK_CLOSE_TOL(saved(x), plain(x), 1e-4);
  const int64_t plain_peak = peak_of_call(plain, x), saved_peak = peak_of_call(saved, x);
  MESSAGE("peak above the inputs: plain " << plain_peak / 1024 << " KiB, checkpointed " << saved_peak / 1024 << " KiB");
  CHECK(saved_peak < plain_peak);
}

// The budget is what the step holds at once beyond its arguments, as estimated before compiling
// (within about a fifth of the measurement: test_memory): a budget a plan meets is met, with as
// few checkpointed runs as meet it; one none meets gets the plan that holds least. (Eight blocks:
// 5.7 MiB plain, the blocks compiled as alike parts that hand on one value each; 3.7 MiB with
// every block checkpointed.)
TEST_CASE("memory_budget_mb: the step is checkpointed to fit the budget, gradients unchanged") {
  Tensor w = test::random({256, 256}, hjit::DType::F32, 9) * 0.05;
  Tensor x = test::random({256, 256}, hjit::DType::F32, 10);
  auto loss = [&w](const Tensor& x) {
    Tensor h = x;
    for (int i = 0; i < 8; ++i) h = block(h, w);
    return hjit::mean(h * h);
  };
  auto step = [&](int64_t budget) {
    return hjit::jit([&w, loss](const Tensor& x) { return hjit::grad(loss, std::vector<Tensor>{w})(x)[0]; },
                     {.name = "budget_" + std::to_string(budget), .opt_level = 1, .memory_budget_mb = budget});
  };
  auto runs = [&](auto& f) {  // checkpointed runs: each a host step forward and one backward
    const std::string e = f.explain(x);
    size_t steps = 0;
    for (size_t at = e.find("checkpoint on the host"); at != std::string::npos; at = e.find("checkpoint on the host", at + 1)) ++steps;
    return steps / 2;
  };
  auto plain = step(0);
  const Tensor want = plain(x);
  const int64_t plain_peak = peak_of_call(plain, x);
  CHECK(plain_peak > (5 << 20));
  size_t last_runs = 0;
  for (int64_t budget : {1024, 5, 4}) {
    CAPTURE(budget);
    auto fitted = step(budget);
    CHECK_CLOSE_TOL(fitted(x), want, 1e-4);
    const int64_t peak = peak_of_call(fitted, x);
    const size_t made = runs(fitted);
    MESSAGE("budget " << budget << " MiB: " << made << " checkpointed runs, peak above the inputs " << peak / 1024 << " KiB");
    CHECK(peak <= (budget << 20) * 5 / 4);  // met, as estimated
    CHECK(made >= last_runs);       // a smaller budget, as many runs or more
    CHECK((made == 0) == (budget == 1024));
    CHECK((fitted.stats().schedule.find("host control flow") != std::string::npos) == (made > 0));
    last_runs = made;
  }
  // 2 MiB: no plan meets it (every block checkpointed holds 3.5 MiB): the plan that holds least.
  auto tight = step(2);
  CHECK_CLOSE_TOL(tight(x), want, 1e-4);
  const int64_t tight_peak = peak_of_call(tight, x);
  MESSAGE("budget 2 MiB (not met): peak above the inputs " << tight_peak / 1024 << " KiB, plain " << plain_peak / 1024 << " KiB");
  CHECK(tight_peak < plain_peak * 3 / 4);
  CHECK(runs(tight) >= last_runs);
}

// One ResNet block: its backward pass needs both convolutions' outputs at once, and the values that
// would cross a cut in its forward pass are more than the two it stores, so no run is checkpointed
// however small the budget (checkpointed, W9 at batch 32 held 309 MB instead of 141 MB).
TEST_CASE("memory_budget_mb: no checkpoint where none would keep less") {
  BasicBlock net(16, 3);
  Tensor x = test::random({4, 16, 48, 48}, hjit::DType::F32, 4);  // its convolutions' outputs: 1.2 MB
  auto loss = [&](const Tensor& x) { return hjit::mean(net(x, true)); };
  auto step = hjit::jit([&](const Tensor& x) { return hjit::grad(loss, net.parameters())(x); },
                        {.name = "budget_one_block", .opt_level = 1, .memory_budget_mb = 1});
  const Tensors want = hjit::grad(loss, net.parameters())(x), got = step(x);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK_CLOSE_TOL(got[i], want[i], 1e-4);
  CHECK(step.graph(x).str().find("checkpoint[") == std::string::npos);
  CHECK(step.stats().schedule.find("host control flow") == std::string::npos);
}
