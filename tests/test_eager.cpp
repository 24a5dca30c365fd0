// Eager execution checked against values computed by hand or by an independent formula: eager is
// the oracle for everything compiled, so it is checked on its own.
#include <cmath>
#include <limits>
#include <numeric>

#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;

namespace {

Tensor f32(std::vector<float> v, Shape s) { return Tensor::from_vector(v, s); }
std::vector<float> vals(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace

TEST_CASE("arithmetic with numpy broadcasting") {
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3}), b = f32({10, 20, 30}, {3}), c = f32({100, 200}, {2, 1});
  CHECK(vals(a + b) == std::vector<float>{11, 22, 33, 14, 25, 36});
  CHECK(vals(a * c) == std::vector<float>{100, 200, 300, 800, 1000, 1200});
  CHECK((b + c).shape() == Shape{2, 3});
  CHECK(vals(b - c) == std::vector<float>{-90, -80, -70, -190, -180, -170});
  CHECK(vals(a / 2) == std::vector<float>{0.5, 1, 1.5, 2, 2.5, 3});
  CHECK(vals(1 - a) == std::vector<float>{0, -1, -2, -3, -4, -5});
  Tensor s = Tensor::scalar(3);
  CHECK((s * a).shape() == Shape{2, 3});
  CHECK((s + s).shape() == Shape{});
  CHECK((s + s).item<float>() == 6);
  CHECK(vals(hjit::pow(a, 2.0)) == std::vector<float>{1, 4, 9, 16, 25, 36});
  CHECK(std::isinf((f32({1}, {1}) / 0.0).item<float>()));
}

TEST_CASE("type promotion follows PyTorch, with weak C++ scalars") {
  struct Row {
    DType a, b, want;
  };
  for (Row r : {Row{DType::I32, DType::F32, DType::F32}, Row{DType::I32, DType::I64, DType::I64},
                Row{DType::U8, DType::I8, DType::I16}, Row{DType::U8, DType::I32, DType::I32},
                Row{DType::U16, DType::I16, DType::I32}, Row{DType::Bool, DType::I8, DType::I8},
                Row{DType::F16, DType::BF16, DType::F32}, Row{DType::F16, DType::F64, DType::F64},
                Row{DType::Bool, DType::Bool, DType::Bool}, Row{DType::I64, DType::F16, DType::F16}}) {
    INFO(hjit::dtype_name(r.a) << " + " << hjit::dtype_name(r.b));
    CHECK(hjit::promote_types(r.a, r.b) == r.want);
    CHECK((Tensor::zeros({2}, r.a) == Tensor::zeros({2}, r.b)).dtype() == DType::Bool);
    if (r.want != DType::Bool) CHECK((Tensor::zeros({2}, r.a) + Tensor::ones({2}, r.b)).dtype() == r.want);
  }
  CHECK_THROWS_AS(hjit::promote_types(DType::U64, DType::I32), hjit::DTypeError);
  // Weak scalars: the tensor's dtype wins within a kind; a higher kind gives its default dtype.
  CHECK((Tensor::zeros({2}, DType::F16) * 2.0).dtype() == DType::F16);
  CHECK((Tensor::zeros({2}, DType::I8) + 1000).dtype() == DType::I8);
  CHECK((Tensor::zeros({2}, DType::I32) * 2.5).dtype() == DType::F32);
  CHECK((Tensor::zeros({2}, DType::Bool) + 1).dtype() == DType::I64);
  CHECK((Tensor::zeros({2}, DType::I64) / 2).dtype() == DType::F32);
  CHECK(hjit::exp(Tensor::zeros({2}, DType::I32)).dtype() == DType::F32);
  CHECK(hjit::where(Tensor::ones({2}, DType::Bool), 1, 2.5).dtype() == DType::F32);
  CHECK(vals(Tensor::arange(4, DType::I32) / 2) == std::vector<float>{0, 0.5, 1, 1.5});
}

