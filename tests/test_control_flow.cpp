// Control flow ops (cond, while_loop, fori_loop, scan): the classic examples of the JAX and
// PyTorch guides, compiled against eager, their graphs (one body, not unrolled copies), their
// gradients against the same computation unrolled in C++, and their errors.
#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;
using hjit::Tensors;
using test::f32;

namespace {

Tensor i32(int v) { return Tensor::scalar(v, DType::I32); }

// Operations of kind op (a control flow op with several results is one node per result).
int count_ops(const hjit::Graph& g, hjit::OpKind op) {
  int n = 0;
  for (const hjit::Node& node : g.nodes) n += node.op == op && (!node.attrs.has("result") || node.attrs.i("result") == 0);
  return n;
}

hjit::JitOptions opt(int level) {
  hjit::JitOptions o;
  o.opt_level = level;
  return o;
}

// The example: one trace serves both branches, chosen per call.
Tensor branchy(const Tensor& x) {
  return hjit::cond(hjit::sum(x) > 0.0, [](const Tensor& v) { return v * 2.0; }, [](const Tensor& v) { return -v; }, x);
}

Tensor halving(const Tensor& init, int n) {
  return hjit::fori_loop(0, n, [](const Tensor& i, const Tensor& acc) { return acc * 0.5 + i; }, init);
}

// JAX's g(x, n): `while i < n: i += 1` on a traced n.
Tensor jax_g(const Tensor& x, const Tensor& n) {
  Tensors r = hjit::while_loop([&](const Tensors& s) { return s[0] < n; },
                               [](const Tensors& s) { return Tensors{s[0] + 1, s[1]}; }, Tensors{i32(0), x});
  return r[1] + r[0];
}

// PyTorch's foo(len) from the TorchScript guide: a loop whose trip count is a value, with a branch
// on the index inside.
Tensor torch_foo(const Tensor& len) {
  return hjit::fori_loop(i32(0), len, [](const Tensor& i, const Tensor& rv) {
    return hjit::cond(i < 10, [](const Tensor& r) { return r - 1.0; }, [](const Tensor& r) { return r + 1.0; }, rv);
  }, Tensor::zeros({3, 4}));
}

// An RNN over the rows of xs: scan with a captured weight, a y per step.
std::pair<Tensor, Tensor> rnn(const Tensor& xs, const Tensor& w, const Tensor& h0, bool reverse) {
  hjit::ScanResult r = hjit::scan([&](const Tensors& c, const Tensors& x) {
    Tensor h = hjit::tanh(hjit::matmul(c[0], w) + x[0]);
    return std::pair<Tensors, Tensors>{{h}, {h * 2.0}};
  }, {h0}, {xs}, -1, reverse);
  return {r.carries[0], r.ys[0]};
}

// The same, unrolled in C++: the oracle for values and gradients.
std::pair<Tensor, Tensor> rnn_unrolled(const Tensor& xs, const Tensor& w, const Tensor& h0, bool reverse) {
  const int64_t t_len = xs.shape()[0];
  Tensor h = h0;
  std::vector<Tensor> ys(static_cast<size_t>(t_len));
  for (int64_t s = 0; s < t_len; ++s) {
    const int64_t t = reverse ? t_len - 1 - s : s;
    h = hjit::tanh(hjit::matmul(h, w) + hjit::squeeze(hjit::slice(xs, 0, t, t + 1), {0}));
    ys[size_t(t)] = h * 2.0;
  }
  return {h, t_len > 0 ? hjit::stack(ys, 0) : Tensor::zeros({0, h.shape()[0], h.shape()[1]}, h.dtype())};
}

}  // namespace

