// Reductions. Every reduction becomes [outer, reduced, inner] over a contiguous block of axes
// (non-adjacent axes are first moved to the end by a transpose).
#include <algorithm>
#include <limits>

#include "frontend/eager/loops.h"
#include "support/thread_pool.h"

namespace hjit::eager {
namespace {

struct Block {
  int64_t outer = 1, reduced = 1, inner = 1;
};

// Makes the reduced axes one contiguous block, transposing into `scratch` if they are not.
const void* as_block(const KernelArgs& a, const std::vector<int64_t>& axes, std::vector<unsigned char>& scratch,
                     Block* b) {
  const Shape& s = a.in[0].type->shape;
  if (axes.empty()) {  // nothing to reduce: a copy (with sum's dtype change)
    b->outer = shape_numel(s);
    return a.in[0].data;
  }
  bool contiguous = true;
  for (size_t i = 1; i < axes.size(); ++i) contiguous &= axes[i] == axes[i - 1] + 1;
  if (contiguous) {
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t ax = int64_t(d);
      if (ax < axes.front()) b->outer *= s[d];
      else if (ax <= axes.back()) b->reduced *= s[d];
      else b->inner *= s[d];
    }
    return a.in[0].data;
  }
  // Kept axes first, reduced axes last.
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < int64_t(s.size()); ++d)
    if (!std::binary_search(axes.begin(), axes.end(), d)) perm.push_back(d);
  perm.insert(perm.end(), axes.begin(), axes.end());
  std::vector<int64_t> src_strides = strides_of(s), st(perm.size());
  Shape ps(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) ps[i] = s[size_t(perm[i])], st[i] = src_strides[size_t(perm[i])];
  int elem = dtype_size(a.in[0].type->dtype);
  scratch.resize(size_t(shape_numel(s)) * size_t(elem));
  strided_copy(scratch.data(), strides_of(ps), a.in[0].data, st, ps, elem);
  for (size_t i = 0; i < perm.size(); ++i)
    (i < perm.size() - axes.size() ? b->outer : b->reduced) *= ps[i];
  return scratch.data();
}

// out[o, i] = fold(x[o, :, i]) with accumulator type A, starting from `init`.
template <class T, class R, class A, class F>
void reduce_block(const T* x, R* out, const Block& b, A init, F f) {
  const int64_t O = b.outer, N = b.reduced, I = b.inner;
  if (I == 1) {
    // Rows: eight independent accumulators, so the loop vectorizes without reassociating one sum.
    parallel_loop(O, O * N >= kParallelGrain && O > 1, [&](int64_t o) {
      const T* row = x + o * N;
      A lane[8] = {init, init, init, init, init, init, init, init};
      int64_t r = 0;
      for (; r + 8 <= N; r += 8)
        for (int l = 0; l < 8; ++l) lane[l] = f(lane[l], A(C<T>(row[r + l])));
      for (; r < N; ++r) lane[0] = f(lane[0], A(C<T>(row[r])));
      A acc = lane[0];
      for (int l = 1; l < 8; ++l) acc = f(acc, lane[l]);
      out[o] = R(acc);
    });
    return;
  }
  constexpr int64_t kChunk = 512;
  const int64_t chunks = (I + kChunk - 1) / kChunk;
  parallel_loop(O * chunks, O * N * I >= kParallelGrain, [&](int64_t i_oc) {
    const int64_t o = i_oc / chunks, c = i_oc % chunks;
    const int64_t i0 = c * kChunk, n = std::min(kChunk, I - i0);
    A acc[kChunk];
    for (int64_t i = 0; i < n; ++i) acc[i] = init;
    for (int64_t r = 0; r < N; ++r) {
      const T* src = x + (o * N + r) * I + i0;
      for (int64_t i = 0; i < n; ++i) acc[i] = f(acc[i], A(C<T>(src[i])));
    }
    for (int64_t i = 0; i < n; ++i) out[o * I + i0 + i] = R(acc[i]);
  });
}

// Integers sum in u64, where C++ defines the wrap (as the compiled code's i64 sums wrap); the i64
// result is the same bits.
template <class T> using SumAcc = std::conditional_t<std::is_floating_point_v<C<T>>, C<T>, uint64_t>;

template <class A>
A lowest() { return std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest(); }
template <class A>
A highest() { return std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max(); }

template <class Kind>
void reduce(const KernelArgs& a, Kind kind) {
  std::vector<unsigned char> scratch;
  Block b;
  const void* src = as_block(a, a.attrs.ints("axes"), scratch, &b);
  dispatch_all(a.in[0].type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    kind(static_cast<const T*>(src), b, tag);
  });
}

}  // namespace

void ReduceSum(const KernelArgs& a) {
  reduce(a, [&](const auto* x, const Block& b, auto tag) {
    using T = typename decltype(tag)::type;
    using A = SumAcc<T>;
    using R = std::conditional_t<std::is_floating_point_v<C<T>>, T, int64_t>;
    reduce_block(x, static_cast<R*>(a.out.data), b, A(0), [](A p, A q) { return A(p + q); });
  });
}

void ReduceMax(const KernelArgs& a) {
  reduce(a, [&](const auto* x, const Block& b, auto tag) {
    using T = typename decltype(tag)::type;
    using A = C<T>;
    reduce_block(x, static_cast<T*>(a.out.data), b, lowest<A>(), [](A p, A q) { return max_nan(p, q); });
  });
}

