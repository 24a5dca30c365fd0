// Tensor::str(): numpy's str() layout: nested brackets, elements aligned in columns, long
// dimensions summarized with "...".
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <sstream>

#include <hjit/tensor.h>

#include "frontend/tensor/tensor_impl.h"

namespace hjit {
namespace {

constexpr int64_t kSummarizeOver = 1000;  // numpy's threshold
constexpr int64_t kEdgeItems = 3;

// Formats every element the way numpy would for the whole array: one notation for all, at most 8
// fraction digits (4 for 16-bit floats), fewer when an element needs fewer.
std::vector<std::string> format_values(const std::vector<double>& v, DType dtype) {
  std::vector<std::string> out;
  if (dtype == DType::Bool) {
    for (double x : v) out.push_back(x != 0 ? "True" : "False");
    return out;
  }
  double max_abs = 0, min_abs = HUGE_VAL;
  for (double x : v)
    if (std::isfinite(x)) max_abs = std::max(max_abs, std::fabs(x)), min_abs = x != 0 ? std::min(min_abs, std::fabs(x)) : min_abs;
  bool sci = max_abs >= 1e16 || (min_abs < 1e-4 && min_abs > 0) || (min_abs != HUGE_VAL && max_abs / min_abs > 1e3 && max_abs >= 1e8);
  const int max_digits = dtype == DType::F16 || dtype == DType::BF16 ? 4 : 8;
  char buf[64];
  if (sci) {
    int digits = 0;
    for (double x : v) {
      if (!std::isfinite(x)) continue;
      for (int d = 0; d <= max_digits; ++d) {
        std::snprintf(buf, sizeof buf, "%.*e", d, x);
        char ref[64];
        std::snprintf(ref, sizeof ref, "%.*e", max_digits, x);
        if (std::strtod(buf, nullptr) == std::strtod(ref, nullptr)) {
          digits = std::max(digits, d);
          break;
        }
      }
    }
    for (double x : v) {
      if (std::isnan(x)) out.push_back("nan");
      else if (std::isinf(x)) out.push_back(x > 0 ? "inf" : "-inf");
      else std::snprintf(buf, sizeof buf, "%.*e", digits, x), out.push_back(buf);
    }
    return out;
  }
  // Each element with the fewest fraction digits that keep its value (at most max_digits), then
  // aligned on the decimal point: integer parts padded left, fractions padded right, as numpy does.
  std::vector<std::pair<std::string, std::string>> parts;
  size_t int_width = 0, frac_width = 0;
  for (double x : v) {
    if (!std::isfinite(x)) {
      parts.emplace_back(std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf", "\x01");
      continue;
    }
    char ref[64];
    std::snprintf(ref, sizeof ref, "%.*f", max_digits, x);
    const double target = std::strtod(ref, nullptr);
    for (int d = 0; d <= max_digits; ++d) {
      std::snprintf(buf, sizeof buf, "%.*f", d, x);
      if (std::strtod(buf, nullptr) == target || d == max_digits) break;
    }
    std::string s = buf;
    size_t dot = s.find('.');
    std::string ip = dot == std::string::npos ? s : s.substr(0, dot), fp = dot == std::string::npos ? "" : s.substr(dot + 1);
    int_width = std::max(int_width, ip.size());
    frac_width = std::max(frac_width, fp.size());
    parts.emplace_back(ip, fp);
  }
  for (auto& [ip, fp] : parts) {
    if (fp == "\x01") {  // nan / inf: right-aligned by the printer
      out.push_back(ip);
      continue;
    }
    out.push_back(std::string(int_width - ip.size(), ' ') + ip + "." + fp + std::string(frac_width - fp.size(), ' '));
  }
  return out;
}

struct Printer {
  const Shape& shape;
  const std::vector<std::string>& cells;  // the printed elements (after summarizing)
  size_t width = 0;
  size_t next = 0;
  bool summarize = false;

  void print(std::ostringstream& os, size_t dim, int indent) {
    if (dim == shape.size()) {
      const std::string& c = cells[next++];
      os << std::string(width - c.size(), ' ') << c;
      return;
    }
    os << "[";
    const int64_t n = shape[dim];
    bool cut = summarize && n > 2 * kEdgeItems;
    for (int64_t i = 0; i < n; ++i) {
      if (cut && i == kEdgeItems) {
        if (dim + 1 == shape.size()) os << " ...";
        else os << "\n" << std::string(size_t(indent + 1), ' ') << "...";
        i = n - kEdgeItems;
      }
      if (i > 0 || (cut && i == n - kEdgeItems)) {
        if (dim + 1 == shape.size()) os << " ";
        else os << std::string(shape.size() - dim - 1, '\n') << std::string(size_t(indent + 1), ' ');
      }
      print(os, dim + 1, indent + 1);
    }
    os << "]";
  }
};

// The flat indices numpy would print, in order.
void printed_indices(const Shape& shape, bool summarize, size_t dim, int64_t base, std::vector<int64_t>& out) {
  if (dim == shape.size()) {
    out.push_back(base);
    return;
  }
  int64_t stride = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d) stride *= shape[d];
  const int64_t n = shape[dim];
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    printed_indices(shape, summarize, dim + 1, base + i * stride, out);
  }
}

}  // namespace

std::string Tensor::str() const {
  if (!impl_) return "Tensor(undefined)";
  if (impl_->traced() && !impl_->storage) return "Traced<" + impl_->type.str() + ">";
  const Shape& s = impl_->type.shape;
  if (numel() == 0) return "[]";
  bool summarize = numel() > kSummarizeOver;
  std::vector<int64_t> idx;
  printed_indices(s, summarize, 0, 0, idx);
  std::vector<std::string> cells;
  // Integers print exactly from their own type (a double holds 53 bits; u64 values above 2^63
  // are not negative).
  if (dtype_info(dtype()).kind == DTypeKind::UnsignedInt) {
    std::vector<uint64_t> all = to_vector<uint64_t>();
    for (int64_t i : idx) cells.push_back(std::to_string(all[size_t(i)]));
  } else if (is_integral(dtype())) {
    std::vector<int64_t> all = to_vector<int64_t>();
    for (int64_t i : idx) cells.push_back(std::to_string(all[size_t(i)]));
  } else {
    std::vector<double> all = to_vector<double>(), vals;
    for (int64_t i : idx) vals.push_back(all[size_t(i)]);
    cells = format_values(vals, dtype());
  }
  if (s.empty()) return cells[0];
  Printer p{s, cells};
  for (const auto& c : cells) p.width = std::max(p.width, c.size());
  p.summarize = summarize;
  std::ostringstream os;
  p.print(os, 0, 0);
  return os.str();
}

}  // namespace hjit
