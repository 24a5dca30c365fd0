// opt_level 2 with a named autoscheduler: Halide's plugins, as Debian installs them.
#include <cstdio>
#include <fstream>
#include <iterator>

#include <unistd.h>
#include <mutex>
#include <set>
#include <thread>
#include <functional>
#include <sstream>

#include "graph/op_def.h"
#include "halide_backend/lowering/lower.h"
#include "schedules/autoscheduler_source.h"
#include "schedules/schedule.h"
#include "support/child_process.h"
#include "support/log.h"
#include "support/settings.h"
#include "support/thread_pool.h"

#ifndef HJIT_HALIDE_PLUGIN_DIR
#define HJIT_HALIDE_PLUGIN_DIR "/usr/lib/x86_64-linux-gnu/halide14"
#endif

namespace hjit::schedules {
namespace {

std::string lowercase(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

void load_plugin(backend::Autoscheduler a) {
  static std::mutex mu;
  static std::set<backend::Autoscheduler> loaded;
  std::lock_guard lock(mu);
  if (loaded.count(a)) return;
  const std::string dir = setting::raw(setting::Id::HalidePluginDir).value_or(HJIT_HALIDE_PLUGIN_DIR);
  std::string path = dir + "/libautoschedule_" + lowercase(backend::autoscheduler_name(a)) + ".so";
  Halide::load_plugin(path);
  loaded.insert(a);
  log().debug("loaded autoscheduler plugin {}", path);
}

namespace {

// The size of the largest cache of cpu0, from sysfs ("32768K"); 32 MiB when it cannot be read.
uint64_t last_level_cache_bytes() {
  uint64_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    std::string s;
    if (!(f >> s) || s.empty()) continue;
    uint64_t v = std::stoull(s), unit = s.back() == 'K' ? 1024 : s.back() == 'M' ? 1024 * 1024 : 1;
    best = std::max(best, v * unit);
  }
  return best ? best : uint64_t(32) << 20;
}

// Runs f with the process's stderr captured (Adams2019 prints its search there), and sends what
// was printed to the debug log. Called under the compile mutex. The file is unlinked at once and
// read back through its descriptor, so that a process killed mid-search (a tuning run's time
// limit) leaves nothing behind.
template <class F>
auto with_stderr_captured(F&& f) {
  std::fflush(stderr);
  char path[] = "/tmp/hjit_autoschedule_XXXXXX";
  int tmp = mkstemp(path), saved = dup(2);
  if (tmp >= 0) unlink(path);
  if (tmp < 0 || saved < 0) return f();
  dup2(tmp, 2);
  struct Restore {
    int saved, tmp;
    ~Restore() {
      std::fflush(stderr);
      dup2(saved, 2);
      close(saved);
      std::string text;
      char buf[4096];
      lseek(tmp, 0, SEEK_SET);
      for (ssize_t n; (n = read(tmp, buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
      if (!text.empty()) log().debug("autoscheduler output:\n{}", text);
      close(tmp);
    }
  } restore{saved, tmp};
  return f();
}

Halide::MachineParams machine_params() { return Halide::MachineParams(halide_threads(), last_level_cache_bytes(), 40); }

int adams2019_limit() {
  return int(std::min<int64_t>(*setting::count(setting::Id::Adams2019MaxFuncs), 1 << 20));
}

// What Halide is handed for a request's parameters: machine parameters for every autoscheduler;
// Adams2019's search in its environment (the search runs in a child process that sets them).
struct HalideParams {
  Halide::MachineParams machine = machine_params();
  int64_t max_funcs = adams2019_limit();  // 0: no limit
  std::vector<std::pair<std::string, std::string>> env;  // HL_SEED, HL_RANDOM_DROPOUT, ...
};

HalideParams halide_params(const backend::AutoParams& a) {
  HalideParams h;
  if (a.parallelism) h.machine.parallelism = int(*a.parallelism);
  if (a.cache) h.machine.last_level_cache_size = *a.cache;
  if (a.balance) h.machine.balance = float(*a.balance);
  if (a.max_funcs) h.max_funcs = *a.max_funcs;
  if (a.seed) h.env.emplace_back("HL_SEED", std::to_string(*a.seed));
  if (a.dropout) h.env.emplace_back("HL_RANDOM_DROPOUT", std::to_string(*a.dropout));
  if (a.beam) h.env.emplace_back("HL_BEAM_SIZE", std::to_string(*a.beam));
  if (!a.weights.empty()) h.env.emplace_back("HL_WEIGHTS_DIR", a.weights);
  return h;
}

template <class Dim>
void estimate(Dim dim_of, const Shape& shape) {
  const Shape halide_shape = backend::to_halide_order(shape);
  for (int i = 0; i < int(halide_shape.size()); ++i) dim_of(i).set_estimate(0, int(halide_shape[size_t(i)]));
}

}  // namespace

// The machine's CPUs, not the threads a call may use: code compiled once runs with any count, and
// computes the same.
int halide_threads() { return machine_threads(); }

std::string autoscheduler_identity(const backend::Auto& how) {
  const HalideParams h = halide_params(how.params);
  std::string id = backend::ScheduleRequest{how}.str() + " machine=" + h.machine.to_string();
  if (how.scheduler == backend::Autoscheduler::Adams2019) id += " max_funcs=" + std::to_string(h.max_funcs);
  return id + " guarded=1.5x";
}

std::optional<backend::Schedule> schedule_auto(const backend::LoweredPipeline& p, const backend::Auto& how, std::string* why) {
  const Graph& g = *p.graph;
  const std::string name = backend::autoscheduler_name(how.scheduler);
  const HalideParams a = halide_params(how.params);
  int stages = 0;  // the Funcs the autoscheduler would place: stages, accumulators, helpers
  for (const backend::Stage& s : p.stages)
    if (s.func.defined() && !has_trait(s.op, Source))
      stages += 1 + (s.reduction.defined() ? 1 : 0) + int(s.helpers.size());
  log().debug("{} on '{}': {} funcs", name, g.name, stages);
  const bool adams = how.scheduler == backend::Autoscheduler::Adams2019;
  if (adams && a.max_funcs > 0 && stages > a.max_funcs) {
    *why = "Adams2019 is not tried on pipelines of more than " + std::to_string(a.max_funcs) + " Funcs (this one has " +
           std::to_string(stages) + "): its search takes minutes there; raise HJIT_ADAMS2019_MAX_FUNCS to try anyway";
    return std::nullopt;
  }
  // The autoscheduler applies its schedule to the Funcs it is given: give it a scratch lowering.
  auto search = [&]() -> std::string {
    backend::LoweredPipeline q = backend::lower(g, p.target);
    load_plugin(how.scheduler);
    for (size_t i = 0; i < q.params.size(); ++i)
      if (q.params[i].defined()) estimate([&](int d) { return q.params[i].dim(d); }, g.type(g.inputs[i]).shape);
    for (size_t i = 0; i < q.const_params.size(); ++i)
      estimate([&](int d) { return q.const_params[i].dim(d); }, q.const_types[i].shape);
    std::vector<Halide::Func> outs;
    for (size_t k = 0; k < q.outputs.size(); ++k) {
      if (!q.outputs[k].defined()) continue;
      Halide::Region region;
      for (int64_t extent : backend::to_halide_order(g.type(q.output_node[k]).shape)) region.emplace_back(0, int(extent));
      q.outputs[k].set_estimates(region);
      outs.push_back(q.outputs[k]);
    }
    for (const auto& [key, value] : a.env) setenv(key.c_str(), value.c_str(), 1);
    Halide::AutoSchedulerResults r = Halide::Pipeline(outs).auto_schedule(name, q.target, a.machine);
    if (!how.params.features.empty()) {
      std::ofstream f(how.params.features, std::ios::binary);
      f.write(reinterpret_cast<const char*>(r.featurization.data()), std::streamsize(r.featurization.size()));
    }
    return r.schedule_source;
  };
  try {
    Timer t;
    // Only Adams2019 has been seen to end the process; the others' errors reach the catch below.
    const std::string source = with_stderr_captured([&] { return adams ? run_in_child(search) : search(); });
    log().debug("{} scheduled '{}' in {:.1f} ms", name, g.name, t.ms());
    log().trace("{} schedule of '{}':\n{}", name, g.name, source);
    backend::Schedule s = parse_autoscheduler_source(source, p);
    s.source = how.params == backend::AutoParams{} ? autoscheduler_identity(how) : backend::ScheduleRequest{how}.str();
    s.notes = {name + "'s schedule: " + std::to_string(s.directives.size()) + " directives"};
    return s;
  } catch (const Halide::Error& e) {
    *why = std::string("it failed: ") + e.what();
  } catch (const ValueError& e) {
    *why = e.what();
  }
  return std::nullopt;
}

}  // namespace hjit::schedules
