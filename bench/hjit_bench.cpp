// hjit-bench: the standard workloads (docs/performance.md) eager, at opt levels 0 and 1, and with
// each of Halide's autoschedulers, as a table of prepare and steady times.
//
//   cold:    prepare (the first call: trace + compile + run) in a fresh process with an empty
//            compile cache;
//   warm:    prepare in another fresh process with the cache the cold one filled (what every
//            later run of a program pays), and "ready", the part of it before the run (tracing,
//            optimizing, finding and loading the compiled code: JitStats::compile_ms);
//   steady:  the median time of one call after warm-up (W1: of 1000 calls);
//   ratios:  taken in that same process against eager and against a hand-written reference
//            (a C++ OpenMP loop, or OpenBLAS for W3), measured interleaved with the variant.
//
//   tuned:   (with --db FILE) the best schedule a tuning run (hjit-tune) left in that database.
//
// Usage: hjit-bench [--workloads W1,W3] [--variants eager,O1,Adams2019] [--db tuning.sqlite] [--quick] [--all]
//                   [--compile-scaling]
//        hjit-bench --models DIR [--only resnet50,gru]   real architectures (bench/models.h)
//        hjit-bench --models DIR --int8                   each model quantized against its f32 self (bench/models.h)
//        hjit-bench --models DIR --bf16                   each model in bf16 (LoadOptions::autocast) against its f32 self
//        hjit-bench --small-cnn                           a small CNN's training step (bench/small_cnn.h)
//        hjit-bench --param-model                         fitted built-in parameters against the rules
//                                                         (bench/param_model_rows.h)
//        hjit-bench --exported [--workloads W3,W8]        exported libraries against the jitted code they
//                                                         write out (bench/exported_rows.h)
//        hjit-bench --low-precision                       int8 and bf16 contractions against the peaks of
//                                                         their dot-product instructions (bench/low_precision_rows.h)
//        hjit-bench --busy [--workloads W1] [--models DIR]  each one quiet, then with a core taken by another
//                                                         process, on hjit's threads and on one (bench/busy_rows.h)
//        hjit-bench --generate                            GPT-2 124M's prefill and decode tokens a second, f32, i8 and i4 weights,
//                                                         against the memory bandwidth (bench/generation_rows.h)
// The compile-time table (compile_scaling.h) comes last: with every workload, or --compile-scaling.
// By default the training workloads (W7, W9, W11) run eager and at opt level 1 only: their
// unfused baseline and the autoschedulers take minutes to compile their large graphs (--all runs
// every variant on every workload).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/busy_rows.h"
#include "bench/compile_scaling.h"
#include "bench/exported_rows.h"
#include "bench/low_precision_rows.h"
#include "bench/generation_rows.h"
#include "bench/machine_limits.h"
#include "bench/models.h"
#include "bench/param_model_rows.h"
#include "bench/small_cnn.h"
#include "bench/timing.h"
#include "bench/workloads.h"
#include "examples/llama_attention.h"
#include "examples/resnet_block.h"

