// Pieces of the text format shared by the printer and the parser.
#pragma once
#include <string>

#include <hjit/graph.h>

namespace hjit {

// The shortest text that reads back as v in `dtype` (f64 at double precision, else float);
// always reads back as a floating point number.
std::string format_number(double v, DType dtype);
std::string value_name(int index);      // a, b, ..., z, ba, bb, ...
bool is_inlined_literal(const Node& n);  // 0-d fulls print inline as "1.5:f32"

}  // namespace hjit
