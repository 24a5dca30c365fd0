// Little-endian binary encoding for hjit's files (disk-cache entries, saved modules): a writer, a
// bounds-checked reader that throws ValueError on truncated input, and the file header every such
// file starts with (magic, format version, payload size, checksum of the payload).
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include <hjit/error.h>

namespace hjit {

class BinaryWriter {
 public:
  void u8(uint8_t v) { s_.push_back(char(v)); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(uint8_t(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) u8(uint8_t(v >> (8 * i)));
  }
  void i32(int32_t v) { u32(uint32_t(v)); }
  void i64(int64_t v) { u64(uint64_t(v)); }
  void bytes(const void* p, size_t n) {
    u64(n);
    s_.append(static_cast<const char*>(p), n);
  }
  void str(const std::string& s) { bytes(s.data(), s.size()); }
  std::string& out() { return s_; }

 private:
  std::string s_;
};

class BinaryReader {
 public:
  explicit BinaryReader(std::string_view s, size_t at = 0) : s_(s), at_(at) {}
  uint8_t u8() {
    need(1);
    return uint8_t(s_[at_++]);
  }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(u8()) << (8 * i);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(u8()) << (8 * i);
    return v;
  }
  int32_t i32() { return int32_t(u32()); }
  int64_t i64() { return int64_t(u64()); }
  std::string str() { return std::string(view()); }
  // The next string, without copying it (valid while the reader's bytes are).
  std::string_view view() {
    const uint64_t n = u64();
    need(n);
    std::string_view v = s_.substr(at_, size_t(n));
    at_ += size_t(n);
    return v;
  }
  // A count that must not exceed `limit` (a corrupt count must not allocate gigabytes).
  size_t count(size_t limit) {
    const uint64_t n = u64();
    if (n > limit) throw ValueError("a count of " + std::to_string(n) + " is out of range");
    return size_t(n);
  }
  bool done() const { return at_ == s_.size(); }

 private:
  void need(uint64_t n) {
    if (n > s_.size() - at_) throw ValueError("it is truncated");
  }
  std::string_view s_;
  size_t at_;
};

// 32 hex digits of a 128-bit hash of the bytes (hash128).
std::string hash_hex(std::string_view bytes);

// magic (8 bytes) | format version (u32) | payload size (u64) | hash_hex(payload) (32) | payload
std::string wrap_payload(const char (&magic)[9], uint32_t version, const std::string& payload);
// The payload, once the header checks: throws ValueError saying which check failed (`what` names
// the kind of file: "an hjit cache entry", "a saved hjit module").
// The payload is a view into `file`.
// The whole of a file, read at once (nullopt when it cannot be opened or read); a stream that
// cannot seek (a pipe) is read as it comes. A character iterator took 150 ms over a 100 MB model.
std::optional<std::string> read_file_bytes(const std::string& path);

std::string_view unwrap_payload(std::string_view file, const char (&magic)[9], uint32_t version, const std::string& what);

}  // namespace hjit
