#include "tuning/generation.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

#include <hjit/distributed.h>

#include "tuning/candidates.h"
#include "tuning/rank_exchange.h"

namespace hjit::tuning {

int generation_size(int ranks) { return std::max(8, ranks); }

std::vector<std::string> generation_strings(const Generation& g) {
  std::vector<std::string> out{std::to_string(g.timeout_s), std::to_string(g.remaining_s)};
  out.insert(out.end(), g.requests.begin(), g.requests.end());
  return out;
}

Generation parse_generation(const std::vector<std::string>& strings) {
  Generation g;
  if (strings.size() < 2) return g;
  g.timeout_s = std::atof(strings[0].c_str()), g.remaining_s = std::atof(strings[1].c_str());
  g.requests.assign(strings.begin() + 2, strings.end());
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

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One candidate measured on this rank, with what is left of the run's time.
Measured measure_here(const Generation& g, size_t k, Clock::time_point start, const MeasureOne& measure) {
  Measured done;
  done.index = k;
  const double began = seconds_since(start);
  // A candidate started near the end may run a little past it, not a whole timeout.
  done.m = measure(k, std::min(g.timeout_s, std::max(10.0, g.remaining_s - began + 5)));
  done.at_s = seconds_since(start), done.seconds = done.at_s - began;
  return done;
}

// The messages between rank 0 and a measuring rank: a report (the last measurement, or nothing)
// that asks for the next candidate, and the answer (an index, or none left).
constexpr int kTag = 7321;
constexpr int64_t kNoneLeft = -1;

void send_index(int64_t index, int peer) { dist::send(Tensor::scalar(double(index), DType::I64), peer, kTag); }
int64_t recv_index(int peer) { return dist::recv({}, DType::I64, peer, kTag).item<int64_t>(); }

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

std::vector<size_t> MeasuringTimes::longest_first(const std::vector<std::string>& requests) const {
  std::vector<size_t> order(requests.size());
  std::vector<double> cost(requests.size());
  for (size_t k = 0; k < requests.size(); ++k) order[k] = k, cost[k] = estimate(requests[k]);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  return order;
}

std::vector<Measured> dispatch_generation(const Generation& g, const std::vector<size_t>& order, const MeasureOne& measure,
                                          const std::function<bool()>& stop) {
  const Clock::time_point start = Clock::now();
  std::mutex mutex;  // over next and done: the threads serving the other ranks share them
  size_t next = 0;
  std::vector<Measured> done;
  // The next candidate to measure, if the run has time and candidates left.
  auto take = [&]() -> int64_t {
    std::lock_guard<std::mutex> lock(mutex);
    if (next >= order.size() || seconds_since(start) >= g.remaining_s || stop()) return kNoneLeft;
    return int64_t(order[next++]);
  };
  // Each other rank is served by a thread of its own, which waits for that rank alone (a receive
  // from one rank at a time is all hjit::dist offers, and all this needs).
  std::vector<std::thread> serving;
  std::vector<std::exception_ptr> failed(size_t(dist::world_size()));
  for (int peer = 1; peer < dist::world_size(); ++peer)
    serving.emplace_back([&, peer] {
      try {
        for (;;) {
          std::vector<Measured> reported = parse_measured(recv_string(peer, kTag));
          {
            std::lock_guard<std::mutex> lock(mutex);
            for (Measured& d : reported)
              if (d.index < g.requests.size()) done.push_back(std::move(d));
          }
          const int64_t k = take();
          send_index(k, peer);
          if (k == kNoneLeft) return;
        }
      } catch (...) {
        failed[size_t(peer)] = std::current_exception();
      }
    });
  for (int64_t k = take(); k != kNoneLeft; k = take()) {
    Measured d = measure_here(g, size_t(k), start, measure);
    if (stop()) break;  // stopped while measuring: not a measurement
    std::lock_guard<std::mutex> lock(mutex);
    done.push_back(std::move(d));
  }
  for (std::thread& t : serving) t.join();
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
  return done;
}

std::pair<int, int> measure_dispatched(const Generation& g, const MeasureOne& measure) {
  const Clock::time_point start = Clock::now();
  int tried = 0, failed = 0;
  for (std::string report;;) {
    send_string(report, 0, kTag);
    const int64_t k = recv_index(0);
    if (k == kNoneLeft || k < 0 || size_t(k) >= g.requests.size()) return {tried, failed};
    const Measured d = measure_here(g, size_t(k), start, measure);
    ++tried, failed += d.m.valid ? 0 : 1;
    report = format_measured({d});
  }
}

std::string format_measured(const std::vector<Measured>& measured) {
  std::vector<std::string> each;
  for (const Measured& d : measured) {
    char head[96];
    std::snprintf(head, sizeof head, "%zu %.6f %.6f\n", d.index, d.at_s, d.seconds);
    each.push_back(head + format_result(d.m));
  }
  return pack_strings(each);
}

std::vector<Measured> parse_measured(const std::string& text) {
  std::vector<Measured> measured;
  for (const std::string& s : unpack_strings(text)) {
    const size_t line = s.find('\n');
    Measured d;
    unsigned long long index = 0;
    if (line == std::string::npos || std::sscanf(s.c_str(), "%llu %lf %lf", &index, &d.at_s, &d.seconds) != 3) continue;
    d.index = size_t(index);
    d.m = parse_result(s.substr(line + 1));
    measured.push_back(std::move(d));
  }
  return measured;
}

}  // namespace hjit::tuning
