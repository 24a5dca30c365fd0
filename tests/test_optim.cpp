// Optimizers against PyTorch's formulas written out by hand, eagerly and jitted: Adam's L2 weight
// decay, AdamW's decoupled one, gradient clipping, accumulation, and learning-rate schedules that
// change a jitted step's rate without tracing it again.
#include <cmath>
#include <numbers>
#include <vector>

#include <hjit/optim_schedule.h>

#include "tests/support.h"

using hjit::DType;
using hjit::Tensor;
namespace optim = hjit::optim;

namespace {

const std::vector<float> kP0 = {0.5f, -1.25f, 2.0f, 0.0f}, kGrad = {0.1f, -0.3f, 0.02f, 1.5f};

// torch.optim.Adam / AdamW on one parameter, the same gradient each step, in double.
std::vector<double> adam_by_hand(int steps, double lr, double wd, bool decoupled, std::vector<double> lrs = {}) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  std::vector<double> p(kP0.begin(), kP0.end()), m(p.size()), v(p.size());
  for (int t = 1; t <= steps; ++t) {
    const double rate = lrs.empty() ? lr : lrs[size_t(t - 1)];
    for (size_t i = 0; i < p.size(); ++i) {
      double g = kGrad[i];
      if (decoupled) p[i] *= 1 - rate * wd;
      else g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
      p[i] -= rate / (1 - std::pow(b1, t)) * m[i] / denom;
    }
  }
  return p;
}

void check_values(const Tensor& got, const std::vector<double>& want, double tol) {
  const std::vector<float> g = got.to_vector<float>();
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) CHECK_MESSAGE(std::abs(g[i] - want[i]) <= tol * (1 + std::abs(want[i])), i << ": " << g[i] << " vs " << want[i]);
}

// `steps` steps of opt on a parameter made from kP0, eagerly or in a jitted step.
template <class Make>
Tensor run(bool jitted, int steps, Make make) {
  Tensor p = Tensor::from_vector(kP0, {4});
  auto opt = make(std::vector<Tensor>{p});
  const Tensor g = Tensor::from_vector(kGrad, {4});
  auto step = [&](const Tensor& grad) {
    opt.step({grad});
    return hjit::sum(grad);
  };
  auto compiled = hjit::jit(step);
  for (int i = 0; i < steps; ++i) jitted ? compiled(g) : step(g);
  if (jitted) CHECK(compiled.stats().traces == 1);
  return p;
}

}  // namespace

TEST_CASE("Adam's weight decay and AdamW's: PyTorch's updates, eagerly and jitted") {
  for (bool jitted : {false, true}) {
    CAPTURE(jitted);
    check_values(run(jitted, 4, [](std::vector<Tensor> p) { return optim::Adam(std::move(p), 0.01); }),
                 adam_by_hand(4, 0.01, 0, false), 1e-6);
    check_values(run(jitted, 4, [](std::vector<Tensor> p) { return optim::Adam(std::move(p), 0.01, 0.9, 0.999, 1e-8, 0.1); }),
                 adam_by_hand(4, 0.01, 0.1, false), 1e-6);
    check_values(run(jitted, 4, [](std::vector<Tensor> p) { return optim::AdamW(std::move(p), 0.01, 0.9, 0.999, 1e-8, 0.1); }),
                 adam_by_hand(4, 0.01, 0.1, true), 1e-6);
  }
  // AdamW's default decay is PyTorch's, 0.01.
  check_values(run(false, 3, [](std::vector<Tensor> p) { return optim::AdamW(std::move(p), 0.05); }), adam_by_hand(3, 0.05, 0.01, true),
               1e-6);
  Tensor p = Tensor::zeros({2});
  CHECK_THROWS_AS(optim::AdamW({p}, 0.1, 0.9, 0.999, 1e-8, -1), hjit::ValueError);
  CHECK_THROWS_AS(optim::Adam({p}, std::nan("")), hjit::ValueError);
  CHECK_THROWS_AS(optim::AdamW({Tensor::zeros({2}, DType::I64)}), hjit::DTypeError);
}

