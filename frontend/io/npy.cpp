// numpy's .npy format (numpy/lib/format.py): the magic "\x93NUMPY", a version, a header that is a
// Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }, then the
// elements. The header is parsed as the small literal it is, strictly.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>

#include <hjit/io.h>
#include <hjit/ops.h>

#include "frontend/io/file_bytes.h"
#include "support/binary_io.h"

namespace hjit {

namespace {

const char kMagic[] = "\x93NUMPY";

struct Descr {
  const char* code;  // numpy's kind and size, without the byte order
  DType dtype;
};
constexpr Descr kDescrs[] = {{"b1", DType::Bool}, {"i1", DType::I8},  {"i2", DType::I16}, {"i4", DType::I32}, {"i8", DType::I64},
                             {"u1", DType::U8},   {"u2", DType::U16}, {"u4", DType::U32}, {"u8", DType::U64}, {"f2", DType::F16},
                             {"f4", DType::F32},  {"f8", DType::F64}};

[[noreturn]] void bad(const std::string& why) { throw ValueError("npy: not a valid .npy array: " + why); }

// The header dict: each key to its value's text ('...' strings unquoted, tuples kept whole).
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view s) : s_(s) {}
  std::map<std::string, std::string> dict() {
    std::map<std::string, std::string> out;
    expect('{');
    while (true) {
      skip();
      if (peek() == '}') break;
      const std::string key = quoted();
      expect(':');
      skip();
      std::string value;
      if (peek() == '\'' || peek() == '"') value = quoted();
      else if (peek() == '(') value = tuple();
      else value = word();
      if (!out.emplace(key, value).second) bad("the header names '" + key + "' twice");
      skip();
      if (peek() == ',') ++at_;
      else if (peek() != '}') bad("the header dict is malformed");
    }
    ++at_;
    skip();
    if (at_ != s_.size()) bad("the header has text after its dict");
    return out;
  }

 private:
  char peek() {
    if (at_ >= s_.size()) bad("the header ends early");
    return s_[at_];
  }
  void skip() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\n' || s_[at_] == '\t')) ++at_;
  }
  void expect(char c) {
    skip();
    if (peek() != c) bad(std::string("the header lacks '") + c + "'");
    ++at_;
  }
  std::string quoted() {
    skip();
    const char q = peek();
    if (q != '\'' && q != '"') bad("the header's keys must be strings");
    const size_t end = s_.find(q, at_ + 1);
    if (end == std::string_view::npos || end - at_ > 64) bad("the header has an unterminated string");
    std::string v(s_.substr(at_ + 1, end - at_ - 1));
    at_ = end + 1;
    return v;
  }
  std::string tuple() {
    const size_t end = s_.find(')', at_);
    if (end == std::string_view::npos) bad("the header has an unterminated tuple");
    std::string v(s_.substr(at_, end - at_ + 1));
    at_ = end + 1;
    return v;
  }
  std::string word() {
    const size_t start = at_;
    while (at_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[at_]))) ++at_;
    return std::string(s_.substr(start, at_ - start));
  }
  std::string_view s_;
  size_t at_ = 0;
};

Shape parse_shape(const std::string& t) {
  Shape shape;
  size_t at = 1;  // after '('
  int64_t elements = 1;
  while (true) {
    while (at < t.size() && t[at] == ' ') ++at;
    if (at >= t.size()) bad("the shape " + t + " is malformed");
    if (t[at] == ')') break;
    size_t digits = 0;
    int64_t d = 0;
    while (at < t.size() && std::isdigit(static_cast<unsigned char>(t[at]))) {
      if (++digits > 15) bad("the shape " + t + " has a dimension too large");
      d = d * 10 + (t[at++] - '0');
    }
    if (digits == 0) bad("the shape " + t + " is not a tuple of sizes");
    if (d > 0 && elements > (int64_t(1) << 50) / d) bad("the shape " + t + " has too many elements");
    elements *= d;
    shape.push_back(d);
    if (shape.size() > 32) bad("the shape " + t + " has more than 32 dimensions");
    while (at < t.size() && t[at] == ' ') ++at;
    if (at < t.size() && t[at] == ',') ++at;
    else if (at >= t.size() || t[at] != ')') bad("the shape " + t + " is malformed");
  }
  return shape;
}

struct Header {
  DType dtype;
  bool big_endian;
  bool fortran;
  Shape shape;
};

