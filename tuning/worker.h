// Candidates are compiled, checked and timed in a worker process (hjit-tune --worker), so that one
// that crashes or hangs while compiling or running costs a failed record and not the tuning run.
// A worker is started with exec, not only forked: OpenMP's thread pool (which runs compiled
// parallel loops) hangs in a forked child of a process that has used it.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <hjit/graph.h>

namespace hjit::tuning {

// What every candidate of one pipeline is measured on: the graph, its inputs, and what eager
// execution computes from them (the outputs, then the updated values).
struct Request {
  Graph graph;
  Device device = Device::CPU;
  std::vector<std::string> inputs;    // raw bytes, one per graph input
  std::vector<std::string> expected;  // raw bytes, one per output then per update
};
void write_request(const std::string& path, const Request& r);
Request read_request(const std::string& path);  // ValueError when the file is not one

struct Measurement {
  bool valid = false;
  double ms = 0, compile_ms = 0;
  double baseline_ms = 0;  // the built-in baseline's, timed in turn with it (the baseline's own: ms)
  std::string schedule;  // the text form measured (empty when none was decided)
  std::string error;     // why it is not valid
};

// The median time of each of `runs`, timed in turn (a, b, a, b, ...) after a warm-up of each: at
// least 5 turns and 0.3 s in all, at most 50 turns, 3 where the turns take over 3 s. Timed in turn,
// they see the same machine: on a shared VM the speed of one pipeline's medians drifts by 5% over
// seconds while the ratio of two timed in turn holds within half a percent (W3 at one thread).
// With `losers_stop`, timing stops after the first turn in which the first run's fastest time is
// over twice the others' slowest: a candidate that far behind the baseline cannot be best, and
// its time is known well enough (Li2018's W3 schedule at 44x took 2 s to time in full).
std::vector<double> medians_ms(const std::vector<std::function<void()>>& runs, bool losers_stop = false);

// A measurement as text (how a worker reports it, and how the ranks of a distributed run send it).
std::string format_result(const Measurement& m);
Measurement parse_result(const std::string& text);

// A confirmation: `how` that times the schedule text in the file at schedule_path against the
// built-in baseline in one worker, in alternating rounds, so that both see the same machine.
std::string confirm_request(const std::string& schedule_path);

// What a tuning run's workers share, removed when the run ends: the request file they read, and a
// disk cache they compile into (the baseline every candidate is timed beside is compiled once;
// candidates' entries are not worth keeping, but the baseline's partitioned build needs a cache).
class WorkerFiles {
 public:
  explicit WorkerFiles(const Request& r);
  ~WorkerFiles();
  WorkerFiles(const WorkerFiles&) = delete;
  WorkerFiles& operator=(const WorkerFiles&) = delete;
  const std::string& request() const { return request_; }
  const std::string& cache() const { return cache_; }  // "" when no directory could be made

 private:
  void remove() const;
  std::string request_, cache_;
};

// Runs the worker on the run's request for the schedule request `how` (backend::decide_schedule),
// killing it after timeout_s; a crash, a hang, a wrong result are invalid measurements.
// Returns early with error "interrupted" when stop() becomes true.
Measurement measure_in_worker(const WorkerFiles& files, const std::string& how, double timeout_s,
                              const std::function<bool()>& stop);

// The worker's main: hjit-tune --worker REQUEST HOW RESULT.
int worker_main(const std::string& request, const std::string& how, const std::string& result);

// The hjit-tune executable that serves as the worker: $HJIT_TUNE_WORKER, else the one built
// beside this library, else the installed one. ValueError when none is found.
std::string worker_program();

}  // namespace hjit::tuning
