#include "support/log.h"

#include <cstdlib>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace hjit {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    // Not registered with spdlog: an application may have its own logger called "hjit".
    auto l = std::make_shared<spdlog::logger>("hjit", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_pattern("[hjit %L %T.%e] %v");
    l->set_level(spdlog::level::warn);
    if (const char* env = std::getenv("HJIT_LOG")) l->set_level(spdlog::level::from_str(env));
    return l;
  }();
  return *logger;
}

}  // namespace hjit
