// Layers with torch.nn's arguments, parameter names, shapes and default initializations (so a
// PyTorch state dict loads by name: nn/checkpoint's .npz files). Each holds its parameters as
// public members and calls the functional op of <hjit/ops.h>.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <hjit/error.h>
#include <hjit/nn/module.h>
#include <hjit/nn/quantize.h>
#include <hjit/ops.h>

namespace hjit::nn {

// A size per spatial dimension, or one for all: Conv2d(3, 16, 3) or Conv2d(3, 16, {3, 5}).
struct Size2 : Pair {
  Size2(int64_t v) : Pair{v, v} {}
  Size2(int64_t a, int64_t b) : Pair{a, b} {}
};
struct Size3 : Triple {
  Size3(int64_t v) : Triple{v, v, v} {}
  Size3(int64_t a, int64_t b, int64_t c) : Triple{a, b, c} {}
};

// y = x W^T + b on the last axis; W [out, in] and b [out] ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Layer {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
  Int8State int8;                // set by nn::quantize (quantize.h)
  WeightOnlyState weight_only;   // set by nn::quantize_weights (quantize.h)
};

// Convolutions: weight [out, in / groups, kernel...] ([in, out / groups, kernel...] when
// transposed) and bias [out], both ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as PyTorch draws them.
class ConvLayer : public Layer {
 public:
  Tensor weight, bias;

 protected:
  ConvLayer(const char* layer, int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel, int64_t groups, bool bias,
            bool transposed);
};

class Conv1d : public ConvLayer {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, int64_t padding = 0,
         int64_t dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  int64_t stride, padding, dilation, groups;
};

class Conv2d : public ConvLayer {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride = 1, Size2 padding = 0, Size2 dilation = 1,
         int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  Pair stride, padding, dilation;
  int64_t groups;
  Int8State int8;  // set by nn::quantize (quantize.h)
};

class Conv3d : public ConvLayer {
 public:
  Conv3d(int64_t in_channels, int64_t out_channels, Size3 kernel_size, Size3 stride = 1, Size3 padding = 0, Size3 dilation = 1,
         int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  Triple stride, padding, dilation;
  int64_t groups;
};

// weight [in, out / groups, kh, kw] (PyTorch's layout for transposed convolutions).
class ConvTranspose2d : public ConvLayer {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride = 1, Size2 padding = 0,
                  Size2 output_padding = 0, int64_t groups = 1, bool bias = true, Size2 dilation = 1);
  Tensor forward(const Tensor& x) override;
  Pair stride, padding, output_padding, dilation;
  int64_t groups;
};

// Batch normalization over the channel axis (1) of [N, C] or [N, C, ...] (BatchNorm1d/2d/3d in
// one): in training mode with the batch's statistics, updating running_mean and running_var
// (momentum-weighted, the variance unbiased); in eval mode with the running ones.
class BatchNorm : public Layer {
 public:
  explicit BatchNorm(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                     bool track_running_stats = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias, running_mean, running_var;
  Tensor num_batches_tracked;  // i64 scalar: training-mode calls (PyTorch's buffer, so state dicts match)
  double eps, momentum;

 protected:
  void check_input(const Tensor& x) const;  // [N, C, ...] of the parameters' floating dtype
};
using BatchNorm1d = BatchNorm;
using BatchNorm2d = BatchNorm;
using BatchNorm3d = BatchNorm;

// torch.nn.SyncBatchNorm: batch normalization whose training-mode statistics are those of the
// whole batch across the ranks of hjit::dist (each rank normalizes its shard with them, and the
// running statistics move alike on every rank), eagerly and jitted, with gradients through the
// exchange (each rank's shard gets the gradient the whole batch gives it). Each rank's mean,
// variance and count are gathered and combined (Chan's parallel variance), not sums of squares.
// In eval mode, and in a world of one process, it is BatchNorm. Its state is BatchNorm's, so
// either loads the other's checkpoints.
class SyncBatchNorm : public BatchNorm {
 public:
  using BatchNorm::BatchNorm;
  Tensor forward(const Tensor& x) override;
};

// Over the last normalized_shape.size() axes.
class LayerNorm : public Layer {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
  Shape normalized_shape;
  double eps;
};

class RMSNorm : public Layer {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-6, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight;
  double eps;
};

// [N, C, ...] normalized per sample over each of num_groups groups of channels.
class GroupNorm : public Layer {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
  int64_t num_groups;
  double eps;
};

// Rows of weight [num_embeddings, dim] ~ N(0, 1) by integer ids; the padding_idx row is zero
// and receives no gradient.
class Embedding : public Layer {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& ids) override;
  Tensor weight;
  std::optional<int64_t> padding_idx;
  WeightOnlyState weight_only;  // set by nn::quantize_weights (quantize.h)
};

