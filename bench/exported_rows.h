// hjit-bench --exported: each workload's exported library (export_library for this machine, its
// parameters as arguments) against the jitted function it writes out, in one process, timed
// alternately on the same inputs; and whether every result is the same bits.
#pragma once
#include <string>
#include <vector>

namespace bench {

int exported_rows(const std::vector<std::string>& workloads, bool quick);

}  // namespace bench
