// Rebuilds a graph node by node: what every pass needs. Nodes are visited in order; each old node
// is copied (operands remapped) or replaced by an existing new value. Inputs keep their positions,
// so the signature of the graph never changes under a pass.
#pragma once
#include <vector>

#include <hjit/graph.h>

namespace hjit {

class Rewriter {
 public:
  explicit Rewriter(const Graph& old);

  const Graph& old() const { return old_; }
  Graph& out() { return out_; }

  int copy(int old_id);                         // copies the old node with mapped operands
  void map(int old_id, int new_id) { map_[size_t(old_id)] = new_id; }
  int mapped(int old_id) const { return map_[size_t(old_id)]; }
  std::vector<int> mapped_inputs(int old_id) const;

  // Copies every node that has not been mapped yet, in order (for passes that only touch some).
  Graph finish();

 private:
  const Graph& old_;
  Graph out_;
  std::vector<int> map_;
};

// Copies g's nodes into `into`, g's inputs taking the values `args` (g must have no updates);
// returns the values of g's outputs there. How a body becomes part of a bigger graph.
std::vector<int> inline_graph(Graph& into, const Graph& g, const std::vector<int>& args);

// The bytes of a uniform tensor of `type` holding `value`, converted like a C++ cast.
ConstData fill_bytes(const TensorType& type, double value);
// The first element of bytes of dtype `t`, as a double.
double read_scalar(DType t, const void* data);

}  // namespace hjit