TEST_CASE("elementwise functions against the C library") {
  std::vector<double> x = {-3.5, -1, -0.25, 0, 0.3, 1, 2.75};
  Tensor t = Tensor::from_vector(x, {7});
  auto each = [&](const Tensor& got, double (*f)(double)) {
    std::vector<double> g = got.to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i) CHECK(g[i] == doctest::Approx(f(x[i])).epsilon(1e-15));
  };
  each(hjit::exp(t), [](double v) { return std::exp(v); });
  each(hjit::sin(t), [](double v) { return std::sin(v); });
  each(hjit::cos(t), [](double v) { return std::cos(v); });
  each(hjit::tanh(t), [](double v) { return std::tanh(v); });
  each(hjit::erf(t), [](double v) { return std::erf(v); });
  each(hjit::sigmoid(t), [](double v) { return 1 / (1 + std::exp(-v)); });
  each(hjit::log(hjit::abs(t) + 1), [](double v) { return std::log(std::fabs(v) + 1); });
  each(hjit::log1p(hjit::abs(t)), [](double v) { return std::log1p(std::fabs(v)); });
  each(hjit::sqrt(hjit::abs(t)), [](double v) { return std::sqrt(std::fabs(v)); });
  each(hjit::relu(t), [](double v) { return v > 0 ? v : 0.0; });
  each(hjit::sign(t), [](double v) { return double((v > 0) - (v < 0)); });
  each(hjit::gelu(t), [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); });
  each(hjit::clamp(t, -1.0, 1.0), [](double v) { return std::min(1.0, std::max(-1.0, v)); });
  each(hjit::hardswish(t), [](double v) { return v * std::min(std::max(v + 3, 0.0), 6.0) / 6; });
  each(hjit::atan(t), [](double v) { return std::atan(v); });
  each(hjit::asin(t / 4.0), [](double v) { return std::asin(v / 4); });
  each(hjit::acos(t / 4.0), [](double v) { return std::acos(v / 4); });
  // Round half to even, like numpy and PyTorch.
  CHECK(vals(hjit::round(f32({0.5, 1.5, 2.5, -0.5, -1.5, 2.4}, {6}))) == std::vector<float>{0, 2, 2, -0.0f, -2, 2});
  CHECK(vals(hjit::floor(f32({-1.5, 1.5}, {2}))) == std::vector<float>{-2, 1});
  // Rounding an integer is the identity.
  CHECK(hjit::floor(Tensor::arange(3, DType::I32)).dtype() == DType::I32);
}

TEST_CASE("hardswish: zero below -3, x above 3, NaN through, and PyTorch's NaN at -inf") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> y = vals(hjit::hardswish(f32({-4, -3, 0, 1.5, 3, 4, inf, -inf, nan}, {9})));
  CHECK(y[0] == 0);
  CHECK(y[1] == 0);
  CHECK(y[2] == 0);
  CHECK(y[3] == doctest::Approx(1.5 * 4.5 / 6));
  CHECK(y[4] == 3);
  CHECK(y[5] == 4);
  CHECK(y[6] == inf);
  CHECK(std::isnan(y[7]));  // -inf * 0, as PyTorch's kernel computes it
  CHECK(std::isnan(y[8]));
  CHECK(hjit::hardswish(Tensor::ones({2}, DType::F16)).dtype() == DType::F16);
  CHECK(hjit::hardswish(Tensor::ones({2}, DType::I32)).dtype() == DType::F32);  // integers compute in f32
}

TEST_CASE("maximum and minimum propagate NaN, like PyTorch") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = f32({1, nan, 3}, {3}), b = f32({nan, 2, 1}, {3});
  std::vector<float> mx = vals(hjit::maximum(a, b)), mn = vals(hjit::minimum(a, b));
  CHECK(std::isnan(mx[0]));
  CHECK(std::isnan(mx[1]));
  CHECK(mx[2] == 3);
  CHECK(std::isnan(mn[0]));
  CHECK(mn[2] == 1);
  CHECK(hjit::argmax(a, 0).item<int64_t>() == 1);  // a NaN counts as the maximum
}

