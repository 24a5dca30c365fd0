// Which schedule to try next in a tuning run: requests for backend::decide_schedule, from every
// scheduler the run uses, in an order that spends the first minutes where experience says the
// wins are (the built-in schedule, each autoscheduler's own choice), then alternates between
// local moves around the best built-in parameters, random points of the built-in space,
// Adams2019's random-dropout samples and Mullapudi2016's machine-parameter grid.
#pragma once
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "halide_backend/schedule_request.h"

namespace hjit::tuning {

using backend::ScheduleRequest;

class Candidates {
 public:
  // schedulers: those the run uses (empty: all); tried: requests measured before (a resumed run
  // does not repeat them); extern_gemm, extern_conv, extern_int_conv: whether the pipeline has
  // matmuls, convolutions or integer convolutions a library can compute
  // (halide_backend/providers/extern_stages.h).
  Candidates(std::vector<std::string> schedulers, std::set<std::string> tried, uint64_t seed, bool extern_gemm,
             bool extern_conv, bool extern_int_conv = false);
  // Adams2019 cost-model weights to search with from now on ("": Halide's own).
  void set_weights(const std::string& path) { weights_ = path; }
  // The next request not tried, given the best one so far (an origin in the database: a request's
  // text form); nullopt when the space is exhausted.
  std::optional<ScheduleRequest> next(const std::string& best);
  void tried(const ScheduleRequest& request) { tried_.insert(request.str()); }

 private:
  bool uses(const std::string& scheduler) const;
  std::optional<ScheduleRequest> fresh(const ScheduleRequest& request);  // nullopt when tried before or not used
  std::optional<ScheduleRequest> builtin_local(const std::string& best);
  std::optional<ScheduleRequest> builtin_random();
  std::optional<ScheduleRequest> adams_sample();
  std::optional<ScheduleRequest> mullapudi_grid();
  std::optional<ScheduleRequest> li_variant();

  std::vector<std::string> schedulers_;
  std::set<std::string> tried_;
  std::mt19937_64 rng_;
  std::string weights_;
  size_t step_ = 0, firsts_ = 0, mullapudi_ = 0, li_ = 0;
  int adams_seed_ = 0;
  bool extern_gemm_ = false, extern_conv_ = false, extern_int_conv_ = false;
  size_t externs_ = 0;
};

// The scheduler of a candidate's origin (a request's text form, as the database records it):
// "built-in" or the autoscheduler's name, as TuneOptions::schedulers names them.
std::string scheduler_of(const std::string& origin);

}  // namespace hjit::tuning
