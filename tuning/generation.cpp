#include "tuning/generation.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "tuning/candidates.h"
#include "tuning/rank_exchange.h"

namespace hjit::tuning {

int generation_size(int ranks) { return std::max(8, ranks); }

std::vector<std::string> generation_strings(const Generation& g) {
  std::string owners;
  for (int o : g.owners) owners += std::to_string(o) + " ";
  std::vector<std::string> out{std::to_string(g.timeout_s), std::to_string(g.remaining_s), owners};
  out.insert(out.end(), g.requests.begin(), g.requests.end());
  return out;
}

Generation parse_generation(const std::vector<std::string>& strings) {
  Generation g;
  if (strings.size() < 3) return g;
  g.timeout_s = std::atof(strings[0].c_str()), g.remaining_s = std::atof(strings[1].c_str());
  std::istringstream owners(strings[2]);
  for (int o; owners >> o;) g.owners.push_back(o);
  g.requests.assign(strings.begin() + 3, strings.end());
  g.owners.resize(g.requests.size(), 0);
  return g;
}

namespace {

// Candidates that take alike: one scheduler's, Adams2019's whole beam search apart from its
// one-beam samples.
std::string kind_of(const std::string& request) {
  const std::string scheduler = scheduler_of(request);
  if (scheduler == "Adams2019" && request.find("beam=1") == std::string::npos) return "Adams2019 search";
  return scheduler;
}

}  // namespace

void MeasuringTimes::observe(const std::string& request, double seconds) {
  auto& [sum, count] = by_kind_[kind_of(request)];
  sum += seconds, ++count;
}

double MeasuringTimes::estimate(const std::string& request) const {
  if (auto it = by_kind_.find(kind_of(request)); it != by_kind_.end()) return it->second.first / it->second.second;
  // Not seen yet: a beam search takes many times what one point does; others as the average.
  double sum = 0;
  int count = 0;
  for (const auto& [kind, seen] : by_kind_) sum += seen.first, count += seen.second;
  const double average = count > 0 ? sum / count : 1.0;
  return kind_of(request) == "Adams2019 search" ? 10 * average : average;
}

std::vector<int> MeasuringTimes::owners(const std::vector<std::string>& requests, int ranks) const {
  std::vector<size_t> order(requests.size());
  std::vector<double> cost(requests.size()), load(size_t(std::max(ranks, 1)), 0.0);
  for (size_t k = 0; k < requests.size(); ++k) order[k] = k, cost[k] = estimate(requests[k]);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<int> owner(requests.size(), 0);
  for (size_t k : order) {
    const size_t r = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    owner[k] = int(r), load[r] += cost[k];
  }
  return owner;
}

std::vector<Measured> measure_share(const Generation& g, int rank, const std::function<Measurement(size_t, double)>& measure,
                                    const std::function<bool()>& stop) {
  const auto start = std::chrono::steady_clock::now();
  auto into = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<Measured> share;
  for (size_t k = 0; k < g.requests.size(); ++k) {
    if (k < g.owners.size() && g.owners[k] != rank) continue;
    const double left = g.remaining_s - into();
    if (left <= 0 || stop()) break;
    // A candidate started near the end may run a little past it, not a whole timeout.
    Measured done;
    done.index = k;
    const double began = into();
    done.m = measure(k, std::min(g.timeout_s, std::max(10.0, left + 5)));
    if (stop()) break;  // stopped while measuring: not a measurement
    done.at_s = into(), done.seconds = done.at_s - began;
    share.push_back(std::move(done));
  }
  return share;
}

std::string format_share(const std::vector<Measured>& share) {
  std::vector<std::string> each;
  for (const Measured& d : share) {
    char head[64];
    std::snprintf(head, sizeof head, "%zu %.6f %.6f\n", d.index, d.at_s, d.seconds);
    each.push_back(head + format_result(d.m));
  }
  return pack_strings(each);
}

std::vector<Measured> parse_share(const std::string& text) {
  std::vector<Measured> share;
  for (const std::string& s : unpack_strings(text)) {
    const size_t line = s.find('\n');
    Measured d;
    unsigned long long index = 0;
    if (line == std::string::npos || std::sscanf(s.c_str(), "%llu %lf %lf", &index, &d.at_s, &d.seconds) != 3) continue;
    d.index = size_t(index);
    d.m = parse_result(s.substr(line + 1));
    share.push_back(std::move(d));
  }
  return share;
}

}  // namespace hjit::tuning