namespace {

using Clock = std::chrono::steady_clock;

const std::vector<std::string> kVariants = {"eager", "O0", "O1", "Adams2019", "Li2018", "Mullapudi2016"};

// The tuning database of the "tuned" rows (--db).
std::string g_db;

hjit::JitOptions options_for(const std::string& variant, const std::string& workload) {
  hjit::JitOptions o;
  o.name = workload + "_" + variant;
  if (variant == "O0") o.opt_level = 0;
  else if (variant == "O1") o.opt_level = 1;
  else if (variant == "tuned") o.opt_level = 2, o.tuning_db = g_db;
  else o.opt_level = 2, o.autoscheduler = variant;
  return o;
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// (bench/timing.h)
std::vector<double> measure(const std::vector<std::function<void()>>& fns, int calls, double budget_s) {
  return bench::interleaved_ms(fns, calls, budget_s);
}

// One (workload, variant) in this fresh process; prints a RESULT line (or, with prepare_only, a
// PREPARE line with the first call's time only).
int child(const std::string& id, const std::string& variant, bool quick, bool prepare_only) {
  bench::Workload w = bench::make_workload(id);
  hjit::JitOptions opts = options_for(variant, id);
  bench::Runner run = w.make_runner(variant == "eager" ? nullptr : &opts);
  auto t = Clock::now();
  hjit::Tensor first = run.call();
  double prepare = ms_since(t);
  if (prepare_only) {
    const hjit::CacheStats c = hjit::cache_stats();
    std::printf("PREPARE %.4f %lld %.4f\n", prepare, (long long)c.misses, run.stats ? run.stats().compile_ms : 0.0);
    return 0;
  }
  // Peak memory of one call: the workload's inputs and parameters, the result, and everything the
  // call took on the way (eager: every op's result; compiled: the pipeline's temporaries).
  hjit::reset_peak_memory();
  run.call();
  const double peak_mb = double(hjit::memory_stats().peak_bytes) / (1 << 20);
  bench::Runner eager = w.make_runner(nullptr);
  std::vector<std::function<void()>> fns{[&] { run.call(); }};
  if (variant != "eager") fns.push_back([&] { eager.call(); });
  if (w.run_reference) fns.push_back(w.run_reference);
  const int calls = id == "W1" ? 1000 : 1;
  std::vector<double> ms = measure(fns, calls, quick ? 0.3 : 1.0);
  double steady = ms[0], eager_ms = variant == "eager" ? ms[0] : ms[1], ref = w.run_reference ? ms.back() : 0;
  // Check the variant against eager while we are here: a wrong fast answer is no answer.
  std::vector<float> a = first.to_vector<float>(), b = eager.call().to_vector<float>();
  double err = w.stateful ? -1 : 0;  // a training step changes its parameters: no two calls agree
  for (size_t i = 0; i < a.size() && !w.stateful; ++i) err = std::max(err, double(std::fabs(a[i] - b[i])) / (1 + std::fabs(b[i])));
  double ref_err = w.reference_error ? w.reference_error() : 0;
  std::printf("RESULT %s %s %.4f %.6f %.6f %.6f %.3g %.3g %.3f %s\n", id.c_str(), variant.c_str(), prepare, steady, eager_ms,
              ref, err, ref_err, peak_mb, run.stats ? run.stats().schedule.c_str() : "eager");
  return 0;
}

struct Row {
  std::string variant;
  double prepare = 0, warm = -1, warm_ready = -1, steady = 0, eager = 0, ref = 0, err = 0, ref_err = 0, peak_mb = 0;
  std::string schedule;
  bool ok = false;
};

// Runs the child for (id, variant) twice on one new, empty compile cache: cold, then warm.
Row run_child(const std::string& self, const std::string& id, const std::string& variant, bool quick) {
  char dir[] = "/tmp/hjit_bench_cache_XXXXXX";
  if (!mkdtemp(dir)) return Row{};
  // OpenBLAS's threads otherwise spin for ~0.1 s after each call, on the cores the next block needs.
  const std::string env = "HJIT_CACHE_DIR=" + std::string(dir) + " OPENBLAS_THREAD_TIMEOUT=4 ";
  std::string db = g_db.empty() ? "" : " --db '" + g_db + "'";
  std::string cmd = env + self + db + " --child " + id + " " + variant + (quick ? " --quick" : "") + " 2>&1";
  Row r;
  r.variant = variant;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char line[1024];
  std::string last;
  while (std::fgets(line, sizeof line, p)) {
    char wid[16], var[32];
    int used = 0;
    if (std::sscanf(line, "RESULT %15s %31s %lf %lf %lf %lf %lf %lf %lf %n", wid, var, &r.prepare, &r.steady, &r.eager, &r.ref,
                    &r.err, &r.ref_err, &r.peak_mb, &used) == 9) {
      r.ok = true;
      r.schedule = std::string(line + used);
      while (!r.schedule.empty() && r.schedule.back() == '\n') r.schedule.pop_back();
    } else
      last = line;
  }
  pclose(p);
  if (!r.ok) std::fprintf(stderr, "  %s %s failed: %s", id.c_str(), variant.c_str(), last.c_str());
  if (r.ok && variant != "eager") {
    // Warm: the median of three fresh processes on the filled cache; each must compile nothing.
    std::vector<double> warm, ready;
    for (int i = 0; i < 3; ++i) {
      FILE* q = popen((env + self + db + " --prepare-only " + id + " " + variant + " 2>&1").c_str(), "r");
      double ms = 0, ready_ms = 0;
      long long misses = -1;
      while (q && std::fgets(line, sizeof line, q))
        if (std::sscanf(line, "PREPARE %lf %lld %lf", &ms, &misses, &ready_ms) == 3 && misses == 0)
          warm.push_back(ms), ready.push_back(ready_ms);
      if (q) pclose(q);
    }
    if (warm.size() == 3) r.warm = median(warm), r.warm_ready = median(ready);
  }
  std::string rm = "rm -rf " + std::string(dir);
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "  could not remove %s\n", dir);
  return r;
}

}  // namespace

