// Graph -> Halide Funcs (unscheduled). Each node's lowering is an entry of the per-op table in
// lower_ops.cpp, keyed by the op list like every other per-op table.
#pragma once
#include <set>

#include "halide_backend/lowering/lowered.h"

namespace hjit::backend {

// Throws CompileError for graphs Halide cannot take (a dimension or tensor too large for int32
// indexing). externs: matmul and conv2d nodes computed by library calls (extern_stages.h).
// dynamic: the graph's sizes that vary (lowered as expressions of its inputs' extents); a
// ValueError when an op there cannot take them (the caller then compiles for fixed sizes).
LoweredPipeline lower(const Graph& g, const Halide::Target& target, const std::set<int>& externs = {},
                      const SymbolicSizes* dynamic = nullptr);

// Types: what a dtype is computed in (16-bit floats in f32, bool as UInt(1)) and stored as.
Halide::Type compute_type(DType t);
Halide::Type storage_type(DType t);
// A value between the two: bool is stored as u8, 16-bit floats as their bits.
Halide::Expr to_storage(DType t, const Halide::Expr& computed);
Halide::Expr from_storage(DType t, const Halide::Expr& stored);

}  // namespace hjit::backend
