// Planning: how a matched extern stage's work travels to its kernel (providers/kernel_abi.h):
// which post-ops fold into the weights, the rest as one int32, and which values between two
// extern convolutions stay in oneDNN's blocked layout.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "halide_backend/providers/matching.h"

namespace hjit::backend {

// How many post-ops from the first are per-channel affine (no relu): they fold into the
// convolution, a * conv(x, w) + b = conv(x, a * w) + b, which costs oneDNN nothing extra (each
// post-op costs it about 5% of a 3x3 convolution).
size_t affine_prefix(const ConvChain& c);
// The post-ops from `first` on as the extern stage's integer argument.
int32_t post_op_code(const ConvChain& c, size_t first);

// A chain whose value only the next extern convolution reads hands it over in oneDNN's blocked
// layout (16 channels innermost), where both convolutions use it: no reorder to NCHW and back in
// between. Halide allocates that buffer with NCHW's size and never reads it. Per chain end: its
// kernel_abi::ConvLayout bits.
std::map<int, int> conv_layouts(const Graph& g, const std::vector<ConvChain>& chains);

}  // namespace hjit::backend
