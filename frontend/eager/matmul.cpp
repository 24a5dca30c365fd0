// Batched matrix multiplication with numpy's batch broadcasting.
#include <algorithm>
#include <array>
#include <functional>

#include "frontend/eager/loops.h"
#include "support/thread_pool.h"

namespace hjit::eager {
namespace {

// o[M,N] = x[M,K] @ y[K,N] for rows [i0, i1) of o, blocked so that a panel of y stays in cache and
// the innermost loop runs along a row of y (vectorizable).
template <class A>
void gemm_rows(int64_t i0, int64_t i1, int64_t N, int64_t K, const A* x, const A* y, A* o) {
  constexpr int64_t KB = 128, NB = 512;
  for (int64_t i = i0; i < i1; ++i) std::fill(o + i * N, o + (i + 1) * N, A(0));
  for (int64_t j0 = 0; j0 < N; j0 += NB) {
    const int64_t j1 = std::min(N, j0 + NB);
    for (int64_t k0 = 0; k0 < K; k0 += KB) {
      const int64_t k1 = std::min(K, k0 + KB);
      for (int64_t i = i0; i < i1; ++i) {
        A* orow = o + i * N;
        for (int64_t k = k0; k < k1; ++k) {
          const A aik = x[i * K + k];
          const A* yrow = y + k * N;
          if constexpr (std::is_integral_v<A>) {  // wrapping, as the compiled code (loops.h)
            for (int64_t j = j0; j < j1; ++j) orow[j] = wrapping(orow[j], wrapping(aik, yrow[j], std::multiplies<>()), std::plus<>());
          } else {
            for (int64_t j = j0; j < j1; ++j) orow[j] = A(orow[j] + aik * yrow[j]);
          }
        }
      }
    }
  }
}

// Batch b's offsets (in matrices) in the two operands: the broadcast plan iterates the batch
// dimensions (an empty batch: both 0).
std::array<int64_t, 2> batch_offsets(const BroadcastPlan& plan, bool no_batch, int64_t b) {
  std::array<int64_t, 2> off{0, 0};
  if (no_batch) return off;
  for (size_t d = plan.shape.size(); d-- > 0;) {
    const int64_t idx = b % plan.shape[d];
    b /= plan.shape[d];
    off[0] += idx * plan.strides[0][d], off[1] += idx * plan.strides[1][d];
  }
  return off;
}

}  // namespace

void Matmul(const KernelArgs& a) {
  const TensorType &tx = *a.in[0].type, &ty = *a.in[1].type, &to = *a.out.type;
  const int r = to.rank();
  const int64_t M = to.shape[size_t(r - 2)], N = to.shape[size_t(r - 1)], K = tx.shape[size_t(r - 1)];
  Shape batch(to.shape.begin(), to.shape.end() - 2);
  Shape bx(tx.shape.begin(), tx.shape.end() - 2), by(ty.shape.begin(), ty.shape.end() - 2);
  BroadcastPlan plan = plan_broadcast(batch.empty() ? Shape{1} : batch,
                                      {batch.empty() ? &batch : &bx, batch.empty() ? &batch : &by});
  const int64_t B = shape_numel(batch);
  dispatch_numeric(to.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = C<T>;
    std::vector<A> wx, wy, wo;
    const A* x = widened(static_cast<const T*>(a.in[0].data), tx.numel(), wx);
    const A* y = widened(static_cast<const T*>(a.in[1].data), ty.numel(), wy);
    A* o;
    if constexpr (std::is_same_v<T, A>) o = static_cast<T*>(a.out.data);
    else wo.resize(size_t(to.numel())), o = wo.data();
    constexpr int64_t RB = 32;
    const int64_t row_blocks = (M + RB - 1) / RB;
    parallel_loop(B * row_blocks, B * M * N * K >= kParallelGrain, [&](int64_t i_brb) {
      const int64_t b = i_brb / row_blocks, rb = i_brb % row_blocks;
      const std::array<int64_t, 2> off = batch_offsets(plan, batch.empty(), b);
      gemm_rows(rb * RB, std::min(M, (rb + 1) * RB), N, K, x + off[0] * M * K, y + off[1] * K * N, o + b * M * N);
    });
    if constexpr (!std::is_same_v<T, A>) {
      T* out = static_cast<T*>(a.out.data);
      for (int64_t i = 0; i < to.numel(); ++i) out[i] = T(wo[size_t(i)]);
    }
  });
}

}  // namespace hjit::eager

namespace hjit::eager {

// u8 [.., M, 4K] x i8 [.., K, N, 4] (the right operand packed) -> i32, summed exactly in i32 (a
// sum of 8-bit products fits for any K below 2^16; beyond, it wraps as the compiled code does).
void IntMatmul(const KernelArgs& a) {
  const TensorType &tx = *a.in[0].type, &ty = *a.in[1].type, &to = *a.out.type;
  const int r = to.rank();
  const int64_t M = to.shape[size_t(r - 2)], N = to.shape[size_t(r - 1)], K4 = ty.shape[size_t(r - 2)];
  Shape batch(to.shape.begin(), to.shape.end() - 2);
  Shape bx(tx.shape.begin(), tx.shape.end() - 2), by(ty.shape.begin(), ty.shape.end() - 3);
  BroadcastPlan plan = plan_broadcast(batch.empty() ? Shape{1} : batch, {batch.empty() ? &batch : &bx, batch.empty() ? &batch : &by});
  const int64_t B = shape_numel(batch);
  const auto* x = static_cast<const uint8_t*>(a.in[0].data);
  const auto* y = static_cast<const int8_t*>(a.in[1].data);
  auto* o = static_cast<int32_t*>(a.out.data);
  parallel_loop(B * M, B * M * N * K4 * 4 >= kParallelGrain, [&](int64_t i_bi) {
    const int64_t b = i_bi / M, i = i_bi % M;
    const std::array<int64_t, 2> off = batch_offsets(plan, batch.empty(), b);
    const uint8_t* row = x + off[0] * M * K4 * 4 + i * K4 * 4;
    const int8_t* panel = y + off[1] * K4 * N * 4;
    int32_t* out = o + (b * M + i) * N;
    std::fill(out, out + N, 0);
    for (int64_t k = 0; k < K4; ++k)
      for (int64_t j = 0; j < N; ++j) {
        const int8_t* w = panel + (k * N + j) * 4;
        const uint8_t* v = row + k * 4;
        const int32_t dot = int32_t(v[0]) * w[0] + int32_t(v[1]) * w[1] + int32_t(v[2]) * w[2] + int32_t(v[3]) * w[3];
        out[j] = int32_t(uint32_t(out[j]) + uint32_t(dot));
      }
  });
}

}  // namespace hjit::eager
