// Gradients: every rule against central finite differences in f64 (broadcasting included), the
// jitted gradient against the eager one, and the grad API's shapes and errors.
#include <functional>
#include <map>

#include "graph/op_def.h"
#include "graph/autodiff/grad_rules.h"
#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

namespace {

// sum(f(inputs) * weights): a scalar whose gradient exercises every element of f's output.
Fn weighted(std::function<Tensor(const std::vector<Tensor>&)> f, uint64_t seed) {
  auto weights = std::make_shared<std::map<Shape, Tensor>>();
  return [f, seed, weights](const std::vector<Tensor>& in) {
    Tensor y = f(in);
    auto it = weights->find(y.shape());
    if (it == weights->end()) it = weights->emplace(y.shape(), Tensor::randn(y.shape(), seed, DType::F64)).first;
    return hjit::sum(y.astype(DType::F64) * it->second);
  };
}

// Checks d fn / d inputs against central differences on up to 10 elements of each input, and the
// jitted gradient against the eager one.
void check_grad(const std::string& name, const Fn& fn, std::vector<Tensor> inputs, double tol = 1e-6, double eps = 1e-6) {
  INFO(name);
  Fn loss = weighted(fn, 99);
  auto grads = hjit::grad([&](const std::vector<Tensor>& in) { return loss(in); }, std::vector<int>{0})(inputs);
  REQUIRE(grads.size() == inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!hjit::is_floating(inputs[i].dtype())) continue;
    std::vector<double> x = inputs[i].to_vector<double>(), gv = grads[i].to_vector<double>();
    CHECK(grads[i].shape() == inputs[i].shape());
    const size_t n = x.size(), stride = std::max<size_t>(1, n / 10);
    for (size_t j = 0; j < n; j += stride) {
      auto at = [&](double delta) {
        std::vector<double> p = x;
        p[j] += delta;
        std::vector<Tensor> in = inputs;
        in[i] = Tensor::from_vector(p, inputs[i].shape());
        return loss(in).item<double>();
      };
      double numeric = (at(eps) - at(-eps)) / (2 * eps);
      INFO("input " << i << " element " << j);
      CHECK(gv[j] == doctest::Approx(numeric).epsilon(tol).scale(1));
    }
  }
  auto jitted = hjit::jit(hjit::grad([&](const std::vector<Tensor>& in) { return loss(in); }, std::vector<int>{0}));
  std::vector<Tensor> compiled = jitted(inputs);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (hjit::is_floating(inputs[i].dtype())) CHECK_CLOSE_TOL(compiled[i], grads[i], 1e-9);
}

Tensor r(Shape s, uint64_t seed) { return Tensor::randn(std::move(s), seed, DType::F64); }
Tensor pos(Shape s, uint64_t seed) { return hjit::abs(r(std::move(s), seed)) + 0.5; }

}  // namespace

TEST_CASE("every op has a gradient rule, and non-differentiable ops say so") {
  for (int i = 0; i < hjit::kNumOps; ++i) {
    INFO(hjit::op_name(hjit::OpKind(i)));
    CHECK((hjit::grad_rule_for(hjit::OpKind(i)) != nullptr));
  }
  for (hjit::OpKind op : {hjit::OpKind::ArgMax, hjit::OpKind::ArgMin, hjit::OpKind::Conv2dWeightGrad})
    CHECK(hjit::has_trait(op, hjit::NonDifferentiable));
}