TEST_CASE("a schedule changes a jitted step's learning rate without tracing it again") {
  // StepLR halving every 2 steps: 0.1, 0.1, 0.05, 0.05, 0.025.
  const std::vector<double> rates = {0.1, 0.1, 0.05, 0.05, 0.025};
  for (bool jitted : {false, true}) {
    CAPTURE(jitted);
    Tensor p = Tensor::from_vector(kP0, {4});
    optim::Adam opt({p}, 0.1);
    optim::StepLR schedule(opt, 2, 0.5);
    const Tensor g = Tensor::from_vector(kGrad, {4});
    auto step = [&](const Tensor& grad) {
      opt.step({grad});
      return hjit::sum(grad);
    };
    auto compiled = hjit::jit(step);
    for (double rate : rates) {
      CHECK(opt.lr() == doctest::Approx(rate));
      jitted ? compiled(g) : step(g);
      schedule.step();
    }
    if (jitted) CHECK(compiled.stats().traces == 1);
    check_values(p, adam_by_hand(5, 0, 0, false, rates), 1e-6);
    CHECK(schedule.steps() == 5);
  }
}

TEST_CASE("learning-rate schedules follow PyTorch's") {
  Tensor p = Tensor::zeros({2});
  auto rates = [](optim::LRScheduler& s, int n) {
    std::vector<double> out{s.last_lr()};
    for (int i = 1; i < n; ++i) s.step(), out.push_back(s.last_lr());
    return out;
  };
  auto check = [](const std::vector<double>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(got[i] == doctest::Approx(want[i]).epsilon(1e-12), i);
  };
  {
    optim::SGD opt({p}, 0.2);
    optim::StepLR s(opt, 3, 0.1);
    check(rates(s, 7), {0.2, 0.2, 0.2, 0.02, 0.02, 0.02, 0.002});
    CHECK(opt.lr() == doctest::Approx(0.002));
  }
  {
    optim::SGD opt({p}, 1.0);
    optim::CosineAnnealingLR s(opt, 4, 0.1);
    const double c = std::cos(std::numbers::pi / 4);
    check(rates(s, 5), {1.0, 0.1 + 0.9 * (1 + c) / 2, 0.55, 0.1 + 0.9 * (1 - c) / 2, 0.1});
  }
  {
    optim::SGD opt({p}, 0.3);
    optim::LinearLR warmup(opt, 0.25, 1.0, 3);  // PyTorch: 0.075, 0.15, 0.225, 0.3, 0.3
    check(rates(warmup, 5), {0.075, 0.15, 0.225, 0.3, 0.3});
  }
  {
    optim::SGD opt({p}, 0.5);
    optim::LambdaLR s(opt, [](int64_t step) { return 1.0 / double(step + 1); });
    check(rates(s, 3), {0.5, 0.25, 0.5 / 3});
    CHECK(s.base_lr() == 0.5);
  }
  optim::SGD opt({p}, 0.5);
  CHECK_THROWS_AS(optim::StepLR(opt, 0), hjit::ValueError);
  CHECK_THROWS_AS(optim::CosineAnnealingLR(opt, 10, 0.5), hjit::ValueError);  // eta_min above the rate
  CHECK_THROWS_AS(optim::LinearLR(opt, 0.0), hjit::ValueError);
  CHECK_THROWS_AS(opt.set_lr(-1), hjit::ValueError);
  CHECK_THROWS_AS(opt.set_lr(INFINITY), hjit::ValueError);
  optim::LambdaLR bad(opt, [](int64_t step) { return step == 0 ? 1.0 : -1.0; });
  CHECK_THROWS_AS(bad.step(), hjit::ValueError);
  CHECK(bad.steps() == 0);  // a step that failed is not taken
  CHECK(opt.lr() == 0.5);
}

