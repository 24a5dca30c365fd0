// The data caches of the CPU this process runs on, read once: the built-in schedules size their
// blocks from them, and since a schedule then depends on them, so does the compile cache's key.
#pragma once
#include <cstdint>
#include <string>

namespace hjit {

struct CpuCaches {
  int64_t l1d = 0, l2 = 0, l3 = 0;  // bytes per core (L3: per cache, shared); 0 where unknown
  std::string str() const;          // "l1d=32K l2=512K l3=32768K"
};

// From Linux's /sys/devices/system/cpu/cpu0/cache (what lscpu reads), else from sysconf, else the
// sizes of a core of the last ten years (32 KiB, 512 KiB, 8 MiB) where neither knows.
const CpuCaches& cpu_caches();

// A size as sysfs writes it: "48K", "1024K", "32M", or bytes. -1 for anything else.
int64_t parse_cache_size(const std::string& text);

}  // namespace hjit
