// ONNX ops that select by index or rearrange blocks: GatherElements, OneHot, EyeLike,
// DepthToSpace, SpaceToDepth; and the losses that pick each target's class.
#include <limits>

#include "onnx_import/ops/ops.h"
#include "onnx_import/tensor_proto.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

int64_t rank_of(const Tensor& t) { return int64_t(t.shape().size()); }

// Indices in [-extent, extent) made non-negative (ONNX allows counting from the end).
Tensor wrap(const Tensor& idx, int64_t extent) {
  const Tensor i = astype(idx, DType::I64);
  return where(i < int64_t(0), i + extent, i);
}

// out[i...] = data[i... with idx[i...] along axis] (hjit::gather).
Tensor gather_elements(const Tensor& data, const Tensor& idx, int axis) { return gather(data, axis, idx); }

V GatherElements(const NodeContext& n) {
  const Tensor &data = n.input(0), &idx = n.input(1);
  const int64_t r = rank_of(data);
  if (rank_of(idx) != r) n.fail("its indices have rank " + std::to_string(rank_of(idx)) + " where the data has " + std::to_string(r));
  const int axis = n.axis(n.attr_int("axis", 0), r);
  const int64_t extent = data.shape()[size_t(axis)];
  return {gather_elements(data, wrap(check_index(idx, -extent, extent, "GatherElements index"), extent), axis)};
}

// GatherND: each index tuple (the last axis of indices) picks a slice of data, within the
// leading batch_dims; computed as one take from data flattened to [batches * picked, rest...].
V GatherND(const NodeContext& n) {
  const Tensor &data = n.input(0), &idx = n.input(1);
  const int64_t b = n.attr_int("batch_dims", 0), r = rank_of(data), q = rank_of(idx);
  if (q < 1 || b < 0 || b >= std::min(r, q)) n.fail("needs batch_dims below the ranks of data and indices");
  const int64_t m = idx.shape().back();
  if (m < 1 || b + m > r) n.fail("its index tuples of " + std::to_string(m) + " do not fit data of rank " + std::to_string(r));
  int64_t batches = 1, picked = 1;
  for (int64_t d = 0; d < b; ++d) batches *= data.shape()[size_t(d)];
  for (int64_t d = b; d < b + m; ++d) picked *= data.shape()[size_t(d)];
  Shape flat_shape{batches * picked};
  for (int64_t d = b + m; d < r; ++d) flat_shape.push_back(data.shape()[size_t(d)]);
  const Shape tuples(idx.shape().begin(), idx.shape().end() - 1);
  Tensor flat = Tensor::zeros(tuples, DType::I64);
  int64_t stride = 1;
  for (int64_t j = m - 1; j >= 0; --j) {
    const int64_t extent = data.shape()[size_t(b + j)];
    const Tensor ij = reshape(slice(idx, int(q - 1), j, j + 1), tuples);
    flat = flat + wrap(check_index(ij, -extent, extent, "GatherND index"), extent) * stride;
    stride *= extent;
  }
  Tensor batch = Tensor::zeros(tuples, DType::I64);  // the flat batch number of each tuple
  int64_t bstride = 1;
  for (int64_t d = b - 1; d >= 0; --d) {
    batch = batch + iota(tuples, int(d), DType::I64) * bstride;
    bstride *= data.shape()[size_t(d)];
  }
  Tensor out = take(reshape(data, flat_shape), flat + batch * picked, 0);
  return {out};
}

// ReverseSequence: along time_axis, the first sequence_lens[b] steps of each batch entry reversed.
V ReverseSequence(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t r = rank_of(x);
  const int time = n.axis(n.attr_int("time_axis", 0), r), batch = n.axis(n.attr_int("batch_axis", 1), r);
  Shape ls(size_t(r), 1);
  ls[size_t(batch)] = x.shape()[size_t(batch)];
  const Tensor len = reshape(astype(n.input(1), DType::I64), ls);
  const Tensor t = iota(x.shape(), time, DType::I64);
  const Tensor src = where(t < len, len - t - int64_t(1), t);
  const int64_t extent = x.shape()[size_t(time)];
  return {gather_elements(x, check_index(src, 0, extent, "ReverseSequence step"), time)};
}

// TopK: hjit::topk (the lowest index first among equals, as ONNX's reference).
V TopK(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int axis = n.axis(n.attr_int("axis", -1), rank_of(x));
  const int64_t k = n.opset() < 10 ? n.attr_int("k") : n.input_ints(1).at(0);
  if (k < 0 || k > x.shape()[size_t(axis)]) n.fail("k = " + std::to_string(k) + " is out of range for an axis of " + std::to_string(x.shape()[size_t(axis)]));
  auto [values, indices] = topk(x, k, axis, n.attr_int("largest", 1) != 0);
  return {values, indices};
}

