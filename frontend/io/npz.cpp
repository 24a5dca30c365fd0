// numpy's .npz: a zip archive whose members are .npy files. Read from the central directory (the
// authority on sizes and offsets; numpy writes zip64 fields and data descriptors), each member
// stored or deflated, its CRC-32 checked. zlib (Debian's zlib1g) inflates, deflates and sums:
// a well-kept implementation of exactly the formats zip uses.
#include <algorithm>
#include <cstring>
#include <set>

#include <zlib.h>

#include <hjit/io.h>

#include "frontend/io/file_bytes.h"

namespace hjit {

namespace {

[[noreturn]] void bad(const std::string& why) { throw ValueError("npz: not a valid .npz archive: " + why); }

uint64_t le(std::string_view s, size_t at, int n) {
  if (at > s.size() || size_t(n) > s.size() - at) bad("it is truncated");
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t(uint8_t(s[at + size_t(i)])) << (8 * i);
  return v;
}

constexpr uint32_t kLocal = 0x04034b50, kCentral = 0x02014b50, kEnd = 0x06054b50, kEnd64 = 0x06064b50, kEnd64Locator = 0x07064b50;

struct Member {
  std::string name;
  uint16_t method = 0, flags = 0;
  uint32_t crc = 0;
  uint64_t compressed = 0, size = 0, offset = 0;
};

uint32_t crc_of(std::string_view data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t at = 0;
  while (at < data.size()) {  // zlib takes 32-bit lengths
    const uInt n = uInt(std::min<size_t>(data.size() - at, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + at), n);
    at += n;
  }
  return uint32_t(crc);
}

std::string inflated(std::string_view in, uint64_t size) {
  // Deflate cannot expand by more than 1032:1: a larger size is a lie (a zip bomb's first sign).
  if (size > in.size() * 1032 + 1024) bad("a member claims " + std::to_string(size) + " bytes from " + std::to_string(in.size()) + " compressed");
  std::string out(size_t(size), '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw Error("npz: zlib could not start inflating");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(std::min<size_t>(in.size(), UINT32_MAX));
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(std::min<size_t>(out.size(), UINT32_MAX));
  int rc = Z_OK;
  while (rc == Z_OK) {
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc == Z_OK && z.avail_in == 0 && z.total_in < in.size()) z.avail_in = uInt(std::min<size_t>(in.size() - z.total_in, UINT32_MAX));
    if (rc == Z_OK && z.avail_out == 0 && z.total_out < out.size()) z.avail_out = uInt(std::min<size_t>(out.size() - z.total_out, UINT32_MAX));
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out == 0) rc = Z_BUF_ERROR;
  }
  const uint64_t produced = z.total_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END || produced != size) bad("a deflated member is corrupt");
  return out;
}

std::vector<Member> central_directory(std::string_view f) {
  // The end record: its signature in the last 22 + 65535 bytes (after it, a comment).
  if (f.size() < 22) bad("it is too short to be a zip archive");
  size_t end = std::string_view::npos;
  for (size_t at = f.size() - 22 + 1; at-- > 0 && f.size() - at <= 22 + 65535;)
    if (le(f, at, 4) == kEnd) {
      end = at;
      break;
    }
  if (end == std::string_view::npos) bad("it has no zip end record (is it a zip archive?)");
  uint64_t entries = le(f, end + 10, 2), dir_size = le(f, end + 12, 4), dir_at = le(f, end + 16, 4);
  if (entries == 0xffff || dir_size == 0xffffffff || dir_at == 0xffffffff) {
    if (end < 20 || le(f, end - 20, 4) != kEnd64Locator) bad("its zip64 end record is missing");
    const uint64_t at64 = le(f, end - 20 + 8, 8);
    if (le(f, size_t(std::min<uint64_t>(at64, f.size())), 4) != kEnd64) bad("its zip64 end record is corrupt");
    entries = le(f, size_t(at64) + 32, 8), dir_size = le(f, size_t(at64) + 40, 8), dir_at = le(f, size_t(at64) + 48, 8);
  }
  if (dir_at > f.size() || dir_size > f.size() - dir_at || entries > dir_size / 46) bad("its central directory is out of bounds");
  std::vector<Member> members;
  size_t at = size_t(dir_at);
  for (uint64_t i = 0; i < entries; ++i) {
    if (le(f, at, 4) != kCentral) bad("its central directory is corrupt");
    Member m;
    m.flags = uint16_t(le(f, at + 8, 2)), m.method = uint16_t(le(f, at + 10, 2)), m.crc = uint32_t(le(f, at + 16, 4));
    m.compressed = le(f, at + 20, 4), m.size = le(f, at + 24, 4);
    const size_t name_len = size_t(le(f, at + 28, 2)), extra_len = size_t(le(f, at + 30, 2)), comment_len = size_t(le(f, at + 32, 2));
    m.offset = le(f, at + 42, 4);
    if (at + 46 + name_len + extra_len + comment_len > f.size()) bad("its central directory is truncated");
    m.name = std::string(f.substr(at + 46, name_len));
    // The zip64 extra field holds, in order, each of size, compressed size and offset that is
    // 0xffffffff above.
    for (size_t e = at + 46 + name_len; e + 4 <= at + 46 + name_len + extra_len;) {
      const uint64_t id = le(f, e, 2), len = le(f, e + 2, 2);
      if (id == 1) {
        size_t p = e + 4;
        for (uint64_t* field : {&m.size, &m.compressed, &m.offset})
          if (*field == 0xffffffff) {
            if (p + 8 > e + 4 + len) bad("a zip64 field is truncated");
            *field = le(f, p, 8), p += 8;
          }
      }
      e += 4 + size_t(len);
    }
    members.push_back(std::move(m));
    at += 46 + name_len + extra_len + comment_len;
  }
  return members;
}

