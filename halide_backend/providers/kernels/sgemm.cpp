// The sgemm kernel: C = A B through oneDNN's or OpenBLAS's sgemm, whichever this build found.
// Built into the kernels' object (providers/provider.h): nothing of hjit's but kernel_abi.h.
#include <HalideRuntime.h>

#include <cstdint>

#if defined(HJIT_HAVE_DNNL)
#include <oneapi/dnnl/dnnl.h>
#elif defined(HJIT_HAVE_OPENBLAS)
extern "C" void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha, const float* a, int lda,
                            const float* b, int ldb, float beta, float* c, int ldc);
#endif

namespace {

// Element (x, y) of a 2-D buffer (Halide order: x innermost).
float* at(const halide_buffer_t* b, int64_t x, int64_t y) {
  return reinterpret_cast<float*>(b->host) + (x - b->dim[0].min) * b->dim[0].stride + (y - b->dim[1].min) * b->dim[1].stride;
}

}  // namespace

// C = A B (A: m x k, B: k x n) for the region of C asked for: rows [y0, y0 + m), columns
// [x0, x0 + n). In a bounds query (a host pointer null) it says which parts of A and B that
// region reads, as Halide's extern stage protocol asks.
extern "C" int hjit_extern_sgemm(halide_buffer_t* a, halide_buffer_t* b, int32_t k, halide_buffer_t* c) {
  const int32_t x0 = c->dim[0].min, n = c->dim[0].extent, y0 = c->dim[1].min, m = c->dim[1].extent;
  if (!a->host || !b->host || !c->host) {
    if (!a->host) a->dim[0].min = 0, a->dim[0].extent = k, a->dim[1].min = y0, a->dim[1].extent = m;
    if (!b->host) b->dim[0].min = x0, b->dim[0].extent = n, b->dim[1].min = 0, b->dim[1].extent = k;
    return 0;
  }
  if (a->dim[0].stride != 1 || b->dim[0].stride != 1 || c->dim[0].stride != 1) return -1;
  if (m == 0 || n == 0) return 0;
  const float* pa = at(a, 0, y0);
  const float* pb = at(b, x0, 0);
  float* pc = at(c, x0, y0);
#if defined(HJIT_HAVE_DNNL)
  const dnnl_status_t status =
      dnnl_sgemm('N', 'N', m, n, k, 1.0f, pa, a->dim[1].stride, pb, b->dim[1].stride, 0.0f, pc, c->dim[1].stride);
  return status == dnnl_success ? 0 : -1;
#elif defined(HJIT_HAVE_OPENBLAS)
  cblas_sgemm(101 /*row major*/, 111, 111, m, n, k, 1.0f, pa, int(a->dim[1].stride), pb, int(b->dim[1].stride), 0.0f, pc,
              int(c->dim[1].stride));
  return 0;
#else
  (void)pa, (void)pb, (void)pc;
  return -1;
#endif
}

