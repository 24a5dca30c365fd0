#include "support/log.h"

#include <cstdlib>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace hjit {

bool parse_log_level(const std::string& name, spdlog::level::level_enum* level) {
  const auto parsed = spdlog::level::from_str(name);
  if (parsed == spdlog::level::off && name != "off") return false;  // spdlog's answer for unknown names
  *level = parsed;
  return true;
}

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    // Not registered with spdlog: an application may have its own logger called "hjit".
    auto l = std::make_shared<spdlog::logger>("hjit", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_pattern("[hjit %L %T.%e] %v");
    l->set_level(spdlog::level::warn);
    if (const char* env = std::getenv("HJIT_LOG")) {
      spdlog::level::level_enum level{};
      if (parse_log_level(env, &level))
        l->set_level(level);
      else
        l->warn("HJIT_LOG={} is not a log level; use trace, debug, info, warn, error, critical or off (keeping warn)", env);
    }
    return l;
  }();
  return *logger;
}

}  // namespace hjit
