// hjit::nn: the convolutions beside conv2d against direct loops, the module registry (names,
// state, modes), initializations, and each layer against its formula written out, eagerly,
// jitted and differentiated.
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

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
  CHECK(names_of(net.named_buffers()) == std::vector<std::string>{"norm.running_mean", "norm.running_var"});
  CHECK(net.parameters().size() == 5);
  CHECK(net.state().size() == 7);
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
  wrong.back().second = Tensor::ones({9});  // norm.running_var
  CHECK_THROWS_AS(net.load_state(wrong), hjit::ShapeError);
  CHECK(vals(net.fc1.bias) == before);  // nothing assigned
  wrong = state;
  wrong[1].second = Tensor::zeros({8}, DType::F64);
  CHECK_THROWS_AS(net.load_state(wrong), hjit::DTypeError);
  wrong = state;
  wrong.pop_back();
  CHECK_THROWS_WITH_AS(net.load_state(wrong), doctest::Contains("missing: norm.running_var"), hjit::ValueError);
  net.load_state(wrong, false);  // the names both have
  CHECK(vals(net.fc1.bias) == vals(other.fc1.bias));
  wrong = state;
  wrong.push_back({"fc2.weight", Tensor::zeros({1})});
  CHECK_THROWS_WITH_AS(net.load_state(wrong), doctest::Contains("not in the module: fc2.weight"), hjit::ValueError);

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
