// Data movement: each kernel is a strided copy (or a few).
#include "graph/threefry.h"
#include "frontend/eager/loops.h"
#include "support/thread_pool.h"

namespace hjit::eager {
namespace {

int elem(const KernelArgs& a) { return dtype_size(a.out.type->dtype); }

}  // namespace

void Reshape(const KernelArgs& a) {
  std::memcpy(a.out.data, a.in[0].data, size_t(a.out.type->numel()) * size_t(elem(a)));
}

void Transpose(const KernelArgs& a) {
  const auto& perm = a.attrs.ints("perm");
  std::vector<int64_t> in_strides = strides_of(a.in[0].type->shape), src(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) src[i] = in_strides[size_t(perm[i])];
  strided_copy(a.out.data, strides_of(a.out.type->shape), a.in[0].data, src, a.out.type->shape, elem(a));
}

void BroadcastTo(const KernelArgs& a) {
  const Shape &out = a.out.type->shape, &in = a.in[0].type->shape;
  std::vector<int64_t> in_strides = strides_of(in), src(out.size(), 0);
  for (size_t d = 0; d < in.size(); ++d) src[out.size() - in.size() + d] = in[d] == 1 ? 0 : in_strides[d];
  strided_copy(a.out.data, strides_of(out), a.in[0].data, src, out, elem(a));
}

void Slice(const KernelArgs& a) {
  const auto &starts = a.attrs.ints("starts"), &steps = a.attrs.ints("steps");
  std::vector<int64_t> in_strides = strides_of(a.in[0].type->shape), src(starts.size());
  int64_t offset = 0;
  for (size_t d = 0; d < starts.size(); ++d) offset += starts[d] * in_strides[d], src[d] = in_strides[d] * steps[d];
  const char* base = static_cast<const char*>(a.in[0].data) + offset * elem(a);
  strided_copy(a.out.data, strides_of(a.out.type->shape), base, src, a.out.type->shape, elem(a));
}

void Concat(const KernelArgs& a) {
  const size_t axis = size_t(a.attrs.i("axis"));
  const std::vector<int64_t> out_strides = strides_of(a.out.type->shape);
  int64_t offset = 0;
  for (const In& in : a.in) {
    char* dst = static_cast<char*>(a.out.data) + offset * out_strides[axis] * elem(a);
    strided_copy(dst, out_strides, in.data, strides_of(in.type->shape), in.type->shape, elem(a));
    offset += in.type->shape[axis];
  }
}

void Pad(const KernelArgs& a) {
  Attrs fill{{"value", a.attrs.f("value")}};
  Full(KernelArgs{OpKind::Full, fill, {}, a.out});
  const auto& lo = a.attrs.ints("lo");
  const std::vector<int64_t> out_strides = strides_of(a.out.type->shape);
  int64_t offset = 0;
  for (size_t d = 0; d < lo.size(); ++d) offset += lo[d] * out_strides[d];
  char* dst = static_cast<char*>(a.out.data) + offset * elem(a);
  strided_copy(dst, out_strides, a.in[0].data, strides_of(a.in[0].type->shape), a.in[0].type->shape, elem(a));
}

void RandomBits(const KernelArgs& a) {
  const uint32_t* key = static_cast<const uint32_t*>(a.in[0].data);
  uint32_t* out = static_cast<uint32_t*>(a.out.data);
  const int64_t n = a.out.type->numel();
  auto konst = [](int64_t v) { return v; };
  auto select = [](bool c, int64_t x, int64_t y) { return c ? x : y; };
  parallel_loop(n, n >= kParallelGrain / 8, [&](int64_t i) {
    int64_t c0, c1, second;
    threefry::counter_of<int64_t>(i, n, konst, select, &c0, &c1, &second);
    auto [x0, x1] = threefry::threefry2x32(key[0], key[1], uint32_t(c0), uint32_t(c1));
    out[i] = second ? x1 : x0;
  });
}

}  // namespace hjit::eager

