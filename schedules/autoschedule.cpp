// opt_level 2 with a named autoscheduler: Halide's plugins, as Debian installs them.
#include <cstdio>
#include <fstream>
#include <iterator>

#include <cerrno>
#include <sys/wait.h>
#include <unistd.h>
#include <mutex>
#include <set>
#include <omp.h>
#include <thread>

#include "graph/op_def.h"
#include "schedules/schedule.h"
#include "support/log.h"

#ifndef HJIT_HALIDE_PLUGIN_DIR
#define HJIT_HALIDE_PLUGIN_DIR "/usr/lib/x86_64-linux-gnu/halide14"
#endif

namespace hjit::schedules {
namespace {

const char* const kAutoschedulers[] = {"Adams2019", "Li2018", "Mullapudi2016"};

std::string lowercase(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void load_plugin(const std::string& name) {
  static std::mutex mu;
  static std::set<std::string> loaded;
  std::lock_guard lock(mu);
  if (loaded.count(name)) return;
  std::string dir = HJIT_HALIDE_PLUGIN_DIR;
  if (const char* env = std::getenv("HJIT_HALIDE_PLUGIN_DIR")) dir = env;
  std::string path = dir + "/libautoschedule_" + lowercase(name) + ".so";
  Halide::load_plugin(path);
  loaded.insert(name);
  log().debug("loaded autoscheduler plugin {}", path);
}

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
// was printed to the debug log. Called under the compile mutex.
template <class F>
auto with_stderr_captured(F&& f) {
  std::fflush(stderr);
  char path[] = "/tmp/hjit_autoschedule_XXXXXX";
  int tmp = mkstemp(path), saved = dup(2);
  if (tmp < 0 || saved < 0) return f();
  dup2(tmp, 2);
  struct Restore {
    int saved, tmp;
    const char* path;
    ~Restore() {
      std::fflush(stderr);
      dup2(saved, 2);
      close(saved);
      std::ifstream in(path);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!text.empty()) log().debug("autoscheduler output:\n{}", text);
      close(tmp);
      std::remove(path);
    }
  } restore{saved, tmp, path};
  return f();
}

// Runs f in a child process first: Halide 14's Adams2019 ends the process (std::terminate from
// inside the plugin, an error escaping one of its threads) on some pipelines (a gather indexed by a
// 0-d tensor), which a catch cannot stop. Empty when the child finished, else what killed it. The child's result is
// thrown away: an autoscheduler applies its schedule to the Funcs of the process that runs it, so
// the caller then runs f itself (the search is deterministic and takes milliseconds).
template <class F>
std::string crash_in_child(F&& f) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return "";  // cannot tell: let the caller try
  if (pid == 0) {
    try {
      f();
    } catch (...) {
    }
    _exit(0);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) return "it crashed (signal " + std::to_string(WTERMSIG(status)) + ")";
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) return "it ended the process (exit status " + std::to_string(WEXITSTATUS(status)) + ")";
  return "";
}

template <class Dim>
void estimate(Dim dim_of, const Shape& shape) {
  const Shape halide_shape = backend::to_halide_order(shape);
  for (int i = 0; i < int(halide_shape.size()); ++i) dim_of(i).set_estimate(0, int(halide_shape[size_t(i)]));
}

}  // namespace

bool is_autoscheduler(const std::string& name) {
  for (const char* a : kAutoschedulers)
    if (name == a) return true;
  return false;
}

int halide_threads() { return std::max(1, omp_get_max_threads()); }

std::optional<std::string> schedule_auto(backend::LoweredPipeline& p, const std::string& name, std::string* why) {
  const Graph& g = *p.graph;
  int stages = 0;  // the Funcs the autoscheduler would place: stages, accumulators, helpers
  for (const backend::Stage& s : p.stages)
    if (s.func.defined() && !has_trait(s.op, Source))
      stages += 1 + (s.reduction.defined() ? 1 : 0) + int(s.helpers.size());
  log().debug("{} on '{}': {} funcs", name, g.name, stages);
  int limit = kAdams2019MaxFuncs;
  if (const char* env = std::getenv("HJIT_ADAMS2019_MAX_FUNCS")) limit = std::atoi(env);
  if (name == "Adams2019" && stages > limit) {
    *why = "Adams2019 is not tried on pipelines of more than " + std::to_string(limit) + " Funcs (this one has " +
           std::to_string(stages) + "): its search takes minutes there; raise HJIT_ADAMS2019_MAX_FUNCS to try anyway";
    return std::nullopt;
  }
  try {
    load_plugin(name);
    for (size_t i = 0; i < p.params.size(); ++i)
      if (p.params[i].defined()) estimate([&](int d) { return p.params[i].dim(d); }, g.type(g.inputs[i]).shape);
    for (size_t i = 0; i < p.const_params.size(); ++i)
      estimate([&](int d) { return p.const_params[i].dim(d); }, p.const_types[i].shape);
    std::vector<Halide::Func> outs;
    for (size_t k = 0; k < p.outputs.size(); ++k) {
      if (!p.outputs[k].defined()) continue;
      Halide::Region region;
      const Shape& shape = g.type(p.output_node[k]).shape;
      for (int64_t extent : backend::to_halide_order(shape)) region.emplace_back(0, int(extent));
      p.outputs[k].set_estimates(region);
      outs.push_back(p.outputs[k]);
    }
    Halide::MachineParams machine(halide_threads(), last_level_cache_bytes(), 40);
    Timer t;
    // Only Adams2019 has been seen to end the process; the others' errors reach the catch below.
    const std::string crash = name != "Adams2019" ? std::string() :
        with_stderr_captured([&] { return crash_in_child([&] { Halide::Pipeline(outs).auto_schedule(name, p.target, machine); }); });
    if (!crash.empty()) {
      *why = crash;
      return std::nullopt;
    }
    Halide::AutoSchedulerResults r =
        with_stderr_captured([&] { return Halide::Pipeline(outs).auto_schedule(name, p.target, machine); });
    log().debug("{} scheduled '{}' in {:.1f} ms", name, g.name, t.ms());
    return "machine parameters " + machine.to_string() + "\n" + r.schedule_source;
  } catch (const Halide::Error& e) {
    *why = std::string("it failed: ") + e.what();
    return std::nullopt;
  }
}

}  // namespace hjit::schedules
