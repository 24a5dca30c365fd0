#include "frontend/io/file_bytes.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>

#include <unistd.h>

#include "support/binary_io.h"

namespace hjit::io {
namespace {

// What the system said of the last failed call (a missing folder, a full disk), or "".
std::string system_reason() { return errno ? std::string(": ") + std::strerror(errno) : ""; }

}  // namespace

std::string read_whole_file(const std::string& path, const std::string& what) {
  std::optional<std::string> bytes = read_file_bytes(path);
  if (!bytes) throw ValueError("hjit: cannot open " + what + " '" + path + "'");
  return std::move(*bytes);
}

void write_file_atomically(const std::string& path, const std::string& bytes, const std::string& what) {
  // The process id in the temporary name: two processes saving one path do not share it.
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    errno = 0;
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    out.flush();
    if (!out) {
      const std::string why = system_reason();
      std::remove(tmp.c_str());
      throw ValueError("hjit: cannot write " + what + " '" + path + "'" + why);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = system_reason();
    std::remove(tmp.c_str());
    throw ValueError("hjit: cannot write " + what + " '" + path + "'" + why);
  }
}

}  // namespace hjit::io
