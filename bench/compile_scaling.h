// hjit-bench's compile-time table: how long graphs of growing size take from the first call to
// compiled code (trace, optimize, compile), cold, in a fresh process with an empty compile cache.
#pragma once
#include <string>

namespace bench {

// Prints the table, measured in a child process (`self --compile-scaling-child`).
void compile_scaling_rows(const std::string& self, bool quick);
// The child's side: compiles each graph and prints its row.
int compile_scaling_child(bool quick);

}  // namespace bench
