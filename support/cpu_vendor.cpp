#include "support/cpu_vendor.h"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace hjit {
namespace {

CpuVendor read_vendor() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return CpuVendor::Other;
  // The twelve bytes are EBX, EDX, ECX in that order.
  char id[13] = {};
  std::memcpy(id, &b, 4), std::memcpy(id + 4, &d, 4), std::memcpy(id + 8, &c, 4);
  if (std::strcmp(id, "GenuineIntel") == 0) return CpuVendor::Intel;
  if (std::strcmp(id, "AuthenticAMD") == 0) return CpuVendor::Amd;
#endif
  return CpuVendor::Other;
}

}  // namespace

CpuVendor cpu_vendor() {
  static const CpuVendor v = read_vendor();
  return v;
}

std::string to_string(CpuVendor v) {
  switch (v) {
    case CpuVendor::Intel: return "intel";
    case CpuVendor::Amd: return "amd";
    case CpuVendor::Other: break;
  }
  return "other";
}

}  // namespace hjit
