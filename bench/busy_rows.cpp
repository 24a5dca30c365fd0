#include "bench/busy_rows.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <hjit/hjit.h>
#include <hjit/onnx.h>

#include "bench/models.h"
#include "bench/ort_peer.h"
#include "bench/spinner.h"
#include "bench/timing.h"
#include "bench/workloads.h"

namespace fs = std::filesystem;

namespace bench {

int busy_child(const std::string& what, bool quick) {
  try {
    std::function<void()> call;
    std::optional<Runner> runner;
    std::optional<hjit::Module> module;
    std::vector<hjit::Tensor> inputs;
    if (fs::exists(fs::path(what) / "model.onnx")) {
      module = hjit::onnx::load((fs::path(what) / "model.onnx").string(), {.freeze = true});
      inputs = read_set(what, "input_");
      call = [&] { (*module).call(inputs); };
    } else {
      hjit::JitOptions o;
      o.name = what + "_busy";
      o.opt_level = 1;
      runner = make_workload(what).make_runner(&o);
      call = [&] { runner->call(); };
    }
    const double budget = quick ? 1.0 : 3.0;
    // Calls of a few microseconds (W1) are timed a millisecond's worth at a time.
    const int reps = int(std::clamp(1.0 / std::max(1e-6, steady_ms(call, 0.2)), 1.0, 10000.0));
    const std::function<void()> batch = [&] {
      for (int r = 0; r < reps; ++r) call();
    };
    const double quiet = steady_ms(batch, budget) / reps;
    const Spinner neighbour;
    const std::vector<double> busy = interleaved_ms(
        {batch, [&] {
           hjit::set_num_threads(1);
           batch();
           hjit::set_num_threads(0);
         }},
        1, 2 * budget);
    std::printf("BUSY %.6f %.6f %.6f\n", quiet, busy[0] / reps, busy[1] / reps);
    return 0;
  } catch (const std::exception& e) {
    std::printf("failed: %s\n", e.what());
    return 1;
  }
}

int busy_rows(const std::string& self, const std::string& workloads, const std::string& models_dir, const std::string& only,
              bool quick) {
  std::vector<std::pair<std::string, std::string>> rows;  // name, what the child runs
  for (const std::string& id : workloads.empty() ? workload_ids() : split_list(workloads)) rows.emplace_back(id, id);
  if (!models_dir.empty())
    for (const auto& e : fs::directory_iterator(models_dir)) {
      const std::string name = e.path().filename().string();
      if (fs::exists(e.path() / "model.onnx") && (only.empty() || ("," + only + ",").find("," + name + ",") != std::string::npos))
        rows.emplace_back(name, e.path().string());
    }
  std::printf("hjit-bench --busy: steady ms quiet, then with a spinning process holding one of the machine's %d CPUs,\n"
              "on hjit's %d threads and on one thread (taken alternately under the same load). Bars: busy <= 2.5x quiet,\n"
              "busy <= one thread busy. Models: ONNX Runtime (bench/ort_peer.h, 2 threads) quiet and under the same load.\n\n",
              hjit::num_threads(), hjit::num_threads());
  std::printf("%-26s %10s %10s %8s %12s %10s %10s %10s %8s\n", "workload", "quiet ms", "busy ms", "x quiet", "1 thread ms",
              "x 1 thread", "ort quiet", "ort busy", "x quiet");
  bool ok = true;
  for (const auto& [name, what] : rows) {
    FILE* p = popen((self + " --busy-child '" + what + "'" + (quick ? " --quick" : "") + " 2>&1").c_str(), "r");
    if (!p) return 1;
    char line[4096];
    double quiet = 0, busy = 0, one = 0;
    bool got = false;
    std::string failure;
    while (std::fgets(line, sizeof line, p)) {
      if (std::sscanf(line, "BUSY %lf %lf %lf", &quiet, &busy, &one) == 3) got = true;
      else failure = line;
    }
    pclose(p);
    if (!got) {
      std::printf("%-26s failed: %s", name.c_str(), failure.c_str());
      ok = false;
      continue;
    }
    double ort_quiet = -1, ort_busy = -1;
    if (what != name) {  // a model folder: ONNX Runtime on it, quiet and with a core taken
      ort_quiet = ort_ms(what, 2);
      if (ort_quiet > 0) {
        const Spinner neighbour;
        ort_busy = ort_ms(what, 2);
      }
    }
    auto peer = [](double ms, const char* f) {
      char b[32];
      std::snprintf(b, sizeof b, f, ms);
      return ms > 0 ? std::string(b) : std::string("-");
    };
    std::printf("%-26s %10.4f %10.4f %7.2fx %12.4f %9.2fx %10s %10s %8s\n", name.c_str(), quiet, busy, busy / quiet, one, busy / one,
                peer(ort_quiet, "%.3f").c_str(), peer(ort_busy, "%.3f").c_str(),
                peer(ort_busy > 0 ? ort_busy / ort_quiet : -1, "%.2fx").c_str());
    std::fflush(stdout);
  }
  return ok ? 0 : 1;
}

}  // namespace bench
