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

  size_t size() const { return inputs_.size(); }
  // Whether input i of a call may have type t, the symbols read from their sources.
  bool agrees(size_t i, const TensorType& t, const std::vector<int64_t>& symbols) const {
    if (fixed_) return t == fixed_types_[i];
    const Expected& e = inputs_[i];
    if (t.dtype != e.dtype || t.shape.size() != e.extents.size()) return false;
    for (size_t d = 0; d < e.extents.size(); ++d)
      if (t.shape[d] != e.extents[d].at(symbols)) return false;
    return true;
  }

  // For a call whose input types do not all agree: the error the same ops raise when run eagerly at
  // these types (the graph's own shape inference, at the call's symbols), thrown; or, where every
  // op accepts them (dimensions that were equal when traced only by chance), a ShapeError naming
  // the relation the pipeline was compiled with. `who` starts the message.
  [[noreturn]] void raise(const Graph& g, const SymbolicSizes* dynamic, const std::vector<TensorType>& types,
                          const std::vector<int64_t>& symbols, const std::string& who) const;

 private:
  struct Expected {
    DType dtype = DType::F32;
    std::vector<Affine> extents;
  };
  std::vector<Expected> inputs_;
  // Every extent fixed (no symbol): the types compared whole, the cost of a cached call's check.
  bool fixed_ = true;
  std::vector<TensorType> fixed_types_;
  std::vector<SymbolicSizes::Source> sources_;
};

}  // namespace hjit