// In training mode, each element zeroed with probability p and the rest scaled by 1 / (1 - p);
// the identity in eval mode. Its key is state of its own, split at every call (inside jit too:
// a jitted step reads it and assigns the next one, so each step draws a new mask).
class Dropout : public Layer {
 public:
  explicit Dropout(double p = 0.5, std::optional<Tensor> key = std::nullopt);
  Tensor forward(const Tensor& x) override;
  double p;
  Tensor key;
};

// A function as a layer (an activation, a reshape) for Sequential.
class Function : public Layer {
 public:
  explicit Function(std::function<Tensor(const Tensor&)> fn) : fn_(std::move(fn)) {}
  Tensor forward(const Tensor& x) override { return fn_(x); }

 private:
  std::function<Tensor(const Tensor&)> fn_;
};

class ReLU : public Layer {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }
};
class GELU : public Layer {
 public:
  explicit GELU(bool tanh_approximation = false) : tanh_(tanh_approximation) {}
  Tensor forward(const Tensor& x) override { return gelu(x, tanh_); }

 private:
  bool tanh_;
};
class Tanh : public Layer {
 public:
  Tensor forward(const Tensor& x) override { return tanh(x); }
};
class Sigmoid : public Layer {
 public:
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
};
class SiLU : public Layer {
 public:
  Tensor forward(const Tensor& x) override { return silu(x); }
};
// Axes start_dim..end_dim merged into one.
class Flatten : public Layer {
 public:
  explicit Flatten(int start_dim = 1, int end_dim = -1) : start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& x) override;

 private:
  int start_, end_;
};
class MaxPool2d : public Layer {
 public:
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0);
  Tensor forward(const Tensor& x) override { return max_pool2d(x, kernel_, stride_, padding_); }

 private:
  Pair kernel_, stride_, padding_;
};
class AvgPool2d : public Layer {
 public:
  explicit AvgPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0);
  Tensor forward(const Tensor& x) override { return avg_pool2d(x, kernel_, stride_, padding_); }

 private:
  Pair kernel_, stride_, padding_;
};

// Layers applied in order, named "0", "1", ... (as torch.nn.Sequential):
//   nn::Sequential mlp;
//   mlp.add<nn::Linear>(784, 128); mlp.add<nn::ReLU>(); mlp.add<nn::Linear>(128, 10);
class Sequential : public Layer {
 public:
  Sequential() = default;
  template <class L, class... Args>
  std::shared_ptr<L> add(Args&&... args) {
    return add(std::make_shared<L>(std::forward<Args>(args)...));
  }
  template <class L>
  std::shared_ptr<L> add(std::shared_ptr<L> layer) {
    layers_.push_back(layer);
    return register_module(std::to_string(layers_.size() - 1), std::move(layer));
  }
  std::shared_ptr<Function> add(std::function<Tensor(const Tensor&)> fn) { return add(std::make_shared<Function>(std::move(fn))); }
  Tensor forward(const Tensor& x) override;
  size_t size() const { return layers_.size(); }
  Layer& operator[](size_t i) const;  // IndexError past the end

 private:
  std::vector<std::shared_ptr<Layer>> layers_;
};

// Modules of one kind in a list, named "0", "1", ... (torch.nn.ModuleList): a model's blocks.
//   nn::ModuleList<nn::TransformerEncoderLayer> blocks;
//   for (int i = 0; i < 4; ++i) blocks.add(C, heads);
//   for (auto& b : blocks) h = (*b)(h, {.is_causal = true});
template <class M>
class ModuleList : public Module {
 public:
  template <class... Args>
  M& add(Args&&... args) {
    items_.push_back(register_module(std::to_string(items_.size()), std::make_shared<M>(std::forward<Args>(args)...)));
    return *items_.back();
  }
  size_t size() const { return items_.size(); }
  M& operator[](size_t i) const {
    if (i >= items_.size()) throw IndexError("nn::ModuleList: module " + std::to_string(i) + " of " + std::to_string(items_.size()));
    return *items_[i];
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

}  // namespace hjit::nn