TEST_CASE("reductions by hand") {
  Tensor x = f32({1, 5, 3, 4, 2, 6}, {2, 3});
  CHECK(vals(hjit::sum(x, {0})) == std::vector<float>{5, 7, 9});
  CHECK(vals(hjit::sum(x, {1})) == std::vector<float>{9, 12});
  CHECK(hjit::sum(x).item<float>() == 21);
  CHECK(hjit::sum(x, {1}, true).shape() == Shape{2, 1});
  CHECK(hjit::sum(x, {0, 1}, true).shape() == Shape{1, 1});
  CHECK(vals(hjit::mean(x, {-1})) == std::vector<float>{3, 4});
  CHECK(vals(hjit::max(x, {1})) == std::vector<float>{5, 6});
  CHECK(vals(hjit::min(x, {0})) == std::vector<float>{1, 2, 3});
  CHECK(hjit::argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(hjit::argmin(x, 0).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
  CHECK(hjit::argmax(x, 1, true).shape() == Shape{2, 1});
  CHECK(hjit::argmax(f32({2, 7, 7, 1}, {4}), 0).item<int64_t>() == 1);  // the first of equal maxima
  // A non-adjacent axis set.
  Tensor y = Tensor::arange(24).reshape({2, 3, 4});
  CHECK(vals(hjit::sum(y, {0, 2})) == std::vector<float>{60, 92, 124});
  // Integers and bools sum in i64, like PyTorch.
  Tensor b = Tensor::from_vector<bool>({true, false, true, true}, {4});
  CHECK(hjit::sum(b).dtype() == DType::I64);
  CHECK(hjit::sum(b).item<int64_t>() == 3);
  CHECK(hjit::sum(Tensor::full({3}, 1e9, DType::I32)).item<int64_t>() == 3000000000LL);
  // Empty sums are 0; the mean of nothing is NaN.
  CHECK(vals(hjit::sum(Tensor::zeros({0, 3}), {0})) == std::vector<float>{0, 0, 0});
  CHECK(std::isnan(hjit::mean(Tensor::zeros({0}), {0}).item<float>()));
  // numel: the count along axes (every one by default) as a 0-d tensor of the dtype asked for.
  CHECK(hjit::numel(y).item<float>() == 24);
  CHECK(hjit::numel(y, {0, 2}, DType::I64).item<int64_t>() == 8);
  CHECK(hjit::numel(y, {-1}, DType::F64).shape() == Shape{});
  CHECK(hjit::numel(Tensor::zeros({0, 3}), {1}).item<float>() == 3);
  CHECK(hjit::numel(Tensor::scalar(2.0)).item<float>() == 1);
  CHECK_THROWS_AS(hjit::numel(y, {3}), hjit::ShapeError);
  CHECK_THROWS_AS(hjit::numel(y, {0}, DType::Bool), hjit::DTypeError);
  // Large rows: the lane-parallel sum agrees with a double-precision sum.
  Tensor big = Tensor::randn({100003}, 9);
  std::vector<double> bv = big.to_vector<double>();
  double ref = 0;
  for (double v : bv) ref += v;
  CHECK(hjit::sum(big).item<float>() == doctest::Approx(ref).epsilon(1e-5));
}

TEST_CASE("matmul with numpy semantics, by hand") {
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3}), b = f32({7, 8, 9, 10, 11, 12}, {3, 2});
  CHECK(vals(hjit::matmul(a, b)) == std::vector<float>{58, 64, 139, 154});
  Tensor v = f32({1, 0, -1}, {3});
  CHECK(vals(hjit::matmul(a, v)) == std::vector<float>{-2, -2});
  CHECK(hjit::matmul(v, v).shape() == Shape{});
  CHECK(hjit::matmul(v, v).item<float>() == 2);
  CHECK(vals(hjit::matmul(v, b)) == std::vector<float>{-4, -4});
  // Batch broadcasting: [2,1,2,3] @ [3,3,2] -> [2,3,2,2].
  Tensor batch = hjit::matmul(hjit::broadcast_to(a, {2, 1, 2, 3}), hjit::broadcast_to(b, {3, 3, 2}));
  CHECK(batch.shape() == Shape{2, 3, 2, 2});
  CHECK(vals(hjit::slice(batch.reshape({-1}), 0, 20, 24)) == std::vector<float>{58, 64, 139, 154});
  CHECK(hjit::matmul(Tensor::arange(6, DType::I32).reshape({2, 3}), Tensor::ones({3, 1}, DType::I32)).to_vector<int>() ==
        std::vector<int>{3, 12});
  CHECK(vals(hjit::matmul(Tensor::zeros({2, 0}), Tensor::zeros({0, 2}))) == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("shape ops by hand") {
  Tensor x = Tensor::arange(6).reshape({2, 3});  // [[0,1,2],[3,4,5]]
  CHECK(x.reshape({3, -1}).shape() == Shape{3, 2});
  CHECK(vals(x.transpose()) == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(vals(hjit::broadcast_to(f32({1, 2}, {2, 1}), {2, 3})) == std::vector<float>{1, 1, 1, 2, 2, 2});
  CHECK(hjit::unsqueeze(x, -1).shape() == Shape{2, 3, 1});
  CHECK(hjit::squeeze(Tensor::zeros({1, 3, 1})).shape() == Shape{3});
  CHECK(vals(hjit::slice(x, 1, 1, std::nullopt)) == std::vector<float>{1, 2, 4, 5});
  CHECK(vals(hjit::slice(x, -1, -1, std::nullopt)) == std::vector<float>{2, 5});
  CHECK(vals(hjit::slice(Tensor::arange(10), 0, 1, -1, 3)) == std::vector<float>{1, 4, 7});
  CHECK(hjit::slice(Tensor::arange(10), 0, 8, 2).numel() == 0);            // empty, like Python
  CHECK(vals(hjit::slice(Tensor::arange(4), 0, -100, 100)) == std::vector<float>{0, 1, 2, 3});  // clipped
  CHECK(vals(hjit::concat({x, x * 10}, 0)).back() == 50);
  CHECK(hjit::concat({x, x}, 1).shape() == Shape{2, 6});
  CHECK(hjit::stack({x, x, x}, 1).shape() == Shape{2, 3, 3});
  CHECK(vals(hjit::pad(f32({1, 2}, {2}), {{1, 2}}, -1)) == std::vector<float>{-1, 1, 2, -1, -1});
  CHECK(vals(hjit::concat({f32({1}, {1}), Tensor::zeros({0})}, 0)) == std::vector<float>{1});
}

TEST_CASE("softmax, log_softmax and layer_norm against their formulas") {
  Tensor x = Tensor::randn({4, 9}, 3);
  std::vector<float> xv = vals(x), sm = vals(hjit::softmax(x)), lsm = vals(hjit::log_softmax(x));
  for (int r = 0; r < 4; ++r) {
    double m = -1e30, s = 0;
    for (int c = 0; c < 9; ++c) m = std::max(m, double(xv[r * 9 + c]));
    for (int c = 0; c < 9; ++c) s += std::exp(xv[r * 9 + c] - m);
    for (int c = 0; c < 9; ++c) {
      CHECK(sm[r * 9 + c] == doctest::Approx(std::exp(xv[r * 9 + c] - m) / s).epsilon(1e-6));
      CHECK(lsm[r * 9 + c] == doctest::Approx(xv[r * 9 + c] - m - std::log(s)).epsilon(1e-6));
    }
  }
  Tensor w = Tensor::randn({9}, 4), b = Tensor::randn({9}, 5);
  std::vector<float> ln = vals(hjit::layer_norm(x, w, b)), wv = vals(w), bv = vals(b);
  for (int r = 0; r < 4; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < 9; ++c) mean += xv[r * 9 + c] / 9.0;
    for (int c = 0; c < 9; ++c) var += (xv[r * 9 + c] - mean) * (xv[r * 9 + c] - mean) / 9.0;
    for (int c = 0; c < 9; ++c)
      CHECK(ln[r * 9 + c] == doctest::Approx((xv[r * 9 + c] - mean) / std::sqrt(var + 1e-5) * wv[c] + bv[c]).epsilon(1e-5));
  }
}

TEST_CASE("str() prints like numpy") {
  CHECK(f32({1, 2, 3, 4, 5, 6}, {2, 3}).str() == "[[1. 2. 3.]\n [4. 5. 6.]]");
  CHECK(f32({0.5, -1.25}, {2}).str() == "[ 0.5  -1.25]");
  CHECK(Tensor::arange(3, DType::I64).str() == "[0 1 2]");
  CHECK(Tensor::from_vector<bool>({true, false}, {2}).str() == "[ True False]");
  CHECK(Tensor::scalar(2.5).str() == "2.5");
  CHECK(Tensor::zeros({0, 3}).str() == "[]");
  CHECK(Tensor::arange(2000).str().find("...") != std::string::npos);
  CHECK(Tensor::arange(8).reshape({2, 2, 2}).str() == "[[[0. 1.]\n  [2. 3.]]\n\n [[4. 5.]\n  [6. 7.]]]");
}

TEST_CASE("assign writes into the storage every handle shares") {
  Tensor p = Tensor::zeros({2, 2});
  Tensor alias = p;
  const void* before = p.data();
  p.assign(f32({1, 2, 3, 4}, {2, 2}));
  CHECK(vals(alias) == std::vector<float>{1, 2, 3, 4});
  CHECK(p.data() == before);
  p.assign(f32({7, 8}, {2}));  // broadcast
  CHECK(vals(p) == std::vector<float>{7, 8, 7, 8});
  p.assign(Tensor::full({2, 2}, 3, DType::I32));  // converted
  CHECK(vals(p) == std::vector<float>{3, 3, 3, 3});
}

TEST_CASE("random tensors are seeded and distributed as asked") {
  Tensor a = Tensor::randn({20000}, 42), b = Tensor::randn({20000}, 42), c = Tensor::randn({20000}, 43);
  CHECK(vals(a) == vals(b));
  CHECK(vals(a) != vals(c));
  CHECK(hjit::mean(a).item<float>() == doctest::Approx(0).epsilon(0.03));
  CHECK(hjit::mean(a * a).item<float>() == doctest::Approx(1).epsilon(0.03));
  Tensor u = Tensor::uniform({20000}, 1, 2, 5);
  CHECK(hjit::min(u).item<float>() >= 2);
  CHECK(hjit::max(u).item<float>() < 5);
  CHECK(hjit::mean(u).item<float>() == doctest::Approx(3.5).epsilon(0.02));
}

TEST_CASE("16-bit floats convert like IEEE and bfloat16 round to nearest even") {
  using hjit::bf16;
  using hjit::f16;
  CHECK(float(f16(1.0f)) == 1.0f);
  CHECK(float(f16(65504.0f)) == 65504.0f);
  CHECK(std::isinf(float(f16(70000.0f))));
  CHECK(float(f16(5.96e-8f)) == doctest::Approx(5.9604645e-8));  // the smallest subnormal
  CHECK(float(f16(1.0f + 1.0f / 2048)) == 1.0f);                 // a tie rounds to even
  CHECK(std::isnan(float(f16(std::nanf("")))));
  CHECK(float(bf16(1.0f)) == 1.0f);
  CHECK(float(bf16(3.14159f)) == doctest::Approx(3.140625));
  Tensor h = Tensor::from_vector<float>({1.5f, -2.25f}, {2}).astype(DType::F16);
  CHECK(vals(h * 2) == std::vector<float>{3, -4.5});
  CHECK(hjit::sum(h).dtype() == DType::F16);
}

TEST_CASE("conv2d by hand") {
  // 1 image, 1 channel, 3x3 input; a 2x2 kernel of ones sums each 2x2 window.
  Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}), w = Tensor::ones({1, 1, 2, 2});
  CHECK(vals(hjit::conv2d(x, w)) == std::vector<float>{12, 16, 24, 28});
  CHECK(vals(hjit::conv2d(x, w, f32({100}, {1}))) == std::vector<float>{112, 116, 124, 128});
  // Padding 1 and stride 2: windows at (-1,-1), (-1,1), (1,-1), (1,1).
  CHECK(vals(hjit::conv2d(x, w, std::nullopt, {2, 2}, {1, 1})) == std::vector<float>{1, 5, 11, 28});
  // Dilation 2: the kernel's taps 2 apart (corners of the 3x3).
  CHECK(vals(hjit::conv2d(x, w, std::nullopt, {1, 1}, {0, 0}, {2, 2})) == std::vector<float>{1 + 3 + 7 + 9});
  // Depthwise: each channel with its own kernel.
  Tensor two = hjit::concat({x, x * 10}, 1);  // [1, 2, 3, 3]
  Tensor dw = hjit::concat({Tensor::ones({1, 1, 1, 1}), Tensor::full({1, 1, 1, 1}, 2)}, 0);
  CHECK(vals(hjit::conv2d(two, dw, std::nullopt, {1, 1}, {0, 0}, {1, 1}, 2)) == vals(hjit::concat({x, x * 20}, 1)));
  CHECK(hjit::conv2d(Tensor::zeros({2, 4, 10, 7}), Tensor::zeros({6, 2, 3, 3}), std::nullopt, {2, 1}, {1, 0}, {1, 1}, 2).shape() ==
        Shape{2, 6, 5, 5});
}

