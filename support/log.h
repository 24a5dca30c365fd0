// Logging through spdlog, kept out of the public headers. Quiet by default (warnings and errors);
// HJIT_LOG=debug (or trace, info, warn, error, off) sets the level when the library loads.
#pragma once
#include <chrono>
#include <string>

#include <spdlog/spdlog.h>

namespace hjit {

spdlog::logger& log();

// A level's name as HJIT_LOG spells it; false for anything else (spdlog would read it as "off").
bool parse_log_level(const std::string& name, spdlog::level::level_enum* level);

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  double ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace hjit
