// Tensor::str(): numpy's str() layout: nested brackets, elements aligned in columns, long
// dimensions summarized with "...".
#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include <hjit/tensor.h>

#include "frontend/tensor_impl.h"

namespace hjit {
namespace {

constexpr int64_t kSummarizeOver = 1000;  // numpy's threshold
constexpr int64_t kEdgeItems = 3;

// Formats every element the way numpy would for the whole array: one notation and one number of
// fraction digits for all (at most 8, fewer when every element needs fewer).
std::vector<std::string> format_values(const std::vector<double>& v, DType dtype) {
  std::vector<std::string> out;
  if (dtype == DType::Bool) {
    for (double x : v) out.push_back(x != 0 ? "True" : "False");
    return out;
  }
  if (!is_floating(dtype)) {
    for (double x : v) out.push_back(std::to_string(int64_t(x)));
    return out;
  }
  double max_abs = 0, min_abs = HUGE_VAL;
  for (double x : v)
    if (std::isfinite(x)) max_abs = std::max(max_abs, std::fabs(x)), min_abs = x != 0 ? std::min(min_abs, std::fabs(x)) : min_abs;
  bool sci = max_abs >= 1e16 || (min_abs < 1e-4 && min_abs > 0) || (min_abs != HUGE_VAL && max_abs / min_abs > 1e3 && max_abs >= 1e8);
  int digits = 0;
  const int max_digits = dtype == DType::F64 ? 8 : (dtype == DType::F32 ? 8 : 4);
  char buf[64];
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    for (int d = 0; d <= max_digits; ++d) {  // fewest digits that print x as it would round-trip at max_digits
      std::snprintf(buf, sizeof buf, sci ? "%.*e" : "%.*f", d, x);
      char ref[64];
      std::snprintf(ref, sizeof ref, sci ? "%.*e" : "%.*f", max_digits, x);
      if (std::strtod(buf, nullptr) == std::strtod(ref, nullptr)) {
        digits = std::max(digits, d);
        break;
      }
    }
  }
  for (double x : v) {
    if (std::isnan(x)) out.push_back("nan");
    else if (std::isinf(x)) out.push_back(x > 0 ? "inf" : "-inf");
    else {
      std::snprintf(buf, sizeof buf, sci ? "%.*e" : "%.*f", digits, x);
      std::string s = buf;
      if (!sci && digits == 0) s += ".";
      out.push_back(s);
    }
  }
  return out;
}

struct Printer {
  const Shape& shape;
  const std::vector<std::string>& cells;  // the printed elements (after summarizing)
  const std::vector<int64_t>& index_of;   // per printed element, nothing: cells are in order
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
  if (numel() == 0) {
    std::string r;
    for (size_t d = 0; d < std::max<size_t>(s.size(), 1); ++d) r += "[";
    for (size_t d = 0; d < std::max<size_t>(s.size(), 1); ++d) r += "]";
    return r;
  }
  bool summarize = numel() > kSummarizeOver;
  std::vector<int64_t> idx;
  printed_indices(s, summarize, 0, 0, idx);
  std::vector<double> all = to_vector<double>(), vals;
  for (int64_t i : idx) vals.push_back(all[size_t(i)]);
  std::vector<std::string> cells = format_values(vals, dtype());
  if (s.empty()) return cells[0];
  Printer p{s, cells, idx};
  for (const auto& c : cells) p.width = std::max(p.width, c.size());
  p.summarize = summarize;
  std::ostringstream os;
  p.print(os, 0, 0);
  return os.str();
}

}  // namespace hjit
