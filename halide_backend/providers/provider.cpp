#include "halide_backend/providers/provider.h"

#include "halide_backend/providers/kernel_abi.h"

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
