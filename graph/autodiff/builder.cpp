#include "graph/autodiff/builder.h"

namespace hjit {

int Builder::sum(int x, std::vector<int64_t> axes, bool keepdims) {
  if (axes.empty()) return x;
  return op(OpKind::ReduceSum, {x}, Attrs{{"axes", std::move(axes)}, {"keepdims", int64_t(keepdims)}});
}

int Builder::transpose(int x, std::vector<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == int64_t(i);
  return identity ? x : op(OpKind::Transpose, {x}, Attrs{{"perm", std::move(perm)}});
}

int Builder::unbroadcast(int x, const Shape& target) {
  const Shape from = type(x).shape, shape = target;  // copies: adding nodes moves the graph's storage
  if (from == shape) return x;
  const size_t lead = from.size() - shape.size();
  std::vector<int64_t> axes;
  for (size_t d = 0; d < from.size(); ++d)
    if (d < lead || (shape[d - lead] == 1 && from[d] != 1)) axes.push_back(int64_t(d));
  return reshape(sum(x, axes, true), shape);
}

int Builder::transpose_last2(int x) {
  const int r = type(x).rank();
  std::vector<int64_t> perm;
  for (int d = 0; d < r; ++d) perm.push_back(d);
  std::swap(perm[size_t(r - 1)], perm[size_t(r - 2)]);
  return transpose(x, perm);
}

int Builder::spread(int x, int axis, int64_t factor) {
  if (factor == 1) return x;
  Shape s = type(x).shape;
  const size_t a = size_t(axis);
  // [.., n, ..] -> [.., n, 1, ..] -> pad the new axis to `factor` -> [.., n * factor, ..]
  Shape expanded = s;
  expanded.insert(expanded.begin() + std::ptrdiff_t(a) + 1, 1);
  std::vector<int64_t> lo(expanded.size(), 0), hi(expanded.size(), 0);
  hi[a + 1] = factor - 1;
  int padded = pad(reshape(x, expanded), lo, hi);
  s[a] *= factor;
  return reshape(padded, s);
}

}  // namespace hjit
