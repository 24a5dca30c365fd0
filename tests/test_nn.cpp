// hjit::nn: the convolutions beside conv2d against direct loops, the module registry (names,
// state, modes), initializations, and each layer against its formula written out, eagerly,
// jitted and differentiated.
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include <hjit/autocast.h>
#include <hjit/nn.h>
#include <hjit/optim.h>

#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;
using test::vals;
namespace nn = hjit::nn;

namespace {

Tensor rnd(Shape s, uint64_t seed) { return test::random(std::move(s), DType::F32, seed); }

void check_close(const Tensor& got, const Tensor& want, double tol = 1e-4) {
  REQUIRE(got.shape() == want.shape());
  const std::string diff = test::compare(got, want, tol);
  CHECK_MESSAGE(diff.empty(), diff);
}

// Row-major strides of a shape.
std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// Every index of `shape`, in order, to fn.
void each_index(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& fn) {
  if (hjit::shape_numel(shape) == 0) return;
  std::vector<int64_t> i(shape.size(), 0);
  while (true) {
    fn(i);
    size_t d = shape.size();
    while (d-- > 0) {
      if (++i[d] < shape[d]) break;
      i[d] = 0;
    }
    if (d == size_t(-1)) return;
  }
}

struct Window {
  std::vector<int64_t> stride, pad, dilation, output_padding;
  int64_t groups = 1;
};

// y[n, o, p...] = b[o] + sum x[n, g * Cg + c, p * s + k * d - pad] w[o, c, k...] (zero outside).
Tensor conv_by_loops(const Tensor& x, const Tensor& w, const Tensor& b, const Window& win) {
  const size_t dims = size_t(x.ndim()) - 2;
  const int64_t N = x.shape()[0], O = w.shape()[0], Cg = w.shape()[1], Og = O / win.groups;
  Shape out{N, O}, kernel(w.shape().begin() + 2, w.shape().end());
  for (size_t d = 0; d < dims; ++d)
    out.push_back((x.shape()[2 + d] + 2 * win.pad[d] - win.dilation[d] * (kernel[d] - 1) - 1) / win.stride[d] + 1);
  const std::vector<float> xv = vals(x), wv = vals(w), bv = vals(b);
  const auto xs = strides_of(x.shape()), ws = strides_of(w.shape());
  std::vector<float> y(size_t(hjit::shape_numel(out)));
  size_t at = 0;
  each_index(out, [&](const std::vector<int64_t>& i) {
    double acc = bv[size_t(i[1])];
    const int64_t g = i[1] / Og;
    for (int64_t c = 0; c < Cg; ++c)
      each_index(kernel, [&](const std::vector<int64_t>& k) {
        int64_t xo = i[0] * xs[0] + (g * Cg + c) * xs[1], wo = i[1] * ws[0] + c * ws[1];
        for (size_t d = 0; d < dims; ++d) {
          const int64_t p = i[2 + d] * win.stride[d] + k[d] * win.dilation[d] - win.pad[d];
          if (p < 0 || p >= x.shape()[2 + d]) return;
          xo += p * xs[2 + d], wo += k[d] * ws[2 + d];
        }
        acc += double(xv[size_t(xo)]) * wv[size_t(wo)];
      });
    y[at++] = float(acc);
  });
  return Tensor::from_vector(y, out);
}

// The transposed convolution by its definition: each input element scattered through the kernel.
Tensor conv_transpose_by_loops(const Tensor& x, const Tensor& w, const Tensor& b, const Window& win) {
  const size_t dims = size_t(x.ndim()) - 2;
  const int64_t N = x.shape()[0], C = x.shape()[1], Og = w.shape()[1], Cg = C / win.groups, O = Og * win.groups;
  Shape out{N, O}, kernel(w.shape().begin() + 2, w.shape().end());
  for (size_t d = 0; d < dims; ++d)
    out.push_back((x.shape()[2 + d] - 1) * win.stride[d] - 2 * win.pad[d] + win.dilation[d] * (kernel[d] - 1) + win.output_padding[d] + 1);
  const std::vector<float> xv = vals(x), wv = vals(w), bv = vals(b);
  const auto xs = strides_of(x.shape()), ws = strides_of(w.shape()), ys = strides_of(out);
  std::vector<double> y(size_t(hjit::shape_numel(out)));
  each_index(out, [&](const std::vector<int64_t>& i) {
    size_t o = 0;
    for (size_t d = 0; d < i.size(); ++d) o += size_t(i[d] * ys[d]);
    y[o] = bv[size_t(i[1])];
  });
  each_index(x.shape(), [&](const std::vector<int64_t>& i) {
    const int64_t g = i[1] / Cg;
    for (int64_t co = 0; co < Og; ++co)
      each_index(kernel, [&](const std::vector<int64_t>& k) {
        int64_t yo = i[0] * ys[0] + (g * Og + co) * ys[1], wo = i[1] * ws[0] + co * ws[1], xo = 0;
        for (size_t d = 0; d < i.size(); ++d) xo += i[d] * xs[d];
        for (size_t d = 0; d < dims; ++d) {
          const int64_t p = i[2 + d] * win.stride[d] + k[d] * win.dilation[d] - win.pad[d];
          if (p < 0 || p >= out[2 + d]) return;
          yo += p * ys[2 + d], wo += k[d] * ws[2 + d];
        }
        y[size_t(yo)] += double(xv[size_t(xo)]) * wv[size_t(wo)];
      });
  });
  return Tensor::from_vector(std::vector<float>(y.begin(), y.end()), out);
}

}  // namespace

