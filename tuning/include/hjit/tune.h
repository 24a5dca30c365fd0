// Tuning runs: spend minutes once searching for a pipeline's schedule, keep every measurement in
// a SQLite database, and have every later process use the best one without searching.
//
//   hjit::TuneResult r = hjit::tune(block, {.minutes = 5, .db = "tuning.sqlite"}, x);
//   auto f = hjit::jit(block, {.tuning_db = "tuning.sqlite"});   // or HJIT_TUNING_DB
//
// Candidates are schedules from the built-in scheduler's parameter space (tile sizes, vector
// widths, parallel grain, what is stored), Adams2019 (its beam search and random-dropout samples,
// with its cost model retrained on this machine's measurements once there are enough),
// Mullapudi2016 over a grid of machine parameters, and Li2018. Each is compiled, checked against
// eager execution on the same inputs and timed (median of repeated runs) in a worker process of
// its own (the hjit-tune program): one that crashes, hangs or computes wrong results is recorded
// as failed and never chosen. A second run on the same database resumes where the first stopped.
#pragma once
#include <string>
#include <vector>

#include <hjit/detail/tracing.h>

namespace hjit {

struct TuneOptions {
  double minutes = 1;              // the run's length (a candidate under way is stopped at the end)
  int max_candidates = 0;          // at most this many candidates measured in this run (0: as many
                                   // as the minutes allow); with a seed, a run measures the same
                                   // ones on a fast machine and a slow one
  std::string db{};                // the database file (created when missing); required
  std::string name{};              // for the database's report; default: the function's type
  // A GPU (CUDA, OpenCL) is tuned on the device itself, operands resident there: it must be
  // usable here (DeviceError otherwise).
  Device device = Device::CPU;
  // Which schedulers propose candidates: "built-in", "Adams2019", "Li2018", "Mullapudi2016"
  // (empty: all of them; for a GPU, built-in and Li2018, the ones Halide 14 has for GPUs).
  std::vector<std::string> schedulers{};
  double candidate_timeout_s = 180;  // compiling, checking and timing one candidate (and at most a
                                     // sixth of the run, at least 30 s)
  bool progress = true;              // a progress line on stderr when it is a terminal
  bool retrain = true;               // retrain Adams2019's cost model from this run's samples
  uint64_t seed = 0;                 // the random choices of the search (0: a new seed each run); a
                                     // seed makes a run propose the same candidates in the same order
};

struct TuneResult {
  std::string name, key;      // the pipeline and its database key
  int tried = 0, failed = 0;  // candidates measured in this run, and those that failed
  double builtin_ms = 0;      // the built-in schedule's time, timed in turn with the best
  double best_ms = 0;         // the best known (over every run on this database)
  std::string best_origin;    // the request that produced it ("built-in cols=3 rows=4", ...)
  double seconds = 0;         // this run's length
  bool interrupted = false;   // stopped by Ctrl-C (SIGINT): what was measured is kept
  std::string cost_model;     // what became of Adams2019's retraining at the end of the run
  double speedup() const { return best_ms > 0 ? builtin_ms / best_ms : 0; }
};

// Tunes a graph with its inputs (one tensor per graph input, captured ones included): what
// hjit-tune --module does with a saved function.
TuneResult tune_graph(const Graph& graph, const std::vector<Tensor>& inputs, const TuneOptions& options);

// What the database at db knows, as a table: per pipeline the built-in and best times, the
// speed-up, candidates tried and failed, tuning time and the best schedule's origin; per
// scheduler the best speed-up; Adams2019's best with Halide's cost-model weights against its best
// with the retrained ones. With svg_prefix, also two plots: <svg_prefix>_speedup.svg (speed-up per
// pipeline) and <svg_prefix>_progress.svg (best-so-far speed-up against tuning time).
std::string tuning_report(const std::string& db, const std::string& svg_prefix = "");

// Fits the built-in schedule's parameter model to the tuning databases at `dbs` and writes it to
// out_path (hjit-tune --fit-model; HJIT_PARAM_MODEL=out_path makes compiles use it). Returns an
// account of its samples. ValueError for a database that cannot be read or a file that cannot be
// written.
std::string fit_param_model(const std::vector<std::string>& dbs, const std::string& out_path);

// Merges the tuning databases at `from` into the one at `into` (created when missing): hjit-tune
// --merge, for runs made apart (on several machines, or ranks of one run). Every pipeline and
// candidate they hold is copied once (merging the same database again adds nothing), tuning times
// add up, and a pipeline's best is the fastest of the bests the runs confirmed. Returns an account.
// ValueError for a database that cannot be read, or one given twice.
std::string merge_tuning_databases(const std::string& into, const std::vector<std::string>& from);

namespace detail {
TuneResult tune_traced(const std::string& fn_name, const CallArgs& args, Tracer trace, const TuneOptions& options);
}

// Traces fn on the arguments (as jit() would) and tunes the pipeline it compiles to.
template <class Fn, class... Args>
TuneResult tune(Fn&& fn, const TuneOptions& options, const Args&... args) {
  auto use = [&](const std::string& name, const detail::CallArgs& call, detail::Tracer tracer) {
    return detail::tune_traced(name, call, tracer, options);
  };
  return detail::traced_once(fn, use, args...);
}

}  // namespace hjit