TEST_CASE("unary rules against finite differences") {
  using U = Tensor (*)(const Tensor&);
  std::vector<std::pair<const char*, U>> ops = {
      {"neg", hjit::neg}, {"abs", hjit::abs}, {"relu", hjit::relu}, {"exp", hjit::exp}, {"sin", hjit::sin},
      {"cos", hjit::cos}, {"tanh", hjit::tanh}, {"sigmoid", hjit::sigmoid}, {"erf", hjit::erf}, {"silu", hjit::silu},
      {"hardswish", hjit::hardswish}, {"atan", hjit::atan}};
  for (auto [name, op] : ops) check_grad(name, [op](const std::vector<Tensor>& in) { return op(in[0]); }, {r({3, 4}, 1)});
  for (auto [name, op] : std::vector<std::pair<const char*, U>>{{"log", hjit::log}, {"log1p", hjit::log1p}, {"sqrt", hjit::sqrt}, {"rsqrt", hjit::rsqrt}})
    check_grad(name, [op](const std::vector<Tensor>& in) { return op(in[0]); }, {pos({3, 4}, 2)});
  check_grad("gelu", [](const std::vector<Tensor>& in) { return hjit::gelu(in[0]) + hjit::gelu(in[0], true); }, {r({5}, 3)});
  // Inside (-1, 1), where they are differentiable.
  check_grad("asin", [](const std::vector<Tensor>& in) { return hjit::asin(hjit::tanh(in[0]) * 0.9); }, {r({3, 4}, 6)});
  check_grad("acos", [](const std::vector<Tensor>& in) { return hjit::acos(hjit::tanh(in[0]) * 0.9); }, {r({3, 4}, 7)});
  // Every piece of hardswish: below -3, the curve between, above 3.
  check_grad("hardswish", [](const std::vector<Tensor>& in) { return hjit::hardswish(in[0] * 4.0); }, {r({3, 4}, 5)});
  // Through f32 the function moves in f32 steps: a wider finite difference.
  check_grad("convert", [](const std::vector<Tensor>& in) { return in[0].astype(DType::F32).astype(DType::F64) * 2; }, {r({4}, 4)}, 1e-3,
             1e-2);
}

TEST_CASE("binary rules un-broadcast") {
  std::vector<std::pair<Shape, Shape>> shapes = {{{3, 4}, {3, 4}}, {{2, 3, 4}, {4}}, {{1, 4}, {3, 1}}, {{}, {2, 3}}};
  for (auto [sa, sb] : shapes) {
    check_grad("add", [](const std::vector<Tensor>& in) { return in[0] + in[1]; }, {r(sa, 1), r(sb, 2)});
    check_grad("sub", [](const std::vector<Tensor>& in) { return in[0] - in[1]; }, {r(sa, 1), r(sb, 2)});
    check_grad("mul", [](const std::vector<Tensor>& in) { return in[0] * in[1]; }, {r(sa, 1), r(sb, 2)});
    check_grad("div", [](const std::vector<Tensor>& in) { return in[0] / in[1]; }, {r(sa, 1), pos(sb, 2)});
    check_grad("pow", [](const std::vector<Tensor>& in) { return hjit::pow(in[0], in[1]); }, {pos(sa, 1), r(sb, 2)});
    check_grad("maximum", [](const std::vector<Tensor>& in) { return hjit::maximum(in[0], in[1]); }, {r(sa, 3), r(sb, 4)});
    check_grad("minimum", [](const std::vector<Tensor>& in) { return hjit::minimum(in[0], in[1]); }, {r(sa, 3), r(sb, 4)});
    check_grad("where", [](const std::vector<Tensor>& in) { return hjit::where(in[0] > 0, in[0] * 2, in[1]); }, {r(sa, 5), r(sb, 6)});
  }
}

TEST_CASE("reduction rules") {
  Tensor x = r({3, 4, 5}, 1);
  for (std::vector<int> axes : std::vector<std::vector<int>>{{}, {0}, {-1}, {0, 2}, {1}})
    for (bool keep : {false, true}) {
      check_grad("sum", [=](const std::vector<Tensor>& in) { return hjit::sum(in[0], axes, keep); }, {x});
      check_grad("mean", [=](const std::vector<Tensor>& in) { return hjit::mean(in[0], axes, keep); }, {x});
      check_grad("max", [=](const std::vector<Tensor>& in) { return hjit::max(in[0], axes, keep); }, {x});
      check_grad("min", [=](const std::vector<Tensor>& in) { return hjit::min(in[0], axes, keep); }, {x});
    }
  check_grad("cumsum", [](const std::vector<Tensor>& in) { return hjit::cumsum(in[0]) + hjit::cumsum(in[0], 0); }, {r({4, 6}, 2)});
}

