#include "tuning/retrain.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "support/log.h"
#include "support/settings.h"

#ifndef HJIT_HALIDE_PLUGIN_DIR
#define HJIT_HALIDE_PLUGIN_DIR "/usr/lib/x86_64-linux-gnu/halide14"
#endif

namespace hjit::tuning {
namespace {

namespace fs = std::filesystem;

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string tool(const std::string& name) {
  const std::string dir = setting::raw(setting::Id::HalidePluginDir).value_or(HJIT_HALIDE_PLUGIN_DIR);
  return dir + "/" + name;
}

int run(const std::string& cmd) {
  log().debug("tuning: {}", cmd);
  const int rc = std::system(cmd.c_str());
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

uint32_t u32_at(const std::string& s, size_t at) {
  uint32_t v = 0;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}

// Halide's own weights, as retrain_cost_model needs them to start from: Debian ships them only
// inside the Adams2019 plugin (baseline.weights, embedded). Found by their layout (Adams2019's
// Weights.cpp): 'hwf1', two feature versions, 6 buffers, each a dimension count, its extents and
// its floats. "" when the plugin does not hold them.
std::string baseline_weights() {
  const std::string so = read_all(tool("libautoschedule_adams2019.so"));
  const std::string signature("1fwh", 4);  // 0x68776631, little-endian
  for (size_t at = so.find(signature); at != std::string::npos; at = so.find(signature, at + 1)) {
    size_t p = at + 12;
    if (p + 4 > so.size() || u32_at(so, p) != 6) continue;
    p += 4;
    bool ok = true;
    for (int b = 0; b < 6 && ok; ++b) {
      if (p + 4 > so.size()) { ok = false; break; }
      const uint32_t dims = u32_at(so, p);
      p += 4;
      if (dims < 1 || dims > 4 || p + 4 * dims > so.size()) { ok = false; break; }
      uint64_t count = 1;
      for (uint32_t d = 0; d < dims; ++d, p += 4) count *= u32_at(so, p);
      if (count == 0 || count > (1u << 24) || p + 4 * count > so.size()) { ok = false; break; }
      p += size_t(4 * count);
    }
    if (ok) return so.substr(at, p - at);
  }
  return "";
}

}  // namespace

CostModelFiles::CostModelFiles(const std::string& db_path) : dir(db_path + ".adams2019") {}

namespace {

// n of <dir>/retrained-<n>.weights, the latest; 0 when there is none.
int latest_weights(const std::string& dir) {
  int latest = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    int n = 0;
    if (std::sscanf(name.c_str(), "retrained-%d.weights", &n) == 1 && name == "retrained-" + std::to_string(n) + ".weights")
      latest = std::max(latest, n);
  }
  return latest;
}

std::string weights_file(const std::string& dir, int n) { return dir + "/retrained-" + std::to_string(n) + ".weights"; }

}  // namespace

std::string CostModelFiles::weights() const {
  const int n = latest_weights(dir);
  return n > 0 ? weights_file(dir, n) : "";
}

std::string CostModelFiles::featurization(long long pipeline, long long candidate) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  return dir + "/p" + std::to_string(pipeline) + "_c" + std::to_string(candidate) + ".featurization";
}


int CostModelFiles::samples() const {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".sample") ++n;
  return n;
}

bool add_sample(const CostModelFiles& f, const std::string& featurization, double ms, long long pipeline, long long candidate) {
  struct stat st {};
  if (stat(featurization.c_str(), &st) != 0 || st.st_size == 0) return false;
  std::string sample = featurization.substr(0, featurization.size() - std::string(".featurization").size()) + ".sample";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.9f", ms / 1000);
  const int rc = run(shell_quoted(tool("featurization_to_sample")) + " " + shell_quoted(featurization) + " " + seconds + " " +
                     std::to_string(pipeline) + " " + std::to_string(candidate) + " " + shell_quoted(sample) + " >/dev/null 2>&1");
  std::remove(featurization.c_str());
  return rc == 0;
}

std::string retrain(const CostModelFiles& f, int epochs, double timeout_s) {
  const int n = f.samples();
  if (n < 4) return "not retrained: " + std::to_string(n) + " Adams2019 samples (4 needed)";
  const std::string out = f.dir + "/retrained.new.weights";  // the tool writes a directory unless it ends so
  std::string cmd = "find " + shell_quoted(f.dir) + " -name '*.sample' | timeout " + std::to_string(int(timeout_s)) + " " +
                    shell_quoted(tool("retrain_cost_model")) + " --epochs=" + std::to_string(epochs) +
                    " --rates=0.0001 --num_cores=2 --weights_out=" + shell_quoted(out) + " --best_benchmark=" +
                    shell_quoted(f.dir + "/best.benchmark.txt") + " --best_schedule=" + shell_quoted(f.dir + "/best.schedule.h");
  std::string initial = f.weights();
  if (initial.empty()) {
    initial = f.dir + "/baseline.weights";
    const std::string w = baseline_weights();
    if (w.empty()) return "not retrained: Halide's baseline weights were not found in the Adams2019 plugin";
    std::ofstream(initial, std::ios::binary) << w;
  }
  cmd += " --initial_weights=" + shell_quoted(initial);
  cmd += " > " + shell_quoted(f.dir + "/retrain.log") + " 2>&1";
  Timer t;
  const int rc = run(cmd);
  if (rc != 0 || access(out.c_str(), R_OK) != 0)
    return "not retrained: retrain_cost_model failed (exit " + std::to_string(rc) + "; see " + f.dir + "/retrain.log)";
  // A model fitted to samples that do not differ (one schedule, measured again) has a NaN loss:
  // its weights would spoil every later search.
  const std::string log_text = read_all(f.dir + "/retrain.log");
  const size_t loss = log_text.rfind("Loss:");
  const double last_loss = loss == std::string::npos ? NAN : std::strtod(log_text.c_str() + loss + 5, nullptr);
  if (!std::isfinite(last_loss)) {
    std::remove(out.c_str());
    return "not retrained: the " + std::to_string(n) + " samples do not differ enough to fit (see " + f.dir + "/retrain.log)";
  }
  const std::string written = weights_file(f.dir, latest_weights(f.dir) + 1);
  std::rename(out.c_str(), written.c_str());
  char buf[160];
  std::snprintf(buf, sizeof buf, "Adams2019 cost model retrained on %d samples (%d epochs, %.1f s, loss %.3g): %s", n, epochs,
                t.ms() / 1000, last_loss, written.c_str());
  return buf;
}

}  // namespace hjit::tuning
