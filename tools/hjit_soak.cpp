// hjit-soak: a long run of mixed calls, checked throughout. Several threads call several jitted
// functions (shared between the threads) on several shapes, and each its own jitted training step,
// and every result is compared with eager execution of the same function. The resident memory of
// the process is sampled as it goes: after the warm-up (every version compiled), it must stay flat.
//
//   hjit-soak [--seconds S | --minutes M] [--threads T]      (make soak: 10 minutes, 3 threads)
//
// Exits 0 when every result matched eager, nothing threw, and resident memory stayed flat.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <hjit/hjit.h>

namespace {

using hjit::Tensor;
using Clock = std::chrono::steady_clock;

double resident_mb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// max |got - want| / (1 + |want|), NaN-aware (a NaN in one and not the other is a mismatch).
double difference(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) return INFINITY;
  std::vector<float> a = got.to_vector<float>(), b = want.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    if (!std::isnan(a[i])) worst = std::max(worst, std::fabs(double(a[i]) - b[i]) / (1 + std::fabs(double(b[i]))));
  }
  return worst;
}

// A function the threads share, jitted once, with the shapes its calls take.
struct Shared {
  std::string name;
  std::function<Tensor(const std::vector<Tensor>&)> eager, compiled;
  std::vector<std::vector<hjit::Shape>> shapes;  // per call: its arguments' shapes
};

Tensor gelu_like(const Tensor& x) { return x * hjit::sigmoid(1.702 * x) + 0.1 * hjit::tanh(x); }
Tensor softmax_rows(const Tensor& x) { return hjit::softmax(x, -1); }
Tensor mlp(const Tensor& x, const Tensor& w1, const Tensor& w2) { return hjit::matmul(hjit::relu(hjit::matmul(x, w1)), w2); }
Tensor loop5(const Tensor& x) {
  return hjit::fori_loop(0, 5, [&](const Tensor&, const Tensor& acc) { return acc * 0.5 + hjit::tanh(x); }, x);
}
Tensor row_sums(const Tensor& x) { return hjit::sum(x * x, {1}) + 1.0; }

std::vector<Shared> shared_functions() {
  static auto f1 = hjit::jit(gelu_like, {.name = "soak_gelu"});
  static auto f2 = hjit::jit(softmax_rows, {.name = "soak_softmax"});
  static auto f3 = hjit::jit(mlp, {.name = "soak_mlp"});
  static auto f4 = hjit::jit(loop5, {.name = "soak_loop"});
  static auto f5 = hjit::jit(row_sums, {.name = "soak_dynamic", .dynamic_dims = {{0, 1}}});
  std::vector<Shared> out;
  out.push_back({"gelu", [](auto& a) { return gelu_like(a[0]); }, [](auto& a) { return f1(a[0]); },
                 {{{7}}, {{64, 33}}, {{256, 256}}, {{1, 0, 5}}, {{}}}});
  out.push_back({"softmax", [](auto& a) { return softmax_rows(a[0]); }, [](auto& a) { return f2(a[0]); },
                 {{{8, 100}}, {{33, 257}}, {{1, 1}}}});
  out.push_back({"mlp", [](auto& a) { return mlp(a[0], a[1], a[2]); }, [](auto& a) { return f3(a[0], a[1], a[2]); },
                 {{{1, 64}, {64, 32}, {32, 10}}, {{16, 64}, {64, 32}, {32, 10}}, {{50, 64}, {64, 32}, {32, 10}}}});
  out.push_back({"fori_loop", [](auto& a) { return loop5(a[0]); }, [](auto& a) { return f4(a[0]); }, {{{300}}, {{4, 9}}}});
  out.push_back({"dynamic", [](auto& a) { return row_sums(a[0]); }, [](auto& a) { return f5(a[0]); },
                 {{{4, 37}}, {{4, 64}}, {{4, 200}}, {{4, 513}}}});
  return out;
}

// A thread's own model: an MLP trained with SGD, jitted, and its eager twin from the same start.
struct Training {
  Tensor w1, w2, e1, e2;
  std::function<Tensor(const Tensor&, const Tensor&)> jitted;
  Training(uint64_t seed)
      : w1(Tensor::randn({16, 32}, seed) * 0.2), w2(Tensor::randn({32, 4}, seed + 1) * 0.2), e1(w1.clone()), e2(w2.clone()) {
    auto step = [this](const Tensor& x, const Tensor& y) { return train(w1, w2, x, y); };
    jitted = hjit::jit(step, {.name = "soak_train"});
  }
  static Tensor train(Tensor& w1, Tensor& w2, const Tensor& x, const Tensor& y) {
    auto loss = [&](const Tensor& x) {
      Tensor d = mlp(x, w1, w2) - y;
      return hjit::mean(d * d);
    };
    auto [l, g] = hjit::value_and_grad(loss, std::vector<Tensor>{w1, w2})(x);
    w1.assign(w1 - 0.01 * g[0]);
    w2.assign(w2 - 0.01 * g[1]);
    return l;
  }
  // Each step from the same state: two trajectories of many thousand steps part by rounding alone.
  double step(const Tensor& x, const Tensor& y) {
    e1.assign(w1);
    e2.assign(w2);
    const double d = difference(jitted(x, y), train(e1, e2, x, y));
    return std::max({d, difference(w1, e1), difference(w2, e2)});
  }
};