TEST_CASE("matmul and layer rules") {
  check_grad("matmul", [](const std::vector<Tensor>& in) { return hjit::matmul(in[0], in[1]); }, {r({3, 4}, 1), r({4, 5}, 2)});
  check_grad("batched matmul", [](const std::vector<Tensor>& in) { return hjit::matmul(in[0], in[1]); }, {r({2, 1, 3, 4}, 1), r({3, 4, 2}, 2)});
  check_grad("matrix-vector", [](const std::vector<Tensor>& in) { return hjit::matmul(in[0], in[1]); }, {r({3, 4}, 1), r({4}, 2)});
  // A weight shared by a batch: its gradient is one matmul over the batch's rows.
  check_grad("batch times a weight", [](const std::vector<Tensor>& in) { return hjit::matmul(in[0], in[1]); }, {r({2, 3, 4}, 1), r({4, 5}, 2)});
  check_grad("batches times a weight", [](const std::vector<Tensor>& in) { return hjit::matmul(in[0], in[1]); }, {r({2, 1, 3, 4}, 1), r({4, 2}, 2)});
  struct Conv {
    Shape x, w;
    hjit::Pair stride, padding, dilation;
    int64_t groups;
  };
  for (const Conv& c : {Conv{{2, 3, 6, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1}, Conv{{1, 4, 7, 7}, {6, 2, 3, 2}, {2, 2}, {1, 0}, {1, 1}, 2},
                        Conv{{1, 2, 8, 6}, {2, 1, 3, 3}, {1, 2}, {2, 1}, {2, 1}, 2}, Conv{{2, 2, 5, 5}, {3, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},
                        // depthwise over more channels than a vector, whose input is copied channels innermost
                        Conv{{2, 20, 7, 9}, {20, 1, 3, 3}, {2, 1}, {1, 2}, {1, 1}, 20}})
    check_grad("conv2d",
               [c](const std::vector<Tensor>& in) { return hjit::conv2d(in[0], in[1], in[2], c.stride, c.padding, c.dilation, c.groups); },
               {r(c.x, 1), r(c.w, 2), r({c.w[0]}, 3)});
  check_grad("max_pool2d", [](const std::vector<Tensor>& in) { return hjit::max_pool2d(in[0], {3, 2}, {2, 1}, {1, 1}); }, {r({2, 2, 5, 6}, 4)});
  check_grad("avg_pool2d", [](const std::vector<Tensor>& in) { return hjit::avg_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}); }, {r({1, 2, 5, 6}, 5)});
  check_grad("avg_pool2d no pad count",
             [](const std::vector<Tensor>& in) { return hjit::avg_pool2d(in[0], {2, 3}, {1, 2}, {1, 1}, false); }, {r({1, 2, 5, 6}, 5)});
  for (bool causal : {false, true})
    check_grad("attention", [causal](const std::vector<Tensor>& in) { return hjit::scaled_dot_product_attention(in[0], in[1], in[2], causal); },
               {r({1, 2, 5, 4}, 6), r({1, 2, 5, 4}, 7), r({1, 2, 5, 3}, 8)});
  check_grad("softmax", [](const std::vector<Tensor>& in) { return hjit::softmax(in[0]) + hjit::log_softmax(in[0], 0); }, {r({3, 5}, 9)});
  check_grad("layer_norm", [](const std::vector<Tensor>& in) { return hjit::layer_norm(in[0], in[1], in[2]); }, {r({3, 5}, 10), r({5}, 11), r({5}, 12)});
  check_grad("rms_norm", [](const std::vector<Tensor>& in) { return hjit::rms_norm(in[0], in[1]); }, {r({3, 5}, 10), r({5}, 11)});
  check_grad("batch_norm", [](const std::vector<Tensor>& in) { return hjit::batch_norm_training(in[0], std::nullopt, std::nullopt, in[1], in[2]); },
             {r({3, 2, 4, 3}, 13), r({2}, 14), r({2}, 15)});
  Tensor labels = Tensor::from_vector<int64_t>({2, 0, 4}, {3});
  check_grad("cross_entropy", [labels](const std::vector<Tensor>& in) { return hjit::cross_entropy(in[0], labels); }, {r({3, 5}, 16)});
}