// What a guard costs: W1's a * b + c jitted as usual, and the same function in TraceMode::Concrete
// reading one value (a guard, compared after every call), both cached, measured side by side.
void guarded_call_overhead() {
  using hjit::Tensor;
  Tensor a = Tensor::randn({2, 3}, 1), b = Tensor::randn({2, 3}, 2), c = Tensor::randn({2, 3}, 3);
  auto plain = hjit::jit([](const Tensor& a, const Tensor& b, const Tensor& c) { return a * b + c; }, {.name = "unguarded"});
  auto guarded = hjit::jit([](const Tensor& a, const Tensor& b, const Tensor& c) {
    return hjit::max(hjit::abs(a)) < 1e30 ? a * b + c : a;
  }, {.name = "guarded", .trace_mode = hjit::TraceMode::Concrete});
  const int calls = 1000;
  std::vector<double> ms = measure({[&] { plain(a, b, c); }, [&] { guarded(a, b, c); }}, calls, 1.5);
  const double us_plain = ms[0] * 1000 / calls, us_guarded = ms[1] * 1000 / calls;
  std::printf("\nguarded call (TraceMode::Concrete, one guard holding) %.3f us per call, unguarded %.3f us: %+.3f us "
              "(bar: <= 1 us); %lld re-traces\n", us_guarded, us_plain, us_guarded - us_plain,
              (long long)(guarded.stats().traces - 1));
}

// W10 with dynamic_dims on the sequence length: one pipeline for every length, each length timed
// against a compile specialized to it (the same function jitted without dynamic_dims), side by side.
void dynamic_w10_rows(bool quick) {
  using hjit::Tensor;
  LlamaAttention attn(512, 8, 512);
  auto dynamic = hjit::jit([&](const Tensor& x) { return attn(x); }, {.name = "W10_dynamic", .dynamic_dims = {{0, 1}}});
  std::printf("\nW10 with a dynamic sequence length (dynamic_dims {0, 1}): one pipeline for every length, against a "
              "compile for each length\n%6s %12s %15s %8s\n", "seq", "dynamic ms", "specialized ms", "ratio");
  double worst = 0;
  for (int64_t t : {64, 128, 256, 384, 512}) {
    Tensor x = Tensor::randn({1, t, 512}, uint64_t(t));
    auto fixed = hjit::jit([&](const Tensor& x) { return attn(x); }, {.name = "W10_seq" + std::to_string(t)});
    const double diff = hjit::max(hjit::abs(dynamic(x) - fixed(x))).item<double>();
    std::vector<double> ms = measure({[&] { dynamic(x); }, [&] { fixed(x); }}, 1, quick ? 1.0 : 3.0);
    worst = std::max(worst, ms[0] / ms[1]);
    std::printf("%6lld %12.3f %15.3f %7.2fx%s\n", (long long)t, ms[0], ms[1], ms[0] / ms[1],
                diff < 1e-4 ? "" : "  (results differ!)");
  }
  const hjit::JitStats st = dynamic.stats();
  std::printf("dynamic: %lld trace, %lld compile (%lld loaded from the disk cache) for 5 lengths (%.0f ms); worst ratio %.2fx (bar: <= 1.25x)\n",
              (long long)st.traces, (long long)st.compiles, (long long)st.loaded, st.compile_ms, worst);
}