TEST_CASE("pooling by hand") {
  Tensor x = Tensor::arange(16).reshape({1, 1, 4, 4});
  CHECK(vals(hjit::max_pool2d(x, {2, 2})) == std::vector<float>{5, 7, 13, 15});
  CHECK(vals(hjit::avg_pool2d(x, {2, 2})) == std::vector<float>{2.5, 4.5, 10.5, 12.5});
  // Padding counts as zeros in the average by default (PyTorch), or not at all.
  CHECK(vals(hjit::avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}))[0] == 0.0f / 4);
  CHECK(vals(hjit::avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}, false))[0] == 0);
  CHECK(vals(hjit::avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}))[1] == (1 + 2) / 4.0f);
  CHECK(vals(hjit::avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}, false))[1] == (1 + 2) / 2.0f);
  CHECK(vals(hjit::max_pool2d(x - 100, {3, 3}, {2, 2}, {1, 1})) == std::vector<float>{-95, -93, -87, -85});
  CHECK(vals(hjit::adaptive_avg_pool2d(x, {1, 1})) == std::vector<float>{7.5});
}

TEST_CASE("normalization layers against their formulas") {
  Tensor x = Tensor::randn({3, 2, 4, 5}, 1);
  Tensor rm = f32({0.5, -1}, {2}), rv = f32({2, 0.25}, {2}), g = f32({1.5, 0.5}, {2}), b = f32({0.1, -0.2}, {2});
  std::vector<float> xv = vals(x), y = vals(hjit::batch_norm(x, rm, rv, g, b));
  for (size_t i = 0; i < xv.size(); ++i) {
    size_t c = (i / 20) % 2;
    double want = (xv[i] - vals(rm)[c]) / std::sqrt(vals(rv)[c] + 1e-5) * vals(g)[c] + vals(b)[c];
    CHECK(y[i] == doctest::Approx(want).epsilon(1e-5));
  }
  // Training: batch statistics, and the running ones move by momentum (variance unbiased).
  Tensor run_mean = Tensor::zeros({2}), run_var = Tensor::ones({2});
  Tensor yt = hjit::batch_norm_training(x, run_mean, run_var, std::nullopt, std::nullopt, 0.1);
  CHECK(hjit::mean(yt, {0, 2, 3}).to_vector<float>()[1] == doctest::Approx(0).epsilon(1e-5));
  CHECK(hjit::mean(yt * yt, {0, 2, 3}).to_vector<float>()[0] == doctest::Approx(1).epsilon(1e-3));
  Tensor ch0 = hjit::slice(x, 1, 0, 1);
  double m0 = hjit::mean(ch0).item<float>(), v0 = hjit::mean((ch0 - m0) * (ch0 - m0)).item<float>();
  CHECK(run_mean.to_vector<float>()[0] == doctest::Approx(0.1 * m0).epsilon(1e-5));
  CHECK(run_var.to_vector<float>()[0] == doctest::Approx(0.9 + 0.1 * v0 * 60 / 59).epsilon(1e-5));
  hjit::BatchNormResult stats = hjit::batch_norm_stats(x, std::nullopt, std::nullopt);
  CHECK(stats.mean.to_vector<float>()[0] == doctest::Approx(m0).epsilon(1e-5));
  CHECK(stats.var.to_vector<float>()[0] == doctest::Approx(v0).epsilon(1e-5));
  // RMS norm.
  Tensor r = f32({3, 4}, {1, 2});
  CHECK(vals(hjit::rms_norm(r, std::nullopt, 0)) == std::vector<float>{float(3 / std::sqrt(12.5)), float(4 / std::sqrt(12.5))});
}

