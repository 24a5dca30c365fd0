#include "bench/ort_peer.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "support/settings.h"

namespace bench {

OrtTimes ort_times(const std::string& folder, int threads) {
  const std::string script = hjit::setting::text(hjit::setting::Id::BenchOrt).value_or(
      (std::filesystem::path(HJIT_SOURCE_DIR).parent_path() / "shared" / "peers" / "ort_time.js").string());
  if (script.empty() || !std::filesystem::exists(script)) return {};
  const std::vector<double> v = numbers_after("ORT_SPIN=0 node '" + script + "' '" + folder + "' " + std::to_string(threads) + " 40 2>/dev/null",
                                              {"\"load_ms\":", "\"first_ms\":", "\"median_ms\":"});
  auto ms = [](double x) { return x > 0 ? x : -1; };
  return {ms(v[0]), ms(v[1]), ms(v[2])};
}

double ort_ms(const std::string& folder, int threads) { return ort_times(folder, threads).median_ms; }

std::vector<double> numbers_after(const std::string& command, const std::vector<std::string>& keys) {
  std::vector<double> values(keys.size(), -1);
  FILE* p = popen(command.c_str(), "r");
  if (!p) return values;
  char line[8192];
  while (std::fgets(line, sizeof line, p))
    for (size_t k = 0; k < keys.size(); ++k)
      if (const char* at = std::strstr(line, keys[k].c_str())) values[k] = std::atof(at + keys[k].size());
  pclose(p);
  return values;
}

double number_after(const std::string& command, const std::string& key) { return numbers_after(command, {key})[0]; }

}  // namespace bench