void ReduceMin(const KernelArgs& a) {
  reduce(a, [&](const auto* x, const Block& b, auto tag) {
    using T = typename decltype(tag)::type;
    using A = C<T>;
    reduce_block(x, static_cast<T*>(a.out.data), b, highest<A>(), [](A p, A q) { return min_nan(p, q); });
  });
}

namespace {

// Index of the first maximum (or minimum) along the axis; a NaN counts as the extreme, as in PyTorch.
// [outer, the axis, inner].
Block around_axis(const Shape& s, int64_t axis) {
  Block b;
  for (int64_t d = 0; d < int64_t(s.size()); ++d) (d < axis ? b.outer : d == axis ? b.reduced : b.inner) *= s[size_t(d)];
  return b;
}

// f(o, i) for every lane [o, :, i] along the axis, in parallel when the block is large.
template <class F>
void for_each_lane(const Block& b, F&& f) {
  const int64_t O = b.outer, I = b.inner;
  parallel_loop(O * I, O * b.reduced * I >= kParallelGrain, [&](int64_t i_oi) {
    const int64_t o = i_oi / I, i = i_oi % I;
    f(o, i);
  });
}

template <bool kMax>
void arg_reduce(const KernelArgs& a) {
  const Block b = around_axis(a.in[0].type->shape, a.attrs.i("axis"));
  int64_t* out = static_cast<int64_t*>(a.out.data);
  dispatch_numeric(a.in[0].type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = C<T>;
    const T* x = static_cast<const T*>(a.in[0].data);
    const int64_t N = b.reduced, I = b.inner;
    for_each_lane(b, [&](int64_t o, int64_t i) {
      A best = A(x[o * N * I + i]);
      int64_t idx = 0;
      for (int64_t r = 1; r < N; ++r) {
        A v = A(x[(o * N + r) * I + i]);
        bool better = kMax ? v > best : v < best;
        if constexpr (std::is_floating_point_v<A>) better = better || (v != v && best == best);
        if (better) best = v, idx = r;
      }
      out[o * I + i] = idx;
    });
  });
}

}  // namespace

void ArgMax(const KernelArgs& a) { arg_reduce<true>(a); }

void Numel(const KernelArgs& a) {
  const Shape& s = a.in[0].type->shape;
  const std::vector<int64_t>& axes = a.attrs.ints("axes");
  int64_t count = 1;
  if (axes.empty()) count = shape_numel(s);
  for (int64_t ax : axes) count *= s[size_t(ax)];
  dispatch_numeric(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    *static_cast<T*>(a.out.data) = static_cast<T>(static_cast<C<T>>(count));
  });
}
void ArgMin(const KernelArgs& a) { arg_reduce<false>(a); }

// torch.sort's order, stable: NaN after every number (before, descending), -0.0 equal to +0.0.
void ArgSort(const KernelArgs& a) {
  const Block b = around_axis(a.in[0].type->shape, a.attrs.i("axis"));
  const bool descending = a.attrs.i("descending") != 0;
  int64_t* out = static_cast<int64_t*>(a.out.data);
  dispatch_all(a.in[0].type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = C<T>;
    const T* x = static_cast<const T*>(a.in[0].data);
    const int64_t N = b.reduced, I = b.inner;
    auto first = [descending](A p, A q) {  // p goes before q, position aside
      if constexpr (std::is_floating_point_v<A>) {
        if (p != p || q != q) return descending ? (p != p && q == q) : (p == p && q != q);
      }
      return descending ? q < p : p < q;
    };
    for_each_lane(b, [&](int64_t o, int64_t i) {
      std::vector<std::pair<A, int64_t>> row(static_cast<size_t>(N));
      for (int64_t r = 0; r < N; ++r) row[size_t(r)] = {A(x[(o * N + r) * I + i]), r};
      std::stable_sort(row.begin(), row.end(), [&](const auto& p, const auto& q) { return first(p.first, q.first); });
      for (int64_t r = 0; r < N; ++r) out[(o * N + r) * I + i] = row[size_t(r)].second;
    });
  });
}

}  // namespace hjit::eager

namespace hjit::eager {

void CumSum(const KernelArgs& a) {
  const Block b = around_axis(a.in[0].type->shape, a.attrs.i("axis"));
  dispatch_numeric(a.in[0].type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = SumAcc<T>;
    using R = std::conditional_t<std::is_floating_point_v<C<T>>, T, int64_t>;
    const T* x = static_cast<const T*>(a.in[0].data);
    R* out = static_cast<R*>(a.out.data);
    const int64_t O = b.outer, N = b.reduced, I = b.inner;
    parallel_loop(O, O * N * I >= kParallelGrain && O > 1, [&](int64_t o) {
      std::vector<A> acc(static_cast<size_t>(I), A(0));
      for (int64_t r = 0; r < N; ++r)
        for (int64_t i = 0; i < I; ++i) {
          acc[size_t(i)] += A(C<T>(x[(o * N + r) * I + i]));
          out[(o * N + r) * I + i] = R(acc[size_t(i)]);
        }
    });
  });
}

}  // namespace hjit::eager
