// split and chunk: a tensor cut in pieces along an axis, as slices (each piece a view the
// compiler fuses into its readers; nothing is copied).
#include <numeric>
#include <string>

#include <hjit/ops.h>

#include "frontend/ops/op_support.h"

namespace hjit {

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int axis) {
  const int ax = detail::norm_axis(axis, x.ndim(), "split");
  if (x.ndim() == 0) throw ShapeError("split: cannot split a scalar");
  const int64_t n = x.shape()[size_t(ax)];
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw ValueError("split: a piece cannot have " + std::to_string(s) + " elements");
    total += s;
  }
  if (total != n)
    throw ShapeError("split: pieces of " + std::to_string(total) + " elements in all for axis " + std::to_string(ax) + " of " +
                     shape_str(x.shape()) + ", which has " + std::to_string(n));
  std::vector<Tensor> pieces;
  int64_t at = 0;
  for (int64_t s : sizes) {
    pieces.push_back(slice(x, ax, at, at + s));
    at += s;
  }
  return pieces;
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int axis) {
  const int ax = detail::norm_axis(axis, x.ndim(), "split");
  if (x.ndim() == 0) throw ShapeError("split: cannot split a scalar");
  if (size <= 0) throw ValueError("split: pieces of " + std::to_string(size) + " elements; needs at least 1");
  const int64_t n = x.shape()[size_t(ax)];
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < n; at += size) sizes.push_back(std::min(size, n - at));
  if (sizes.empty()) sizes.push_back(0);  // torch.split of an empty axis: one empty piece
  return split(x, sizes, ax);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int axis) {
  const int ax = detail::norm_axis(axis, x.ndim(), "chunk");
  if (x.ndim() == 0) throw ShapeError("chunk: cannot chunk a scalar");
  if (chunks <= 0) throw ValueError("chunk: needs at least 1 chunk, got " + std::to_string(chunks));
  const int64_t n = x.shape()[size_t(ax)];
  return split(x, std::max<int64_t>((n + chunks - 1) / chunks, 1), ax);
}

}  // namespace hjit
