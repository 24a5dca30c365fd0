#include "halide_backend/lowering/names.h"

#include <cctype>

namespace hjit::backend {

std::string canonical_name(const std::string& name) {
  std::string out;
  out.reserve(name.size());
  for (size_t i = 0; i < name.size();) {
    if (name[i] == '$' && i + 1 < name.size() && std::isdigit(static_cast<unsigned char>(name[i + 1]))) {
      i += 1;
      while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
      continue;
    }
    out += name[i++];
  }
  return out;
}

}  // namespace hjit::backend
