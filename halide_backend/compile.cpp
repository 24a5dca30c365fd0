// Compiling a graph: lower, schedule, compile with LLVM into an in-process JIT module, and the
// process-wide cache of compiled pipelines keyed by the graph's text (tinygrad's normalized key:
// two functions that trace to the same graph share one compiled pipeline).
#include <atomic>
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

std::string schedule(LoweredPipeline& p, const Graph& g, const Options& o) {
  if (o.opt_level == 0) return "unfused (opt_level 0)\n" + schedules::schedule_unfused(p);
  if (o.opt_level == 2 && !o.autoscheduler.empty()) {
    if (auto s = schedules::schedule_auto(p, o.autoscheduler)) return *s;
    p = lower(g, p.target);  // the failed attempt may have left estimates and partial state
    return "built-in (fallback after " + o.autoscheduler + " failed)\n" + schedules::schedule_builtin(p);
  }
  return "built-in\n" + schedules::schedule_builtin(p);
}

std::shared_ptr<const Executable> build(const Graph& g, const Options& o) {
  const Halide::Target target = host_target(o.device);
  LoweredPipeline p = lower(g, target);
  std::string schedule_text = schedule(p, g, o);
  auto exe = std::make_shared<HalideExecutable>(g, std::move(p), function_name(o.name.empty() ? g.name : o.name),
                                                std::move(schedule_text));
  return exe;
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
