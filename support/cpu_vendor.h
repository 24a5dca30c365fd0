// Who made the CPU this process runs on, read once from CPUID. A built-in schedule picks a memory
// access pattern by it where the two vendors' prefetchers want opposite ones (measured, not
// guessed: see its use), so the compile cache's key names it too.
#pragma once
#include <string>

namespace hjit {

enum class CpuVendor { Intel, Amd, Other };

CpuVendor cpu_vendor();
std::string to_string(CpuVendor v);  // "intel", "amd", "other"

}  // namespace hjit
