// Schedules of a reduction's accumulator, shared by the unfused and the built-in schedules.
#pragma once
#include <string>

#include "halide_backend/lowering/lowered.h"
#include "schedules/recorder.h"

namespace hjit::schedules {

// Vectorizes the accumulator of a reduction stage: along its innermost output dimension when that
// dimension is kept (the reduction loop goes outside it), or across lanes of the reduced innermost
// axis with rfactor when that axis is reduced. With `parallel`, outer output dimensions run in
// parallel (for accumulators computed at root).
std::string schedule_reduction(const backend::LoweredPipeline& p, const backend::Stage& s, bool parallel, Schedule& out);

// Helpers a lowering made (padded inputs, ...) computed at root, vectorized and parallel.
std::string schedule_helpers_at_root(const backend::LoweredPipeline& p, const backend::Stage& s, Schedule& out);
// A depthwise convolution's rows in fours (int_depthwise2d), computed per tile of `nest` at loop
// `tile`: each channel vector of the four rows stored as one interleaved vector. Its input is
// copied channels innermost first unless `input_channels_innermost`. Empty without one.
std::string schedule_rows_in_fours(const backend::LoweredPipeline& p, const backend::Stage& s, FuncRef nest, Halide::Var tile,
                                   bool input_channels_innermost, Schedule& out);

}  // namespace hjit::schedules