TEST_CASE("movement rules") {
  Tensor x = r({2, 3, 4}, 1);
  auto one = [](std::function<Tensor(const Tensor&)> f) { return [f](const std::vector<Tensor>& in) { return f(in[0]); }; };
  check_grad("reshape", one([](const Tensor& t) { return t.reshape({4, 6}); }), {x});
  check_grad("transpose", one([](const Tensor& t) { return t.transpose({2, 0, 1}); }), {x});
  check_grad("broadcast_to", one([](const Tensor& t) { return hjit::broadcast_to(hjit::slice(t, 1, 0, 1), {5, 2, 3, 4}); }), {x});
  check_grad("slice", one([](const Tensor& t) { return hjit::slice(hjit::slice(t, 2, 1, std::nullopt, 2), 1, -2, std::nullopt); }), {x});
  check_grad("concat", [](const std::vector<Tensor>& in) { return hjit::concat({in[0], in[1] * 2, in[0]}, 1); }, {x, r({2, 1, 4}, 2)});
  check_grad("stack", [](const std::vector<Tensor>& in) { return hjit::stack({in[0], in[0] * in[0]}, -1); }, {x});
  check_grad("pad", one([](const Tensor& t) { return hjit::pad(t, {{1, 0}, {0, 2}, {2, 1}}, 3.0); }), {x});
  check_grad("tril", one([](const Tensor& t) { return hjit::tril(t, 1); }), {x});
  Tensor ids = Tensor::from_vector<int32_t>({2, 0, 2, -1}, {2, 2});
  check_grad("take", [ids](const std::vector<Tensor>& in) { return hjit::take(in[0], ids, 1); }, {x});
  check_grad("embedding", [ids](const std::vector<Tensor>& in) { return hjit::embedding(in[0], hjit::abs(ids)); }, {r({3, 5}, 3)});
}

TEST_CASE("the grad API: argnums, parameters, values, errors") {
  Tensor a = r({3}, 1), b = r({3}, 2), w = r({3}, 3), unused = r({2}, 4);
  auto f = [&](const Tensor& x, const Tensor& y) { return hjit::sum(x * y * w); };
  CHECK_CLOSE(hjit::grad(f)(a, b), b * w);
  CHECK_CLOSE(hjit::grad(f, 1)(a, b), a * w);
  std::vector<Tensor> both = hjit::grad(f, std::vector<int>{0, 1})(a, b);
  REQUIRE(both.size() == 2);
  CHECK_CLOSE(both[1], a * w);
  auto [value, gw] = hjit::value_and_grad(f, std::vector<Tensor>{w, unused})(a, b);
  CHECK(value.item<double>() == doctest::Approx(hjit::sum(a * b * w).item<double>()));
  CHECK_CLOSE(gw[0], a * b);
  CHECK(gw[1].to_vector<double>() == std::vector<double>{0, 0});  // the loss does not read it
  auto [v1, g1] = hjit::value_and_grad(f)(a, b);
  CHECK_CLOSE(g1, b * w);
  // Errors: a loss that is not a scalar, a gradient of an integer, an argument that is not a tensor.
  CHECK_THROWS_AS(hjit::grad([](const Tensor& x) { return x * 2; })(a), hjit::ValueError);
  CHECK_THROWS_AS(hjit::grad([](const Tensor& x) { return hjit::sum(x).astype(DType::F64); })(Tensor::ones({2}, DType::I32)),
                  hjit::ValueError);
  CHECK_THROWS_AS(hjit::grad([](const Tensor& x, double s) { return hjit::sum(x) * s; }, 1)(a, 2.0), hjit::ValueError);
  // Integer casts and comparisons stop the gradient (argmax is not differentiable).
  CHECK(hjit::grad([](const Tensor& x) { return hjit::sum(hjit::argmax(x, 0).astype(DType::F64) + x); })(a).to_vector<double>() ==
        std::vector<double>{1, 1, 1});
}

TEST_CASE("gradients inside jit: one pipeline for forward and backward") {
  Tensor w = r({4, 3}, 1), x = r({5, 4}, 2);
  auto loss = [&](const Tensor& x) { return hjit::mean(hjit::tanh(hjit::matmul(x, w))); };
  auto eager = hjit::value_and_grad(loss, std::vector<Tensor>{w})(x);
  auto compiled = hjit::jit(hjit::value_and_grad(loss, std::vector<Tensor>{w}));
  auto got = compiled(x);
  CHECK_CLOSE(got.first, eager.first);
  CHECK_CLOSE(got.second[0], eager.second[0]);
  compiled(x);
  CHECK(compiled.stats().traces == 1);
  CHECK(compiled.stats().cache_hits == 1);
}