std::string_view member_bytes(std::string_view f, const Member& m) {
  if (m.offset > f.size() || le(f, size_t(m.offset), 4) != kLocal) bad("member '" + m.name + "' has no local header");
  const size_t data = size_t(m.offset) + 30 + size_t(le(f, size_t(m.offset) + 26, 2)) + size_t(le(f, size_t(m.offset) + 28, 2));
  if (data > f.size() || m.compressed > f.size() - data) bad("member '" + m.name + "' runs past the end of the archive");
  return f.substr(data, size_t(m.compressed));
}

// Zip's DOS date of 1980-01-01: members carry no time (the same arrays, the same bytes).
constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;

void put(std::string& s, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s += char(uint8_t(v >> (8 * i)));
}

std::string deflated(const std::string& in) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw Error("npz: zlib could not start deflating");
  std::string out(size_t(deflateBound(&z, uLong(in.size()))), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw Error("npz: zlib could not deflate a member");
  return out;
}

}  // namespace

NamedTensors load_npz(const std::string& path) {
  const std::string file = io::read_whole_file(path, "the npz archive");
  try {
    NamedTensors out;
    std::set<std::string> names;
    for (const Member& m : central_directory(file)) {
      if (m.flags & 1) bad("member '" + m.name + "' is encrypted");
      if (m.name.size() < 4 || m.name.compare(m.name.size() - 4, 4, ".npy") != 0) bad("member '" + m.name + "' is not an .npy array");
      const std::string_view raw = member_bytes(file, m);
      std::string bytes;
      if (m.method == 0) {
        if (m.size != m.compressed) bad("stored member '" + m.name + "' has two sizes");
        bytes = std::string(raw);
      } else if (m.method == 8) {
        bytes = inflated(raw, m.size);
      } else {
        bad("member '" + m.name + "' is compressed by method " + std::to_string(m.method) + " (hjit reads stored and deflated members)");
      }
      if (crc_of(bytes) != m.crc) bad("member '" + m.name + "' fails its CRC-32 check");
      std::string name = m.name.substr(0, m.name.size() - 4);
      if (!names.insert(name).second) bad("it holds '" + m.name + "' twice");
      out.push_back({std::move(name), npy_from_bytes(bytes)});
    }
    return out;
  } catch (const ValueError& e) {
    throw ValueError(std::string(e.what()) + " (" + path + ")");
  }
}

void save_npz(const std::string& path, const NamedTensors& tensors, bool compressed) {
  std::string out, directory;
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name.size() > 60000) throw ValueError("npz: an array name must have 1 to 60000 bytes");
    if (!names.insert(name).second) throw ValueError("npz: the name '" + name + "' is given twice");
    const std::string npy = npy_to_bytes(t), file = name + ".npy";
    if (npy.size() >= 0xffffffffull || out.size() >= 0xffffffffull)
      throw ValueError("npz: '" + name + "' lies past 4 GiB in the archive, beyond what hjit writes (save_tensors has no such limit)");
    const std::string body = compressed ? deflated(npy) : npy;
    const uint32_t crc = crc_of(npy);
    const uint16_t method = compressed ? 8 : 0;
    std::string local;
    put(local, kLocal, 4), put(local, 20, 2), put(local, 0, 2), put(local, method, 2), put(local, 0, 2), put(local, kDosDate, 2);
    put(local, crc, 4), put(local, body.size(), 4), put(local, npy.size(), 4), put(local, file.size(), 2), put(local, 0, 2);
    put(directory, kCentral, 4), put(directory, 20, 2), put(directory, 20, 2), put(directory, 0, 2), put(directory, method, 2);
    put(directory, 0, 2), put(directory, kDosDate, 2), put(directory, crc, 4), put(directory, body.size(), 4), put(directory, npy.size(), 4);
    put(directory, file.size(), 2), put(directory, 0, 2), put(directory, 0, 2), put(directory, 0, 2), put(directory, 0, 2);
    put(directory, 0, 4), put(directory, out.size(), 4);
    directory += file;
    out += local + file + body;
  }
  if (tensors.size() >= 0xffff || out.size() >= 0xffffffffull) throw ValueError("npz: the archive is too large for hjit's writer (save_tensors)");
  const size_t dir_at = out.size();
  out += directory;
  put(out, kEnd, 4), put(out, 0, 2), put(out, 0, 2), put(out, tensors.size(), 2), put(out, tensors.size(), 2);
  put(out, directory.size(), 4), put(out, dir_at, 4), put(out, 0, 2);
  io::write_file_atomically(path, out, "the npz archive");
}

}  // namespace hjit