V OneHot(const NodeContext& n) {
  const Tensor& idx = n.input(0);
  const int64_t depth = int64_t(n.input_doubles(1).at(0));
  const Tensor& values = n.input(2);
  if (values.numel() != 2) n.fail("its values must be [off, on]");
  const int axis = n.axis(n.attr_int("axis", -1), rank_of(idx) + 1);
  Shape out = idx.shape();
  out.insert(out.begin() + axis, depth);
  const Tensor i = unsqueeze(wrap(astype(idx, DType::I64), depth), axis);
  const Tensor off = reshape(slice(values, 0, 0, 1), {}), on = reshape(slice(values, 0, 1, 2), {});
  return {where(iota(out, axis, DType::I64) == i, on, off)};
}

V EyeLike(const NodeContext& n) {
  const Tensor& x = n.input(0);
  if (rank_of(x) != 2) n.fail("takes a matrix, given " + shape_str(x.shape()));
  const DType dtype = n.has_attr("dtype") ? dtype_from_onnx(int(n.attr_int("dtype", 1)), "hjit::onnx: " + n.where() + " attribute 'dtype'") : x.dtype();
  const Tensor eye = iota(x.shape(), 0, DType::I64) + n.attr_int("k", 0) == iota(x.shape(), 1, DType::I64);
  return {astype(eye, dtype)};
}

V DepthToSpace(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t b = n.attr_int("blocksize");
  if (rank_of(x) != 4 || b <= 0 || x.shape()[1] % (b * b) != 0) n.fail("needs [N, C, H, W] with C a multiple of blocksize squared");
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3], c = C / (b * b);
  if (n.attr_string("mode", "DCR") == "CRD")
    return {reshape(transpose(reshape(x, {N, c, b, b, H, W}), {0, 1, 4, 2, 5, 3}), {N, c, H * b, W * b})};
  return {reshape(transpose(reshape(x, {N, b, b, c, H, W}), {0, 3, 4, 1, 5, 2}), {N, c, H * b, W * b})};
}

V SpaceToDepth(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const int64_t b = n.attr_int("blocksize");
  if (rank_of(x) != 4 || b <= 0 || x.shape()[2] % b != 0 || x.shape()[3] % b != 0) n.fail("needs [N, C, H, W] with H and W multiples of blocksize");
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  return {reshape(transpose(reshape(x, {N, C, H / b, b, W / b, b}), {0, 3, 5, 1, 2, 4}), {N, C * b * b, H / b, W / b})};
}

// The scatter reductions ONNX 1.12 defines: none (replace), add and mul.
Tensor combine(const NodeContext& n, const Tensor& data, const Tensor& hit, const Tensor& summed, const Tensor& product) {
  const std::string reduction = n.attr_string("reduction", "none");
  if (reduction == "none") return where(hit, summed, data);
  if (reduction == "add") return as_dtype(data + summed, data.dtype());
  if (reduction == "mul") return as_dtype(data * product, data.dtype());
  n.fail("has reduction '" + reduction + "' (none, add or mul)");
}

// The product of the values of x where `mask` is set, along `axis` (1 where none is).
Tensor masked_product(const Tensor& x, const Tensor& mask, int axis) {
  return product_along(where(mask, x, Tensor::scalar(1, x.dtype())), {axis}, false);
}

// ScatterElements (and opset 9's Scatter): every update goes to data at its own position with the
// index along `axis`. Each output position gathers its updates through a one-hot match over the
// updates' axis, then pads up to the data's shape.
V ScatterElements(const NodeContext& n) {
  const Tensor &data = n.input(0), &idx = n.input(1), &upd = n.input(2);
  const int64_t r = rank_of(data);
  if (rank_of(idx) != r || idx.shape() != upd.shape()) n.fail("needs indices and updates of one shape and the data's rank");
  const int axis = n.axis(n.attr_int("axis", 0), r);
  const int64_t extent = data.shape()[size_t(axis)];
  Shape wide = idx.shape();
  wide.push_back(extent);
  const Tensor k = unsqueeze(wrap(check_index(idx, -extent, extent, "ScatterElements index"), extent), int(r));
  const Tensor match = iota(wide, int(r), DType::I64) == k;  // [U..., extent]
  const Tensor u = unsqueeze(upd, int(r));
  Tensor summed = sum(where(match, u, Tensor::scalar(0, upd.dtype())), {axis});  // [U without axis..., extent]
  Tensor hit = sum(astype(match, DType::I64), {axis}) > int64_t(0);
  Tensor product = masked_product(broadcast_to(u, wide), match, axis);
  // The extent axis (now last) back to `axis`, then each other axis padded to the data's extent.
  std::vector<int> perm;
  for (int d = 0; d < int(r) - 1; ++d) perm.push_back(d);
  perm.insert(perm.begin() + axis, int(r) - 1);
  std::vector<std::pair<int64_t, int64_t>> widths;
  for (int64_t d = 0; d < r; ++d) widths.push_back({0, d == axis ? 0 : data.shape()[size_t(d)] - idx.shape()[size_t(d)]});
  auto place = [&](const Tensor& t, double fill) { return pad(transpose(t, perm), widths, fill); };
  return {combine(n, data, place(astype(hit, DType::U8), 0) > 0, as_dtype(place(summed, 0), data.dtype()), place(product, 1))};
}