TEST_CASE("clip_grad_norm scales gradients to a joint norm, as torch.nn.utils.clip_grad_norm_") {
  for (bool jitted : {false, true}) {
    CAPTURE(jitted);
    auto clip = [](double max_norm, double norm_type) {
      return [=](const Tensor& a, const Tensor& b) {
        std::vector<Tensor> gs{a, b};
        Tensor norm = optim::clip_grad_norm(gs, max_norm, norm_type);
        return std::vector<Tensor>{norm, gs[0], gs[1]};
      };
    };
    const Tensor a = Tensor::from_vector<float>({3, 0}, {2}), b = Tensor::from_vector<float>({-4}, {1, 1});
    auto call = [&](double max_norm, double norm_type) {
      auto f = clip(max_norm, norm_type);
      return jitted ? hjit::jit(f)(a, b) : f(a, b);
    };
    // L2: norm 5, scaled by 1 / (5 + 1e-6).
    std::vector<Tensor> r = call(1.0, 2);
    CHECK(r[0].item<float>() == doctest::Approx(5.0));
    const double s = 1.0 / (5.0 + 1e-6);
    check_values(r[1], {3 * s, 0}, 1e-6);
    check_values(r[2], {-4 * s}, 1e-6);
    // Below the limit: unchanged.
    r = call(10.0, 2);
    check_values(r[1], {3, 0}, 0);
    check_values(r[2], {-4}, 0);
    // L1 (norm 7) and infinity (norm 4).
    r = call(3.5, 1);
    CHECK(r[0].item<float>() == doctest::Approx(7.0));
    check_values(r[1], {3 * 3.5 / (7 + 1e-6), 0}, 1e-6);
    r = call(2.0, INFINITY);
    CHECK(r[0].item<float>() == doctest::Approx(4.0));
    check_values(r[2], {-4 * 2 / (4 + 1e-6)}, 1e-6);
    // p = 3: (27 + 64)^(1/3).
    r = call(1.0, 3);
    CHECK(r[0].item<float>() == doctest::Approx(std::cbrt(91.0)));
  }
  std::vector<Tensor> none;
  CHECK(optim::clip_grad_norm(none, 1.0).item<float>() == 0);
  std::vector<Tensor> ints{Tensor::zeros({2}, DType::I32)};
  CHECK_THROWS_AS(optim::clip_grad_norm(ints, 1.0), hjit::DTypeError);
  std::vector<Tensor> gs{Tensor::ones({2})};
  CHECK_THROWS_AS(optim::clip_grad_norm(gs, -1.0), hjit::ValueError);
  CHECK_THROWS_AS(optim::clip_grad_norm(gs, 1.0, 0), hjit::ValueError);
}

TEST_CASE("gradient accumulation: the mean of several batches' gradients, inside a jitted step too") {
  for (bool jitted : {false, true}) {
    CAPTURE(jitted);
    Tensor p = Tensor::zeros({3});
    optim::GradientAccumulator acc({p});
    auto add = [&](const Tensor& g) {
      acc.add({g});
      return hjit::sum(g);
    };
    auto compiled = hjit::jit(add);
    for (float k : {1.0f, 2.0f, 6.0f}) {
      const Tensor g = Tensor::from_vector<float>({k, -k, 2 * k}, {3});
      jitted ? compiled(g) : add(g);
    }
    CHECK(acc.count().item<double>() == 3);
    check_values(acc.mean()[0], {3, -3, 6}, 1e-6);
    check_values(acc.sums()[0], {9, -9, 18}, 1e-6);
    acc.reset();
    CHECK(acc.count().item<double>() == 0);
    CHECK_THROWS_AS(acc.mean(), hjit::ValueError);
    CHECK_THROWS_AS(acc.add({Tensor::zeros({2})}), hjit::ShapeError);
    CHECK_THROWS_AS(acc.add({}), hjit::ValueError);
  }
}