TEST_CASE("conv1d, conv3d and the transposed convolutions equal their definitions, eagerly and jitted") {
  for (bool jitted : {false, true}) {
    CAPTURE(jitted);
    auto run = [&](auto fn, const Tensor& x) { return jitted ? hjit::jit(fn)(x) : fn(x); };
    {  // conv1d: stride 2, padding 2, dilation 2, 2 groups
      const Tensor x = rnd({2, 4, 11}, 1), w = rnd({6, 2, 3}, 2), b = rnd({6}, 3);
      check_close(run([&](const Tensor& x) { return hjit::conv1d(x, w, b, 2, 2, 2, 2); }, x), conv_by_loops(x, w, b, {{2}, {2}, {2}, {}, 2}));
    }
    {  // conv3d: strides (1, 2, 1), padding (1, 0, 2), dilation (2, 1, 1), 2 groups
      const Tensor x = rnd({2, 4, 5, 6, 5}, 4), w = rnd({4, 2, 2, 3, 2}, 5), b = rnd({4}, 6);
      check_close(run([&](const Tensor& x) { return hjit::conv3d(x, w, b, {1, 2, 1}, {1, 0, 2}, {2, 1, 1}, 2); }, x),
                  conv_by_loops(x, w, b, {{1, 2, 1}, {1, 0, 2}, {2, 1, 1}, {}, 2}));
    }
    {  // conv_transpose1d: stride 3, padding 1, output_padding 2, groups 2, dilation 2
      const Tensor x = rnd({2, 4, 5}, 7), w = rnd({4, 3, 3}, 8), b = rnd({6}, 9);
      check_close(run([&](const Tensor& x) { return hjit::conv_transpose1d(x, w, b, 3, 1, 2, 2, 2); }, x),
                  conv_transpose_by_loops(x, w, b, {{3}, {1}, {2}, {2}, 2}));
    }
    {  // conv_transpose2d: strides (2, 1), padding (1, 0), output_padding (1, 0)
      const Tensor x = rnd({1, 3, 4, 5}, 10), w = rnd({3, 2, 3, 2}, 11), b = rnd({2}, 12);
      check_close(run([&](const Tensor& x) { return hjit::conv_transpose2d(x, w, b, {2, 1}, {1, 0}, {1, 0}); }, x),
                  conv_transpose_by_loops(x, w, b, {{2, 1}, {1, 0}, {1, 1}, {1, 0}, 1}));
    }
    {  // conv_transpose2d: strides (3, 2) past the kernel's height (phases with no taps), output_padding (2, 1)
      const Tensor x = rnd({2, 4, 3, 4}, 19), w = rnd({4, 3, 1, 2}, 20), b = rnd({3}, 21);
      check_close(run([&](const Tensor& x) { return hjit::conv_transpose2d(x, w, b, {3, 2}, {0, 1}, {2, 1}); }, x),
                  conv_transpose_by_loops(x, w, b, {{3, 2}, {0, 1}, {1, 1}, {2, 1}, 1}));
    }
    {  // conv_transpose3d: stride 2, padding (0, 1, 0), groups 3
      const Tensor x = rnd({1, 3, 2, 3, 2}, 13), w = rnd({3, 1, 2, 3, 2}, 14), b = rnd({3}, 15);
      check_close(run([&](const Tensor& x) { return hjit::conv_transpose3d(x, w, b, {2, 2, 2}, {0, 1, 0}, {0, 0, 1}, 3); }, x),
                  conv_transpose_by_loops(x, w, b, {{2, 2, 2}, {0, 1, 0}, {1, 1, 1}, {0, 0, 1}, 3}));
    }
  }
  // The transposed convolution is the adjoint of the convolution: the gradient of
  // sum(conv_transpose2d(x, w) * r) with respect to x is conv2d(r, w), eagerly and jitted.
  const Tensor x = rnd({1, 2, 4, 4}, 16), w = rnd({2, 3, 3, 3}, 17), r = rnd({1, 3, 8, 8}, 18);
  auto loss = [&](const Tensor& x) { return hjit::sum(hjit::conv_transpose2d(x, w, std::nullopt, {2, 2}, {1, 1}, {1, 1}) * r); };
  const Tensor want = hjit::conv2d(r, w, std::nullopt, {2, 2}, {1, 1});
  check_close(hjit::grad(loss)(x), want);
  check_close(hjit::jit([&](const Tensor& x) { return hjit::grad(loss)(x); })(x), want);
  const Tensor bad = rnd({2, 4, 5}, 18);
  CHECK_THROWS_AS(hjit::conv1d(bad, rnd({6, 3, 3}, 1)), hjit::ShapeError);                       // 4 channels, weight of 3
  CHECK_THROWS_AS(hjit::conv1d(rnd({2, 4, 5, 1}, 1), rnd({6, 4, 3}, 1)), hjit::ShapeError);      // rank 4
  CHECK_THROWS_AS(hjit::conv_transpose1d(bad, rnd({4, 3, 3}, 1), std::nullopt, 2, 0, 2), hjit::ValueError);  // output_padding >= stride
  CHECK_THROWS_AS(hjit::conv_transpose1d(bad, rnd({4, 3, 3}, 1), std::nullopt, 1, 4), hjit::ShapeError);   // cropped away
  CHECK_THROWS_AS(hjit::conv3d(rnd({1, 2, 1, 4, 4}, 1), rnd({2, 2, 3, 1, 1}, 1)), hjit::ShapeError);       // shallower than the kernel
  CHECK_THROWS_AS(hjit::conv1d(bad, rnd({6, 4, 3}, 1), rnd({5}, 1)), hjit::ShapeError);                    // bias of 5 for 6
}