// Training steps of ResNet blocks (W9's) with JitOptions::memory_budget_mb: automatic checkpointing
// against the same step without a budget. "step MB" is what one step holds at once beyond what was
// in use before it (what the budget bounds, as estimated before compiling); "peak MB" adds the
// input and parameters. One block at batch 32 (W9 at the size: its backward pass needs both
// convolutions' outputs at once, so no checkpoint lowers its peak and the budget leaves it as it
// is, with a warning), and four blocks at batch 8 (the forward values of four blocks are kept or
// recomputed; 40 MB is below what any plan holds: the plan that holds least).
void memory_budget_rows(bool quick) {
  using hjit::Tensor;
  std::printf("\nResNet blocks (W9's), one training step with a memory budget (automatic checkpointing of the forward pass)\n"
              "%-22s %10s %10s %10s %10s %8s %8s\n", "step", "budget MB", "step MB", "peak MB", "step ms", "memory", "time");
  for (const auto& [blocks, batch] : {std::pair<int, int64_t>{1, 32}, {4, 8}}) {
    std::vector<BasicBlock> net;
    for (int i = 0; i < blocks; ++i) net.emplace_back(64, uint64_t(7 + i));
    std::vector<Tensor> params;
    for (const BasicBlock& b : net)
      for (const Tensor& p : b.parameters()) params.push_back(p);
    Tensor x = Tensor::randn({batch, 64, 56, 56}, 1);
    auto step_fn = [&](const Tensor& x) {
      auto loss = [&](const Tensor& x) {
        Tensor h = x;
        for (const BasicBlock& b : net) h = b(h, true);
        return hjit::mean(h);
      };
      auto [value, grads] = hjit::value_and_grad(loss, params)(x);
      grads.insert(grads.begin(), value);
      return grads;
    };
    const std::string what = blocks == 1 ? "W9 at batch 32" : std::to_string(blocks) + " blocks at batch " + std::to_string(batch);
    double base_peak = 0, base_ms = 0;
    for (int64_t budget : blocks == 1 ? std::vector<int64_t>{0, 100} : std::vector<int64_t>{0, 100, 75, 40}) {
      auto f = hjit::jit(step_fn, {.name = "W9x" + std::to_string(blocks) + "_budget" + std::to_string(budget), .opt_level = 1,
                                   .memory_budget_mb = budget});
      f(x);
      hjit::reset_peak_memory();
      const int64_t before = hjit::memory_stats().current_bytes;
      f(x);
      const double peak = double(hjit::memory_stats().peak_bytes) / (1 << 20);
      const double step_mb = double(hjit::memory_stats().peak_bytes - before) / (1 << 20);
      const double ms = measure({[&] { f(x); }}, 1, quick ? 2.0 : 5.0)[0];
      if (budget == 0) base_peak = peak, base_ms = ms;
      std::printf("%-22s %10s %10.1f %10.1f %10.1f %7.0f%% %7.2fx\n", what.c_str(), budget ? std::to_string(budget).c_str() : "none",
                  step_mb, peak, ms, 100 * peak / base_peak, ms / base_ms);
      std::fflush(stdout);
    }
  }
}

// x = f(x) with JitOptions::donate against the same function without: the result is computed into
// x's storage (no second buffer while the call runs), at about the same time per call.
void donate_rows(bool quick) {
  using hjit::Tensor;
  std::printf("\nx = tanh(x * a + 0.5) * 0.5 with JitOptions::donate = {0} (the result computed into x's storage)\n%12s %12s %12s %8s %14s %14s\n",
              "elements", "plain ms", "donate ms", "time", "plain peak MB", "donate peak MB");
  auto fn = [](const Tensor& x, const Tensor& a) { return hjit::tanh(x * a + 0.5) * 0.5; };
  for (int64_t n : {int64_t(1) << 16, (int64_t(1) << 22) + 7}) {
    auto plain = hjit::jit(fn, {.name = "donate_plain", .opt_level = 1});
    auto donating = hjit::jit(fn, {.name = "donate_donating", .opt_level = 1, .donate = {0}});
    Tensor a = Tensor::randn({n}, 2), x = Tensor::randn({n}, 3), y = Tensor::randn({n}, 3);
    double peak[2];
    for (int v = 0; v < 2; ++v) {  // one call's peak above what is held before it
      (v ? y = donating(y, a) : x = plain(x, a));
      hjit::reset_peak_memory();
      const int64_t base = hjit::memory_stats().current_bytes;
      (v ? y = donating(y, a) : x = plain(x, a));
      peak[v] = double(hjit::memory_stats().peak_bytes - base) / (1 << 20);
    }
    const double diff = hjit::max(hjit::abs(plain(x, a) - donating(x.clone(), a))).item<double>();
    const std::vector<double> ms = measure({[&] { x = plain(x, a); }, [&] { y = donating(y, a); }}, 1, quick ? 0.6 : 2.0);
    std::printf("%12lld %12.3f %12.3f %7.2fx %14.1f %14.1f%s\n", (long long)n, ms[0], ms[1], ms[1] / ms[0], peak[0], peak[1],
                diff == 0 ? "" : "  (results differ!)");
  }
}

