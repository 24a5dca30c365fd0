// Pieces of the text format shared by the printer and the parser.
#pragma once
#include <string>

#include <hjit/graph.h>

namespace hjit {

std::string format_number(double v);    // shortest round-trip form; always reads back as a float
std::string value_name(int index);      // a, b, ..., z, ba, bb, ...
bool is_inlined_literal(const Node& n);  // 0-d fulls print inline as "1.5:f32"

}  // namespace hjit
