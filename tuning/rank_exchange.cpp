#include "tuning/rank_exchange.h"

#include <cstring>

#include <hjit/distributed.h>

namespace hjit::tuning {
namespace {

Tensor bytes_tensor(const std::string& s, int64_t size) {
  std::string padded = s;
  padded.resize(size_t(size), '\0');
  return Tensor::from_bytes(padded.data(), padded.size(), {size}, DType::U8);
}

std::string text_of(const Tensor& t, int64_t from, int64_t length) {
  const char* p = static_cast<const char*>(t.data());
  return std::string(p + from, size_t(length));
}

}  // namespace

std::string pack_strings(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) {
    const int64_t n = int64_t(s.size());
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    out += s;
  }
  return out;
}
std::vector<std::string> unpack_strings(const std::string& packed) {
  std::vector<std::string> v;
  for (size_t at = 0; at + sizeof(int64_t) <= packed.size();) {
    int64_t n = 0;
    std::memcpy(&n, packed.data() + at, sizeof n);
    at += sizeof n;
    if (n < 0 || size_t(n) > packed.size() - at) break;
    v.push_back(packed.substr(at, size_t(n)));
    at += size_t(n);
  }
  return v;
}

void send_string(const std::string& s, int peer, int tag) {
  dist::send(Tensor::scalar(double(s.size()), DType::I64), peer, tag);
  if (!s.empty()) dist::send(bytes_tensor(s, int64_t(s.size())), peer, tag);
}

std::string recv_string(int peer, int tag) {
  const int64_t size = dist::recv({}, DType::I64, peer, tag).item<int64_t>();
  if (size <= 0) return {};
  return text_of(dist::recv({size}, DType::U8, peer, tag), 0, size);
}

}  // namespace hjit::tuning