TEST_CASE("cumsum, take, embedding, tril, triu, iota, silu, cross_entropy by hand") {
  CHECK(vals(hjit::cumsum(f32({1, 2, 3, 4}, {2, 2}))) == std::vector<float>{1, 3, 3, 7});
  CHECK(vals(hjit::cumsum(f32({1, 2, 3, 4}, {2, 2}), 0)) == std::vector<float>{1, 2, 4, 6});
  CHECK(hjit::cumsum(Tensor::ones({3}, DType::I32)).dtype() == DType::I64);
  Tensor table = Tensor::arange(6).reshape({3, 2});
  Tensor ids = Tensor::from_vector<int32_t>({2, 0, 2}, {3});
  CHECK(vals(hjit::embedding(table, ids)) == std::vector<float>{4, 5, 0, 1, 4, 5});
  CHECK(vals(hjit::take(table, Tensor::from_vector<int32_t>({-1}, {1}))) == std::vector<float>{4, 5});  // take wraps
  CHECK_THROWS_AS(hjit::embedding(table, Tensor::from_vector<int32_t>({-1}, {1})), hjit::IndexError);  // embedding does not
  CHECK(hjit::take(table, Tensor::from_vector<int64_t>({1, 1, 0, 1}, {2, 2}), 1).shape() == Shape{3, 2, 2});
  CHECK_THROWS_AS(hjit::embedding(table, Tensor::from_vector<int32_t>({3}, {1})), hjit::IndexError);
  Tensor sq = Tensor::ones({3, 3});
  CHECK(vals(hjit::tril(sq)) == std::vector<float>{1, 0, 0, 1, 1, 0, 1, 1, 1});
  CHECK(vals(hjit::triu(sq, 1)) == std::vector<float>{0, 1, 1, 0, 0, 1, 0, 0, 0});
  CHECK(vals(hjit::iota({2, 3}, 1)) == std::vector<float>{0, 1, 2, 0, 1, 2});
  CHECK(hjit::silu(Tensor::scalar(1.0)).item<float>() == doctest::Approx(1 / (1 + std::exp(-1.0))));
  // cross entropy: mean over rows of log(sum exp) - logit[label].
  Tensor logits = f32({1, 2, 3, 1, 1, 1}, {2, 3});
  Tensor labels = Tensor::from_vector<int64_t>({2, 0}, {2});
  double row0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3, row1 = std::log(3 * std::exp(1.0)) - 1;
  CHECK(hjit::cross_entropy(logits, labels).item<float>() == doctest::Approx((row0 + row1) / 2).epsilon(1e-6));
  CHECK_THROWS_AS(hjit::cross_entropy(logits, Tensor::from_vector<int64_t>({3, 0}, {2})), hjit::IndexError);
}

