// Ops whose output shape depends on their input values: NonZero, Compress, Unique,
// NonMaxSuppression. The values they shape by must be known when the model runs them (eagerly,
// or constants while tracing): they are computed on the host and the data gathered by hjit ops.
// Inside a compiled module with values from the model's inputs they are the typed "must be known"
// error (a graph break between compiled segments is the way to go further).
#include <algorithm>
#include <cmath>
#include <climits>
#include <array>
#include <numeric>

#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

Tensor i64s(const std::vector<int64_t>& v, Shape shape) { return Tensor::from_vector<int64_t>(v, std::move(shape)); }

V NonZero(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const std::vector<double> v = n.input_doubles(0);
  const Shape& s = x.shape();
  std::vector<std::vector<int64_t>> coords(s.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == 0) continue;
    size_t rest = i;
    for (size_t d = s.size(); d-- > 0;) {
      coords[d].push_back(int64_t(rest % size_t(s[d])));
      rest /= size_t(s[d]);
    }
  }
  std::vector<int64_t> flat;
  for (const auto& c : coords) flat.insert(flat.end(), c.begin(), c.end());
  const int64_t count = s.empty() ? (v.at(0) != 0 ? 1 : 0) : int64_t(coords[0].size());
  if (s.empty()) return {Tensor::zeros({0, count}, DType::I64)};
  return {i64s(flat, {int64_t(s.size()), count})};
}

V Compress(const NodeContext& n) {
  Tensor x = n.input(0);
  const std::vector<int64_t> keep = n.input_ints(1);
  int axis = 0;
  if (n.has_attr("axis")) axis = n.axis(n.attr_int("axis", 0), int64_t(x.shape().size()));
  else x = reshape(x, {-1});
  std::vector<int64_t> at;
  for (size_t i = 0; i < keep.size() && int64_t(i) < x.shape()[size_t(axis)]; ++i)
    if (keep[i]) at.push_back(int64_t(i));
  return {take(x, i64s(at, {int64_t(at.size())}), axis)};
}

V Unique(const NodeContext& n) {
  Tensor x = n.input(0);
  const std::vector<double> v = n.input_doubles(0);
  int axis = 0;
  if (n.has_attr("axis")) axis = n.axis(n.attr_int("axis", 0), int64_t(x.shape().size()));
  else x = reshape(x, {-1});
  // Slices along the axis as rows of values: [outer, extent, inner].
  const Shape& s = x.shape();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t extent = s[size_t(axis)];
  auto slice_values = [&](int64_t k) {
    std::vector<double> out;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) out.push_back(v[size_t((o * extent + k) * inner + i)]);
    return out;
  };
  std::map<std::vector<double>, int64_t> first;  // slice -> its first position
  std::vector<int64_t> order, counts, inverse(static_cast<size_t>(extent));
  std::vector<std::vector<double>> rows;
  for (int64_t k = 0; k < extent; ++k) rows.push_back(slice_values(k));
  for (int64_t k = 0; k < extent; ++k)
    if (first.emplace(rows[size_t(k)], k).second) order.push_back(k);
  if (n.attr_int("sorted", 1)) std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return rows[size_t(a)] < rows[size_t(b)]; });
  std::map<std::vector<double>, int64_t> slot;
  for (size_t j = 0; j < order.size(); ++j) slot[rows[size_t(order[j])]] = int64_t(j);
  counts.assign(order.size(), 0);
  for (int64_t k = 0; k < extent; ++k) {
    inverse[size_t(k)] = slot[rows[size_t(k)]];
    ++counts[size_t(inverse[size_t(k)])];
  }
  const int64_t u = int64_t(order.size());
  return {take(x, i64s(order, {u}), axis), i64s(order, {u}), i64s(inverse, {extent}), i64s(counts, {u})};
}

