// What a lowered pipeline and the providers' kernels agree on: the kernels' C symbols, and how a
// convolution's post-ops and layouts travel as int32 arguments. The kernels (providers/kernels/)
// include this header alone, so that they build into an object of their own, which an exported
// library carries (export/archive.cpp).
#pragma once
#include <cstdint>

namespace hjit::kernel_abi {

// The names the lowered pipeline calls (extern "C").
inline constexpr const char* kSgemmSymbol = "hjit_extern_sgemm";
inline constexpr const char* kConvSymbol = "hjit_extern_conv2d";
inline constexpr const char* kConvWeightGradSymbol = "hjit_extern_conv2d_weight_grad";
inline constexpr const char* kIntGemmSymbol = "hjit_extern_int_gemm";
inline constexpr const char* kBf16GemmSymbol = "hjit_extern_bf16_gemm";
inline constexpr const char* kIntConvSymbol = "hjit_extern_int_conv2d";

// An int_conv2d's sizes as its kernel takes them: input channels / 4, input rows and columns,
// output channels, their block (the weights' B), kernel rows and columns, strides, dilations.
inline constexpr int kIntConvProblemInts = 11;

// The element-wise work after a convolution that oneDNN does in the same pass, 3 bits each in one
// int32 (the first post-op lowest).
struct PostOpKinds {
  enum Kind { Add = 1, Sub = 2, Mul = 3, Div = 4, Relu = 5, Sum = 6 };
};
inline constexpr int kPostOpBits = 3;
inline constexpr int kMaxPostOps = 10;

// The bytes of the header of weights packed when compiling (hjit_matmul_pack_constant), and of the
// `packed` operand that says there are none (zeros).
inline constexpr int64_t kPackedHeaderBytes = 64;

// Which of a convolution's activations travel in oneDNN's 16-channel blocked layout.
enum ConvLayout { kBlockedInput = 1, kBlockedOutput = 2 };

// Whether oneDNN's forward convolution with these channel counts computes in the 16-channel
// blocked layout (whole blocks only).
inline bool blocked_activations(int64_t in_channels, int64_t out_channels) {
  return in_channels % 16 == 0 && out_channels % 16 == 0;
}

}  // namespace hjit::kernel_abi

// 1 where oneDNN's u8 x s8 matmul (bf16 0) or bf16 matmul (bf16 1) runs on AMX's tiles on this CPU
// (the CPU has AMX-INT8 or AMX-BF16 and the kernel granted the process its tile state), else 0.
// Defined with the oneDNN kernels.
extern "C" int hjit_matmul_uses_amx(int32_t bf16);

// Packs a constant right operand of those matmuls (int8: hjit's [K/4, N, 4], bf16: [K, N], dense)
// into the layout oneDNN's primitive picks on this CPU, after a 64-byte header the kernels check:
// the bytes that takes (out null), or written (0: out_bytes too few, or oneDNN failed). The kernels
// take it as their `packed` operand; 64 zero bytes there say there is none.
extern "C" int64_t hjit_matmul_pack_constant(int32_t bf16, int64_t k, int64_t n, const void* weights, void* out, int64_t out_bytes);

// 1 where oneDNN's u8 x s8 convolution of `problem` (kIntConvProblemInts values, as above) runs on
// AMX's tiles on this CPU, else 0.
extern "C" int hjit_int_conv_uses_amx(const int32_t* problem);

// Packs constant weights of that convolution (hjit's [O/B, C/4, KH, KW, B, 4], dense) into the
// layout oneDNN picks for a call of `rows` output rows, after the header its kernel checks, as
// hjit_matmul_pack_constant does.
extern "C" int64_t hjit_int_conv_pack_constant(const int32_t* problem, int32_t rows, const void* weights, void* out, int64_t out_bytes);