TEST_CASE("scaled dot-product attention equals softmax(q k^T / sqrt(d) + mask) v") {
  Tensor q = Tensor::randn({2, 3, 6, 8}, 1), k = Tensor::randn({2, 3, 6, 8}, 2), v = Tensor::randn({2, 3, 6, 5}, 3);
  Tensor scores = hjit::matmul(q, k.transpose({0, 1, 3, 2})) / std::sqrt(8.0);
  CHECK_CLOSE(hjit::scaled_dot_product_attention(q, k, v), hjit::matmul(hjit::softmax(scores), v));
  Tensor mask = hjit::where(hjit::triu(Tensor::ones({6, 6}), 1) > 0, -std::numeric_limits<double>::infinity(), 0.0);
  CHECK_CLOSE(hjit::scaled_dot_product_attention(q, k, v, true), hjit::matmul(hjit::softmax(scores + mask), v));
  CHECK_CLOSE(hjit::scaled_dot_product_attention(q, k, v, false, 0.5), hjit::matmul(hjit::softmax(scores * std::sqrt(8.0) * 0.5), v));
}

// Integer arithmetic wraps, eagerly as compiled (and as PyTorch): signed overflow is undefined
// behaviour in C++, so the eager kernels compute in unsigned arithmetic (UBSan under make sanitize
// found the negation of INT_MIN and a sum of int64 extremes).
TEST_CASE("integer overflow wraps in every kernel that can overflow, eagerly and compiled") {
  constexpr int64_t big = std::numeric_limits<int64_t>::max(), small = std::numeric_limits<int64_t>::min();
  const Tensor x = Tensor::from_vector<int64_t>({big, 8, small, -1}, {2, 2});
  const Tensor i = Tensor::from_vector<int32_t>({std::numeric_limits<int32_t>::max(), 2, std::numeric_limits<int32_t>::min(), 3}, {2, 2});
  auto ops = [](const Tensor& x, const Tensor& i) {
    return std::vector<Tensor>{-x, x + x, x * x, hjit::sum(x, {1}), hjit::cumsum(x, 1), hjit::matmul(i, i), -i, hjit::abs(i)};
  };
  const std::vector<Tensor> eager = ops(x, i);
  CHECK(eager[0].to_vector<int64_t>() == std::vector<int64_t>{small + 1, -8, small, 1});
  CHECK(eager[1].to_vector<int64_t>() == std::vector<int64_t>{-2, 16, 0, -2});
  CHECK(eager[2].to_vector<int64_t>() == std::vector<int64_t>{1, 64, 0, 1});
  CHECK(eager[3].to_vector<int64_t>() == std::vector<int64_t>{small + 7, big});          // big + 8, small - 1
  CHECK(eager[4].to_vector<int64_t>() == std::vector<int64_t>{big, small + 7, small, big});
  // [[M, 2], [m, 3]] @ itself, M = INT32_MAX, m = INT32_MIN, each product and sum taken mod 2^32.
  const int64_t M = std::numeric_limits<int32_t>::max(), m = std::numeric_limits<int32_t>::min();
  auto wrap32 = [](int64_t v) { return int32_t(uint32_t(uint64_t(v))); };
  CHECK(eager[5].to_vector<int32_t>() ==
        std::vector<int32_t>{wrap32(M * M + 2 * m), wrap32(M * 2 + 2 * 3), wrap32(m * M + 3 * m), wrap32(m * 2 + 3 * 3)});
  CHECK(eager[6].to_vector<int32_t>() == std::vector<int32_t>{int32_t(-M), -2, int32_t(m), -3});
  CHECK(eager[7].to_vector<int32_t>() == std::vector<int32_t>{int32_t(M), 2, int32_t(m), 3});
  auto compiled = hjit::jit(ops, {.name = "integer_wrap", .opt_level = 1});
  const std::vector<Tensor> got = compiled(x, i);
  REQUIRE(got.size() == eager.size());
  for (size_t k = 0; k < got.size(); ++k) {
    CAPTURE(k);
    if (got[k].dtype() == hjit::DType::I64) CHECK(got[k].to_vector<int64_t>() == eager[k].to_vector<int64_t>());
    else CHECK(got[k].to_vector<int32_t>() == eager[k].to_vector<int32_t>());
  }
}

