// hjit-tune: tuning runs from the command line (hjit/tune.h).
//
//   hjit-tune --workload W8 --minutes 10 --db tuning.sqlite       a bench workload (W1..W11) by name
//   hjit-tune --module block.hjit --minutes 10 --db tuning.sqlite  a function saved with hjit::save
//   hjit-tune --db tuning.sqlite --report [--plots PREFIX]         what the database knows, and plots
//   hjit-tune --merge all.sqlite a.sqlite b.sqlite                  databases of separate runs, as one
//   hjit-tune --db a.sqlite,b.sqlite --fit-model model.txt         the built-in schedule's parameter
//                                                                   model fitted to databases
//   mpirun -np 4 hjit-tune --workload W3 --db t.sqlite             every rank measures a candidate at
//                                                                   once; rank 0 writes the database
//
// Options: --device cpu|cuda|opencl (default cpu; a GPU is tuned on the device, with built-in and
// Li2018), --schedulers built-in,Adams2019,Li2018,Mullapudi2016 (default: all), --timeout S (one
// candidate's compile, check and timing; default 180), --candidates N (stop after N candidates,
// or when the minutes are up), --seed N (the same candidates in the same order, run after run),
// --no-retrain, --quiet (no progress line).
// Ctrl-C stops the run and keeps what was measured. A saved module is tuned on made-up inputs of
// its signature (normally distributed floats, zero integers). A tuning run measures the built-in
// rules without a parameter model (its workers run with HJIT_PARAM_MODEL=off): what it finds is
// what a model fitted to it should pick.
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <hjit/hjit.h>
#include <hjit/tune.h>

#include "bench/workloads.h"
#include "tuning/worker.h"

namespace {

// The usage text: on stdout for --help (exit 0), on stderr for a bad command line (exit 2).
int usage(bool asked = false) {
  std::fprintf(asked ? stdout : stderr,
               "usage: hjit-tune --workload W8[,W3...] --db FILE [--minutes M] [--candidates N] [options]\n"
               "       hjit-tune --module FILE.hjit --db FILE [--minutes M] [--candidates N] [options]\n"
               "       hjit-tune --db FILE --report [--plots PREFIX]\n"
               "       hjit-tune --db FILE[,FILE...] --fit-model MODEL.txt\n"
               "       hjit-tune --merge INTO FROM [FROM...]\n"
               "options: --device cpu|cuda|opencl  --schedulers built-in,Adams2019,Li2018,Mullapudi2016  --timeout S\n"
               "         --seed N  --no-retrain  --quiet  --help\n"
               "Measures candidate schedules in worker processes, keeps every measurement in the SQLite database,\n"
               "and leaves the best compiled in the disk cache; jit() uses it with {.tuning_db = FILE} or\n"
               "HJIT_TUNING_DB=FILE. Ctrl-C stops a run and keeps what was measured. --fit-model fits the built-in\n"
               "schedule's parameter model to databases; HJIT_PARAM_MODEL=MODEL.txt makes compiles use it.\n"
               "docs/tuning.md says more.\n");
  return asked ? 0 : 2;
}

// A whole number >= 0, all of the text.
bool count(const char* text, int& n) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < 0 || v > INT_MAX) return false;
  n = int(v);
  return true;
}

void print(const hjit::TuneResult& r) {
  std::printf("%s: built-in %.4f ms, best %.4f ms (%.2fx, %s); %d tried, %d failed in %.0f s%s\n", r.name.c_str(),
              r.builtin_ms, r.best_ms, r.speedup(), r.best_origin.c_str(), r.tried, r.failed, r.seconds,
              r.interrupted ? " (interrupted)" : "");
  if (!r.cost_model.empty()) std::printf("  %s\n", r.cost_model.c_str());
  std::fflush(stdout);
}

