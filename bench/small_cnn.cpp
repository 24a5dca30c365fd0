#include "bench/small_cnn.h"

#include <hjit/hjit.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/timing.h"

namespace bench {

namespace {

using hjit::Tensor;

constexpr int64_t kBatch = 32, kSide = 8, kClasses = 10;

struct Times {
  double first = -1, steady = -1, loss = NAN;
};

// Runs `cmd`, reading "first_ms=... steady_med_ms=... loss=..." from its output.
Times run(const std::string& cmd) {
  Times t;
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return t;
  char line[1024];
  while (std::fgets(line, sizeof line, p)) {
    double first = 0, steady = 0, loss = 0;
    const char* at = std::strstr(line, "first_ms=");
    if (at && std::sscanf(at, "first_ms=%lf steady_med_ms=%lf loss=%lf", &first, &steady, &loss) == 3) t = {first, steady, loss};
  }
  pclose(p);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

}  // namespace

int small_cnn_child(bool quick) {
  uint64_t seed = 70;
  auto param = [&](hjit::Shape s, double fan_in) { return Tensor::randn(std::move(s), seed++) * (1.0 / std::sqrt(fan_in)); };
  std::vector<Tensor> params{param({16, 3, 3, 3}, 27), Tensor::zeros({16}), param({32, 16, 3, 3}, 144), Tensor::zeros({32}),
                             param({32 * 2 * 2, kClasses}, 128), Tensor::zeros({kClasses})};
  hjit::optim::SGD opt(params, 0.01, 0.9);
  auto loss = [&](const std::vector<Tensor>& p, const Tensor& x, const Tensor& y) {
    Tensor h = hjit::max_pool2d(hjit::relu(hjit::conv2d(x, p[0], p[1], {1, 1}, {1, 1})), {2, 2});
    h = hjit::max_pool2d(hjit::relu(hjit::conv2d(h, p[2], p[3], {1, 1}, {1, 1})), {2, 2});
    return hjit::cross_entropy(hjit::matmul(h.reshape({kBatch, 32 * 2 * 2}), p[4]) + p[5], y);
  };
  auto step = hjit::jit([&](const Tensor& x, const Tensor& y) {
    auto [l, g] = hjit::value_and_grad([&](const Tensor& a, const Tensor& b) { return loss(params, a, b); }, params)(x, y);
    opt.step(g);
    return l;
  }, {.name = "small_cnn_train"});
  const Tensor x = Tensor::randn({kBatch, 3, kSide, kSide}, 1);
  std::vector<int64_t> labels(static_cast<size_t>(kBatch));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int64_t((i * 7) % size_t(kClasses));
  const Tensor y = Tensor::from_vector(labels, {kBatch});
  const auto t = Clock::now();
  const double l = step(x, y).item<double>();
  const double first = ms_since(t);
  const double steady = steady_ms([&] { step(x, y); }, quick ? 1.0 : 3.0);
  std::printf("RESULT name=small_cnn first_ms=%.2f steady_med_ms=%.4f loss=%.4f\n", first, steady, l);
  return 0;
}

int small_cnn_rows(const std::string& self, bool quick) {
  const std::string script = std::string(HJIT_SOURCE_DIR) + "/tools/models/small_cnn_train.py";
  // The peers' tuned settings (../shared/peers/README.md), as the models' PyTorch rows have.
  const std::string torch_cmd =
      "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp "
      "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824 "
      "/usr/bin/python3 '" + script + "' 2";
  char cache[] = "/tmp/hjit_bench_small_cnn_XXXXXX";
  if (!mkdtemp(cache)) return 1;
  const std::string hjit_cmd = "HJIT_CACHE_DIR=" + std::string(cache) + " " + self + " --small-cnn-child" + (quick ? " --quick" : "");
  std::vector<double> ours, theirs;
  Times cold, last_torch;
  const int rounds = quick ? 1 : 3;
  for (int r = 0; r < rounds; ++r) {  // alternately, so that both see the same machine
    const Times h = run(hjit_cmd), p = run(torch_cmd);
    if (r == 0) cold = h;
    if (h.steady > 0) ours.push_back(h.steady);
    if (p.steady > 0) theirs.push_back(p.steady), last_torch = p;
  }
  std::system(("rm -rf " + std::string(cache)).c_str());
  std::printf("small CNN training step (conv-relu-pool x2, linear, cross entropy, SGD; 32 images 3x8x8), median of %d\n"
              "alternate runs each: hjit jitted at opt level 1 (cold = first call with an empty compile cache), PyTorch eager\n"
              "%-10s %10s %12s %10s\n", rounds, "", "cold ms", "steady ms", "loss");
  std::printf("%-10s %10.1f %12.4f %10.4f\n", "hjit", cold.first, median(ours), cold.loss);
  std::printf("%-10s %10s %12.4f %10.4f\n", "PyTorch", "-", median(theirs), last_torch.loss);
  if (ours.empty() || theirs.empty()) {
    std::printf("(a run failed: %s)\n", ours.empty() ? "hjit" : "PyTorch, is python3-torch installed?");
    return ours.empty() ? 1 : 0;
  }
  std::printf("PyTorch / hjit: %.2fx (>1: hjit is faster)\n", median(theirs) / median(ours));
  return 0;
}

}  // namespace bench
