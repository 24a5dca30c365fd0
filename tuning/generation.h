// A tuning run proposes its candidates a generation at a time: a fixed number of them chosen
// around the best of the generations before, all measured (by the ranks of a distributed run, each
// its share at once), and only then the best updated. The candidates a seed leads to therefore do
// not depend on how many ranks measure them, so N ranks walk the same path N times as fast (as
// TVM's measurement batches do), instead of searching somewhere else.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tuning/worker.h"

namespace hjit::tuning {

// The candidates of a generation: runs of up to this many ranks take the same path for a seed;
// more ranks make generations of one candidate each.
int generation_size(int ranks);

// What rank 0 hands every rank.
struct Generation {
  double timeout_s = 0;               // the most one candidate may take
  double remaining_s = 0;             // of the run's time, when the generation starts
  std::vector<std::string> requests;  // text forms of backend::ScheduleRequest
  std::vector<int> owners;            // the rank that measures each
};
std::vector<std::string> generation_strings(const Generation& g);
Generation parse_generation(const std::vector<std::string>& strings);  // no requests: the run is over

// How long candidates take to measure, learnt as the run goes, so that rank 0 can share a
// generation out evenly (longest first, each to the rank with the least so far): an Adams2019
// beam search or a schedule that runs slowly takes many times what a built-in point does. Who
// measures a candidate never changes which candidates come next.
class MeasuringTimes {
 public:
  void observe(const std::string& request, double seconds);
  double estimate(const std::string& request) const;
  std::vector<int> owners(const std::vector<std::string>& requests, int ranks) const;

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

// This rank's share of a generation, one after another in the generation's order, none started
// once the run's time is over or stop() is true. measure(index, timeout) measures one.
std::vector<Measured> measure_share(const Generation& g, int rank, const std::function<Measurement(size_t, double)>& measure,
                                    const std::function<bool()>& stop);

// A share as one string (gathered on rank 0), and back.
std::string format_share(const std::vector<Measured>& share);
std::vector<Measured> parse_share(const std::string& text);

}  // namespace hjit::tuning
