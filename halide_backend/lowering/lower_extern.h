// Extern stages in a lowered pipeline: the Funcs that call the libraries of extern_stages.h (a
// matmul, a convolution with the element-wise work oneDNN does after it, a convolution's weight
// gradient), with the operands they read.
#pragma once
#include <map>
#include <optional>
#include <set>

#include "halide_backend/providers/extern_stages.h"
#include "halide_backend/lowering/lower_ctx.h"

namespace hjit::backend {

// The convolution chains that externs (node ids a schedule names) end, checked: each must be a
// library-computable matmul or weight gradient (no chain), or the last node of a convolution
// chain. ValueError otherwise.
std::map<int, std::optional<ConvChain>> extern_chains(const Graph& g, const std::set<int>& externs);

// Defines s.func, for node n, as the library call; `chain` for a convolution, `layout` its
// ConvLayout bits.
void lower_extern(LowerCtx& ctx, Stage& s, const Node& n, const std::optional<ConvChain>& chain, int layout);

}  // namespace hjit::backend