namespace {

// A model as a user writes one: layers as members, registered by name.
struct Net : nn::Module {
  nn::Linear fc1{4, 8};
  nn::Sequential head;
  nn::BatchNorm norm{8};
  Net() {
    register_module("fc1", fc1);
    register_module("norm", norm);
    head.add<nn::ReLU>();
    head.add<nn::Linear>(8, 3, false);
    register_module("head", head);
  }
  Tensor operator()(const Tensor& x) { return head(norm(fc1(x))); }
};

std::vector<std::string> names_of(const nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

}  // namespace

TEST_CASE("modules name their parameters and buffers by path, and load them back by name") {
  nn::manual_seed(7);
  Net net;
  CHECK(names_of(net.named_parameters()) == std::vector<std::string>{"fc1.weight", "fc1.bias", "norm.weight", "norm.bias", "head.1.weight"});
  CHECK(names_of(net.named_buffers()) == std::vector<std::string>{"norm.running_mean", "norm.running_var", "norm.num_batches_tracked"});
  CHECK(net.parameters().size() == 5);
  CHECK(net.state().size() == 8);
  // The handles share storage with the members: an optimizer's update reaches the model.
  net.parameters()[0].assign(Tensor::zeros({8, 4}));
  CHECK(vals(net.fc1.weight) == std::vector<float>(32, 0.f));
  // Modes reach every module below.
  CHECK(net.head[1].training());
  net.eval();
  CHECK(!net.training());
  CHECK(!net.norm.training());
  CHECK(!net.head[1].training());
  net.train();
  CHECK(net.head[0].training());

  // manual_seed: the same layers draw the same values.
  nn::manual_seed(7);
  Net again;
  nn::manual_seed(8);
  Net other;
  CHECK(vals(again.fc1.bias) == vals(net.fc1.bias));
  CHECK(vals(again.fc1.bias) != vals(other.fc1.bias));

  // load_state: by name, checked in full before anything is assigned.
  nn::NamedTensors state = other.state();
  again.load_state(state);
  CHECK(vals(again.fc1.weight) == vals(other.fc1.weight));
  CHECK(vals(again.head[1].parameters()[0]) == vals(other.head[1].parameters()[0]));
  const std::vector<float> before = vals(net.fc1.bias);
  nn::NamedTensors wrong = state;
  wrong[6].second = Tensor::ones({9});  // norm.running_var
  CHECK_THROWS_AS(net.load_state(wrong), hjit::ShapeError);
  CHECK(vals(net.fc1.bias) == before);  // nothing assigned
  wrong = state;
  wrong[1].second = Tensor::zeros({8}, DType::F64);
  CHECK_THROWS_AS(net.load_state(wrong), hjit::DTypeError);
  wrong = state;
  wrong.erase(wrong.begin() + 6);
  CHECK_THROWS_WITH_AS(net.load_state(wrong), doctest::Contains("missing: norm.running_var"), hjit::ValueError);
  net.load_state(wrong, false);  // the names both have
  CHECK(vals(net.fc1.bias) == vals(other.fc1.bias));
  wrong = state;
  wrong.push_back({"fc2.weight", Tensor::zeros({1})});
  CHECK_THROWS_WITH_AS(net.load_state(wrong), doctest::Contains("not expected: fc2.weight"), hjit::ValueError);

  struct Bad : nn::Module {
    Tensor a = Tensor::zeros({1}), b = Tensor::zeros({1});
    Bad() {
      register_parameter("a", a);
      CHECK_THROWS_AS(register_parameter("a", b), hjit::ValueError);
      CHECK_THROWS_AS(register_buffer("x.y", b), hjit::ValueError);
    }
  } bad;
  CHECK_THROWS_AS(net.head[5], hjit::IndexError);
}

TEST_CASE("initializations: PyTorch's bounds and spreads, drawn from keys") {
  Tensor w = Tensor::empty({256, 64});
  nn::init::kaiming_uniform_(w, std::sqrt(5.0));  // Linear's default: U(-1/sqrt(64), 1/sqrt(64))
  std::vector<float> v = vals(w);
  const float bound = 1 / 8.f;
  CHECK(*std::max_element(v.begin(), v.end()) <= bound);
  CHECK(*std::min_element(v.begin(), v.end()) >= -bound);
  CHECK(*std::max_element(v.begin(), v.end()) > 0.95f * bound);
  auto stddev = [](const std::vector<float>& v) {
    double s = 0, s2 = 0;
    for (float e : v) s += e, s2 += double(e) * e;
    const double m = s / double(v.size());
    return std::sqrt(s2 / double(v.size()) - m * m);
  };
  nn::init::kaiming_normal_(w, 0, nn::init::FanMode::FanIn, nn::init::Nonlinearity::Relu);  // std sqrt(2 / 64)
  CHECK(stddev(vals(w)) == doctest::Approx(std::sqrt(2.0 / 64)).epsilon(0.03));
  nn::init::xavier_normal_(w);  // std sqrt(2 / (64 + 256))
  CHECK(stddev(vals(w)) == doctest::Approx(std::sqrt(2.0 / 320)).epsilon(0.03));
  nn::init::xavier_uniform_(w, 2.0);
  v = vals(w);
  CHECK(*std::max_element(v.begin(), v.end()) <= float(2 * std::sqrt(6.0 / 320)));
  Tensor conv = Tensor::empty({8, 3, 5, 5});
  CHECK(nn::init::fans(conv.shape()) == std::pair<int64_t, int64_t>{75, 200});
  // A given key gives the same draw.
  Tensor a = Tensor::empty({10}), b = Tensor::empty({10});
  nn::init::normal_(a, 0, 1, hjit::random::key(3));
  nn::init::normal_(b, 0, 1, hjit::random::key(3));
  CHECK(vals(a) == vals(b));
  CHECK(nn::init::calculate_gain(nn::init::Nonlinearity::Tanh) == doctest::Approx(5.0 / 3));
  Tensor ints = Tensor::zeros({4}, DType::I32);
  CHECK_THROWS_AS(nn::init::uniform_(ints), hjit::DTypeError);
  Tensor vec = Tensor::empty({4});
  CHECK_THROWS_AS(nn::init::xavier_uniform_(vec), hjit::ValueError);
  // Layers' defaults: Conv2d's U(-1/sqrt(fan_in), 1/sqrt(fan_in)), Embedding's N(0, 1).
  nn::Conv2d c(3, 8, 5);
  v = vals(c.weight);
  CHECK(*std::max_element(v.begin(), v.end()) <= float(1 / std::sqrt(75.0)));
  nn::Embedding e(1000, 16, 0);
  CHECK(stddev(vals(e.weight)) == doctest::Approx(1.0).epsilon(0.05));
  CHECK(vals(hjit::slice(e.weight, 0, 0, 1)) == std::vector<float>(16, 0.f));
}

TEST_CASE("normalization layers against their formulas; batch norm's modes") {
  const Tensor x = rnd({3, 4, 2, 5}, 21);
  // LayerNorm over the last two axes: each [2, 5] block to mean 0, variance 1, then affine.
  nn::LayerNorm ln({2, 5});
  nn::init::normal_(ln.weight, 1, 0.5), nn::init::normal_(ln.bias, 0, 0.5);
  {
    const Tensor flat = x.reshape({12, 10});
    const Tensor mu = hjit::mean(flat, {1}, true), var = hjit::mean((flat - mu) * (flat - mu), {1}, true);
    const Tensor want = ((flat - mu) / hjit::sqrt(var + 1e-5)).reshape(x.shape()) * ln.weight + ln.bias;
    check_close(ln(x), want);
    check_close(hjit::jit([&](const Tensor& x) { return ln(x); })(x), want);
  }
  // GroupNorm(2 groups of 2 channels): statistics over [2 channels, 2, 5] per sample.
  nn::GroupNorm gn(2, 4);
  nn::init::normal_(gn.weight), nn::init::normal_(gn.bias);
  {
    const Tensor g = x.reshape({3, 2, 20});
    const Tensor mu = hjit::mean(g, {2}, true), var = hjit::mean((g - mu) * (g - mu), {2}, true);
    const Tensor want = ((g - mu) / hjit::sqrt(var + 1e-5)).reshape(x.shape()) * gn.weight.reshape({4, 1, 1}) + gn.bias.reshape({4, 1, 1});
    check_close(gn(x), want);
    check_close(hjit::jit([&](const Tensor& x) { return gn(x); })(x), want);
  }
  nn::RMSNorm rms(5);
  check_close(rms(x), x / hjit::sqrt(hjit::mean(x * x, {-1}, true) + 1e-6));
  CHECK_THROWS_AS(ln(rnd({3, 5, 2}, 1)), hjit::ShapeError);
  CHECK_THROWS_AS(gn(rnd({3, 6, 2}, 1)), hjit::ShapeError);
  CHECK_THROWS_AS(nn::GroupNorm(3, 4), hjit::ValueError);

  // BatchNorm: training normalizes by the batch and moves the running statistics; eval uses them.
  nn::BatchNorm bn(4, 1e-5, 0.5);
  const Tensor y = bn(x);
  const Tensor mu = hjit::mean(x, {0, 2, 3}, true), var = hjit::mean((x - mu) * (x - mu), {0, 2, 3}, true);
  check_close(y, (x - mu) / hjit::sqrt(var + 1e-5));
  check_close(bn.running_mean, mu.reshape({4}) * 0.5);
  check_close(bn.running_var, var.reshape({4}) * (30.0 / 29.0) * 0.5 + 0.5);
  bn.eval();
  const Tensor rm = bn.running_mean.clone(), rv = bn.running_var.clone();
  check_close(bn(x), (x - rm.reshape({4, 1, 1})) / hjit::sqrt(rv.reshape({4, 1, 1}) + 1e-5));
  CHECK(vals(bn.running_mean) == vals(rm));  // eval leaves them
  // Inside jit, a step in training mode updates them too.
  bn.train();
  auto step = hjit::jit([&](const Tensor& x, bool training) {
    bn.train(training);
    return bn(x);
  });
  step(x, true);
  check_close(bn.running_mean, rm * 0.5 + mu.reshape({4}) * 0.5);
  const std::vector<float> after = vals(bn.running_mean);
  check_close(step(x, false), (x - bn.running_mean.reshape({4, 1, 1})) / hjit::sqrt(bn.running_var.reshape({4, 1, 1}) + 1e-5));
  CHECK(vals(bn.running_mean) == after);
  nn::BatchNorm1d bn1(3);
  check_close(hjit::mean(bn1(rnd({8, 3}, 5)), {0}), Tensor::zeros({3}), 1e-5);
}

TEST_CASE("a jitted function runs the version of its modules' mode: a switch traces the other once, then both are kept") {
  const Tensor x = rnd({6, 4, 3, 3}, 31);
  nn::BatchNorm bn(4, 1e-5, 0.5);
  nn::Dropout drop(0.5);
  auto f = hjit::jit([&](const Tensor& v) { return drop(bn(v)); }, {.name = "modes"});
  const Tensor mu = hjit::mean(x, {0, 2, 3}, true), var = hjit::mean((x - mu) * (x - mu), {0, 2, 3}, true);
  auto eval_output = [&] { return (x - bn.running_mean.reshape({4, 1, 1})) / hjit::sqrt(bn.running_var.reshape({4, 1, 1}) + 1e-5); };
  // Training: the batch's statistics, the running ones moved, dropout zeroing about half.
  Tensor y = f(x);
  CHECK(f.stats().traces == 1);
  check_close(bn.running_mean, mu.reshape({4}) * 0.5);
  const std::vector<float> trained = vals(y);
  CHECK(std::count(trained.begin(), trained.end(), 0.0f) > 40);
  // eval(): the running statistics, left as they are; no dropout.
  bn.eval(), drop.eval();
  const std::vector<float> moved = vals(bn.running_mean);
  check_close(f(x), eval_output());
  CHECK(f.stats().traces == 2);
  CHECK(vals(bn.running_mean) == moved);
  check_close(f(x), eval_output());
  // Back to training and eval: the versions traced before, nothing traced again.
  bn.train(), drop.train();
  f(x);
  check_close(bn.running_mean, Tensor::from_vector(moved, {4}) * 0.5 + mu.reshape({4}) * 0.5);
  bn.eval(), drop.eval();
  check_close(f(x), eval_output());
  CHECK(f.stats().traces == 2);
  // One module's mode alone: a third combination, traced once.
  drop.train();
  const std::vector<float> dropped = vals(f(x));
  CHECK(std::count(dropped.begin(), dropped.end(), 0.0f) > 40);
  CHECK(f.stats().traces == 3);
  f(x);
  CHECK(f.stats().traces == 3);

  // Any host flag read through traced_flag, and eager gradients cached per signature likewise.
  bool doubled = true;
  auto g = hjit::jit([&](const Tensor& v) { return hjit::traced_flag(doubled) ? v * 2.0f : v * 3.0f; });
  const Tensor one = Tensor::ones({3});
  CHECK(vals(g(one)) == std::vector<float>{2, 2, 2});
  doubled = false;
  CHECK(vals(g(one)) == std::vector<float>{3, 3, 3});
  doubled = true;
  CHECK(vals(g(one)) == std::vector<float>{2, 2, 2});
  CHECK(g.stats().traces == 2);
  auto slope = hjit::grad([&](const Tensor& v) { return hjit::sum(hjit::traced_flag(doubled) ? v * 2.0f : v * 3.0f); });
  CHECK(vals(slope(one)) == std::vector<float>{2, 2, 2});
  doubled = false;
  CHECK(vals(slope(one)) == std::vector<float>{3, 3, 3});
  // A flag the traced function sets before it reads it is its own doing, not part of the key.
  auto step = hjit::jit([&](const Tensor& v, bool training) {
    bn.train(training);
    return bn(v);
  });
  step(x, true), step(x, false), step(x, true), step(x, false);
  CHECK(step.stats().traces == 2);
}

TEST_CASE("an input of another floating dtype than a layer's parameters is a DTypeError naming the layer, eagerly and jitted; autocast casts") {
  nn::Linear fc(4, 3);
  nn::Conv2d conv(2, 3, {3, 3});
  nn::LayerNorm ln({4});
  nn::BatchNorm bn(2);
  const Tensor x64 = rnd({5, 4}, 1).astype(DType::F64), img64 = rnd({1, 2, 5, 5}, 2).astype(DType::F64);
  CHECK_THROWS_WITH_AS(fc(x64), doctest::Contains("nn::Linear: the input is f64 but the layer's parameters are f32"), hjit::DTypeError);
  CHECK_THROWS_AS(conv(img64), hjit::DTypeError);
  CHECK_THROWS_AS(ln(x64), hjit::DTypeError);
  CHECK_THROWS_AS(bn(img64), hjit::DTypeError);
  auto f = hjit::jit([&](const Tensor& v) { return fc(v); });
  CHECK_THROWS_AS(f(x64), hjit::DTypeError);
  CHECK(f(x64.astype(DType::F32)).dtype() == DType::F32);
  // Under autocast the contractions cast their operands: no mismatch.
  auto scope = hjit::autocast(DType::BF16);
  CHECK(fc(rnd({5, 4}, 3).astype(DType::BF16)).dtype() == DType::BF16);
}

TEST_CASE("embedding, dropout, flatten and Sequential") {
  nn::Embedding emb(10, 4, 2);
  const Tensor ids = Tensor::from_vector<int64_t>({1, 2, 9, 2}, {2, 2});
  const Tensor y = emb(ids);
  CHECK(y.shape() == Shape{2, 2, 4});
  check_close(hjit::slice(y.reshape({4, 4}), 0, 0, 1), hjit::slice(emb.weight, 0, 1, 2));
  // The padding row gets no gradient; the rows used do.
  auto [loss, grads] = hjit::value_and_grad([&](const Tensor& ids) { return hjit::sum(emb(ids) * 3.0); }, std::vector<Tensor>{emb.weight})(ids);
  const std::vector<float> g = vals(grads[0]);
  CHECK(g[2 * 4] == 0.f);
  CHECK(g[1 * 4] == 3.f);
  CHECK(g[9 * 4 + 3] == 3.f);
  CHECK_THROWS_AS(emb(Tensor::from_vector<float>({1.f}, {1})), hjit::DTypeError);
  CHECK_THROWS_AS(nn::Embedding(4, 2, 4), hjit::ValueError);

  // Dropout: a fresh mask at every call, eagerly and inside jit (its key moves on); none in eval.
  nn::Dropout drop(0.5, hjit::random::key(1));
  const Tensor ones = Tensor::ones({64});
  const std::vector<float> a = vals(drop(ones)), b = vals(drop(ones));
  CHECK(a != b);
  for (float v : a) CHECK((v == 0.f || v == 2.f));
  auto jitted = hjit::jit([&](const Tensor& x) { return drop(x); });
  const std::vector<float> c = vals(jitted(ones)), d = vals(jitted(ones));
  CHECK(c != d);
  CHECK(c != b);
  CHECK(jitted.stats().traces == 1);
  drop.eval();
  CHECK(vals(drop(ones)) == vals(ones));
  nn::Dropout all(1.0);
  CHECK(vals(all(ones)) == std::vector<float>(64, 0.f));
  CHECK_THROWS_AS(nn::Dropout(1.5), hjit::ValueError);

  nn::Flatten flat;
  CHECK(flat(Tensor::zeros({2, 3, 4})).shape() == Shape{2, 12});
  CHECK(nn::Flatten(0, 1)(Tensor::zeros({2, 3, 4})).shape() == Shape{6, 4});

  nn::Sequential mlp;
  auto l1 = mlp.add<nn::Linear>(3, 5);
  mlp.add([](const Tensor& x) { return hjit::tanh(x); });
  auto l2 = mlp.add(std::make_shared<nn::Linear>(5, 2));
  CHECK(mlp.size() == 3);
  CHECK(names_of(mlp.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  const Tensor x = rnd({4, 3}, 30);
  check_close(mlp(x), hjit::matmul(hjit::tanh(hjit::matmul(x, hjit::transpose(l1->weight)) + l1->bias), hjit::transpose(l2->weight)) + l2->bias);
  CHECK_THROWS_AS(mlp(rnd({4, 2}, 1)), hjit::ShapeError);
}

namespace {

// Attention written out head by head: softmax(q_h k_h^T / sqrt(d) + mask) v_h, then out_proj.
Tensor attention_by_heads(nn::MultiheadAttention& m, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& additive) {
  const int64_t E = m.embed_dim, H = m.num_heads, d = E / H;
  const Tensor W = m.in_proj_weight, B = m.in_proj_bias;
  auto proj = [&](const Tensor& x, int64_t i) {
    return hjit::matmul(x, hjit::transpose(hjit::slice(W, 0, i * E, (i + 1) * E))) + hjit::slice(B, 0, i * E, (i + 1) * E);
  };
  const Tensor Q = proj(q, 0), K = proj(k, 1), V = proj(v, 2);  // [N, T, E]
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < H; ++h) {
    const Tensor qh = hjit::slice(Q, 2, h * d, (h + 1) * d), kh = hjit::slice(K, 2, h * d, (h + 1) * d), vh = hjit::slice(V, 2, h * d, (h + 1) * d);
    const Tensor s = hjit::matmul(qh, hjit::transpose(kh, {0, 2, 1})) / std::sqrt(double(d)) + additive;
    heads.push_back(hjit::matmul(hjit::softmax(s, -1), vh));
  }
  return m.out_proj(hjit::concat(heads, 2));
}

}  // namespace

TEST_CASE("multi-head attention against attention head by head, with masks and both layouts") {
  nn::manual_seed(3);
  nn::MultiheadAttention mha(8, 2, 0.0, true, true);
  nn::init::normal_(mha.in_proj_bias, 0, 0.1), nn::init::normal_(mha.out_proj.bias, 0, 0.1);
  const Tensor q = rnd({2, 3, 8}, 40), kv = rnd({2, 5, 8}, 41), v = rnd({2, 5, 8}, 42);
  const Tensor none = Tensor::zeros({3, 5});
  check_close(mha(q, kv, v), attention_by_heads(mha, q, kv, v, none));
  check_close(hjit::jit([&](const Tensor& q) { return mha(q, kv, v); })(q), attention_by_heads(mha, q, kv, v, none));
  // A causal mask (top left), as a flag and as a bool attn_mask.
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor causal = hjit::where(hjit::triu(Tensor::ones({3, 5}, DType::Bool), 1), -inf, Tensor::zeros({3, 5}));
  check_close(mha(q, kv, v, {.is_causal = true}), attention_by_heads(mha, q, kv, v, causal));
  check_close(mha(q, kv, v, {.attn_mask = hjit::triu(Tensor::ones({3, 5}, DType::Bool), 1)}), attention_by_heads(mha, q, kv, v, causal));
  // The key padding mask hides the last two keys of batch 1.
  const Tensor pad = Tensor::from_vector<bool>({false, false, false, false, false, false, false, false, true, true}, {2, 5});
  const Tensor additive = hjit::where(pad.reshape({2, 1, 5}), -inf, Tensor::zeros({2, 1, 5}));
  check_close(mha(q, kv, v, {.key_padding_mask = pad}), attention_by_heads(mha, q, kv, v, additive));
  // Sequence-first layout (PyTorch's default) gives the same, transposed.
  nn::MultiheadAttention seq_first(8, 2);
  seq_first.load_state(mha.state());
  check_close(seq_first(hjit::transpose(q, {1, 0, 2}), hjit::transpose(kv, {1, 0, 2}), hjit::transpose(v, {1, 0, 2})),
              hjit::transpose(mha(q, kv, v), {1, 0, 2}));
  CHECK(names_of(mha.named_parameters()) == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"});
  CHECK_THROWS_AS(mha(q, rnd({2, 5, 6}, 1), v), hjit::ShapeError);
  CHECK_THROWS_AS(mha(q, kv, v, {.attn_mask = Tensor::zeros({3, 4})}), hjit::ShapeError);
  CHECK_THROWS_AS(nn::MultiheadAttention(10, 3), hjit::ValueError);
}

TEST_CASE("transformer layers: post-norm and pre-norm, jitted and differentiated as eagerly") {
  nn::manual_seed(4);
  for (bool norm_first : {false, true}) {
    CAPTURE(norm_first);
    nn::TransformerEncoderLayer enc(8, 2, {.dim_feedforward = 16, .dropout = 0.1, .activation = nn::Activation::Gelu, .batch_first = true, .norm_first = norm_first});
    enc.eval();  // dropout off: deterministic
    const Tensor x = rnd({2, 4, 8}, 50);
    // Post-norm by hand: norm1(x + attn(x)), then norm2(h + ff(h)).
    Tensor want;
    if (!norm_first) {
      const Tensor h = enc.norm1(x + enc.self_attn(x, x, x));
      want = enc.norm2(h + enc.linear2(hjit::gelu(enc.linear1(h))));
    } else {
      const Tensor n1 = enc.norm1(x);
      const Tensor h = x + enc.self_attn(n1, n1, n1);
      want = h + enc.linear2(hjit::gelu(enc.linear1(enc.norm2(h))));
    }
    check_close(enc(x), want);
    check_close(hjit::jit([&](const Tensor& x) { return enc(x, {.is_causal = true}); })(x), enc(x, {.is_causal = true}));
    const std::vector<Tensor> params = enc.parameters();
    auto loss = [&](const Tensor& x) { return hjit::mean(enc(x) * enc(x)); };
    auto [l0, g0] = hjit::value_and_grad(loss, params)(x);
    auto [l1, g1] = hjit::jit([&](const Tensor& x) { return hjit::value_and_grad(loss, params)(x); })(x);
    check_close(l1, l0);
    REQUIRE(g1.size() == params.size());
    for (size_t i = 0; i < g0.size(); ++i) check_close(g1[i], g0[i], 1e-3);
  }
  nn::TransformerDecoderLayer dec(8, 2, {.dim_feedforward = 16, .batch_first = true});
  dec.eval();
  const Tensor tgt = rnd({2, 3, 8}, 51), mem = rnd({2, 5, 8}, 52);
  const Tensor h1 = dec.norm1(tgt + dec.self_attn(tgt, tgt, tgt, {.is_causal = true}));
  const Tensor h2 = dec.norm2(h1 + dec.multihead_attn(h1, mem, mem));
  check_close(dec(tgt, mem, {.is_causal = true}), dec.norm3(h2 + dec.linear2(hjit::relu(dec.linear1(h2)))));
  CHECK(dec.named_parameters().size() == 4 + 4 + 4 + 6);
}

namespace {

// The LSTM cell stepped by hand on [T, N, I] (one layer), PyTorch's formulas.
std::pair<Tensor, Tensor> lstm_by_steps(const Tensor& x, const nn::NamedTensors& p, int64_t H) {
  auto get = [&](const std::string& name) {
    for (auto& [n, t] : p)
      if (n == name) return t;
    FAIL("no parameter " << name);
    return Tensor();
  };
  const Tensor wih = get("weight_ih_l0"), whh = get("weight_hh_l0"), b = get("bias_ih_l0") + get("bias_hh_l0");
  const int64_t T = x.shape()[0], N = x.shape()[1];
  Tensor h = Tensor::zeros({N, H}), c = Tensor::zeros({N, H});
  std::vector<Tensor> outs;
  for (int64_t t = 0; t < T; ++t) {
    const Tensor xt = hjit::squeeze(hjit::slice(x, 0, t, t + 1), {0});
    const Tensor g = hjit::matmul(xt, hjit::transpose(wih)) + hjit::matmul(h, hjit::transpose(whh)) + b;
    const Tensor i = hjit::sigmoid(hjit::slice(g, 1, 0, H)), f = hjit::sigmoid(hjit::slice(g, 1, H, 2 * H));
    const Tensor gg = hjit::tanh(hjit::slice(g, 1, 2 * H, 3 * H)), o = hjit::sigmoid(hjit::slice(g, 1, 3 * H, 4 * H));
    c = f * c + i * gg;
    h = o * hjit::tanh(c);
    outs.push_back(h);
  }
  return {hjit::stack(outs, 0), c};
}

}  // namespace

TEST_CASE("LSTM and GRU: PyTorch's cells stepped by hand, two layers, jitted and differentiated") {
  nn::manual_seed(5);
  nn::LSTM lstm(3, 4);
  const Tensor x = rnd({6, 2, 3}, 60);
  const nn::LSTMResult r = lstm(x);
  auto [want_out, want_c] = lstm_by_steps(x, lstm.named_parameters(), 4);
  check_close(r.output, want_out);
  check_close(r.h, hjit::slice(want_out, 0, 5, 6));
  check_close(r.c, want_c.reshape({1, 2, 4}));
  CHECK(names_of(lstm.named_parameters()) == std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"});

  // Two layers, batch first: the second layer reads the first's outputs.
  nn::LSTM deep(3, 4, {.num_layers = 2, .batch_first = true});
  const Tensor xb = hjit::transpose(x, {1, 0, 2});
  const nn::LSTMResult d = deep(xb);
  CHECK(d.output.shape() == Shape{2, 6, 4});
  CHECK(d.h.shape() == Shape{2, 2, 4});
  nn::NamedTensors second;
  for (auto& [n, t] : deep.named_parameters())
    if (n.size() > 3 && n.substr(n.size() - 3) == "_l1") second.push_back({n.substr(0, n.size() - 1) + "0", t});
  auto [first_out, first_c] = lstm_by_steps(x, [&] {
    nn::NamedTensors first;
    for (auto& [n, t] : deep.named_parameters())
      if (n.substr(n.size() - 3) == "_l0") first.push_back({n, t});
    return first;
  }(), 4);
  auto [second_out, second_c] = lstm_by_steps(first_out, second, 4);
  check_close(d.output, hjit::transpose(second_out, {1, 0, 2}));

  const std::vector<Tensor> params = lstm.parameters();
  auto loss = [&](const Tensor& x) { return hjit::sum(lstm(x).output); };
  auto [l0, g0] = hjit::value_and_grad(loss, params)(x);
  auto jitted = hjit::jit([&](const Tensor& x) { return hjit::value_and_grad(loss, params)(x); });
  auto [l1, g1] = jitted(x);
  check_close(l1, l0);
  for (size_t i = 0; i < g0.size(); ++i) check_close(g1[i], g0[i], 1e-3);

  // GRU: h' = (1 - z) n + z h, n = tanh(W_in x + b_in + r (W_hn h + b_hn)).
  nn::GRU gru(3, 4);
  const nn::NamedTensors p = gru.named_parameters();
  const Tensor wih = p[0].second, whh = p[1].second, bih = p[2].second, bhh = p[3].second;
  Tensor h = rnd({2, 4}, 61);
  const Tensor h0 = h.reshape({1, 2, 4});
  for (int64_t t = 0; t < 6; ++t) {
    const Tensor gx = hjit::matmul(hjit::squeeze(hjit::slice(x, 0, t, t + 1), {0}), hjit::transpose(wih)) + bih;
    const Tensor gh = hjit::matmul(h, hjit::transpose(whh)) + bhh;
    const Tensor rr = hjit::sigmoid(hjit::slice(gx, 1, 0, 4) + hjit::slice(gh, 1, 0, 4));
    const Tensor z = hjit::sigmoid(hjit::slice(gx, 1, 4, 8) + hjit::slice(gh, 1, 4, 8));
    const Tensor n = hjit::tanh(hjit::slice(gx, 1, 8, 12) + rr * hjit::slice(gh, 1, 8, 12));
    h = (1.0 - z) * n + z * h;
  }
  check_close(gru(x, h0).h, h.reshape({1, 2, 4}));
  check_close(hjit::jit([&](const Tensor& x, const Tensor& h0) { return gru(x, h0).h; })(x, h0), h.reshape({1, 2, 4}));
  CHECK_THROWS_AS(gru(rnd({6, 2, 5}, 1)), hjit::ShapeError);
  CHECK_THROWS_AS(gru(x, Tensor::zeros({2, 2, 4})), hjit::ShapeError);
  CHECK_THROWS_AS(lstm(Tensor::zeros({0, 2, 3})), hjit::ShapeError);
}

TEST_CASE("a small CNN of nn layers trains in a jitted step with AdamW") {
  nn::manual_seed(6);
  struct Cnn : nn::Module {
    nn::Conv2d conv{1, 4, 3, 1, 1};
    nn::BatchNorm bn{4};
    nn::Linear fc{4 * 4 * 4, 2};
    nn::Dropout drop{0.1};
    Cnn() {
      register_module("conv", conv);
      register_module("bn", bn);
      register_module("fc", fc);
      register_module("drop", drop);
    }
    Tensor operator()(const Tensor& x) {
      const Tensor h = hjit::max_pool2d(hjit::relu(bn(conv(x))), {2, 2});
      return fc(drop(h.reshape({x.shape()[0], -1})));
    }
  } net;
  // Two classes: images brighter on the left or on the right.
  const Tensor side = Tensor::from_vector<int64_t>({0, 1, 0, 1, 1, 0, 1, 0}, {8});
  const Tensor ramp = hjit::iota({8, 1, 8, 8}, 3) / 7.0;
  const Tensor images = hjit::where(side.reshape({8, 1, 1, 1}) == int64_t(0), 1.0 - ramp, ramp) + rnd({8, 1, 8, 8}, 70) * 0.1;
  const std::vector<Tensor> params = net.parameters();
  hjit::optim::AdamW opt(params, 0.05);
  auto loss = [&](const Tensor& x, const Tensor& y) { return hjit::cross_entropy(net(x), y); };
  auto step = hjit::jit([&](const Tensor& x, const Tensor& y) {
    auto [l, g] = hjit::value_and_grad(loss, params)(x, y);
    opt.step(g);
    return l;
  });
  const double first = step(images, side).item<float>();
  double last = first;
  for (int i = 0; i < 30; ++i) last = step(images, side).item<float>();
  CHECK(last < 0.25 * first);
  CHECK(step.stats().traces == 1);
  net.eval();
  const std::vector<int64_t> predicted = hjit::argmax(net(images), 1).to_vector<int64_t>();
  CHECK(predicted == side.to_vector<int64_t>());
}

namespace {

// A reference written by tests/data/nn/make_torch_references.py: PyTorch's state dict, inputs and
// outputs for one layer.
struct TorchReference {
  nn::NamedTensors state;
  std::vector<Tensor> inputs, outputs;
};

TorchReference torch_reference(const std::string& name) {
  TorchReference r;
  for (auto& [key, t] : hjit::load_npz(std::string(HJIT_TEST_DATA_DIR) + "/nn/" + name + ".npz")) {
    if (key.rfind("state.", 0) == 0) r.state.push_back({key.substr(6), t});
    else if (key.rfind("in.", 0) == 0) r.inputs.push_back(t);
    else if (key.rfind("out.", 0) == 0) r.outputs.push_back(t);
  }
  return r;
}

template <class M, class Run>
void check_against_torch(const std::string& name, M& module, Run run) {
  CAPTURE(name);
  const TorchReference r = torch_reference(name);
  module.load_state(r.state);  // strict: PyTorch's names, shapes and dtypes
  module.eval();
  const std::vector<Tensor> got = run(r.inputs);
  REQUIRE(got.size() <= r.outputs.size());
  for (size_t i = 0; i < got.size(); ++i) check_close(got[i], r.outputs[i], 2e-5);
}

}  // namespace

TEST_CASE("PyTorch's state dicts load by name, and the layers compute PyTorch's outputs") {
  nn::Sequential mlp;
  mlp.add<nn::Linear>(4, 8), mlp.add<nn::ReLU>(), mlp.add<nn::Linear>(8, 3);
  check_against_torch("linear", mlp, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mlp(in[0])}; });

  nn::Sequential conv;
  conv.add<nn::Conv2d>(3, 4, 3, 2, 1), conv.add<nn::BatchNorm2d>(4), conv.add<nn::ReLU>();
  conv.add<nn::ConvTranspose2d>(4, 2, 3, 2, 1, 1), conv.add<nn::GroupNorm>(1, 2);
  check_against_torch("conv", conv, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{conv(in[0])};
  });
  {
    const TorchReference r = torch_reference("conv");  // the jitted run against the same output
    check_close(hjit::jit([&](const Tensor& x) { return conv(x); })(r.inputs[0]), r.outputs[0], 2e-5);
  }

  nn::Conv1d c1(2, 4, 3, 1, 2, 2);
  check_against_torch("conv1d_3d", c1, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{c1(in[0])}; });
  nn::Conv3d c3(2, 2, {2, 3, 3}, {1, 2, 1}, 1);
  check_against_torch("conv3d", c3, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{c3(in[0])}; });

  nn::LSTM lstm(3, 5, {.num_layers = 2, .batch_first = true});
  check_against_torch("lstm", lstm, [&](const std::vector<Tensor>& in) {
    const nn::LSTMResult r = lstm(in[0]);
    return std::vector<Tensor>{r.output, r.h, r.c};
  });
  nn::GRU gru(3, 4);
  check_against_torch("gru", gru, [&](const std::vector<Tensor>& in) {
    auto jitted = hjit::jit([&](const Tensor& x) { return gru(x).output; });
    return std::vector<Tensor>{jitted(in[0]), gru(in[0]).h};
  });

  nn::MultiheadAttention mha(8, 2, 0.0, true, true);
  check_against_torch("mha", mha, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mha(in[0], in[1], in[2])}; });
  nn::TransformerEncoderLayer enc(8, 2, {.dim_feedforward = 16, .activation = nn::Activation::Gelu, .batch_first = true});
  check_against_torch("encoder", enc, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{hjit::jit([&](const Tensor& x) { return enc(x); })(in[0])};
  });
  nn::Sequential emb;
  emb.add<nn::Embedding>(10, 4, 0), emb.add<nn::LayerNorm>(Shape{4});
  check_against_torch("embedding", emb, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{emb(in[0])}; });
}

