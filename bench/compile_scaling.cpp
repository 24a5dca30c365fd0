#include "bench/compile_scaling.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <hjit/hjit.h>

namespace bench {
namespace {

using hjit::Tensor;

// The row of one jitted call: its graph's size, the parts it compiled in, and the time to ready.
void row(const std::string& graph, int64_t ops, const hjit::JitStats& st, double err) {
  int parts = 1, distinct = 0;
  const size_t at = st.schedule.find(", in ");
  if (at != std::string::npos) std::sscanf(st.schedule.c_str() + at, ", in %d parts (%d distinct)", &parts, &distinct);
  if (distinct == 0) distinct = parts;
  std::printf("%-34s %6lld %6d %9d %12.0f %9.2f %9.1e\n", graph.c_str(), (long long)ops, parts, distinct, st.compile_ms,
              st.compile_ms / double(ops), err);
  std::fflush(stdout);
}

double max_error(const Tensor& got, const Tensor& want) {
  return hjit::max(hjit::abs(got - want) / (1.0 + hjit::abs(want))).item<double>();
}

// y = y * a * c_i + b, a constant c_i per step: no two steps alike, so no two parts are.
void chain(int64_t ops) {
  const int steps = int(ops / 3);
  auto fn = [steps](const Tensor& x, const Tensor& a, const Tensor& b) {
    Tensor y = x;
    for (int i = 0; i < steps; ++i) y = y * a * (1.0 + i * 1e-6) + b;
    return y;
  };
  Tensor x = Tensor::randn({16, 256}, 1), a = Tensor::full({256}, 0.5), b = Tensor::randn({16, 256}, 2);
  auto f = hjit::jit(fn, {.name = "chain" + std::to_string(ops), .opt_level = 1});
  const double err = max_error(f(x, a, b), fn(x, a, b));
  row("element-wise chain", int64_t(steps) * 3, f.stats(), err);
}

// 64x64 matmuls, each followed by a bias of its own constant: every layer differs.
void matmul_bias(int layers) {
  auto fn = [layers](const Tensor& x, const Tensor& w) {
    Tensor y = x;
    for (int i = 0; i < layers; ++i) y = hjit::matmul(y, w) + i * 1e-6;
    return y;
  };
  Tensor x = Tensor::randn({64, 64}, 3), w = Tensor::randn({64, 64}, 4) * (1.0 / 8);
  auto f = hjit::jit(fn, {.name = "matmul_bias" + std::to_string(layers), .opt_level = 1});
  const double err = max_error(f(x, w), fn(x, w));
  row("matmul + own bias (64x64)", 2 * layers, f.stats(), err);
}

// 64x64 matmuls with a weight each: layers alike but for their weights.
void matmul_weights(int layers) {
  auto fn = [](const Tensor& x, const std::vector<Tensor>& ws) {
    Tensor y = x;
    for (const Tensor& w : ws) y = hjit::matmul(y, w);
    return y;
  };
  Tensor x = Tensor::randn({64, 64}, 5);
  std::vector<Tensor> ws;
  for (int i = 0; i < layers; ++i) ws.push_back(Tensor::randn({64, 64}, uint64_t(100 + i)) * (1.0 / 8));
  auto f = hjit::jit(fn, {.name = "matmul_weights" + std::to_string(layers), .opt_level = 1});
  const double err = max_error(f(x, ws), fn(x, ws));
  row("matmul, a weight each (64x64)", layers, f.stats(), err);
}

}  // namespace

int compile_scaling_child(bool quick) {
  for (int64_t ops : {100, 250, 500, 1000, 2000}) chain(ops);
  for (int layers : {25, 50, 100, 250}) matmul_bias(layers);
  if (!quick) matmul_bias(500);
  matmul_weights(500);
  return 0;
}

void compile_scaling_rows(const std::string& self, bool quick) {
  std::printf("\ncompile time against graph size (opt_level 1, a fresh process, an empty compile cache): ready ms is\n"
              "trace + optimize + compile; a graph compiles in parts of bounded cost, parts alike once\n"
              "%-34s %6s %6s %9s %12s %9s %9s\n", "graph", "ops", "parts", "distinct", "ready ms", "ms/op", "err");
  std::fflush(stdout);
  char dir[] = "/tmp/hjit_bench_compile_XXXXXX";
  if (!mkdtemp(dir)) return;
  const std::string cmd = "HJIT_CACHE_DIR=" + std::string(dir) + " " + self + " --compile-scaling-child" + (quick ? " --quick" : "");
  if (std::system(cmd.c_str()) != 0) std::printf("(the compile-time child failed)\n");
  const std::string rm = "rm -rf " + std::string(dir);
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "  could not remove %s\n", dir);
}

}  // namespace bench
