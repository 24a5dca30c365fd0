// Every way hjit decides a schedule. Each returns a schedule value (halide_backend/
// schedule_value.h) for a lowered, unscheduled pipeline; none touches the pipeline's Funcs.
#pragma once
#include <optional>
#include <string>

#include "halide_backend/lowering/lowered.h"
#include "halide_backend/scheduling/schedule_value.h"
#include "halide_backend/schedule_request.h"

namespace hjit::schedules {

// opt_level 0: every op its own compute_root stage (vectorized and parallel, but nothing fused):
// the unfused baseline the fused schedules are measured against.
backend::Schedule schedule_unfused(const backend::LoweredPipeline& p);

// opt_level 1: what a good Halide programmer writes by hand: elementwise chains inlined into one
// loop nest, innermost dimension vectorized at the target's natural width, outer dimensions
// parallel, reductions and matmul computed at root with tiled, vectorized, parallel loops.
// params: a point of the space tuning runs search; the defaults are the built-in schedule.
backend::Schedule schedule_builtin(const backend::LoweredPipeline& p, const backend::BuiltinParams& params = {});

// On a GPU target (CUDA): every stage a kernel of tiled thread blocks (schedules/gpu.cpp); fused,
// element-wise chains inline into the kernels that read them (opt_level 1), else each op is a
// kernel of its own (opt_level 0).
backend::Schedule schedule_gpu(const backend::LoweredPipeline& p, bool fuse);
std::string gpu_identity();

// What makes the built-in and unfused schedules what they are besides the pipeline and target:
// their version and the thread count they split work for. Part of every cache key.
std::string builtin_identity();
// Whether schedule_builtin (default parameters) stores an element-wise value of op read by `readers`
// nodes: expensive ones read twice or more.
bool builtin_stores_elementwise(OpKind op, size_t readers);
std::string unfused_identity();

// opt_level 2 with an autoscheduler: Halide's Adams2019, Li2018 or Mullapudi2016, loaded as a
// plugin, with estimates from the actual shapes and machine parameters of this machine (or those
// `how.params` sets), run on a scratch lowering of p's graph; its source is read into a schedule
// value. Returns nullopt when the autoscheduler fails or is not tried, with the reason in *why.
// Adams2019 is not tried on pipelines of more than its max_funcs (HJIT_ADAMS2019_MAX_FUNCS,
// default 20, support/settings_list.h) Funcs: measured here, its search takes 2 s on softmax (7
// Funcs), 6 s on layer norm (13) and 9 minutes on a ResNet block (29), and gigabytes of memory on
// a training step.
std::optional<backend::Schedule> schedule_auto(const backend::LoweredPipeline& p, const backend::Auto& how, std::string* why);
// The autoscheduler with its machine parameters and limits: part of every cache key.
std::string autoscheduler_identity(const backend::Auto& how);

// Loads an autoscheduler's plugin into this process (once).
void load_plugin(backend::Autoscheduler a);

// Threads compiled code is scheduled for: the CPUs the process may run on (hjit's pool runs the
// loops, support/thread_pool.h, on as many of them as a call is allowed).
int halide_threads();

// A schedule's notes from a multi-line description.
std::vector<std::string> note_lines(const std::string& text);

}  // namespace hjit::schedules