TEST_CASE("pad_sequence, pack_padded_sequence and pad_packed_sequence as torch.nn.utils.rnn's") {
  const Tensor a = rnd({3, 2}, 70), b = rnd({1, 2}, 71), c = rnd({4, 2}, 72);
  const Tensor padded = nn::pad_sequence({a, b, c}, true, -1.0);  // [3, 4, 2]
  CHECK(padded.shape() == Shape{3, 4, 2});
  check_close(hjit::slice(padded, 0, 0, 1).reshape({4, 2}), hjit::concat({a, Tensor::full({1, 2}, -1.0)}, 0));
  CHECK(nn::pad_sequence({a, b, c}).shape() == Shape{4, 3, 2});
  // Packed: time step by time step, the longest sequences first (c, a, b).
  const nn::PackedSequence p = nn::pack_padded_sequence(padded, {3, 1, 4}, true, false);
  CHECK(p.batch_sizes.to_vector<int64_t>() == std::vector<int64_t>{3, 2, 2, 1});
  CHECK(p.sorted_indices.to_vector<int64_t>() == std::vector<int64_t>{2, 0, 1});
  CHECK(p.unsorted_indices.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0});
  CHECK(p.lengths() == std::vector<int64_t>{3, 1, 4});
  auto row = [](const Tensor& s, int64_t t) { return hjit::slice(s, 0, t, t + 1); };
  check_close(p.data, hjit::concat({row(c, 0), row(a, 0), row(b, 0), row(c, 1), row(a, 1), row(c, 2), row(a, 2), row(c, 3)}, 0));
  // And back, padded with another value, to a longer length.
  const auto [back, lengths] = nn::pad_packed_sequence(p, true, 0.0, 6);
  CHECK(back.shape() == Shape{3, 6, 2});
  CHECK(lengths.to_vector<int64_t>() == std::vector<int64_t>{3, 1, 4});
  check_close(hjit::slice(back, 1, 0, 4), hjit::where(padded == -1.0, Tensor::zeros({3, 4, 2}), padded));
  check_close(nn::pack_sequence({c, a, b}).data, nn::pack_padded_sequence(nn::pad_sequence({c, a, b}), {4, 3, 1}).data);
  // What PyTorch refuses, refused with the values.
  CHECK_THROWS_WITH_AS(nn::pack_padded_sequence(padded, {3, 1, 4}, true), doctest::Contains("enforce_sorted"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(nn::pack_padded_sequence(padded, {3, 0, 4}, true, false), doctest::Contains("length 0"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(nn::pack_padded_sequence(padded, {3, 1, 5}, true, false), doctest::Contains("length 5"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(nn::pack_padded_sequence(padded, {3, 1}, true, false), doctest::Contains("2 lengths"), hjit::ShapeError);
  CHECK_THROWS_WITH_AS(nn::pad_sequence({a, rnd({2, 3}, 73)}), doctest::Contains("sequence 1"), hjit::ShapeError);
  CHECK_THROWS_WITH_AS(nn::pad_packed_sequence(p, true, 0.0, 3), doctest::Contains("total_length 3"), hjit::ValueError);
}

TEST_CASE("LSTM and GRU on packed sequences: each sequence as if run alone, eagerly, jitted and differentiated") {
  nn::manual_seed(8);
  nn::LSTM lstm(2, 3, {.num_layers = 2});
  nn::GRU gru(2, 3);
  const std::vector<Tensor> seqs{rnd({3, 2}, 80), rnd({5, 2}, 81), rnd({1, 2}, 82)};
  const nn::PackedSequence packed = nn::pack_sequence(seqs, false);
  const nn::PackedLSTMResult r = lstm(packed);
  const nn::PackedGRUResult g = gru(packed);
  const auto [out, lengths] = nn::pad_packed_sequence(r.output, true);
  const auto [gru_out, gru_lengths] = nn::pad_packed_sequence(g.output, true);
  CHECK(out.shape() == Shape{3, 5, 3});
  for (int64_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    const Tensor alone = seqs[size_t(i)].reshape({seqs[size_t(i)].dim(0), 1, 2});
    const int64_t len = alone.dim(0);
    const nn::LSTMResult want = lstm(alone);
    check_close(hjit::slice(hjit::slice(out, 0, i, i + 1), 1, 0, len).reshape({len, 3}), want.output.reshape({len, 3}));
    check_close(hjit::slice(r.h, 1, i, i + 1), want.h);
    check_close(hjit::slice(r.c, 1, i, i + 1), want.c);
    check_close(hjit::slice(hjit::slice(out, 0, i, i + 1), 1, len, 5), Tensor::zeros({1, 5 - len, 3}));  // past its end
    const nn::GRUResult gw = gru(alone);
    check_close(hjit::slice(hjit::slice(gru_out, 0, i, i + 1), 1, 0, len).reshape({len, 3}), gw.output.reshape({len, 3}));
    check_close(hjit::slice(g.h, 1, i, i + 1), gw.h);
  }
  // Jitted (the lengths are what it was traced for) and differentiated: the gradient of a sum
  // over the packed outputs is the sum of each sequence's alone.
  const std::vector<Tensor> params = lstm.parameters();
  auto packed_loss = [&](const Tensor& x) {  // x: the padded batch, time major
    return hjit::sum(lstm(nn::pack_padded_sequence(x, {3, 5, 1}, false, false)).output.data);
  };
  const Tensor x = nn::pad_sequence(seqs);
  auto [l0, g0] = hjit::value_and_grad(packed_loss, params)(x);
  auto [l1, g1] = hjit::jit([&](const Tensor& x) { return hjit::value_and_grad(packed_loss, params)(x); })(x);
  check_close(l1, l0);
  std::vector<Tensor> want(params.size());
  for (const Tensor& s : seqs) {
    auto alone_loss = [&](const Tensor& v) { return hjit::sum(lstm(v).output); };
    const std::vector<Tensor> gs = hjit::value_and_grad(alone_loss, params)(s.reshape({s.dim(0), 1, 2})).second;
    for (size_t k = 0; k < params.size(); ++k) want[k] = want[k].defined() ? want[k] + gs[k] : gs[k];
  }
  for (size_t k = 0; k < params.size(); ++k) {
    CAPTURE(k);
    check_close(g0[k], want[k], 1e-4);
    check_close(g1[k], want[k], 1e-3);
  }
}
