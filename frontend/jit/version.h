// One compiled version of a jitted function: what a signature (and, in TraceMode::Concrete, the
// values read while tracing it) compiled to, with everything a call needs to run it.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <hjit/jit.h>

#include "frontend/compiled/function.h"
#include "frontend/jit/build_once.h"
#include "frontend/tracing/signature.h"
#include "frontend/tensor/tensor_impl.h"
#include "graph/symbolic_sizes.h"
#include "halide_backend/backend.h"

namespace hjit::detail {

struct Version {
  Signature key;                      // what the cache holds it under
  BuildOnce built;                    // traced and compiled by the caller that made it
  std::atomic<uint64_t> last_used{0}; // the cache's clock at its latest call (least recently used goes first)

  // Filled in by the build (frontend/jit/build_version.h), read-only after.
  // The optimized graph compiled: its outputs are the function's results, then one per guard; its
  // inputs the arguments, then the captured tensors.
  std::shared_ptr<CompiledFunction> fn;
  std::vector<int> tree;  // the result's structure
  std::vector<std::shared_ptr<TensorImpl>> captured;  // inputs after the arguments
  size_t num_args = 0;
  std::vector<Tensor> first_outputs;  // TraceMode::Concrete: the eager results of the tracing call

  // TraceMode::Concrete (frontend/jit/guards.h): the bytes of each value read while tracing,
  // computed as outputs after the function's own; `next` is another version of the signature,
  // traced when these guards failed.
  std::vector<std::vector<uint8_t>> guards;
  std::mutex next_mu;
  std::shared_ptr<Version> next;  // guarded by next_mu
  // Host flags read while tracing it (hjit::traced_flag: a module's train/eval mode) and their
  // values; `other_flags` is a version of the signature traced where they read otherwise
  // (frontend/jit/modes.h).
  std::vector<std::pair<const bool*, bool>> flags;
  std::shared_ptr<Version> other_flags;  // guarded by next_mu

  // dynamic_dims (frontend/jit/dynamic_sizes.h): the graph's sizes as expressions of the marked
  // dimensions when one pipeline serves every size (its key leaves them out); null for a version
  // of fixed sizes.
  std::shared_ptr<const SymbolicSizes> dynamic;
  int64_t min_dynamic_size = 1;  // the pipeline serves sizes from this up (its schedule's splits)
  bool fixed_sizes = false;      // built for this call's sizes only, though dynamic_dims are set
  // Meant for every size but built for the first call's sizes only: the key it moves to when it
  // is published (until then `key` is what the cache holds).
  std::optional<Signature> sizes_key;

  const Graph& graph() const { return fn->graph(); }
  size_t num_outputs() const { return fn->output_types().size() - guards.size(); }
  // The call's tensors as the compiled function's inputs: its arguments, then v's captured tensors.
  CallInputs inputs(const CallArgs& args) const {
    CallInputs in;
    for (size_t i = 0; i < args.count; ++i) in.push(args.tensor(i).impl().get());
    for (const auto& c : captured) in.push(c.get());
    return in;
  }
};

}  // namespace hjit::detail