TEST_CASE("cond: the branch is chosen per call, one trace, at every opt level") {
  for (int level : {0, 1, 2}) {
    auto f = hjit::jit(branchy, opt(level));
    for (Tensor x : {f32({1, -2, 3}, {3}), f32({-1, -2, 3}, {3}), f32({0.5f}, {1}), Tensor::zeros({2, 0})}) {
      CHECK_CLOSE(f(x), branchy(x));
      CHECK_CLOSE(f(-x), branchy(-x));
    }
    CHECK(test::vals(f(f32({1, -2, 3}, {3}))) == std::vector<float>{2, -4, 6});
    CHECK(test::vals(f(f32({-1, -2, 3}, {3}))) == std::vector<float>{1, 2, -3});
    CHECK(f.stats().traces == 3);  // one per shape, not per branch
  }
  const hjit::Graph g = hjit::make_graph(branchy, f32({1, 2}, {2}));
  CHECK(count_ops(g, hjit::OpKind::Cond) == 1);
  const std::string text = g.str();
  CHECK(text.find("cond[then={ lambda") != std::string::npos);
  CHECK(text.find("neg") != std::string::npos);  // the false branch, printed inside
}

TEST_CASE("cond: several operands and results, values captured from the caller, nested in a loop") {
  Tensor w = f32({0.5f, -1.5f}, {2});  // a parameter the branches read: an operand of the op
  auto f = [&](const Tensor& x, const Tensor& y, const Tensor& flag) {
    Tensors r = hjit::cond(flag, [&](const Tensors& v) { return Tensors{v[0] * w + v[1], hjit::sum(v[0])}; },
                           [&](const Tensors& v) { return Tensors{v[1] - x, hjit::max(v[1])}; }, Tensors{x, y});
    return r[0] * r[1];
  };
  auto jf = hjit::jit(f);
  Tensor x = f32({1, 2}, {2}), y = f32({3, -4}, {2});
  for (bool b : {true, false}) CHECK_CLOSE(jf(x, y, Tensor::scalar(b, DType::Bool)), f(x, y, Tensor::scalar(b, DType::Bool)));
  CHECK(jf.stats().traces == 1);
  // A cond inside a fori_loop inside a jitted function, on an integer carry too.
  auto g = [](const Tensor& x) {
    Tensors r = hjit::fori_loop(0, 7, [](const Tensor& i, const Tensors& s) {
      Tensor odd = (i - (i / 2) * 2) == 1;  // i32 arithmetic
      return Tensors{hjit::cond(odd, [](const Tensor& v) { return v * 3.0; }, [](const Tensor& v) { return v - 1.0; }, s[0]),
                     s[1] + i};
    }, Tensors{x, i32(0)});
    return std::make_pair(r[0], r[1]);
  };
  auto jg = hjit::jit(g);
  Tensor x2 = f32({1, 2, 3}, {3});
  auto [a, n] = jg(x2);
  auto [ea, en] = g(x2);
  CHECK_CLOSE(a, ea);
  CHECK(n.item<int32_t>() == 21);
  CHECK(en.item<int32_t>() == 21);
}

TEST_CASE("fori_loop: the issue's example, a loop of compiled bodies, not an unrolled trace") {
  for (int level : {0, 1, 2}) {
    auto f = hjit::jit(halving, opt(level));
    Tensor init = f32({1, -2, 3}, {3});
    for (int n : {0, 1, 5, 40}) CHECK_CLOSE(f(init, n), halving(init, n));
  }
  // acc_{k+1} = acc_k / 2 + k: from 1, after 5 steps 1/32 + 0/16 + 1/8 + 2/4 + 3/2 + 4.
  CHECK(halving(Tensor::scalar(1.0), 5).item<float>() == doctest::Approx(1.0 / 32 + 0.125 + 0.5 + 1.5 + 4));
  // The graph holds one body whatever the trip count.
  const hjit::Graph g10 = hjit::make_graph(halving, f32({1}, {1}), 10), g1000 = hjit::make_graph(halving, f32({1}, {1}), 1000);
  CHECK(g10.nodes.size() == g1000.nodes.size());
  CHECK(count_ops(g1000, hjit::OpKind::Scan) == 1);
  CHECK(count_ops(g1000, hjit::OpKind::Mul) == 0);  // the multiply is inside the body
  // Bounds in the wrong order: no iterations, as for (i = 5; i < 2; ++i).
  auto backwards = hjit::jit([](const Tensor& x) {
    return hjit::fori_loop(5, 2, [](const Tensor& i, const Tensor& a) { return a + i; }, x);
  });
  CHECK(test::vals(backwards(f32({1, 2}, {2}))) == std::vector<float>{1, 2});
}

