// A tuning run proposes its candidates a generation at a time: a fixed number of them chosen
// around the best of the generations before the last, all measured (by the ranks of a distributed
// run at once, each taking the next as it becomes free), and the best updated generation by
// generation. Generation g+2 is proposed when generation g is measured, from what the generations
// up to g found; so the ranks move on to generation g+1 while g's last candidates are measured (an
// Adams2019 beam search takes 7 s where a built-in point takes half a second), and the candidates
// a seed leads to still do not depend on how many ranks measure them: N ranks walk the same path N
// times as fast (as TVM's measurement batches do), instead of searching somewhere else.
#pragma once
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tuning/worker.h"

namespace hjit::tuning {

// The candidates of a generation: 8 (runs of up to 8 ranks take the same path for a seed; more
// ranks make generations of one each).
int generation_size(int ranks);

// How long candidates take to measure, learnt as the run goes, so that rank 0 hands out the long
// ones first (an Adams2019 beam search or a schedule that runs slowly takes many times what a
// built-in point does) and no rank is left measuring one while the others wait at the
// generation's end. Who measures a candidate, and when, never changes which candidates come next.
class MeasuringTimes {
 public:
  void observe(const std::string& request, double seconds);
  double estimate(const std::string& request) const;
  std::vector<size_t> longest_first(const std::vector<std::string>& requests) const;  // indices

 private:
  std::map<std::string, std::pair<double, int>> by_kind_;  // seconds, count
};

// One candidate measured: which, when rank 0 learnt of it (seconds into the run), how long it took.
struct Measured {
  int generation = 0;
  size_t index = 0;  // into its generation's requests
  double at_s = 0, seconds = 0;
  Measurement m;
};
// Measures a request (a backend::ScheduleRequest's text form) within timeout_s.
using MeasureOne = std::function<Measurement(const std::string& request, double timeout_s)>;

// Rank 0's side of a run. Generations are added in order, and their candidates handed out in that
// order (within a generation, in the order given), one at a time to whichever rank asks next:
// each other rank is served by a thread of its own (a receive from one rank at a time is all
// hjit::dist offers, and all this needs), and this rank measures in finish(). None is handed out
// once the run's time is over, max_candidates (0: no limit) have been handed out or stop() is
// true; a candidate started near the end gets what is left (at least 10 s), not its whole timeout.
// In a world of one, finish() measures them all.
class Dispatcher {
 public:
  using Clock = std::chrono::steady_clock;
  Dispatcher(Clock::time_point start, double budget_s, int max_candidates, std::function<bool()> stop);
  ~Dispatcher();  // close()
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Generation number generations() - 1.
  void add(std::vector<std::string> requests, const std::vector<size_t>& order, double timeout_s);
  int generations() const;
  // Whether candidates may still be handed out (worth proposing more).
  bool open() const;
  // Measures candidates here until every candidate of generation g handed out has been measured
  // and none is left to hand out; returns them by index. Rethrows a serving thread's failure (a
  // rank that stopped answering).
  std::vector<Measured> finish(int g, const MeasureOne& measure);
  // Tells every other rank to stop (once it has reported what it measures now) and waits for them.
  void close();

 private:
  struct Generation {
    std::vector<std::string> requests;
    std::vector<size_t> order;
    double timeout_s = 0;
    size_t handed = 0, reported = 0;
    std::vector<Measured> done;
  };
  struct Job {
    int generation = -1;
    size_t index = 0;
    double timeout_s = 0;
  };
  bool over() const;         // the run's time, its candidates, or stop(); with mutex_ held
  bool take(Job& job);       // the next candidate, if one may be handed out; with mutex_ held
  void serve(int peer);
  void report(Measured d);   // with mutex_ held

  Clock::time_point start_;
  double budget_s_;
  int max_candidates_;
  int handed_ = 0;  // over every generation
  std::function<bool()> stop_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Generation> generations_;
  bool closed_ = false;
  std::exception_ptr failed_;
  std::vector<std::thread> serving_;
};

// Every other rank: asks rank 0 for a candidate, measures it, reports it with the next request,
// until rank 0 has none for it; returns how many it measured and how many failed.
std::pair<int, int> measure_for_dispatcher(const MeasureOne& measure);

// Measurements as one string, and back.
std::string format_measured(const std::vector<Measured>& measured);
std::vector<Measured> parse_measured(const std::string& text);

}  // namespace hjit::tuning
