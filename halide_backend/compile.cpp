// Compiling a graph: lower, schedule, compile with LLVM into an in-process JIT module, and the
// process-wide cache of compiled pipelines keyed by the graph's text (tinygrad's normalized key:
// two functions that trace to the same graph share one compiled pipeline).
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include <cpuid.h>
#include <unistd.h>

#include "graph/op_def.h"
#include "halide_backend/backend.h"
#include "halide_backend/executable.h"
#include "halide_backend/lower.h"
#include "schedules/schedule.h"
#include "support/hash.h"
#include "support/log.h"

namespace hjit::backend {

std::mutex& compile_mutex() {
  // Halide's compiler keeps global state (names, the shared JIT runtime): one compile at a time.
  static std::mutex mu;
  return mu;
}

namespace {

// Halide's warnings (storage folding notes and the like) go to the debug log instead of stderr:
// hjit is quiet by default. Errors still throw, as Halide's own reporter does.
class QuietReporter final : public Halide::CompileTimeErrorReporter {
 public:
  void warning(const char* msg) override { log().debug("halide: {}", msg); }
  void error(const char* msg) override { throw Halide::CompileError(msg); }
};

void install_reporter() {
  static QuietReporter reporter;
  static std::once_flag once;
  std::call_once(once, [] { Halide::set_custom_compile_time_error_reporter(&reporter); });
}

}  // namespace

namespace {


std::string cache_key(const Graph& g, const Options& o) {
  Hasher h;
  for (const ConstData& c : g.constants) h.add_bytes(c.data, c.nbytes);
  return g.str() + "|" + std::to_string(h.value()) + "|" + std::to_string(o.opt_level) + "|" + o.autoscheduler + "|" +
         std::to_string(int(o.device));
}

std::string function_name(const std::string& name) {
  static std::atomic<int> counter{0};
  std::string s = "hjit_";
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (s.size() > 40) s.resize(40);
  return s + "_" + std::to_string(counter++);
}

// Whether the CPU executes AVX512-FP16 (CPUID leaf 7, EDX bit 23).
bool cpu_has_avx512_fp16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 23));
}

Halide::Target host_target(Device device) {
  if (device != Device::CPU)
    throw CompileError("hjit: CUDA pipelines cannot run in this build (no GPU runtime); use Device::CPU");
  Halide::Target t = Halide::get_host_target().with_feature(Halide::Target::JIT).with_feature(Halide::Target::UserContext);
  // Halide 14 reports avx512_sapphirerapids on AMD Zen 4, whose AVX-512 has BF16 and VNNI but no
  // FP16: code for it uses AVX512-FP16 instructions on f16 values and dies with SIGILL there.
  if (t.has_feature(Halide::Target::AVX512_SapphireRapids) && !cpu_has_avx512_fp16())
    t = t.without_feature(Halide::Target::AVX512_SapphireRapids);
  return t;
}

// Inputs and outputs for trial runs: inputs hold deterministic values in [-1, 1) (integers in
// [0, 4), so that indices stay in range), outputs start as zeros.
struct TrialBuffers {
  std::vector<std::shared_ptr<void>> owned;
  std::vector<const void*> in;
  std::vector<void*> out;
  std::vector<TensorType> out_types;

  explicit TrialBuffers(const Graph& g) {
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (int id : g.inputs) {
      const TensorType& t = g.type(id);
      void* p = alloc(t);
      for (int64_t i = 0; i < t.numel(); ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        double u = double(state >> 11) / 9007199254740992.0;
        write(t.dtype, p, i, is_floating(t.dtype) ? 2 * u - 1 : double(int(u * 4)));
      }
      in.push_back(p);
    }
    for (int id : g.outputs) out.push_back(alloc(g.type(id))), out_types.push_back(g.type(id));
    for (const Update& u : g.updates) out.push_back(alloc(g.type(u.value))), out_types.push_back(g.type(u.value));
  }
  void* alloc(const TensorType& t) {
    size_t bytes = (size_t(t.numel()) * size_t(dtype_size(t.dtype)) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes ? bytes : 64);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, bytes ? bytes : 64);
    owned.emplace_back(p, std::free);
    return p;
  }
  static void write(DType t, void* p, int64_t i, double v) {
    switch (t) {
#define HJIT_TRIAL_WRITE(e, name, T, kind) \
  case DType::e: static_cast<T*>(p)[i] = static_cast<T>(v); break;
      HJIT_DTYPES(HJIT_TRIAL_WRITE)
#undef HJIT_TRIAL_WRITE
    }
  }
  static double read(DType t, const void* p, int64_t i) {
    switch (t) {
#define HJIT_TRIAL_READ(e, name, T, kind) \
  case DType::e: return double(static_cast<const T*>(p)[i]);
      HJIT_DTYPES(HJIT_TRIAL_READ)
#undef HJIT_TRIAL_READ
    }
    return 0;
  }
};

// The fastest of a few runs; throws if the pipeline fails to run.
double trial_ms(const Executable& exe, TrialBuffers& b) {
  exe.run(b.in.data(), b.out.data());  // warm-up, and the check that it runs at all
  double best = HUGE_VAL, total = 0;
  for (int i = 0; i < 5 && total < 300; ++i) {
    Timer t;
    exe.run(b.in.data(), b.out.data());
    best = std::min(best, t.ms());
    total += t.ms();
  }
  return best;
}