// Made-up inputs of a saved module's signature, then its parameters.
std::vector<hjit::Tensor> module_inputs(const hjit::Module& m) {
  std::vector<hjit::Tensor> in;
  uint64_t seed = 1;
  for (const hjit::TensorType& t : m.input_types())
    in.push_back(hjit::is_floating(t.dtype) ? hjit::Tensor::randn(t.shape, seed++, t.dtype) : hjit::Tensor::zeros(t.shape, t.dtype));
  for (const hjit::Tensor& p : m.parameters()) in.push_back(p);
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--worker") return hjit::tuning::worker_main(argv[2], argv[3], argv[4]);
  if (argc >= 2 && std::string(argv[1]) == "--merge") {
    if (argc < 4) return usage();
    try {
      std::fputs(hjit::merge_tuning_databases(argv[2], std::vector<std::string>(argv + 3, argv + argc)).c_str(), stdout);
    } catch (const hjit::Error& e) {
      std::fprintf(stderr, "hjit-tune: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  std::vector<std::string> workloads;
  std::string module, plots, fit;
  bool report = false;
  hjit::TuneOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--workload" && has_value) workloads = bench::split_list(argv[++i]);
    else if (a == "--module" && has_value) module = argv[++i];
    else if (a == "--db" && has_value) o.db = argv[++i];
    else if (a == "--minutes" && has_value) o.minutes = std::atof(argv[++i]);
    else if (a == "--candidates" && has_value) {
      if (!count(argv[++i], o.max_candidates)) return usage();
    }
    else if (a == "--schedulers" && has_value) o.schedulers = bench::split_list(argv[++i]);
    else if (a == "--timeout" && has_value) o.candidate_timeout_s = std::atof(argv[++i]);
    else if (a == "--seed" && has_value) o.seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--device" && has_value) {
      const std::string d = argv[++i];
      if (d == "cpu") o.device = hjit::Device::CPU;
      else if (d == "cuda") o.device = hjit::Device::CUDA;
      else if (d == "opencl") o.device = hjit::Device::OpenCL;
      else return usage();
    }
    else if (a == "--plots" && has_value) plots = argv[++i];
    else if (a == "--fit-model" && has_value) fit = argv[++i];
    else if (a == "--report") report = true;
    else if (a == "--no-retrain") o.retrain = false;
    else if (a == "--quiet") o.progress = false;
    else if (a == "--help" || a == "-h") return usage(true);
    else return usage();
  }
  if (o.db.empty() || (!report && fit.empty() && workloads.empty() && module.empty())) return usage();
  try {
    // Under mpirun or srun every rank measures candidates at once, on its own cores; rank 0 writes
    // the database and reports. The ranks wait for one another while one measures a candidate and
    // while rank 0 alone confirms the best (as long again), retrains and compiles it: the group's
    // timeout covers that (HJIT_DIST_TIMEOUT still overrides it).
    hjit::dist::InitOptions group;
    const double candidate_s = std::isfinite(o.candidate_timeout_s) ? std::clamp(o.candidate_timeout_s, 0.0, 86400.0) : 0.0;
    group.timeout = std::chrono::seconds(int64_t(2 * candidate_s) + 300);  // a bad --timeout is refused by tune()
    hjit::dist::init(group);
    const bool reporter = hjit::dist::rank() == 0;
    if (!fit.empty()) {
      if (reporter) std::fputs(hjit::fit_param_model(bench::split_list(o.db), fit).c_str(), stdout);
      return 0;
    }
    for (const std::string& id : workloads) {
      bench::Workload w = bench::make_workload(id);
      hjit::TuneOptions wo = o;
      wo.name = w.id + " " + w.name;
      const hjit::TuneResult r = w.tune(wo);
      if (reporter) print(r);
    }
    if (!module.empty()) {
      hjit::Module m = hjit::Module::load(module);
      hjit::TuneOptions mo = o;
      if (mo.name.empty()) mo.name = m.name();
      const hjit::TuneResult r = hjit::tune_graph(m.graph(), module_inputs(m), mo);
      if (reporter) print(r);
    }
    if (report && reporter) {
      if (plots.empty()) {
        plots = o.db;
        const size_t dot = plots.rfind('.');
        if (dot != std::string::npos && plots.find('/', dot) == std::string::npos) plots.resize(dot);
      }
      std::fputs(hjit::tuning_report(o.db, plots).c_str(), stdout);
    }
  } catch (const hjit::Error& e) {
    std::fprintf(stderr, "hjit-tune: %s\n", e.what());
    return 1;
  }
  return 0;
}
