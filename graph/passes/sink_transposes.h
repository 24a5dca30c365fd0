#pragma once
#include <hjit/graph.h>

namespace hjit {

// A transpose that moves the innermost dimension, read by element-wise work that ends in a
// conversion to one-byte integers (a quantization: QuantizeLinear after a transpose in a QDQ
// model), moves past that work: the arithmetic then runs along the rows it reads, and the
// transpose moves the bytes it makes. Node by node, where the result's element is no wider than
// the transposed operands' together and every other operand holds one element (an operand read
// elsewhere keeps its transpose there too). Leaves dead nodes for DCE. Precondition: a verified graph.
Graph sink_transposes(const Graph& g);

}  // namespace hjit
