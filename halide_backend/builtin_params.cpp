#include "halide_backend/builtin_params.h"

#include <sstream>

#include <hjit/error.h>

#include "support/cpu_vendor.h"

namespace hjit::backend {
namespace {

struct Knob {
  const char* key;
  int BuiltinParams::*field;
  int lo, hi;
};
const Knob kKnobs[] = {{"cols", &BuiltinParams::cols, 0, 8}, {"rows", &BuiltinParams::rows, 0, 32},
                       {"vec", &BuiltinParams::vec, 0, 8},   {"tasks", &BuiltinParams::tasks, 1, 256},
                       {"grain", &BuiltinParams::grain, 0, 30}, {"runs", &BuiltinParams::runs, 0, 8},
                       {"ahead", &BuiltinParams::ahead, -1, 64}};

struct Switch {
  const char* key;
  bool BuiltinParams::*field;
};
const Switch kSwitches[] = {{"store_expensive", &BuiltinParams::store_expensive},
                            {"extern_gemm", &BuiltinParams::extern_gemm},
                            {"extern_conv", &BuiltinParams::extern_conv},
                            {"extern_int_gemm", &BuiltinParams::extern_int_gemm},
                            {"extern_bf16_gemm", &BuiltinParams::extern_bf16_gemm},
                            {"extern_int_conv", &BuiltinParams::extern_int_conv}};

}  // namespace

int BuiltinParams::row_runs() const { return runs > 0 ? runs : cpu_vendor() == CpuVendor::Amd ? 1 : 4; }

int BuiltinParams::prefetch_bytes() const { return 1024 * (ahead >= 0 ? ahead : cpu_vendor() == CpuVendor::Amd ? 2 : 0); }

bool BuiltinParams::is_default() const { return *this == BuiltinParams{}; }

std::string BuiltinParams::str() const {
  const BuiltinParams d;
  std::string s;
  auto word = [&](const std::string& w) { s += (s.empty() ? "" : " ") + w; };
  for (const Knob& k : kKnobs)
    if (this->*k.field != d.*k.field) word(std::string(k.key) + "=" + std::to_string(this->*k.field));
  for (const Switch& k : kSwitches)
    if (this->*k.field != d.*k.field) word(std::string(k.key) + "=" + (this->*k.field ? "1" : "0"));
  return s;
}

BuiltinParams BuiltinParams::parse(const std::string& words) {
  BuiltinParams p;
  std::istringstream in(words);
  for (std::string w; in >> w;) {
    const size_t eq = w.find('=');
    const std::string key = w.substr(0, eq);
    int value = 0;
    try {
      size_t used = 0;
      value = std::stoi(w.substr(eq == std::string::npos ? w.size() : eq + 1), &used);
      if (eq + 1 + used != w.size()) throw std::invalid_argument(w);
    } catch (const std::exception&) {
      throw ValueError("built-in schedule parameters: '" + w + "' is not key=integer");
    }
    bool known = false;
    for (const Knob& k : kKnobs)
      if (key == k.key) {
        if (value < k.lo || value > k.hi)
          throw ValueError("built-in schedule parameters: " + key + " must be in [" + std::to_string(k.lo) + ", " +
                           std::to_string(k.hi) + "], got " + std::to_string(value));
        p.*k.field = value, known = true;
      }
    for (const Switch& k : kSwitches)
      if (key == k.key) p.*k.field = value != 0, known = true;
    if (!known) {
      std::string names;
      for (const Knob& k : kKnobs) names += std::string(" ") + k.key;
      for (const Switch& k : kSwitches) names += std::string(" ") + k.key;
      throw ValueError("built-in schedule parameters: unknown '" + key + "'; known:" + names);
    }
  }
  return p;
}

}  // namespace hjit::backend