// W5 in the loop a user writes, y = f(x, w, b): the old result is alive while the new one is
// computed, into memory the caches have not seen; f.into(y, x, w, b) writes where y already is.
// Against a hand loop that writes one buffer, its row sums vectorized as -ffast-math would.
void user_loop_rows(bool quick) {
  using hjit::Tensor;
  const int64_t rows = 4096, cols = 1024;
  const Tensor x = Tensor::randn({rows, cols}, 1), w = Tensor::randn({cols}, 2), b = Tensor::randn({cols}, 3);
  auto f = hjit::jit([](const Tensor& x, const Tensor& w, const Tensor& b) { return hjit::layer_norm(x, w, b, 1e-5); },
                     {.name = "w5_user_loop", .opt_level = 1});
  Tensor y = f(x, w, b), z = f(x, w, b);
  std::vector<float> hand(size_t(rows * cols));
  auto hand_loop = [&] {
    const float *p = x.data_ptr<float>(), *wp = w.data_ptr<float>(), *bp = b.data_ptr<float>();
    float* o = hand.data();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = p + r * cols;
      float s = 0, v = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < cols; ++c) s += in[c];
      const float mean = s / float(cols);
#pragma omp simd reduction(+ : v)
      for (int64_t c = 0; c < cols; ++c) v += (in[c] - mean) * (in[c] - mean);
      const float inv = 1.0f / std::sqrt(v / float(cols) + 1e-5f);
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = (in[c] - mean) * inv * wp[c] + bp[c];
    }
  };
  const std::vector<double> ms = measure({[&] { y = f(x, w, b); }, [&] { f.into(z, x, w, b); }, hand_loop}, 1, quick ? 0.6 : 2.0);
  double diff = 0;
  const std::vector<float> got = z.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, double(std::fabs(got[i] - hand[i])));
  std::printf("\nW5 in a user's loop (layer norm 4096x1024), ms per call: y = f(x, w, b) %.3f, f.into(y, x, w, b) %.3f, "
              "fast-math hand loop %.3f; into / hand %.2fx (max diff %.1e)\n",
              ms[0], ms[1], ms[2], ms[1] / ms[2], diff);
}

std::string argv_list(const std::vector<std::string>& ids) {
  std::string s;
  for (const std::string& id : ids) s += (s.empty() ? "" : ",") + id;
  return s;
}

