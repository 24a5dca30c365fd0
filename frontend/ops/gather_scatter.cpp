// Gathers and scatters along an axis (torch.gather, torch.scatter, torch.scatter_add), sort and
// topk: compositions of take, one-hot matches, reductions and argsort, so that their gradients
// and compiled forms come with them.
#include <limits>
#include <string>

#include <hjit/ops.h>

#include "frontend/ops/op_support.h"

namespace hjit {

namespace {

// topk's k up to which rounds of argmax beat a sort's network (its log2(n)^2 / 2 steps).
constexpr int64_t kTopkRounds = 4;

// indices of x's rank, each dimension but `axis` at most x's, integers in [-extent, extent)
// along axis: made non-negative and checked (IndexError at the call, eagerly or compiled), or
// clamped into the axis (IndexMode::Clamp).
Tensor checked_indices(const char* op, const Tensor& x, const Tensor& indices, int axis, IndexMode mode = IndexMode::Check) {
  if (is_floating(indices.dtype()) || indices.dtype() == DType::Bool)
    throw DTypeError(std::string(op) + ": indices must be integers, given " + dtype_name(indices.dtype()));
  if (indices.ndim() != x.ndim())
    throw ShapeError(std::string(op) + ": indices " + shape_str(indices.shape()) + " must have the rank of the input " + shape_str(x.shape()));
  for (int d = 0; d < x.ndim(); ++d)
    if (d != axis && indices.dim(d) > x.dim(d))
      throw ShapeError(std::string(op) + ": indices " + shape_str(indices.shape()) + " are larger than the input " + shape_str(x.shape()) +
                       " along axis " + std::to_string(d));
  const int64_t extent = x.dim(axis);
  if (mode == IndexMode::Clamp) return detail::clamped_indices(indices, extent);
  const Tensor i = indices.astype(DType::I64);
  return check_index(where(i < int64_t(0), i + extent, i), 0, extent, std::string(op) + ": index");
}

}  // namespace

Tensor gather(const Tensor& x, int axis, const Tensor& indices, IndexMode mode) {
  const int ax = detail::norm_axis(axis, x.ndim(), "gather");
  const Tensor idx = checked_indices("gather", x, indices, ax, mode);
  // One take from the flattened input at each element's flat position.
  Tensor flat = Tensor::scalar(0, DType::I64);
  int64_t stride = 1;
  for (int d = x.ndim() - 1; d >= 0; --d) {
    flat = flat + (d == ax ? idx : iota(idx.shape(), d, DType::I64)) * stride;
    stride *= x.dim(d);
  }
  return take(x.reshape({-1}), broadcast_to(flat, idx.shape()), 0);
}

namespace {

// For each position of x: the sum of the src values whose index lands there, and whether any
// does. Each update is matched one-hot over the axis ([indices..., extent]), summed over the
// axis of the indices, and the result padded up to x's shape.
std::pair<Tensor, Tensor> scattered(const char* op, const Tensor& x, int axis, const Tensor& indices, const Tensor& src) {
  const int ax = detail::norm_axis(axis, x.ndim(), op);
  if (src.shape() != indices.shape())
    throw ShapeError(std::string(op) + ": src " + shape_str(src.shape()) + " must have the indices' shape " + shape_str(indices.shape()));
  const Tensor idx = checked_indices(op, x, indices, ax);
  const int r = x.ndim();
  Shape wide = idx.shape();
  wide.push_back(x.dim(ax));
  const Tensor match = iota(wide, r, DType::I64) == unsqueeze(idx, r);  // [indices..., extent]
  const Tensor summed = sum(where(match, unsqueeze(src.astype(x.dtype()), r), Tensor::scalar(0, x.dtype())), {ax});
  const Tensor hit = sum(match.astype(DType::I64), {ax}) > int64_t(0);
  // The extent axis (now last) back to `axis`, each other axis padded to x's extent.
  std::vector<int> perm;
  for (int d = 0; d < r - 1; ++d) perm.push_back(d);
  perm.insert(perm.begin() + ax, r - 1);
  std::vector<std::pair<int64_t, int64_t>> widths;
  for (int d = 0; d < r; ++d) widths.push_back({0, d == ax ? 0 : x.dim(d) - idx.dim(d)});
  return {pad(transpose(summed, perm), widths, 0), pad(transpose(hit, perm), widths, 0)};
}

}  // namespace

Tensor scatter(const Tensor& x, int axis, const Tensor& indices, const Tensor& src) {
  auto [summed, hit] = scattered("scatter", x, axis, indices, src);
  return where(hit, summed, x);
}

Tensor scatter_add(const Tensor& x, int axis, const Tensor& indices, const Tensor& src) {
  return x + scattered("scatter_add", x, axis, indices, src).first;
}

Tensor argsort(const Tensor& x, int axis, bool descending) {
  if (x.ndim() == 0) return Tensor::zeros({}, DType::I64);
  const int ax = detail::norm_axis(axis, x.ndim(), "argsort");
  return detail::apply(OpKind::ArgSort, {x}, Attrs{{"axis", int64_t(ax)}, {"descending", int64_t(descending)}});
}

std::pair<Tensor, Tensor> sort(const Tensor& x, int axis, bool descending) {
  if (x.ndim() == 0) return {x, Tensor::zeros({}, DType::I64)};
  const int ax = detail::norm_axis(axis, x.ndim(), "sort");
  const Tensor order = argsort(x, ax, descending);
  return {gather(x, ax, order), order};
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int axis, bool largest) {
  if (x.ndim() == 0) throw ShapeError("topk: takes a tensor of rank 1 or more");
  const int ax = detail::norm_axis(axis, x.ndim(), "topk");
  if (k < 0 || k > x.dim(ax))
    throw ValueError("topk: k = " + std::to_string(k) + " is out of range for an axis of " + std::to_string(x.dim(ax)));
  if (k == 0) {
    Shape empty = x.shape();
    empty[size_t(ax)] = 0;
    return {Tensor::zeros(empty, x.dtype()), Tensor::zeros(empty, DType::I64)};
  }
  // Beyond a few rounds of arg-extreme, a sort: O(n log^2 n) against k passes over the axis.
  if (k > kTopkRounds || !largest) {
    const Tensor order = slice(argsort(x, ax, largest), ax, 0, k);
    return {gather(x, ax, order), order};
  }
  // k rounds of argmax, each found value masked out: the lowest index first among equals
  // (torch.topk's order), NaN largest.
  const double inf = std::numeric_limits<double>::infinity();
  Tensor rest = is_floating(x.dtype()) ? x : x.astype(DType::F64);
  const Tensor positions = iota(x.shape(), ax, DType::I64);
  std::vector<Tensor> values, indices;
  for (int64_t i = 0; i < k; ++i) {
    const Tensor at = argmax(rest, ax, true);
    values.push_back(gather(x, ax, at));
    indices.push_back(at);
    rest = where(positions == at, -inf, rest);
  }
  return {concat(values, ax), concat(indices, ax)};
}

}  // namespace hjit
