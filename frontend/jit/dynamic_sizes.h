// JitOptions::dynamic_dims: one pipeline for every size of the marked dimensions. Such a version
// is held under a key that leaves those sizes out; its graph's sizes are expressions of them,
// found by tracing again at other sizes. Where one pipeline cannot serve every size (C++ that
// branches on a size, an op compiled for fixed sizes only, a size below 2), versions are built per
// size as without dynamic_dims, and the reason is kept so that the fit is not tried again.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "frontend/jit/version.h"
#include "frontend/tracing/signature.h"

namespace hjit::detail {

class DynamicSizes {
 public:
  explicit DynamicSizes(const DynamicDims& dims) : dims_(dims) {}
  // Null when the function has no dynamic dimensions.
  const DynamicDims* dims() const { return dims_.empty() ? nullptr : &dims_; }

  // Traces the function at these sizes (and optimizes the graph), for fit().
  using TraceAt = std::function<Graph(const CallArgs& args)>;
  // The sizes of `base` (traced from args) that vary with the marked dimensions, found by tracing
  // again with them changed: one symbol per distinct size among them (dimensions of equal size
  // move together), each changed alone, then all together as a check. Null, with the reason in
  // *why, where one pipeline cannot serve every size; when that holds for every size (not only
  // these), the reason is kept and every later version is built per size.
  std::shared_ptr<const SymbolicSizes> fit(const CallArgs& args, const Graph& base, const TraceAt& trace_at, std::string* why);

  // The same for any marking of the dynamic dimensions (tensor i of the call, dimension d of its
  // `rank`): a Module's ModuleOptions::dynamic_dims name tensors, not arguments. *permanent says
  // whether the reason holds for every size (not only these).
  using Marked = std::function<bool(const CallArgs& args, size_t i, int d, int rank)>;
  static std::shared_ptr<const SymbolicSizes> fit_marked(const CallArgs& args, const Graph& base, const TraceAt& trace_at,
                                                         const Marked& marked, std::string* why, bool* permanent);
  // Why one pipeline cannot serve every size of this function ("" while it may).
  std::string impossible() const;
  void set_impossible(const std::string& why);

 private:
  const DynamicDims dims_;
  mutable std::mutex mu_;
  std::string impossible_;  // guarded by mu_
};

// A call's arguments with some sizes changed, for tracing at them: zeros where a tensor's shape
// changes, the call's own tensors elsewhere. size_of(i, d, size) is dimension d of tensor i.
struct ResizedArgs {
  std::vector<Tensor> holders;  // what args points into
  CallArgs args;
};
std::unique_ptr<ResizedArgs> resized_args(const CallArgs& args, const std::function<int64_t(size_t i, int d, int64_t size)>& size_of);

// Whether v, found under the key of a call, serves the call's sizes: a version of fixed sizes
// always does (its key has them), a pipeline for every size from its smallest size up, where the
// call's sizes keep the relations it was traced with (graph/input_sizes.h).
bool serves(const Version& v, const CallArgs& args);

}  // namespace hjit::detail
