// What a compiled pipeline assumes of its inputs: each input's dtype and rank, and each extent as
// an affine form of the dynamic sizes' symbols (a constant where the size is fixed). Tracing proved
// these relations (dynamic dimensions of equal size became one symbol: a contraction, a broadcast,
// an elementwise pair), and the pipeline's loops rely on them: a call that breaks one would read
// past a buffer or compute wrong values. So every call is checked against them before native
// code runs, from the graph and its symbolic sizes alone, which is what a cache entry, a saved
// module and a loaded model keep.
#pragma once
#include <string>
#include <vector>

#include <hjit/graph.h>

#include "graph/symbolic_sizes.h"

namespace hjit {

class InputSizes {
 public:
  InputSizes() = default;
  InputSizes(const Graph& g, const SymbolicSizes* dynamic);

  size_t size() const { return types_.size(); }
  // Whether input i of a call may have type t, the symbols read from their sources.
  bool agrees(size_t i, const TensorType& t, const std::vector<int64_t>& symbols) const {
    if (extents_.empty()) return t == types_[i];
    if (t.dtype != types_[i].dtype || t.shape.size() != extents_[i].size()) return false;
    for (size_t d = 0; d < extents_[i].size(); ++d)
      if (t.shape[d] != extents_[i][d].at(symbols)) return false;
    return true;
  }

  // For a call whose input types do not all agree: the error the same ops raise when run eagerly at
  // these types (the graph's own shape inference, at the call's symbols), thrown; or, where every
  // op accepts them (dimensions that were equal when traced only by chance), a ShapeError naming
  // the relation the pipeline was compiled with. `who` starts the message.
  [[noreturn]] void raise(const Graph& g, const SymbolicSizes* dynamic, const std::vector<TensorType>& types,
                          const std::vector<int64_t>& symbols, const std::string& who) const;

 private:
  std::vector<TensorType> types_;  // the graph's inputs, at the traced sizes
  // Per input, per dimension, its size as an affine form of the symbols; empty where every size is
  // fixed (the types are then compared whole: the cost of a cached call's check).
  std::vector<std::vector<Affine>> extents_;
};

}  // namespace hjit
