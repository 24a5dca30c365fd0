// Det: Gaussian elimination with partial pivoting, unrolled over the (static) matrix size as
// element-wise ops, argmax and sums on the whole batch: a row swap is a rank-1 update by one-hot
// rows, so no step gathers or scatters, and the result differentiates like any other op chain.
#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

V Det(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const Shape& s = x.shape();
  if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2]) n.fail("needs square matrices in its last two axes, given " + shape_str(s));
  if (!is_float(x.dtype())) n.fail<DTypeError>("takes floating point matrices");
  const int64_t m = s.back();
  const Shape batch(s.begin(), s.end() - 2);
  int64_t count = 1;
  for (int64_t d : batch) count *= d;
  Tensor a = reshape(x, {count, m, m});
  Tensor det = Tensor::ones({count}, x.dtype());
  const Tensor rows = iota({m}, 0, DType::I64);
  for (int64_t k = 0; k < m; ++k) {
    const Tensor below = astype(rows >= double(k), x.dtype());                          // [m]: rows still to pivot
    const Tensor column = reshape(slice(a, 2, k, k + 1), {count, m});           // [count, m]
    const Tensor p = argmax(abs(column) * below - (1.0 - below), 1);            // the largest below k
    const Tensor pick_p = astype(rows == reshape(p, {count, 1}), x.dtype());      // [count, m] one-hot
    const Tensor pick_k = astype(rows == double(k), x.dtype());
    const Tensor row_p = sum(a * unsqueeze(pick_p, 2), {1});                    // [count, m]
    const Tensor row_k = reshape(slice(a, 1, k, k + 1), {count, m});
    a = a + unsqueeze(pick_k - pick_p, 2) * unsqueeze(row_p - row_k, 1);       // swap rows k and p
    det = det * where(p == double(k), 1.0, -1.0);
    const Tensor pivot = reshape(slice(row_p, 1, k, k + 1), {count});
    det = det * pivot;
    // Eliminate below the pivot (a zero pivot makes the determinant 0; divide by 1 instead).
    const Tensor safe = where(pivot == 0.0, 1.0, pivot);
    const Tensor factor = reshape(slice(a, 2, k, k + 1), {count, m}) / unsqueeze(safe, 1) * astype(rows > double(k), x.dtype());
    a = a - unsqueeze(factor, 2) * unsqueeze(row_p, 1);
  }
  return {as_dtype(reshape(det, batch), x.dtype())};
}

}  // namespace

void add_linalg_ops(ConverterTable& t) { t["Det"] = Det; }

}  // namespace hjit::onnx_import
