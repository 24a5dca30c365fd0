#include "support/cpu_caches.h"

#include <unistd.h>

#include <cctype>
#include <fstream>

namespace hjit {
namespace {

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

CpuCaches from_sysfs() {
  CpuCaches c;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level = read_line(dir + "level"), type = read_line(dir + "type");
    if (level.empty()) break;
    const int64_t size = parse_cache_size(read_line(dir + "size"));
    if (size <= 0 || type == "Instruction") continue;
    if (level == "1") c.l1d = size;
    if (level == "2") c.l2 = size;
    if (level == "3") c.l3 = size;
  }
  return c;
}

int64_t from_sysconf(int name) {
  const long v = sysconf(name);
  return v > 0 ? int64_t(v) : 0;
}

CpuCaches read_caches() {
  CpuCaches c = from_sysfs();
  if (c.l1d == 0) c.l1d = from_sysconf(_SC_LEVEL1_DCACHE_SIZE);
  if (c.l2 == 0) c.l2 = from_sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (c.l3 == 0) c.l3 = from_sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (c.l1d == 0) c.l1d = int64_t(32) << 10;
  if (c.l2 == 0) c.l2 = int64_t(512) << 10;
  if (c.l3 == 0) c.l3 = int64_t(8) << 20;
  return c;
}

}  // namespace

int64_t parse_cache_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 12) return -1;
  const int64_t n = std::stoll(text.substr(0, digits));
  const std::string unit = text.substr(digits);
  if (unit.empty()) return n;
  if (unit == "K") return n << 10;
  if (unit == "M") return n << 20;
  if (unit == "G") return n << 30;
  return -1;
}

std::string CpuCaches::str() const {
  return "l1d=" + std::to_string(l1d >> 10) + "K l2=" + std::to_string(l2 >> 10) + "K l3=" + std::to_string(l3 >> 10) + "K";
}

const CpuCaches& cpu_caches() {
  static const CpuCaches caches = read_caches();
  return caches;
}

}  // namespace hjit
