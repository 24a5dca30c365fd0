#include "bench/ort_peer.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "support/settings.h"

namespace bench {

double ort_ms(const std::string& folder, int threads) {
  const std::string script = hjit::setting::text(hjit::setting::Id::BenchOrt).value_or(
      (std::filesystem::path(HJIT_SOURCE_DIR).parent_path() / "shared" / "peers" / "ort_time.js").string());
  if (script.empty() || !std::filesystem::exists(script)) return -1;
  const double ms = number_after("ORT_SPIN=0 node '" + script + "' '" + folder + "' " + std::to_string(threads) + " 40 2>/dev/null",
                                  "\"median_ms\":");
  return ms > 0 ? ms : -1;
}

double number_after(const std::string& command, const std::string& key) {
  FILE* p = popen(command.c_str(), "r");
  if (!p) return -1;
  char line[8192];
  double value = -1;
  while (std::fgets(line, sizeof line, p))
    if (const char* at = std::strstr(line, key.c_str())) value = std::atof(at + key.size());
  pclose(p);
  return value;
}

}  // namespace bench
