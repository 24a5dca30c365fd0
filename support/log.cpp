#include "support/log.h"

#include <cstdlib>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>

#include <hjit/error.h>

#include "support/settings.h"

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
    // A bad level is a warning, not an error: every call that logs would otherwise raise it.
    try {
      spdlog::level::level_enum level{};
      if (parse_log_level(setting::choice(setting::Id::Log), &level)) l->set_level(level);
    } catch (const Error& e) {
      l->warn("{}; keeping warn", e.what());
    }
    return l;
  }();
  return *logger;
}

}  // namespace hjit
