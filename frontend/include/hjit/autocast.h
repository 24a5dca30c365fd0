// Mixed precision by scope, as torch.autocast: within an Autocast's lifetime (on its thread),
// contractions compute in its 16-bit dtype and reductions and normalizations in f32.
//
//   {
//     auto scope = hjit::autocast(hjit::DType::BF16);
//     Tensor logits = model.forward(x);       // matmuls and convolutions in bf16 (f32 sums)
//     Tensor loss = hjit::cross_entropy(logits, labels);   // f32
//   }
//
// The rules, applied where the ops are called (eagerly and while tracing):
// - In the autocast dtype: matmul, linear, conv1d/2d/3d, conv_transpose1d/2d/3d and
//   scaled_dot_product_attention. Their floating operands of another dtype (an f32 weight, an f32
//   input) are converted first, bias included, and their result has the autocast dtype. Where the
//   CPU has AVX512_BF16, a bf16 matmul or ungrouped conv2d sums pairs of products with vdpbf16ps.
// - In f32: sum, mean, cumsum, softmax, log_softmax, layer_norm, rms_norm, batch_norm,
//   batch_norm_training and cross_entropy. Their 16-bit operands are widened first, and the
//   result is f32.
// - Every other op computes in its operands' promoted dtype, as always: bf16 + f32 is f32.
// Integer and quantized ops (int_matmul, int_conv2d, nn::quantize's layers) are not touched.
//
// Training keeps f32 master weights: parameters stay f32, the forward pass converts them where a
// contraction reads them, and their gradients come back in f32 through the conversions.
// A jitted function's cache key holds the autocast dtype in force at the call (or none): a call
// under another autocast state traces again, once per state, and never reuses the other's code.
#pragma once

#include <optional>

#include <hjit/dtype.h>

namespace hjit {

class Autocast {
 public:
  // dtype: BF16 or F16 (ValueError otherwise). enabled = false turns autocast off within the
  // scope (an f32 island inside an autocast region). The previous state returns at destruction.
  explicit Autocast(DType dtype = DType::BF16, bool enabled = true);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  std::optional<DType> previous_;
};

// auto scope = hjit::autocast(DType::BF16);  (returned in place: C++17's guaranteed elision)
inline Autocast autocast(DType dtype = DType::BF16, bool enabled = true) { return Autocast(dtype, enabled); }

// The autocast dtype in force on this thread, or none.
std::optional<DType> autocast_dtype();

}  // namespace hjit