struct Totals {
  std::atomic<int64_t> calls{0}, mismatches{0}, errors{0};
  std::mutex mu;
  std::vector<std::string> first_problems;
  void problem(const std::string& what) {
    std::lock_guard lock(mu);
    if (first_problems.size() < 10) first_problems.push_back(what);
  }
};

void worker(int id, Clock::time_point end, const std::vector<Shared>& fns, Totals& totals) {
  std::mt19937_64 rng(uint64_t(id) * 7919 + 1);
  Training model(uint64_t(1000 + id));
  uint64_t seed = uint64_t(id) << 32;
  while (Clock::now() < end) {
    try {
      const size_t pick = rng() % (fns.size() + 1);
      double d = 0;
      std::string what;
      if (pick == fns.size()) {
        const Tensor x = Tensor::randn({8, 16}, ++seed), y = Tensor::randn({8, 4}, ++seed);
        d = model.step(x, y);
        what = "train step";
      } else {
        const Shared& f = fns[pick];
        const auto& shapes = f.shapes[rng() % f.shapes.size()];
        std::vector<Tensor> args;
        for (const hjit::Shape& s : shapes) args.push_back(Tensor::randn(s, ++seed));
        d = difference(f.compiled(args), f.eager(args));
        what = f.name;
      }
      totals.calls.fetch_add(1);
      if (!(d <= 1e-3)) {
        totals.mismatches.fetch_add(1);
        totals.problem(what + ": compiled differs from eager by " + std::to_string(d));
      }
    } catch (const std::exception& e) {
      totals.errors.fetch_add(1);
      totals.problem(std::string("exception: ") + e.what());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 600;
  int threads = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (a == "--minutes" && i + 1 < argc) seconds = 60 * std::atof(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: hjit-soak [--seconds S | --minutes M] [--threads T]\n");
      return 2;
    }
  }
  const std::vector<Shared> fns = shared_functions();
  Totals totals;
  const Clock::time_point start = Clock::now(), end = start + std::chrono::milliseconds(int64_t(seconds * 1000));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t, end, std::cref(fns), std::ref(totals));

  // Warm-up: the first fifth of the run (every version compiled, caches filled), then the samples
  // that must stay flat.
  const double warmup = seconds / 5, every = std::max(1.0, std::min(10.0, seconds / 30));
  std::printf("hjit-soak: %d threads, %.0f s (warm-up %.0f s); every %.0f s: seconds, calls, resident MB, hjit in use / cached MB\n",
              threads, seconds, warmup, every);
  std::vector<double> after_warmup;
  double warm_rss = 0;
  while (Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(int64_t(every * 1000)));
    const double at = std::chrono::duration<double>(Clock::now() - start).count();
    const double rss = resident_mb();
    const hjit::MemoryStats m = hjit::memory_stats();
    std::printf("%8.0f %10lld %10.1f %8.1f / %.1f\n", at, (long long)totals.calls.load(), rss, m.current_bytes / 1048576.0,
                m.cached_bytes / 1048576.0);
    std::fflush(stdout);
    if (at < warmup) warm_rss = rss;
    else after_warmup.push_back(rss);
  }
  for (std::thread& t : pool) t.join();
  // Flat: after the warm-up, resident memory grows by at most 5% (+ 8 MB of allocator noise).
  const double last = after_warmup.empty() ? warm_rss : after_warmup.back();
  const double first = after_warmup.empty() ? warm_rss : after_warmup.front();
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer keeps freed memory in quarantine (256 MB) before reusing it: resident memory
  // says nothing about hjit's there. The results are still checked.
  const bool flat = true;
#else
  const bool flat = last <= first * 1.05 + 8;
#endif
  std::printf("calls %lld, mismatches %lld, errors %lld; resident MB after warm-up %.1f -> %.1f (%s)\n",
              (long long)totals.calls.load(), (long long)totals.mismatches.load(), (long long)totals.errors.load(), first, last,
              flat ? "flat" : "GROWING");
  for (const std::string& p : totals.first_problems) std::printf("  %s\n", p.c_str());
  return totals.mismatches == 0 && totals.errors == 0 && flat && totals.calls > 0 ? 0 : 1;
}
