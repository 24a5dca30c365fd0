#include "support/binary_io.h"

#include <cstdio>
#include <fstream>
#include <iterator>

#include "support/hash.h"

namespace hjit {
namespace {
constexpr size_t kHeaderBytes = 8 + 4 + 8 + 32;
}  // namespace

std::string hash_hex(std::string_view bytes) {
  const Hash128 h = hash128(bytes.data(), bytes.size());
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)h.hi, (unsigned long long)h.lo);
  return buf;
}

std::string wrap_payload(const char (&magic)[9], uint32_t version, const std::string& payload) {
  BinaryWriter h;
  h.out().append(magic, 8);
  h.u32(version);
  h.u64(payload.size());
  h.out() += hash_hex(payload);
  return h.out() + payload;
}

std::string_view unwrap_payload(std::string_view file, const char (&magic)[9], uint32_t version, const std::string& what) {
  if (file.size() < kHeaderBytes || file.compare(0, 8, magic, 8) != 0) throw ValueError("it is not " + what);
  BinaryReader header(file, 8);
  const uint32_t v = header.u32();
  if (v != version)
    throw ValueError("it is " + what + " of format version " + std::to_string(v) + "; this hjit reads version " +
                     std::to_string(version));
  if (header.u64() != file.size() - kHeaderBytes) throw ValueError("it is truncated or has bytes after its end");
  if (file.compare(8 + 4 + 8, 32, hash_hex(file.substr(kHeaderBytes))) != 0)
    throw ValueError("its checksum does not match (it is corrupt)");
  return file.substr(kHeaderBytes);
}

std::optional<std::string> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) {  // not seekable
    in.clear();
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) return std::nullopt;
    return bytes;
  }
  in.seekg(0, std::ios::beg);
  std::string bytes(size_t(size), '\0');
  if (size > 0 && !in.read(bytes.data(), size)) return std::nullopt;
  return bytes;
}

}  // namespace hjit
