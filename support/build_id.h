// What identifies this build of libhjit: the GNU build-id the linker wrote into it (a hash of its
// contents), so that a rebuilt library never loads code an older one compiled.
#pragma once
#include <string>

namespace hjit {

std::string library_build_id();

}  // namespace hjit
