#include "bench/param_model_rows.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <hjit/hjit.h>

#include "bench/timing.h"

namespace bench {
namespace {

using hjit::Tensor;
using Fn = std::function<Tensor(const Tensor&, const Tensor&)>;

Fn conv(int64_t groups) {
  return [=](const Tensor& x, const Tensor& w) {
    return hjit::relu(hjit::conv2d(x, w, std::nullopt, {1, 1}, {1, 1}, {1, 1}, groups));
  };
}

void row(const std::string& label, const Fn& fn, const Tensor& a, const Tensor& b, bool quick) {
  setenv("HJIT_PARAM_MODEL", "off", 1);
  auto rules = hjit::jit(fn, {.name = "rules " + label, .opt_level = 1});  // (a name per row: one jit each)
  rules(a, b);
  unsetenv("HJIT_PARAM_MODEL");
  auto fitted = hjit::jit(fn, {.name = "fitted " + label, .opt_level = 1});
  fitted(a, b);
  double r = 1e30, f = 1e30;
  for (int round = 0; round < (quick ? 2 : 5); ++round) {  // alternately, the best of each
    r = std::min(r, steady_ms([&] { rules(a, b); }, quick ? 0.05 : 0.2));
    f = std::min(f, steady_ms([&] { fitted(a, b); }, quick ? 0.05 : 0.2));
  }
  std::printf("%-34s %9.3f %9.3f %7.2fx   %s\n", label.c_str(), r, f, r / f, fitted.stats().schedule.c_str());
  std::fflush(stdout);
}

}  // namespace

int param_model_rows(bool quick) {
  unsetenv("HJIT_PARAM_MODEL");
  std::printf("the built-in parameters from the shipped model against the rules alone (HJIT_PARAM_MODEL=off), opt level 1,\n"
              "both compiled in this process and timed alternately; ms a call (median), the best of each's rounds\n"
              "%-34s %9s %9s %8s   %s\n", "pipeline", "rules", "fitted", "x", "fitted schedule");
  auto randn = [](hjit::Shape s, uint64_t seed) { return Tensor::randn(std::move(s), seed); };
  row("conv3x3+relu 32x16x8x8 -> 48", conv(1), randn({32, 16, 8, 8}, 1), randn({48, 16, 3, 3}, 2), quick);
  row("conv3x3+relu 32x24x8x8 -> 32", conv(1), randn({32, 24, 8, 8}, 1), randn({32, 24, 3, 3}, 2), quick);
  row("depthwise3x3+relu 1x32x96x96", conv(32), randn({1, 32, 96, 96}, 1), randn({32, 1, 3, 3}, 2), quick);
  row("depthwise3x3+relu 1x48x112x112", conv(48), randn({1, 48, 112, 112}, 1), randn({48, 1, 3, 3}, 2), quick);
  row("conv3x3+relu 8x128x28x28 g4", conv(4), randn({8, 128, 28, 28}, 1), randn({128, 32, 3, 3}, 2), quick);
  const Fn mm = [](const Tensor& a, const Tensor& b) { return hjit::matmul(a, b); };
  row("matmul 1024x128x512", mm, randn({1024, 128}, 1), randn({128, 512}, 2), quick);
  row("matmul 768x128x384", mm, randn({768, 128}, 1), randn({128, 384}, 2), quick);
  row("matmul 12x512x512", mm, randn({12, 512}, 1), randn({512, 512}, 2), quick);
  row("matmul 24x16x4096", mm, randn({24, 16}, 1), randn({16, 4096}, 2), quick);
  return 0;
}

}  // namespace bench
