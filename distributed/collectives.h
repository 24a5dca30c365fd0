// Runs one collective node on this process's group: the eager kernels and the compiled graphs'
// host steps both come here, so the two agree by construction. Before exchanging data every rank
// checks that all ranks reached the same collective with the same shape and dtype (a typed error
// naming the op and each rank's operand otherwise, on every rank, rather than a hang or garbage).
#pragma once
#include <memory>

#include <hjit/graph.h>

#include "distributed/communicator.h"

namespace hjit::distributed {

// `in` / `in_type`: the operand (null for recv); `out`: the result's storage (send: none).
void run_collective(OpKind op, const Attrs& attrs, const TensorType* in_type, const void* in, const TensorType& out_type,
                    void* out);

// The same, started: an all_reduce exchanges in the background until wait() (the ranks' agreement
// is checked before it returns); the others are done when it returns. in and out must stay alive
// until wait() returns.
std::unique_ptr<Pending> start_collective(OpKind op, const Attrs& attrs, const TensorType* in_type, const void* in,
                                          const TensorType& out_type, void* out);

// A description of a collective node for logs and plans: "all_reduce(mean) f32[4,3]".
std::string describe_collective(OpKind op, const Attrs& attrs, const TensorType& operand);

}  // namespace hjit::distributed
