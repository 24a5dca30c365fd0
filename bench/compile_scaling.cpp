#include "bench/compile_scaling.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <hjit/hjit.h>

#include "support/settings.h"

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

// A character-level GPT training step (issue 30's deep network): embedding, pre-norm blocks of
// causal attention and a GELU MLP, cross entropy, gradients, Adam; C = 128, T = 64, batch 16, 4
// heads. The blocks are alike but for their weights: compile time should not grow with depth.
void gpt_step(int blocks) {
  const int64_t C = 128, T = 64, B = 16, V = 65, H = 4;
  uint64_t seed = 1000;
  auto param = [&](hjit::Shape shape, double scale) { return Tensor::randn(std::move(shape), seed++) * scale; };
  std::vector<Tensor> params{param({V, C}, 0.02), param({T, C}, 0.02)};
  for (int b = 0; b < blocks; ++b)
    for (Tensor t : {Tensor::ones({C}), Tensor::zeros({C}), param({C, 3 * C}, 0.02), param({C, C}, 0.02), Tensor::ones({C}),
                     Tensor::zeros({C}), param({C, 4 * C}, 0.02), param({4 * C, C}, 0.02)})
      params.push_back(t);
  for (Tensor t : {Tensor::ones({C}), Tensor::zeros({C}), param({C, V}, 0.02)}) params.push_back(t);
  auto loss = [=](const std::vector<Tensor>& p, const Tensor& ids, const Tensor& targets) {
    Tensor x = hjit::embedding(p[0], ids) + p[1];  // [B, T, C]
    size_t k = 2;
    auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, C / H}).transpose({0, 2, 1, 3}); };
    for (int b = 0; b < blocks; ++b, k += 8) {
      Tensor h = hjit::layer_norm(x, p[k], p[k + 1]);
      Tensor qkv = hjit::matmul(h, p[k + 2]);
      Tensor q = heads(hjit::slice(qkv, 2, 0, C)), kk = heads(hjit::slice(qkv, 2, C, 2 * C)),
             v = heads(hjit::slice(qkv, 2, 2 * C, 3 * C));
      Tensor a = hjit::scaled_dot_product_attention(q, kk, v, true).transpose({0, 2, 1, 3}).reshape({B, T, C});
      x = x + hjit::matmul(a, p[k + 3]);
      Tensor m = hjit::layer_norm(x, p[k + 4], p[k + 5]);
      x = x + hjit::matmul(hjit::gelu(hjit::matmul(m, p[k + 6])), p[k + 7]);
    }
    Tensor logits = hjit::matmul(hjit::layer_norm(x, p[k], p[k + 1]), p[k + 2]);
    return hjit::cross_entropy(logits.reshape({B * T, V}), targets.reshape({B * T}));
  };
  hjit::optim::Adam opt(params, 1e-3);
  auto step = [&](const Tensor& ids, const Tensor& targets) {
    auto [l, g] = hjit::value_and_grad([&](const Tensor& i, const Tensor& t) { return loss(params, i, t); }, params)(ids, targets);
    opt.step(g);
    return l;
  };
  std::vector<int32_t> id_values(size_t(B * T));
  for (size_t i = 0; i < id_values.size(); ++i) id_values[i] = int32_t((i * 7 + i / 3) % size_t(V));
  const Tensor ids = Tensor::from_vector(id_values, {B, T});
  auto f = hjit::jit(step, {.name = "gpt" + std::to_string(blocks), .opt_level = 1});
  const double l = f(ids, ids).item<double>();
  row("GPT train step, " + std::to_string(blocks) + " blocks (C 128)", int64_t(f.graph(ids, ids).nodes.size()), f.stats(),
      std::isfinite(l) ? 0.0 : 1.0);
}

}  // namespace

int compile_scaling_child(bool quick) {
  // HJIT_BENCH_GPT_ONLY=N: the GPT step of N blocks alone (each GPT row is a process of its own:
  // the 8 blocks' parts are the 2 blocks', which a shared cache would hand over); 0: the others.
  if (const int64_t only = *hjit::setting::count(hjit::setting::Id::BenchGptOnly); only > 0) {
    gpt_step(int(only));
    return 0;
  }
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
  for (const char* rows : {"2", "8", "0"}) {
    char dir[] = "/tmp/hjit_bench_compile_XXXXXX";
    if (!mkdtemp(dir)) return;
    const std::string cmd = "HJIT_CACHE_DIR=" + std::string(dir) + " HJIT_BENCH_GPT_ONLY=" + rows + " " + self +
                            " --compile-scaling-child" + (quick ? " --quick" : "");
    if (std::system(cmd.c_str()) != 0) std::printf("(the compile-time child failed)\n");
    const std::string rm = "rm -rf " + std::string(dir);
    if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "  could not remove %s\n", dir);
  }
}

}  // namespace bench
