#include "halide_backend/runtime/linker.h"

#include <unistd.h>

#include <optional>

#include "support/child_process.h"
#include "support/settings.h"

namespace hjit::backend {

// ld itself (starting the compiler driver only to run ld costs more than linking).
const std::string& linker_path() {
  static const std::string ld = [] {
    // HJIT_LINKER names another ld (or, naming nothing runnable, stands for a machine without one).
    if (const std::optional<std::string> env = setting::raw(setting::Id::Linker))
      return access(env->c_str(), X_OK) == 0 ? *env : std::string();
    return find_program("ld");
  }();
  return ld;
}

bool can_link() { return !linker_path().empty(); }

}  // namespace hjit::backend
