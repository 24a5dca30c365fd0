#include "halide_backend/providers/provider.h"

#include "halide_backend/providers/kernel_abi.h"

#include <algorithm>

namespace hjit::backend {
namespace {

// The providers this build was configured with (CMakeLists.txt finds oneDNN, else OpenBLAS).
#if defined(HJIT_HAVE_DNNL)
constexpr KernelProvider kProvider{"oneDNN", true, true, true, "-ldnnl -lgomp -lstdc++"};
#elif defined(HJIT_HAVE_OPENBLAS)
constexpr KernelProvider kProvider{"OpenBLAS", true, false, false, "-lopenblas -lstdc++"};
#endif

}  // namespace

const KernelProvider* provider_for(ExternKind kind) {
#if defined(HJIT_HAVE_DNNL) || defined(HJIT_HAVE_OPENBLAS)
  return kProvider.computes(kind) ? &kProvider : nullptr;
#else
  return nullptr;
#endif
}

bool gemm_on_amx(ExternKind kind) {
#if defined(HJIT_HAVE_DNNL)
  static const bool int8 = hjit_matmul_uses_amx(0) != 0, bf16 = hjit_matmul_uses_amx(1) != 0;
  return kind == ExternKind::IntGemm ? int8 : kind == ExternKind::Bf16Gemm && bf16;
#else
  (void)kind;
  return false;
#endif
}

std::vector<uint8_t> pack_constant_weights(ExternKind kind, int64_t k, int64_t n, const void* weights) {
#if defined(HJIT_HAVE_DNNL)
  const int32_t bf16 = kind == ExternKind::Bf16Gemm;
  const int64_t bytes = hjit_matmul_pack_constant(bf16, k, n, weights, nullptr, 0);
  std::vector<uint8_t> out(size_t(std::max<int64_t>(bytes, 0)));
  if (bytes <= 0 || hjit_matmul_pack_constant(bf16, k, n, weights, out.data(), bytes) != bytes) return {};
  return out;
#else
  (void)kind, (void)k, (void)n, (void)weights;
  return {};
#endif
}

static_assert(std::tuple_size_v<IntConvProblem> == kernel_abi::kIntConvProblemInts);

bool int_conv_on_amx(const IntConvProblem& problem) {
#if defined(HJIT_HAVE_DNNL)
  return gemm_on_amx(ExternKind::IntGemm) && hjit_int_conv_uses_amx(problem.data()) != 0;
#else
  (void)problem;
  return false;
#endif
}

std::vector<uint8_t> pack_int_conv_weights(const IntConvProblem& problem, int32_t rows, const void* weights) {
#if defined(HJIT_HAVE_DNNL)
  const int64_t bytes = hjit_int_conv_pack_constant(problem.data(), rows, weights, nullptr, 0);
  std::vector<uint8_t> out(size_t(std::max<int64_t>(bytes, 0)));
  if (bytes <= 0 || hjit_int_conv_pack_constant(problem.data(), rows, weights, out.data(), bytes) != bytes) return {};
  return out;
#else
  (void)problem, (void)rows, (void)weights;
  return {};
#endif
}

}  // namespace hjit::backend

#if defined(HJIT_KERNELS_OBJECT)
__asm__(".section .rodata\n"
        ".balign 64\n"
        ".globl hjit_kernels_object_begin\n"
        ".hidden hjit_kernels_object_begin\n"
        "hjit_kernels_object_begin:\n"
        ".incbin \"" HJIT_KERNELS_OBJECT "\"\n"
        ".globl hjit_kernels_object_end\n"
        ".hidden hjit_kernels_object_end\n"
        "hjit_kernels_object_end:\n"
        ".previous\n");
extern "C" const char hjit_kernels_object_begin[];
extern "C" const char hjit_kernels_object_end[];
#endif

namespace hjit::backend {

std::string_view kernels_object() {
#if defined(HJIT_KERNELS_OBJECT)
  return std::string_view(hjit_kernels_object_begin, size_t(hjit_kernels_object_end - hjit_kernels_object_begin));
#else
  return {};
#endif
}

}  // namespace hjit::backend