TEST_CASE("while_loop and fori_loop on traced bounds: JAX's g(x, n) and PyTorch's foo(len), compiled once") {
  auto g = hjit::jit(jax_g);
  Tensor x = f32({1, 2, 3}, {3});
  for (int n : {0, 3, 17, -2}) {
    CHECK_CLOSE(g(x, i32(n)), jax_g(x, i32(n)));
    CHECK(test::vals(g(x, i32(n)))[0] == float(1 + std::max(n, 0)));
  }
  CHECK(g.stats().traces == 1);
  CHECK(count_ops(g.graph(x, i32(3)), hjit::OpKind::While) >= 1);

  auto foo = hjit::jit(torch_foo);
  for (int len : {0, 3, 10, 12, 25}) {
    const float want = len <= 10 ? -float(len) : -10.0f + float(len - 10);
    CHECK(test::vals(foo(i32(len))) == std::vector<float>(12, want));
    CHECK_CLOSE(foo(i32(len)), torch_foo(i32(len)));
  }
  CHECK(foo.stats().traces == 1);
}

TEST_CASE("scan: an RNN forwards and in reverse, several carries and ys, integer carries, length 0") {
  Tensor w = test::random({4, 4}, DType::F32, 1) * 0.5, h0 = test::random({2, 4}, DType::F32, 2);
  for (int64_t len : {1, 6, 0}) {
    Tensor xs = test::random({len, 2, 4}, DType::F32, 3);
    for (bool reverse : {false, true}) {
      CAPTURE(len);
      CAPTURE(reverse);
      auto f = hjit::jit([&](const Tensor& a, const Tensor& b) { return rnn(a, w, b, reverse); });
      auto [h, ys] = f(xs, h0);
      auto [eh, eys] = rnn(xs, w, h0, reverse);
      auto [uh, uys] = rnn_unrolled(xs, w, h0, reverse);
      CHECK_CLOSE(h, eh);
      CHECK_CLOSE(ys, eys);
      CHECK_CLOSE(eh, uh);
      CHECK(ys.shape() == Shape{len, 2, 4});
      if (len > 0) CHECK_CLOSE(eys, uys);
    }
  }
  // Two carries of different dtypes, two xs, a y of another shape; rows not a multiple of 64 bytes.
  auto cumulative = [](const Tensor& a, const Tensor& b) {
    hjit::ScanResult r = hjit::scan([](const Tensors& c, const Tensors& x) {
      Tensor total = c[0] + x[0] * x[1];
      return std::pair<Tensors, Tensors>{{total, c[1] + 1}, {hjit::sum(total), total.astype(DType::F64)}};
    }, {Tensor::zeros({3}), Tensor::scalar(0, DType::I64)}, {a, b});
    return Tensors{r.carries[0], r.carries[1], r.ys[0], r.ys[1]};
  };
  Tensor a = test::random({5, 3}, DType::F32, 4), b = test::random({5, 3}, DType::F32, 5);
  Tensors got = hjit::jit(cumulative)(a, b), want = cumulative(a, b);
  REQUIRE(got.size() == 4);
  for (size_t i = 0; i < 3; ++i) CHECK_CLOSE(got[i], want[i]);
  CHECK_CLOSE(got[3].astype(DType::F32), want[3].astype(DType::F32));  // f32 sums (FMA or not), widened
  CHECK(got[1].item<int64_t>() == 5);
  CHECK(got[3].dtype() == DType::F64);
  CHECK_CLOSE(got[2], hjit::sum(hjit::cumsum(a * b, 0), {1}));
}