// ONNX's NonMaxSuppression: per batch and class, boxes above score_threshold by descending score,
// each kept unless its IoU with a kept one exceeds iou_threshold, at most max_output per class.
V NonMaxSuppression(const NodeContext& n) {
  const Shape &bs = n.input(0).shape(), &ss = n.input(1).shape();
  if (bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1])
    n.fail("needs boxes [batch, boxes, 4] and scores [batch, classes, boxes]");
  const std::vector<double> boxes = n.input_doubles(0), scores = n.input_doubles(1);
  const int64_t max_out = n.has_input(2) ? n.input_ints(2).at(0) : 0;
  const double iou_max = n.has_input(3) ? n.input_doubles(3).at(0) : 0.0;
  const bool has_floor = n.has_input(4);
  const double floor_score = has_floor ? n.input_doubles(4).at(0) : 0.0;
  const bool center = n.attr_int("center_point_box", 0) != 0;
  const int64_t B = bs[0], N = bs[1], C = ss[1];
  // Only a kept box whose columns and rows overlap a candidate's can suppress it (any other has
  // IoU 0, at most any threshold from 0 up): the kept boxes sorted by left edge, and a candidate
  // compared with those starting within the widest kept box's width of it, rows checked first.
  // Exhaustive (every kept box) for a negative threshold or coordinates that are not finite, where
  // that does not hold.
  const bool indexed = iou_max >= 0 && std::all_of(boxes.begin(), boxes.end(), [](double v) { return std::isfinite(v); });
  std::vector<int64_t> out;
  std::vector<std::array<double, 4>> box(static_cast<size_t>(N));  // top, left, bottom, right
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < N; ++i) {
      const double* p = boxes.data() + (b * N + i) * 4;
      box[size_t(i)] = center ? std::array<double, 4>{p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2}
                              : std::array<double, 4>{std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
    }
    auto iou = [&](int64_t i, int64_t j) {
      const auto &a = box[size_t(i)], &c = box[size_t(j)];
      const double h = std::max(0.0, std::min(a[2], c[2]) - std::max(a[0], c[0]));
      const double w = std::max(0.0, std::min(a[3], c[3]) - std::max(a[1], c[1]));
      const double inter = h * w, area = (a[2] - a[0]) * (a[3] - a[1]) + (c[2] - c[0]) * (c[3] - c[1]) - inter;
      return area > 0 ? inter / area : 0.0;
    };
    for (int64_t c = 0; c < C; ++c) {
      const double* score = scores.data() + (b * C + c) * N;  // N may be 0: no element is bound
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < N; ++i)
        if (!has_floor || score[i] > floor_score) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) { return score[i] > score[j]; });
      std::vector<int64_t> kept;
      std::vector<std::pair<double, int64_t>> by_left;  // (left edge, box), sorted
      double widest = 0;
      auto suppressed = [&](int64_t i) {
        if (!indexed) return std::any_of(kept.begin(), kept.end(), [&](int64_t j) { return iou(i, j) > iou_max; });
        const auto& a = box[size_t(i)];
        auto it = std::upper_bound(by_left.begin(), by_left.end(), std::pair<double, int64_t>(a[1] - widest, INT64_MAX));
        for (; it != by_left.end() && it->first < a[3]; ++it) {
          const auto& k = box[size_t(it->second)];
          if (k[0] >= a[2] || k[2] <= a[0]) continue;  // no row in common
          if (iou(i, it->second) > iou_max) return true;
        }
        return false;
      };
      for (int64_t i : cand) {
        if (int64_t(kept.size()) >= max_out) break;
        if (suppressed(i)) continue;
        kept.push_back(i);
        if (indexed) {
          const auto& a = box[size_t(i)];
          const std::pair<double, int64_t> entry(a[1], i);
          by_left.insert(std::upper_bound(by_left.begin(), by_left.end(), entry), entry);
          widest = std::max(widest, a[3] - a[1]);
        }
      }
      for (int64_t i : kept) out.insert(out.end(), {b, c, i});
    }
  }
  return {i64s(out, {int64_t(out.size() / 3), 3})};
}

}  // namespace

void add_value_shaped_ops(ConverterTable& t) {
#define HJIT_ONNX_OP(name) t[#name] = name;
  HJIT_ONNX_OP(NonZero) HJIT_ONNX_OP(Compress) HJIT_ONNX_OP(Unique) HJIT_ONNX_OP(NonMaxSuppression)
#undef HJIT_ONNX_OP
}

}  // namespace hjit::onnx_import
