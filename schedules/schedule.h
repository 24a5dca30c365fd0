// Every way a lowered pipeline gets its schedule. Each function schedules every stage of the
// pipeline in place and returns a short human description of what it chose (for explain()).
#pragma once
#include <optional>
#include <string>

#include "halide_backend/lowered.h"

namespace hjit::schedules {

// opt_level 0: every op its own compute_root stage (vectorized and parallel, but nothing fused):
// the unfused baseline the fused schedules are measured against.
std::string schedule_unfused(backend::LoweredPipeline& p);

// opt_level 1: what a good Halide programmer writes by hand: elementwise chains inlined into one
// loop nest, innermost dimension vectorized at the target's natural width, outer dimensions
// parallel, reductions and matmul computed at root with tiled, vectorized, parallel loops.
std::string schedule_builtin(backend::LoweredPipeline& p);

// opt_level 2 with an autoscheduler: Halide's Adams2019, Li2018 or Mullapudi2016, loaded as a
// plugin, with estimates from the actual shapes and machine parameters of this machine. Returns
// nullopt when the autoscheduler fails or is not tried, with the reason in *why; the caller then
// falls back to the built-in schedule on a freshly lowered pipeline. Adams2019 is not tried on
// pipelines of more than HJIT_ADAMS2019_MAX_FUNCS (default 20) Funcs: measured here, its search
// takes 2 s on softmax (7 Funcs), 6 s on layer norm (13) and 9 minutes on a ResNet block (29),
// and gigabytes of memory on a training step.
inline constexpr int kAdams2019MaxFuncs = 20;
std::optional<std::string> schedule_auto(backend::LoweredPipeline& p, const std::string& autoscheduler, std::string* why);

bool is_autoscheduler(const std::string& name);

// Threads compiled code runs on: OpenMP's (Halide's parallel loops are routed to OpenMP, see
// halide_backend/executable.cpp), so OMP_NUM_THREADS sets it.
int halide_threads();

}  // namespace hjit::schedules