TEST_CASE("gradients through cond, fori_loop and scan equal those of the unrolled computation") {
  Tensor x = f32({0.3f, -0.7f, 1.1f}, {3});
  // cond: the gradient of the branch taken.
  auto through_cond = [](const Tensor& v) { return hjit::sum(branchy(v) * v); };
  for (Tensor in : {x, -x}) {
    const Tensor want = hjit::sum(in) > 0.0 ? in * 4.0 : in * -2.0;
    CHECK_CLOSE(hjit::grad(through_cond)(in), want);
    CHECK_CLOSE(hjit::jit(hjit::grad(through_cond))(in), want);
  }
  // fori_loop with integer bounds: a scan underneath, differentiable.
  auto through_loop = [](const Tensor& v) {
    return hjit::sum(hjit::fori_loop(0, 6, [](const Tensor& i, const Tensor& a) { return hjit::sin(a) * 1.5 + i; }, v));
  };
  auto unrolled_loop = [](const Tensor& v) {
    Tensor a = v;
    for (int i = 0; i < 6; ++i) a = hjit::sin(a) * 1.5 + double(i);
    return hjit::sum(a);
  };
  CHECK_CLOSE(hjit::grad(through_loop)(x), hjit::grad(unrolled_loop)(x));
  CHECK_CLOSE(hjit::jit(hjit::grad(through_loop))(x), hjit::grad(unrolled_loop)(x));
  // scan: with respect to the initial carry, the scanned rows and a captured weight.
  Tensor w = test::random({4, 4}, DType::F64, 6) * 0.5, h0 = test::random({2, 4}, DType::F64, 7);
  Tensor xs = test::random({5, 2, 4}, DType::F64, 8);
  for (bool reverse : {false, true}) {
    auto loss = [&](const Tensor& a, const Tensor& ww, const Tensor& b) {
      auto [h, ys] = rnn(a, ww, b, reverse);
      return hjit::sum(h * h) + hjit::mean(ys * ys);
    };
    auto unrolled = [&](const Tensor& a, const Tensor& ww, const Tensor& b) {
      auto [h, ys] = rnn_unrolled(a, ww, b, reverse);
      return hjit::sum(h * h) + hjit::mean(ys * ys);
    };
    const Tensors want = hjit::grad(unrolled, {0, 1, 2})(xs, w, h0);
    const Tensors eager = hjit::grad(loss, {0, 1, 2})(xs, w, h0);
    const Tensors compiled = hjit::jit(hjit::grad(loss, {0, 1, 2}))(xs, w, h0);
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK_CLOSE(eager[i], want[i]);
      CHECK_CLOSE(compiled[i], want[i]);
    }
  }
  // A captured parameter (a model weight) gets its gradient through the body.
  auto pl = [&](const Tensor& a) { return hjit::sum(rnn(a, w, h0, false).second); };
  const Tensor gw = hjit::grad(pl, std::vector<Tensor>{w})(xs)[0];
  const Tensor gw_unrolled = hjit::grad([&](const Tensor& a) { return hjit::sum(rnn_unrolled(a, w, h0, false).second); }, std::vector<Tensor>{w})(xs)[0];
  CHECK_CLOSE(gw, gw_unrolled);
}

