// JitOptions::debug_nans (as JAX's debug_nans): every call's results and new values of assign()ed
// tensors are checked for NaNs and infinities; where one holds any, nothing is assigned, the
// function's graph runs again eagerly op by op on the same inputs, and FloatingPointError names the
// first op whose result is not finite.
#pragma once
#include <string>
#include <vector>

#include "frontend/jit/version.h"

namespace hjit::detail {

// Whether t (of a floating dtype) holds a NaN or an infinity; false for other dtypes.
bool has_nonfinite(const Tensor& t);

// Checks what v computed for a call (outputs, then the new values in v.update_buffers); throws
// FloatingPointError naming the op that made the first NaN or infinity, found by replaying v's
// graph eagerly on the call's arguments and v's captured tensors (copies: nothing they hold
// changes).
void check_finite(const std::string& fn, const Version& v, const CallArgs& args, const std::vector<Tensor>& outputs);

}  // namespace hjit::detail