TEST_CASE("atan, asin and acos: libm's special values") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a = vals(hjit::atan(f32({inf, -inf, nan, 0}, {4})));
  CHECK(a[0] == doctest::Approx(M_PI / 2));
  CHECK(a[1] == doctest::Approx(-M_PI / 2));
  CHECK(std::isnan(a[2]));
  CHECK(a[3] == 0);
  const std::vector<float> s = vals(hjit::asin(f32({1, -1, 1.5f, nan}, {4})));
  CHECK(s[0] == doctest::Approx(M_PI / 2));
  CHECK(s[1] == doctest::Approx(-M_PI / 2));
  CHECK(std::isnan(s[2]));  // outside [-1, 1]
  CHECK(std::isnan(s[3]));
  const std::vector<float> c = vals(hjit::acos(f32({1, -1, -2}, {3})));
  CHECK(c[0] == 0);
  CHECK(c[1] == doctest::Approx(M_PI));
  CHECK(std::isnan(c[2]));
  CHECK(hjit::atan(Tensor::ones({2}, DType::I32)).dtype() == DType::F32);  // integers compute in f32, as PyTorch's
}

TEST_CASE("compiled eager ops: a convolution or matmul whose shapes come back runs compiled, equal to the plain kernel") {
  struct Restore {
    hjit::EagerKernels was = hjit::eager_kernels();
    ~Restore() { hjit::set_eager_kernels(was); }
  } restore;
  const Tensor x = Tensor::randn({4, 8, 16, 16}, 1), w = Tensor::randn({16, 8, 3, 3}, 2);
  const Tensor a = Tensor::randn({96, 128}, 3), b = Tensor::randn({128, 64}, 4);
  auto step = [&] {
    // A forward convolution, its weight gradient (conv2d_weight_grad) and a matmul.
    const Tensor gw = hjit::grad([&](const Tensor& w) { return hjit::sum(hjit::conv2d(x, w, {}, {1, 1}, {1, 1}) * x[{hjit::Slice(), 0, hjit::none}]); })(w);
    return std::vector<Tensor>{hjit::conv2d(x, w, {}, {2, 2}, {1, 1}), gw, hjit::matmul(a, b)};
  };
  hjit::set_eager_kernels(hjit::EagerKernels::Plain);
  const std::vector<Tensor> want = step();
  const int64_t before = hjit::cache_stats().misses + hjit::cache_stats().disk_hits;
  hjit::set_eager_kernels(hjit::EagerKernels::Compiled);
  const std::vector<Tensor> first = step();  // first sightings: the plain kernels
  CHECK(hjit::cache_stats().misses + hjit::cache_stats().disk_hits == before);
  const std::vector<Tensor> second = step();  // compiled (or loaded from the disk cache)
  const int64_t compiled = hjit::cache_stats().misses + hjit::cache_stats().disk_hits - before;
  CHECK(compiled >= 3);
  const std::vector<Tensor> third = step();  // the same pipelines again, from memory
  CHECK(hjit::cache_stats().misses + hjit::cache_stats().disk_hits - before == compiled);
  for (size_t k = 0; k < want.size(); ++k) {
    CAPTURE(k);
    CHECK(test::compare(first[k], want[k], 0) == "");
    CHECK(test::compare(second[k], want[k], 1e-4) == "");
    CHECK(test::compare(third[k], want[k], 1e-4) == "");
  }
  // Small ops stay plain: nothing compiles for them.
  const int64_t now = hjit::cache_stats().misses + hjit::cache_stats().disk_hits;
  for (int i = 0; i < 3; ++i) hjit::matmul(Tensor::ones({4, 4}), Tensor::ones({4, 4}));
  CHECK(hjit::cache_stats().misses + hjit::cache_stats().disk_hits == now);
}
