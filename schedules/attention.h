#pragma once
#include <string>

#include "halide_backend/lowering/lowered.h"
#include "schedules/contraction.h"

namespace hjit::schedules {

// Attention's helpers where its output tiles are computed: the scores, row maxima, probabilities
// and row sums of one tile of query rows at `row_tile` of `nest` (never the whole [S, T] matrix),
// the transposed keys once at root.
std::string schedule_attention_helpers(const backend::LoweredPipeline& p, const backend::Stage& s, const FuncRef& nest,
                                       Halide::Var row_tile, const TileSpec& spec, Schedule& out);

}  // namespace hjit::schedules
