#pragma once
#include <string>

#include <hjit/graph.h>

namespace hjit {

// Checks the invariants every pass relies on: operands defined before use, every node's type equal
// to what the op table infers, parameters numbered in call order, constants sized to their type,
// outputs and updates naming existing values, update targets being captured parameters of the
// same type. Throws InternalError("graph verification failed after <after>: ...").
void verify(const Graph& g, const std::string& after);

}  // namespace hjit
