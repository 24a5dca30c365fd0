#include "bench/exported_rows.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "bench/exported_library.h"
#include "bench/spinner.h"
#include "bench/timing.h"
#include "bench/workloads.h"

namespace bench {
namespace {

std::vector<hjit::Tensor> clones(const std::vector<hjit::Tensor>& ts) {
  std::vector<hjit::Tensor> out;
  for (const hjit::Tensor& t : ts) out.push_back(t.clone());
  return out;
}

bool same_bits(const hjit::Tensor& a, const hjit::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), size_t(a.numel()) * size_t(hjit::dtype_size(a.dtype()))) == 0;
}

}  // namespace

int exported_rows(const std::vector<std::string>& workloads, bool quick) {
  char scratch[] = "/tmp/hjit_bench_export_XXXXXX";
  if (!mkdtemp(scratch)) return 1;
  std::printf("exported libraries (export_library for this machine, parameters as arguments) against the jitted function\n"
              "(opt_level 1) in this process, timed alternately on the same inputs, quiet, then with a spinning process\n"
              "holding a core (busy: each loop of the library on its own pool, as hjit's on its)\n"
              "%-4s %-18s %12s %12s %9s %12s %12s %9s  %s\n",
              "id", "workload", "jitted ms", "exported ms", "exp/jit", "busy jit", "busy exp", "exp/jit", "results");
  bool ok = true;
  for (const std::string& id : workloads) {
    const Workload w = make_workload(id);
    const std::string dir = std::string(scratch) + "/" + id;
    const hjit::Graph g = w.export_to(dir, "w", {.bake_parameters = false});
    const hjit::TracedFunction traced = w.trace();
    // The library on copies of the inputs (a training step assigns its parameters: each side keeps
    // its own), the workload jitted as exported (the same graph and options: the same compiled code).
    std::vector<hjit::Tensor> lib_in = clones(traced.inputs);
    const hjit::JitOptions options{.name = id + "_jitted", .opt_level = 1};
    const Runner jitted = w.make_runner(&options);
    const hjit::Tensor first = jitted.call();
    std::vector<hjit::Tensor> lib_out;
    for (int o : g.outputs) lib_out.push_back(hjit::Tensor::empty(g.type(o).shape, g.type(o).dtype));
    for (const hjit::Update& u : g.updates) lib_out.push_back(hjit::Tensor::empty(g.type(u.value).shape, g.type(u.value).dtype));
    const ExportedLibrary lib(dir, "w");
    std::vector<void*> args;
    for (const hjit::Tensor& t : lib_in) args.push_back(const_cast<void*>(t.data()));
    for (const hjit::Tensor& t : lib_out) args.push_back(const_cast<void*>(t.data()));
    const int status = lib.call(args.data());
    // The first call of each, on the same values: the function's first result.
    const bool same = status == 0 && same_bits(lib_out[0], first);
    ok &= same;
    auto both = [&](int calls) {
      std::vector<double> ms = interleaved_ms({[&] { jitted.call(); }, [&] { lib.call(args.data()); }}, calls, quick ? 0.6 : 2.0);
      for (double& m : ms) m /= calls;
      return ms;
    };
    const std::vector<double> ms = both(id == "W1" ? 1000 : 1);
    std::vector<double> busy;
    {
      // Samples of 5 ms at least: under load a call is fast while its threads hold their cores and
      // waits out the neighbour's time slice when one does not; a sample of several calls counts both.
      const Spinner neighbour;
      busy = both(int(std::clamp(5.0 / std::max(1e-4, ms[0]), 1.0, 100000.0)));
    }
    std::printf("%-4s %-18s %12.4f %12.4f %8.2fx %12.4f %12.4f %8.2fx  %s\n", id.c_str(), w.name.c_str(), ms[0], ms[1], ms[1] / ms[0],
                busy[0], busy[1], busy[1] / busy[0],
                status != 0 ? ("the library failed: " + std::to_string(status)).c_str() : same ? "the same bits" : "DIFFERENT");
    std::fflush(stdout);
  }
  std::filesystem::remove_all(scratch);
  return ok ? 0 : 1;
}

}  // namespace bench
