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

namespace {

// Candidates that take alike: one scheduler's, Adams2019's whole beam search apart from its
// one-beam samples.
std::string kind_of(const std::string& request) {
  const std::string scheduler = scheduler_of(request);
  if (scheduler == "Adams2019" && request.find("beam=1") == std::string::npos) return "Adams2019 search";
  return scheduler;
}

double seconds_since(Dispatcher::Clock::time_point t) {
  return std::chrono::duration<double>(Dispatcher::Clock::now() - t).count();
}

// The messages between rank 0 and a measuring rank: a report (the last measurement, or nothing)
// that asks for the next candidate, and the answer: the candidate (its generation, index, time
// limit and request), or nothing: stop.
constexpr int kTag = 7321;

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

Dispatcher::Dispatcher(Clock::time_point start, double budget_s, int max_candidates, std::function<bool()> stop)
    : start_(start), budget_s_(budget_s), max_candidates_(max_candidates), stop_(std::move(stop)) {
  for (int peer = 1; peer < dist::world_size(); ++peer) serving_.emplace_back([this, peer] { serve(peer); });
}

Dispatcher::~Dispatcher() {
  try {
    close();
  } catch (...) {  // a failure finish() did not see: the run is ending anyway
  }
}

void Dispatcher::add(std::vector<std::string> requests, const std::vector<size_t>& order, double timeout_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  Generation g;
  g.requests = std::move(requests), g.order = order, g.timeout_s = timeout_s;
  generations_.push_back(std::move(g));
  changed_.notify_all();
}

int Dispatcher::generations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return int(generations_.size());
}

bool Dispatcher::open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !over();
}

bool Dispatcher::over() const {
  return closed_ || seconds_since(start_) >= budget_s_ || (max_candidates_ > 0 && handed_ >= max_candidates_) || stop_();
}

bool Dispatcher::take(Job& job) {
  if (over()) return false;
  for (size_t g = 0; g < generations_.size(); ++g) {
    Generation& gen = generations_[g];
    if (gen.handed == gen.order.size()) continue;
    job.generation = int(g), job.index = gen.order[gen.handed++];
    ++handed_;
    job.timeout_s = std::min(gen.timeout_s, std::max(10.0, budget_s_ - seconds_since(start_) + 5));
    return true;
  }
  return false;
}

void Dispatcher::report(Measured d) {
  if (d.generation < 0 || size_t(d.generation) >= generations_.size()) return;
  Generation& gen = generations_[size_t(d.generation)];
  if (d.index >= gen.requests.size()) return;
  d.at_s = seconds_since(start_);
  gen.done.push_back(std::move(d));
  ++gen.reported;
  changed_.notify_all();
}

void Dispatcher::serve(int peer) {
  try {
    for (;;) {
      const std::string reported = recv_string(peer, kTag);
      Job job;
      bool have = false;
      std::string request;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        for (Measured& d : parse_measured(reported)) report(std::move(d));
        // Nothing to hand out yet (the next generation waits for one being measured): wait.
        changed_.wait(lock, [&] { return (have = take(job)) || over(); });
        if (have) request = generations_[size_t(job.generation)].requests[job.index];
      }
      if (!have) {
        send_string("", peer, kTag);
        return;
      }
      send_string(pack_strings({std::to_string(job.generation), std::to_string(job.index), std::to_string(job.timeout_s), request}),
                  peer, kTag);
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failed_) failed_ = std::current_exception();
    changed_.notify_all();
  }
}

std::vector<Measured> Dispatcher::finish(int g, const MeasureOne& measure) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto finished = [&] {
    const Generation& gen = generations_.at(size_t(g));
    return gen.reported == gen.handed && (gen.handed == gen.order.size() || over());
  };
  while (!finished()) {
    if (failed_) std::rethrow_exception(failed_);
    Job job;
    if (take(job)) {
      const std::string request = generations_[size_t(job.generation)].requests[job.index];
      lock.unlock();
      Measured d;
      d.generation = job.generation, d.index = job.index;
      const double began = seconds_since(start_);
      d.m = measure(request, job.timeout_s);
      d.seconds = seconds_since(start_) - began;
      lock.lock();
      if (stop_()) {  // stopped while measuring: not a measurement
        ++generations_[size_t(job.generation)].reported;
        continue;
      }
      report(std::move(d));
    } else {
      // The others measure what is left of it.
      changed_.wait_for(lock, std::chrono::milliseconds(50), [&] { return finished() || failed_; });
    }
  }
  if (failed_) std::rethrow_exception(failed_);
  std::vector<Measured> done = generations_[size_t(g)].done;
  std::sort(done.begin(), done.end(), [](const Measured& a, const Measured& b) { return a.index < b.index; });
  return done;
}

void Dispatcher::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    changed_.notify_all();
  }
  for (std::thread& t : serving_)
    if (t.joinable()) t.join();
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) std::rethrow_exception(std::exchange(failed_, nullptr));
}

std::pair<int, int> measure_for_dispatcher(const MeasureOne& measure) {
  int tried = 0, failed = 0;
  for (std::string report;;) {
    send_string(report, 0, kTag);
    const std::vector<std::string> job = unpack_strings(recv_string(0, kTag));
    if (job.size() != 4) return {tried, failed};
    Measured d;
    d.generation = std::atoi(job[0].c_str()), d.index = size_t(std::strtoull(job[1].c_str(), nullptr, 10));
    const auto began = Dispatcher::Clock::now();
    d.m = measure(job[3], std::atof(job[2].c_str()));
    d.seconds = seconds_since(began);
    ++tried, failed += d.m.valid ? 0 : 1;
    report = format_measured({d});
  }
}

std::string format_measured(const std::vector<Measured>& measured) {
  std::vector<std::string> each;
  for (const Measured& d : measured) {
    char head[128];
    std::snprintf(head, sizeof head, "%d %zu %.6f %.6f\n", d.generation, d.index, d.at_s, d.seconds);
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
    if (line == std::string::npos || std::sscanf(s.c_str(), "%d %llu %lf %lf", &d.generation, &index, &d.at_s, &d.seconds) != 4)
      continue;
    d.index = size_t(index);
    d.m = parse_result(s.substr(line + 1));
    measured.push_back(std::move(d));
  }
  return measured;
}

}  // namespace hjit::tuning