namespace hjit::eager {

void Take(const KernelArgs& a) {
  const Shape& xs = a.in[0].type->shape;
  const size_t axis = size_t(a.attrs.i("axis"));
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= xs[d];
  for (size_t d = axis + 1; d < xs.size(); ++d) inner *= xs[d];
  const int64_t n = xs[axis], m = a.in[1].type->numel();
  // Indices are checked before any copy (and outside the parallel loop, which cannot throw).
  std::vector<int64_t> idx(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    int64_t k = a.in[1].type->dtype == DType::I32 ? static_cast<const int32_t*>(a.in[1].data)[j]
                                                   : static_cast<const int64_t*>(a.in[1].data)[j];
    if (k < -n || k >= n)
      throw IndexError("take: index " + std::to_string(k) + " is out of range for axis " + std::to_string(axis) +
                       " of " + a.in[0].type->str() + " (valid: " + std::to_string(-n) + " to " + std::to_string(n - 1) + ")");
    idx[size_t(j)] = k < 0 ? k + n : k;
  }
  const size_t row = size_t(inner) * size_t(elem(a));
  const char* x = static_cast<const char*>(a.in[0].data);
  char* out = static_cast<char*>(a.out.data);
  parallel_loop(outer * m, outer * m * inner >= kParallelGrain, [&](int64_t i_oj) {
    const int64_t o = i_oj / m, j = i_oj % m;
    std::memcpy(out + size_t(o * m + j) * row, x + size_t(o * n + idx[size_t(j)]) * row, row);
  });
}

}  // namespace hjit::eager

namespace hjit::eager {

void Flip(const KernelArgs& a) {
  const Shape& s = a.in[0].type->shape;
  std::vector<int64_t> strides = strides_of(s);
  int64_t offset = 0;
  for (int64_t axis : a.attrs.ints("axes")) {
    offset += (s[size_t(axis)] - 1) * strides[size_t(axis)];
    strides[size_t(axis)] = -strides[size_t(axis)];
  }
  const char* base = static_cast<const char*>(a.in[0].data) + offset * elem(a);
  strided_copy(a.out.data, strides_of(s), base, strides, s, elem(a));
}

}  // namespace hjit::eager

namespace hjit::eager {

void SliceUpdate(const KernelArgs& a) {
  std::memcpy(a.out.data, a.in[0].data, size_t(a.out.type->numel()) * size_t(elem(a)));
  const auto &starts = a.attrs.ints("starts"), &steps = a.attrs.ints("steps");
  std::vector<int64_t> out_strides = strides_of(a.out.type->shape), dst(starts.size());
  int64_t offset = 0;
  for (size_t d = 0; d < starts.size(); ++d) offset += starts[d] * out_strides[d], dst[d] = out_strides[d] * steps[d];
  char* base = static_cast<char*>(a.out.data) + offset * elem(a);
  strided_copy(base, dst, a.in[1].data, strides_of(a.in[1].type->shape), a.in[1].type->shape, elem(a));
}

void CheckIndex(const KernelArgs& a) {
  const int64_t lo = a.attrs.i("lo"), hi = a.attrs.i("hi"), n = a.out.type->numel();
  dispatch_all(a.in[0].type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(a.in[0].data);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      for (int64_t i = 0; i < n; ++i) {
        // Compared in the type's own domain: u64 values above i64's range are out of any range.
        const bool ok = std::is_unsigned_v<T> ? (uint64_t(x[i]) < uint64_t(INT64_MAX) && int64_t(x[i]) >= lo && int64_t(x[i]) < hi)
                                              : (int64_t(x[i]) >= lo && int64_t(x[i]) < hi);
        if (!ok)
          throw IndexError(a.attrs.s("what") + " " + std::to_string(x[i]) + " is out of range [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + ")");
      }
    }
  });
  std::memcpy(a.out.data, a.in[0].data, size_t(n) * size_t(elem(a)));
}

}  // namespace hjit::eager