TEST_CASE("control flow: a while_loop is not differentiable, and bad branches and bodies are typed errors") {
  Tensor x = f32({1, 2}, {2});
  auto loop_loss = [](const Tensor& v) {
    return hjit::sum(hjit::while_loop([](const Tensor& a) { return hjit::sum(a) < 100.0; }, [](const Tensor& a) { return a * 2.0; }, v));
  };
  CHECK(hjit::sum(hjit::while_loop([](const Tensor& a) { return hjit::sum(a) < 100.0; }, [](const Tensor& a) { return a * 2.0; }, x)).item<float>() == 192.0f);
  CHECK_THROWS_AS(hjit::grad(loop_loss)(x), hjit::ValueError);
  CHECK_THROWS_WITH_AS(hjit::jit(hjit::grad(loop_loss))(x), doctest::Contains("fori_loop"), hjit::ValueError);

  auto not_bool = [](const Tensor& v) { return hjit::cond(hjit::sum(v), [](const Tensor& a) { return a; }, [](const Tensor& a) { return a; }, v); };
  CHECK_THROWS_AS(not_bool(x), hjit::DTypeError);
  CHECK_THROWS_AS(hjit::jit(not_bool)(x), hjit::DTypeError);
  auto mismatch = [](const Tensor& v) {
    return hjit::cond(hjit::sum(v) > 0.0, [](const Tensor& a) { return a; }, [](const Tensor& a) { return hjit::sum(a); }, v);
  };
  CHECK_THROWS_WITH_AS(hjit::jit(mismatch)(x), doctest::Contains("same types"), hjit::ShapeError);
  auto growing = [](const Tensor& v) {
    return hjit::fori_loop(0, 3, [](const Tensor&, const Tensor& a) { return hjit::concat({a, a}, 0); }, v);
  };
  CHECK_THROWS_AS(growing(x), hjit::ShapeError);
  CHECK_THROWS_WITH_AS(hjit::jit(growing)(x), doctest::Contains("carry may not change"), hjit::ShapeError);
  Tensor param = f32({0, 0}, {2});
  auto assigning = [&](const Tensor& v) {
    return hjit::fori_loop(0, 3, [&](const Tensor&, const Tensor& a) { param.assign(a); return a + 1.0; }, v);
  };
  CHECK_THROWS_WITH_AS(hjit::jit(assigning)(x), doctest::Contains("return the new value"), hjit::ValueError);
  auto short_xs = [](const Tensor& v) {
    return hjit::scan([](const Tensors& c, const Tensors& r) { return std::pair<Tensors, Tensors>{c, r}; }, {v}, {v}, 5).ys[0];
  };
  CHECK_THROWS_AS(short_xs(x), hjit::ShapeError);
  CHECK_THROWS_AS(hjit::jit(short_xs)(x), hjit::ShapeError);
  auto bad_bounds = [](const Tensor& v) {
    return hjit::fori_loop(Tensor::scalar(0.0), Tensor::scalar(3.0), [](const Tensor&, const Tensor& a) { return a; }, v);
  };
  CHECK_THROWS_AS(bad_bounds(x), hjit::DTypeError);
}

TEST_CASE("control flow graphs print, parse back and compile from the parsed text") {
  Tensor x = f32({1, -2, 3}, {3});
  auto f = [](const Tensor& v) {
    Tensor c = Tensor::arange(3);  // a constant inside the body: its bytes travel in to_text()
    Tensor a = hjit::fori_loop(0, 4, [&](const Tensor& i, const Tensor& s) { return branchy(s) + c; }, v);
    return a;
  };
  const hjit::Graph g = hjit::make_graph(f, x);
  const hjit::Graph back = hjit::Graph::parse(g.to_text());
  CHECK(back.to_text() == g.to_text());
  CHECK(count_ops(back, hjit::OpKind::Scan) == 1);
  // Nesting deeper than the parser allows is a ValueError, not a stack overflow.
  std::string deep = "{ lambda ; a:f32[]. let\n";
  for (int i = 0; i < 100; ++i) deep += "b:f32[] = cond[then={ lambda ; a:f32[]. let\n";
  CHECK_THROWS_AS(hjit::Graph::parse(deep), hjit::ValueError);
}

TEST_CASE("control flow in Concrete tracing and under fullgraph = false") {
  hjit::JitOptions concrete;
  concrete.trace_mode = hjit::TraceMode::Concrete;
  auto f = hjit::jit(branchy, concrete);
  Tensor x = f32({1, -2, 3}, {3});
  CHECK(test::vals(f(x)) == std::vector<float>{2, -4, 6});  // the first call runs eagerly
  CHECK(test::vals(f(-x)) == std::vector<float>{1, -2, 3});  // the other branch, no re-trace
  CHECK(f.stats().traces == 1);
  hjit::JitOptions lazy;
  lazy.fullgraph = false;
  auto g = hjit::jit([](const Tensor& v) {
    Tensor y = halving(v, 3);
    const float s = hjit::sum(y).item<float>();  // a graph break after the loop
    return y * double(s);
  }, lazy);
  const Tensor want = halving(x, 3) * double(hjit::sum(halving(x, 3)).item<float>());
  CHECK_CLOSE(g(x), want);
}