int main(int argc, char** argv) {
  // Each row is what it names: a tuning database reaches the "tuned" rows only, through --db.
  unsetenv("HJIT_TUNING_DB");
  std::vector<std::string> workloads = bench::workload_ids(), variants = kVariants;
  bool quick = false, all = false, variants_given = false, workloads_given = false, compile_scaling = false, small_cnn = false,
       param_model = false, exported = false, low_precision = false, generate = false,
       busy = false;
  std::string models_dir, only, model_precision;  // --int8 / --bf16: "int8", "bf16"
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--db" && i + 1 < argc) {
      g_db = argv[++i];
      continue;
    }
    if (a == "--child" && i + 2 < argc)
      return child(argv[i + 1], argv[i + 2], argc > i + 3 && std::string(argv[i + 3]) == "--quick", false);
    if (a == "--prepare-only" && i + 2 < argc) return child(argv[i + 1], argv[i + 2], true, true);
    if (a == "--compile-scaling-child") return bench::compile_scaling_child(i + 1 < argc && std::string(argv[i + 1]) == "--quick");
    if (a == "--model-child" && i + 1 < argc) return bench::model_child(argv[i + 1], argc > i + 2 && std::string(argv[i + 2]) == "--quick");
    if (a == "--low-precision-child" && i + 2 < argc)
      return bench::low_precision_child(argv[i + 2], argv[i + 1], argc > i + 3 && std::string(argv[i + 3]) == "--quick");
    if (a == "--busy-child" && i + 1 < argc) return bench::busy_child(argv[i + 1], argc > i + 2 && std::string(argv[i + 2]) == "--quick");
    if (a == "--opencv-child" && i + 1 < argc) return bench::opencv_child(argv[i + 1], argc > i + 2 && std::string(argv[i + 2]) == "--quick");
    if (a == "--small-cnn-child") return bench::small_cnn_child(i + 1 < argc && std::string(argv[i + 1]) == "--quick");
    if (a == "--models" && i + 1 < argc) models_dir = argv[++i];
    else if (a == "--small-cnn") small_cnn = true;
    else if (a == "--param-model") param_model = true;
    else if (a == "--exported") exported = true;
    else if (a == "--low-precision") low_precision = true;
    else if (a == "--generate") generate = true;
    else if (a == "--int8" || a == "--bf16") model_precision = a.substr(2);
    else if (a == "--busy") busy = true;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else
    if (a == "--workloads" && i + 1 < argc) workloads = bench::split_list(argv[++i]), workloads_given = true;
    else if (a == "--compile-scaling") compile_scaling = true;
    else if (a == "--variants" && i + 1 < argc) variants = bench::split_list(argv[++i]), variants_given = true;
    else if (a == "--quick") quick = true;
    else if (a == "--all") all = true;
    else {
      std::fprintf(stderr, "usage: hjit-bench [--workloads W1,W2,...] [--variants eager,O0,O1,Adams2019,Li2018,Mullapudi2016,tuned] "
                           "[--db tuning.sqlite] [--quick] [--all] [--compile-scaling]\n"
                           "       hjit-bench --models DIR [--only NAME,NAME] [--int8 | --bf16] [--quick]   (DIR from tools/models/reference_models.py)\n"
                           "       hjit-bench --small-cnn [--quick]   (a small CNN's training step beside PyTorch's)\n"
                           "       hjit-bench --param-model [--quick]   (fitted built-in parameters against the rules)\n"
                           "       hjit-bench --exported [--workloads W3,W8] [--quick]   (exported libraries against jitted code)\n"
                           "       hjit-bench --low-precision [--quick]   (int8 and bf16 contractions against their instructions' peaks)\n"
                           "       hjit-bench --generate [--quick]   (GPT-2 124M's tokens a second against the memory bandwidth)\n"
                           "       hjit-bench --busy [--workloads W1,W2] [--models DIR [--only NAME]] [--quick]   (with a core taken)\n");
      return 2;
    }
  }
  // With a tuning database, each workload also gets a "tuned" row: its best known schedule.
  if (!g_db.empty() && std::find(variants.begin(), variants.end(), "tuned") == variants.end()) variants.push_back("tuned");
  if (g_db.empty()) variants.erase(std::remove(variants.begin(), variants.end(), "tuned"), variants.end());
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return 1;
  self[len] = 0;
  if (busy) return bench::busy_rows(self, workloads_given ? argv_list(workloads) : "", models_dir, only, quick);
  if (!models_dir.empty() && !model_precision.empty()) return bench::low_precision_model_rows(self, models_dir, model_precision, only, quick);
  if (!models_dir.empty()) return bench::model_rows(self, models_dir, only, quick);
  if (small_cnn) return bench::small_cnn_rows(self, quick);
  if (param_model) return bench::param_model_rows(quick);
  if (low_precision) return bench::low_precision_rows(quick);
  if (generate) return bench::generation_rows(quick);
  if (exported) return bench::exported_rows(workloads_given ? workloads : std::vector<std::string>{"W3", "W8"}, quick);

  const bench::MachineLimits limits = bench::measure_machine_limits();
  std::printf("machine: FP32 peak %.1f GFLOP/s (%d threads, %s FMA), memory bandwidth %.1f GB/s (triad); 'of limit' is\n"
              "the row's time at that peak or bandwidth, whichever binds, over its steady time\n",
              limits.gflops, limits.threads, limits.vectors.c_str(), limits.gbps);
  std::printf("hjit-bench: %u hardware threads; cold = first call in a fresh process with an empty compile cache,\n"
              "warm = first call in a fresh process with the cache filled (median of 3) and ready = its part before\n"
              "the run (trace + load), steady = median per call, peak MB = the most hjit's allocator held during one call\n"
              "(inputs, parameters, result and everything in between),\n",
              std::thread::hardware_concurrency());
  std::printf("(W1: per 1000 calls); 'vs eager' and 'vs ref' are speed-ups over eager hjit and over the hand-written\n"
              "reference measured in the same process (>1 is faster); err = max |jit - eager| / (1 + |eager|).\n\n");
  std::printf("%-4s %-10s %-18s %10s %9s %9s %12s %9s %9s %9s  %-16s %8s\n", "id", "workload", "variant", "cold ms",
              "warm ms", "ready ms", "steady ms", "peak MB", "vs eager", "vs ref", "reference", "err");
  bool all_ok = true;
  std::vector<std::string> notes;
  for (const std::string& id : workloads) {
    bench::Workload w = bench::make_workload(id);
    for (const std::string& v : variants) {
      const bool training = id == "W7" || id == "W9" || id == "W11";
      if (training && !all && !variants_given && v != "eager" && v != "O1" && v != "tuned") continue;
      Row r = run_child(self, id, v, quick);
      all_ok &= r.ok;
      if (!r.ok) continue;
      char extra[96] = "";
      std::string bound;
      const double of_limit = limits.fraction(w.flops, w.bytes, r.steady, &bound);
      if (w.flops > 0 || w.bytes > 0)
        std::snprintf(extra, sizeof extra, "  %3.0f%% of %s (%.1f %s)", 100 * of_limit, bound.c_str(),
                      bound == "bandwidth" ? w.bytes / (r.steady * 1e6) : w.flops / (r.steady * 1e6),
                      bound == "bandwidth" ? "GB/s" : "GFLOP/s");
      std::string ref = w.reference.empty() ? "-" : w.reference;
      char vs_ref[32] = "-";
      if (r.ref > 0) std::snprintf(vs_ref, sizeof vs_ref, "%.2fx", r.ref / r.steady);
      std::string shown = v;
      if (r.schedule.rfind("built-in (", 0) == 0) {  // the autoscheduler fell back
        notes.push_back(id + " " + v + ": " + r.schedule);
        shown += " [" + std::to_string(notes.size()) + "]";
      }
      char err[32] = "-";
      if (r.err >= 0) std::snprintf(err, sizeof err, "%.1e", r.err);
      char warm[32] = "-", ready[32] = "-";
      if (r.warm >= 0) std::snprintf(warm, sizeof warm, "%.2f", r.warm);
      if (r.warm_ready >= 0) std::snprintf(ready, sizeof ready, "%.2f", r.warm_ready);
      std::printf("%-4s %-10s %-18s %10.2f %9s %9s %12.4f %9.1f %8.2fx %9s  %-16s %8s%s\n", id.c_str(), w.name.c_str(),
                  shown.c_str(), r.prepare, warm, ready, r.steady, r.peak_mb, r.eager / r.steady, vs_ref, ref.c_str(), err, extra);
      std::fflush(stdout);
    }
  }
  for (size_t i = 0; i < notes.size(); ++i) std::printf("[%zu] %s\n", i + 1, notes[i].c_str());
  guarded_call_overhead();
  if (std::find(workloads.begin(), workloads.end(), "W10") != workloads.end()) dynamic_w10_rows(quick);
  if (std::find(workloads.begin(), workloads.end(), "W9") != workloads.end()) memory_budget_rows(quick);
  if (std::find(workloads.begin(), workloads.end(), "W1") != workloads.end()) donate_rows(quick);
  if (std::find(workloads.begin(), workloads.end(), "W5") != workloads.end()) user_loop_rows(quick);
  if (compile_scaling || !workloads_given) bench::compile_scaling_rows(self, quick);
  return all_ok ? 0 : 1;
}
