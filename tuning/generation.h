// A tuning run proposes its candidates a generation at a time: a fixed number of them chosen
// around the best of the generations before, all measured (by the ranks of a distributed run at
// once, each taking the next as it becomes free), and only then the best updated. The candidates
// a seed leads to therefore do not depend on how many ranks measure them, so N ranks walk the same
// path N times as fast (as TVM's measurement batches do), instead of searching somewhere else.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tuning/worker.h"

namespace hjit::tuning {

// The candidates of a generation: 8 (runs of up to 8 ranks take the same path for a seed; more
// ranks make generations of one candidate each).
int generation_size(int ranks);

// What rank 0 hands every rank.
struct Generation {
  double timeout_s = 0;               // the most one candidate may take
  double remaining_s = 0;             // of the run's time, when the generation starts
  std::vector<std::string> requests;  // text forms of backend::ScheduleRequest
};
std::vector<std::string> generation_strings(const Generation& g);
Generation parse_generation(const std::vector<std::string>& strings);  // no requests: the run is over

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

// One candidate measured: when it finished, in seconds after its rank received the generation,
// and how long it took.
struct Measured {
  size_t index = 0;  // into Generation::requests
  double at_s = 0, seconds = 0;
  Measurement m;
};
using MeasureOne = std::function<Measurement(size_t index, double timeout_s)>;

// Rank 0: hands the generation's candidates out in `order`, one at a time, to whichever rank asks
// next (this one included: it measures with `measure` between), none once the run's time is over or
// stop() is true; returns what every rank measured. In a world of one, measures them in order.
std::vector<Measured> dispatch_generation(const Generation& g, const std::vector<size_t>& order, const MeasureOne& measure,
                                          const std::function<bool()>& stop);
// Every other rank: asks rank 0 for a candidate of g, measures it, reports it with the next
// request, until rank 0 has none left; returns how many it measured and how many failed.
std::pair<int, int> measure_dispatched(const Generation& g, const MeasureOne& measure);

// Measurements as one string, and back.
std::string format_measured(const std::vector<Measured>& measured);
std::vector<Measured> parse_measured(const std::string& text);

}  // namespace hjit::tuning
