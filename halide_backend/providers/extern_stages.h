// Extern stages: library calls for the heaviest ops, as tuning candidates. A 2-D f32 matmul can be
// computed by oneDNN's or OpenBLAS's sgemm (whichever was found at configure time), and an f32
// convolution and the gradient of its weights by oneDNN's convolution primitives, while the
// element-wise work around them stays fused in Halide. Chosen by a tuning run only where they
// measure faster (BuiltinParams::extern_gemm, extern_conv); a schedule names them ("n5_matmul
// extern sgemm"), and lowering builds them. The providers folder keeps the providers
// (provider.h), matching (matching.h), planning (planning.h) and the kernels (kernels/) apart;
// this header is what the other folders include.
#pragma once
#include "halide_backend/providers/kernel_abi.h"
#include "halide_backend/providers/matching.h"
#include "halide_backend/providers/planning.h"
#include "halide_backend/providers/provider.h"
