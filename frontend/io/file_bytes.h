// Whole files in and out, for hjit's file formats: read at once, written to a temporary file and
// renamed (so a crash while writing leaves the previous file whole, and a reader sees the old
// file or the new one, never a mix).
#pragma once
#include <string>

namespace hjit::io {

// ValueError "hjit: cannot open <what> '<path>'" when it cannot be read.
std::string read_whole_file(const std::string& path, const std::string& what);
// ValueError "hjit: cannot write <what> '<path>': <the system's reason>" when it cannot be written.
void write_file_atomically(const std::string& path, const std::string& bytes, const std::string& what);

}  // namespace hjit::io