// ScatterND: each index tuple (the last axis of indices) names a slice of data that its update
// replaces; tuples are matched one-hot against the flattened leading axes and the updates summed in.
V ScatterND(const NodeContext& n) {
  const Tensor &data = n.input(0), &idx = n.input(1), &upd = n.input(2);
  const int64_t r = rank_of(data), q = rank_of(idx), m = idx.shape().back();
  if (m < 1 || m > r) n.fail("its index tuples of " + std::to_string(m) + " do not fit data of rank " + std::to_string(r));
  int64_t cells = 1, tuples = 1, rest = 1;
  for (int64_t d = 0; d < m; ++d) cells *= data.shape()[size_t(d)];
  for (int64_t d = 0; d < q - 1; ++d) tuples *= idx.shape()[size_t(d)];
  for (int64_t d = m; d < r; ++d) rest *= data.shape()[size_t(d)];
  if (upd.numel() != tuples * rest) n.fail("its updates do not hold one slice per index tuple");
  const Shape tuple_shape(idx.shape().begin(), idx.shape().end() - 1);
  Tensor flat = Tensor::zeros(tuple_shape, DType::I64);
  int64_t stride = 1;
  for (int64_t j = m - 1; j >= 0; --j) {
    const int64_t extent = data.shape()[size_t(j)];
    const Tensor ij = reshape(slice(idx, int(q - 1), j, j + 1), tuple_shape);
    flat = flat + wrap(check_index(ij, -extent, extent, "ScatterND index"), extent) * stride;
    stride *= extent;
  }
  const Tensor match = iota({cells, tuples}, 0, DType::I64) == reshape(flat, {1, tuples});  // [cells, tuples]
  const Tensor u = reshape(upd, {1, tuples, rest});
  const Tensor hit3 = reshape(match, {cells, tuples, 1});
  const Tensor summed = sum(where(hit3, u, Tensor::scalar(0, upd.dtype())), {1});  // [cells, rest]
  const Tensor hit = broadcast_to(sum(astype(match, DType::I64), {1}, true) > int64_t(0), {cells, rest});
  const Tensor product = masked_product(broadcast_to(u, {cells, tuples, rest}), broadcast_to(hit3, {cells, tuples, rest}), 1);
  const Tensor out = combine(n, reshape(data, {cells, rest}), hit, as_dtype(summed, data.dtype()), product);
  return {reshape(out, data.shape())};
}

// NegativeLogLikelihoodLoss on log-probabilities [N, C, d...] and targets [N, d...]: each target's
// class picked through a mask (no gather out of range for an ignored target), weighted, reduced.
std::vector<Tensor> nll(const NodeContext& n, const Tensor& logp, const Tensor& target, const std::optional<Tensor>& weight) {
  if (rank_of(logp) < 2 || rank_of(target) != rank_of(logp) - 1) n.fail("needs input [N, C, ...] and target [N, ...]");
  const int64_t classes = logp.shape()[1];
  const Tensor t = astype(target, DType::I64);
  Tensor keep = Tensor::ones(t.shape(), DType::Bool);
  if (n.has_attr("ignore_index")) keep = t != n.attr_int("ignore_index", 0);
  const Tensor picked = sum(where(iota(logp.shape(), 1, DType::I64) == unsqueeze(t, 1), logp, 0.0), {1});
  Tensor w = astype(keep, logp.dtype());
  if (weight) w = where(keep, take(*weight, check_index(where(keep, t, int64_t(0)), 0, classes, "target class")), 0.0);
  else check_index(where(keep, t, int64_t(0)), 0, classes, "target class");
  const Tensor loss = -picked * w;
  const std::string reduction = n.attr_string("reduction", "mean");
  if (reduction == "none") return {loss};
  if (reduction == "sum") return {sum(loss)};
  if (reduction != "mean") n.fail("has reduction '" + reduction + "' (none, sum or mean)");
  return {sum(loss) / sum(w)};
}

V NegativeLogLikelihoodLoss(const NodeContext& n) { return nll(n, n.input(0), n.input(1), n.optional_input(2)); }

V SoftmaxCrossEntropyLoss(const NodeContext& n) {
  const Tensor logp = log_softmax(n.input(0), 1);
  V out = nll(n, logp, n.input(1), n.optional_input(2));
  out.push_back(logp);
  return out;
}

}  // namespace

void add_indexing_ops(ConverterTable& t) {
#define HJIT_ONNX_OP(name) t[#name] = name;
  HJIT_ONNX_OP(GatherElements) HJIT_ONNX_OP(GatherND) HJIT_ONNX_OP(ReverseSequence) HJIT_ONNX_OP(TopK) HJIT_ONNX_OP(OneHot) HJIT_ONNX_OP(EyeLike) HJIT_ONNX_OP(DepthToSpace)
  HJIT_ONNX_OP(SpaceToDepth) HJIT_ONNX_OP(ScatterElements) HJIT_ONNX_OP(ScatterND) HJIT_ONNX_OP(NegativeLogLikelihoodLoss) HJIT_ONNX_OP(SoftmaxCrossEntropyLoss)
#undef HJIT_ONNX_OP
  t["Scatter"] = ScatterElements;  // opset 9's name for it
}

}  // namespace hjit::onnx_import