Header parse_header(std::string_view text) {
  std::map<std::string, std::string> d = HeaderParser(text).dict();
  if (d.size() != 3 || !d.count("descr") || !d.count("fortran_order") || !d.count("shape"))
    bad("the header must have exactly the keys descr, fortran_order and shape");
  const std::string& descr = d["descr"];
  if (descr.size() != 3 || std::string_view("<>|=").find(descr[0]) == std::string_view::npos)
    bad("the dtype '" + descr + "' is not one hjit reads (bool, int8-64, uint8-64, float16/32/64)");
  const auto it = std::find_if(std::begin(kDescrs), std::end(kDescrs), [&](const Descr& x) { return descr.substr(1) == x.code; });
  if (it == std::end(kDescrs))
    throw DTypeError("npy: the dtype '" + descr + "' has no hjit dtype (hjit reads bool, int8-64, uint8-64, float16/32/64)");
  const std::string& fo = d["fortran_order"];
  if (fo != "True" && fo != "False") bad("fortran_order is '" + fo + "'");
  if (d["shape"].empty() || d["shape"][0] != '(') bad("the shape is not a tuple");
  return {it->dtype, descr[0] == '>', fo == "True", parse_shape(d["shape"])};
}

}  // namespace

Tensor npy_from_bytes(const std::string& bytes) {
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic) != 0) bad("it does not start with numpy's magic \\x93NUMPY");
  const uint8_t major = uint8_t(bytes[6]);
  size_t header_len = 0, at = 0;
  if (major == 1) {
    header_len = size_t(uint8_t(bytes[8])) | size_t(uint8_t(bytes[9])) << 8;
    at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) bad("it is truncated");
    for (int i = 0; i < 4; ++i) header_len |= size_t(uint8_t(bytes[8 + size_t(i)])) << (8 * i);
    at = 12;
  } else {
    bad("its format version " + std::to_string(major) + " is not 1, 2 or 3");
  }
  if (header_len > bytes.size() - at) bad("its header is truncated");
  const Header h = parse_header(std::string_view(bytes).substr(at, header_len));
  at += header_len;
  const size_t item = size_t(dtype_size(h.dtype)), count = size_t(shape_numel(h.shape));
  if (count * item != bytes.size() - at)
    bad("it holds " + std::to_string(bytes.size() - at) + " bytes of data for " + std::to_string(count) + " elements of " + std::to_string(item) +
        " bytes (shape " + shape_str(h.shape) + ")");
  std::string data = bytes.substr(at);
  if (h.big_endian && item > 1)
    for (size_t i = 0; i < data.size(); i += item) std::reverse(data.begin() + long(i), data.begin() + long(i + item));
  if (h.dtype == DType::Bool)
    for (char& c : data) c = c != 0;
  if (!h.fortran) return Tensor::from_bytes(data.data(), data.size(), h.shape, h.dtype);
  // Column-major: the C-order array of the reversed shape, transposed.
  const Shape reversed(h.shape.rbegin(), h.shape.rend());
  return transpose(Tensor::from_bytes(data.data(), data.size(), reversed, h.dtype)).clone();
}

std::string npy_to_bytes(const Tensor& t) {
  if (!t.defined()) throw ValueError("npy: cannot write an undefined tensor");
  const auto it = std::find_if(std::begin(kDescrs), std::end(kDescrs), [&](const Descr& x) { return x.dtype == t.dtype(); });
  if (it == std::end(kDescrs))
    throw DTypeError(std::string("npy: numpy has no dtype for ") + dtype_name(t.dtype()) + "; write t.astype(DType::F32)");
  const Tensor host = t.device() == Device::CPU ? t : t.to(Device::CPU);
  std::string shape = "(";
  for (size_t d = 0; d < host.shape().size(); ++d) shape += std::to_string(host.shape()[d]) + (host.shape().size() == 1 ? "," : d + 1 < host.shape().size() ? ", " : "");
  shape += ")";
  const char order = dtype_size(t.dtype()) == 1 ? '|' : '<';
  std::string header = std::string("{'descr': '") + order + it->code + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Padded with spaces and ended by a newline so that the data starts 64-byte aligned.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 65535) throw ValueError("npy: a header of " + std::to_string(header.size()) + " bytes (format 1.0 holds 65535)");
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  out += header;
  const size_t n = size_t(host.numel()) * size_t(dtype_size(host.dtype()));
  if (n > 0) out.append(static_cast<const char*>(host.data()), n);
  return out;
}

Tensor load_npy(const std::string& path) {
  try {
    return npy_from_bytes(io::read_whole_file(path, "npy"));
  } catch (const ValueError& e) {
    throw ValueError(std::string(e.what()) + " (" + path + ")");
  }
}

void save_npy(const std::string& path, const Tensor& t) { io::write_file_atomically(path, npy_to_bytes(t), "npy"); }

}  // namespace hjit
