#pragma once
#include <hjit/graph.h>

namespace hjit {

// Algebraic simplification, one forward sweep:
//   x*1, 1*x, x/1, x+0, 0+x, x-0 -> x (when x already has the result's type);  neg(neg x) -> x;
//   transpose(transpose x) -> one transpose (or x);  reshape(reshape x) -> one reshape;
//   identity reshape / transpose / broadcast_to / convert / slice / pad / one-operand concat -> x;
//   a value with no elements -> an empty full;  a sum or matmul over no elements -> full 0;
//   a pad of nothing -> a full of the pad value;  concat drops operands with no elements.
// Leaves dead nodes for DCE. Precondition: a verified graph.
Graph simplify(const Graph& g);

}  // namespace hjit
