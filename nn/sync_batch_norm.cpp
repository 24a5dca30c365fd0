// SyncBatchNorm: BatchNorm's training-mode statistics over the whole batch across the ranks.
#include <hjit/distributed.h>
#include <hjit/error.h>
#include <hjit/nn/layers.h>

namespace hjit::nn {

Tensor SyncBatchNorm::forward(const Tensor& x) {
  if (!training() || dist::world_size() == 1) return BatchNorm::forward(x);
  check_input(x);
  const DType t = x.dtype();
  // 16-bit floats are normalized in f32, as batch norm's statistics are.
  const Tensor v = t == DType::F16 || t == DType::BF16 ? x.astype(DType::F32) : x;
  const int64_t C = v.shape()[1];
  if (v.numel() == 0)
    throw ValueError("nn::SyncBatchNorm: rank " + std::to_string(dist::rank()) + " has an empty batch " + shape_str(v.shape()) +
                     " (every rank needs values of every channel)");
  std::vector<int> axes{0};
  for (int d = 2; d < v.ndim(); ++d) axes.push_back(d);
  Shape per_channel(size_t(v.ndim()), 1);
  per_channel[1] = C;
  // This rank's mean, biased variance and count, gathered from every rank as rows [mean | var | n].
  const Tensor mean_here = mean(v, axes, true), centered = v - mean_here;
  const Tensor var_here = mean(centered * centered, axes);
  const Tensor count_here = numel(v, axes, v.dtype());
  const Tensor rows = dist::all_gather(concat({mean_here.reshape({C}), var_here, count_here.reshape({1})}).reshape({1, 2 * C + 1}), 0);
  const Tensor means = slice(rows, 1, 0, C), vars = slice(rows, 1, C, 2 * C), counts = slice(rows, 1, 2 * C, 2 * C + 1);
  // Chan et al.'s combination: the whole batch's mean, and its variance as the ranks' variances
  // plus their means' spread, each weighted by its count (no sum of squares to cancel).
  const Tensor total = sum(counts), share = counts / total;
  const Tensor batch_mean = sum(share * means, {0});
  const Tensor spread = means - batch_mean;
  const Tensor batch_var = sum(share * (vars + spread * spread), {0});
  Tensor y = (v - batch_mean.reshape(per_channel)) * rsqrt(batch_var.reshape(per_channel) + eps);
  if (weight.defined()) y = y * weight.reshape(per_channel).astype(y.dtype());
  if (bias.defined()) y = y + bias.reshape(per_channel).astype(y.dtype());
  if (num_batches_tracked.defined()) num_batches_tracked.assign(num_batches_tracked + int64_t(1));
  if (running_mean.defined()) running_mean.assign((1 - momentum) * running_mean + momentum * batch_mean.astype(running_mean.dtype()));
  if (running_var.defined())
    running_var.assign((1 - momentum) * running_var + momentum * (batch_var * (total / (total - 1.0))).astype(running_var.dtype()));
  return y.astype(t);
}

}  // namespace hjit::nn
