#include "frontend/eager/loops.h"
#include "support/thread_pool.h"

namespace hjit::eager {

std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) s[i] = acc, acc *= shape[i];
  return s;
}

int64_t BroadcastPlan::outer() const {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) n *= shape[i];
  return n;
}

void BroadcastPlan::row_offsets(int64_t j, int64_t* offsets) const {
  for (size_t k = 0; k < strides.size(); ++k) offsets[k] = 0;
  for (size_t d = shape.size() - 1; d-- > 0;) {
    int64_t idx = j % shape[d];
    j /= shape[d];
    for (size_t k = 0; k < strides.size(); ++k) offsets[k] += idx * strides[k][d];
  }
}

BroadcastPlan plan_broadcast(const Shape& out, const std::vector<const Shape*>& operands) {
  // Strides of each operand aligned to the output's dimensions (numpy: trailing alignment).
  std::vector<std::vector<int64_t>> full(operands.size(), std::vector<int64_t>(out.size(), 0));
  for (size_t k = 0; k < operands.size(); ++k) {
    const Shape& s = *operands[k];
    std::vector<int64_t> st = strides_of(s);
    size_t lead = out.size() - s.size();
    for (size_t d = 0; d < s.size(); ++d) full[k][lead + d] = s[d] == 1 ? 0 : st[d];
  }
  BroadcastPlan p;
  p.strides.assign(operands.size(), {});
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;  // size-1 dimensions carry no iteration
    bool merge = !p.shape.empty();
    for (size_t k = 0; merge && k < operands.size(); ++k)
      merge = p.strides[k].back() == full[k][d] * out[d];
    if (merge) {
      p.shape.back() *= out[d];
      for (size_t k = 0; k < operands.size(); ++k) p.strides[k].back() = full[k][d];
    } else {
      p.shape.push_back(out[d]);
      for (size_t k = 0; k < operands.size(); ++k) p.strides[k].push_back(full[k][d]);
    }
  }
  if (p.shape.empty()) {
    p.shape.push_back(1);
    for (auto& s : p.strides) s.push_back(0);
  }
  return p;
}

namespace {

template <class E>
void copy_rows(E* dst, const std::vector<int64_t>& ds, const E* src, const std::vector<int64_t>& ss,
               const Shape& shape) {
  const size_t r = shape.size();
  const int64_t inner = shape[r - 1], dsi = ds[r - 1], ssi = ss[r - 1];
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < r; ++d) outer *= shape[d];
  parallel_loop(outer, outer * inner >= kParallelGrain && outer > 1, [&](int64_t j) {
    int64_t od = 0, os = 0, rem = j;
    for (size_t d = r - 1; d-- > 0;) {
      int64_t idx = rem % shape[d];
      rem /= shape[d];
      od += idx * ds[d];
      os += idx * ss[d];
    }
    E* o = dst + od;
    const E* s = src + os;
    if (dsi == 1 && ssi == 1) std::memcpy(o, s, size_t(inner) * sizeof(E));
    else if (dsi == 1 && ssi == 0) for (int64_t i = 0; i < inner; ++i) o[i] = s[0];
    else for (int64_t i = 0; i < inner; ++i) o[i * dsi] = s[i * ssi];
  });
}

struct Bytes2 { uint16_t v; };
struct Bytes8 { uint64_t v; };

}  // namespace

void strided_copy(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                  const std::vector<int64_t>& src_strides, const Shape& shape, int elem) {
  if (shape_numel(shape) == 0) return;
  // Drop size-1 dimensions and merge dimensions contiguous in both.
  Shape s;
  std::vector<int64_t> ds, ss;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!s.empty() && ds.back() == dst_strides[d] * shape[d] && ss.back() == src_strides[d] * shape[d]) {
      s.back() *= shape[d];
      ds.back() = dst_strides[d];
      ss.back() = src_strides[d];
    } else {
      s.push_back(shape[d]);
      ds.push_back(dst_strides[d]);
      ss.push_back(src_strides[d]);
    }
  }
  if (s.empty()) s = {1}, ds = {1}, ss = {1};
  switch (elem) {
    case 1: copy_rows(static_cast<uint8_t*>(dst), ds, static_cast<const uint8_t*>(src), ss, s); break;
    case 2: copy_rows(static_cast<Bytes2*>(dst), ds, static_cast<const Bytes2*>(src), ss, s); break;
    case 4: copy_rows(static_cast<uint32_t*>(dst), ds, static_cast<const uint32_t*>(src), ss, s); break;
    case 8: copy_rows(static_cast<Bytes8*>(dst), ds, static_cast<const Bytes8*>(src), ss, s); break;
    default: throw InternalError("strided_copy: element size " + std::to_string(elem));
  }
}

}  // namespace hjit::eager