// Where two runs' outputs differ beyond what reassociating a float sum explains, if they do.
std::string first_difference(const TrialBuffers& a, const TrialBuffers& b) {
  for (size_t k = 0; k < a.out.size(); ++k) {
    const TensorType& t = a.out_types[k];
    const double tol = t.dtype == DType::F64 ? 1e-9 : is_floating(t.dtype) ? 1e-3 : 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      double x = TrialBuffers::read(t.dtype, a.out[k], i), y = TrialBuffers::read(t.dtype, b.out[k], i);
      if (x == y || (std::isnan(x) && std::isnan(y)) || std::fabs(x - y) <= tol * (1 + std::fabs(y))) continue;
      return "output " + std::to_string(k) + " element " + std::to_string(i) + " is " + std::to_string(x) +
             " where the built-in schedule computes " + std::to_string(y);
    }
  }
  return "";
}

// One candidate: lowered afresh, scheduled one way, compiled. Null (with the reason in *why) when
// the autoscheduler does not schedule it.
std::shared_ptr<HalideExecutable> make(const Graph& g, const Options& o, const Halide::Target& target, const std::string& how,
                                       std::string* why = nullptr) {
  LoweredPipeline p = lower(g, target);
  std::string text;
  if (how == "unfused") {
    text = schedules::schedule_unfused(p);
  } else if (how == "built-in") {
    text = schedules::schedule_builtin(p);
  } else {
    std::string reason;
    auto s = schedules::schedule_auto(p, how, &reason);
    if (!s) {
      if (why) *why = reason;
      return nullptr;
    }
    text = *s;
  }
  return std::make_shared<HalideExecutable>(g, std::move(p), function_name(o.name.empty() ? g.name : o.name), how,
                                            std::move(text));
}

// An autoscheduler's schedule is used only when it compiles, runs, computes what the built-in
// schedule computes, and is not much slower on this very pipeline; otherwise the built-in schedule
// stands in, with a warning. (Halide 14's autoschedulers fail on some pipelines, emit schedules
// that do not compile, that read outside the buffers, or that compute wrong results (Adams2019's
// storage folding of a padded pooling input), and are sometimes an order of magnitude slower.)
std::shared_ptr<const Executable> build_guarded(const Graph& g, const Options& o, const Halide::Target& target) {
  constexpr double kTolerated = 1.5, kNoiseMs = 0.02;  // below ~20 us a run, timings are noise
  std::shared_ptr<HalideExecutable> builtin = make(g, o, target, "built-in");
  TrialBuffers reference(g), trial(g);
  const double builtin_ms = trial_ms(*builtin, reference);
  std::shared_ptr<HalideExecutable> chosen;
  std::string why;
  double auto_ms = 0;
  try {
    chosen = make(g, o, target, o.autoscheduler, &why);
    if (chosen) {
      auto_ms = trial_ms(*chosen, trial);
      std::string diff = first_difference(trial, reference);
      if (!diff.empty()) why = "its schedule computes wrong results (" + diff + ")", chosen = nullptr;
    }
  } catch (const std::exception& e) {
    why = std::string("its schedule failed: ") + e.what();
    chosen = nullptr;
  }
  if (chosen && (auto_ms <= kTolerated * builtin_ms || auto_ms - builtin_ms < kNoiseMs)) {
    log().debug("{} on '{}': {:.3f} ms a run (built-in {:.3f} ms)", o.autoscheduler, g.name, auto_ms, builtin_ms);
    return chosen;
  }
  if (chosen) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "its schedule ran %.1fx slower than the built-in one (%.3f ms vs %.3f ms a run)",
                  auto_ms / builtin_ms, auto_ms, builtin_ms);
    why = buf;
  }
  log().warn("{} on '{}': {}; using the built-in schedule", o.autoscheduler, g.name, why);
  builtin->set_summary("built-in (" + o.autoscheduler + " fell back: " + why + ")");
  return builtin;
}

// Whether the pipeline computes anything: every output (and update) may have no elements.
bool computes_nothing(const Graph& g) {
  for (int out : g.outputs)
    if (g.type(out).numel() > 0) return false;
  for (const Update& u : g.updates)
    if (g.type(u.value).numel() > 0) return false;
  return true;
}

std::shared_ptr<const Executable> build(const Graph& g, const Options& o) {
  install_reporter();
  const Halide::Target target = host_target(o.device);
  if (o.opt_level == 0) return make(g, o, target, "unfused");
  if (computes_nothing(g)) return make(g, o, target, "built-in");  // nothing for an autoscheduler to schedule
  if (o.opt_level == 2 && !o.autoscheduler.empty()) return build_guarded(g, o, target);
  return make(g, o, target, "built-in");
}

}  // namespace

bool is_known_autoscheduler(const std::string& name) { return schedules::is_autoscheduler(name); }

Compiled compile(const Graph& g, const Options& o) {
  static std::mutex cache_mu;
  static std::unordered_map<std::string, std::shared_ptr<const Executable>> cache;
  Timer t;
  const std::string key = cache_key(g, o);
  {
    std::lock_guard lock(cache_mu);
    auto it = cache.find(key);
    if (it != cache.end()) {
      log().debug("backend: '{}' found in the compiled-pipeline cache", g.name);
      return Compiled{it->second, true, t.ms()};
    }
  }
  std::shared_ptr<const Executable> exe;
  {
    std::lock_guard lock(compile_mutex());
    try {
      exe = build(g, o);
    } catch (const Halide::Error& e) {
      throw CompileError("hjit: Halide could not compile '" + g.name + "': " + e.what());
    }
  }
  log().debug("backend: compiled '{}' (opt_level {}{}) in {:.1f} ms", g.name, o.opt_level,
              o.autoscheduler.empty() ? "" : ", " + o.autoscheduler, t.ms());
  std::lock_guard lock(cache_mu);
  auto [it, inserted] = cache.emplace(key, exe);
  return Compiled{it->second, !inserted, t.ms()};
}

}  // namespace hjit::backend
