// oneDNN's sgemm behind kernels::sgemm (see gemm.h).
#include "kernels/gemm.h"

#include <string>

#include "util/error.h"

#if HFTRAIN_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace hftrain {
namespace kernels {

bool gemm_available() { return HFTRAIN_WITH_DNNL != 0; }

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
#if HFTRAIN_WITH_DNNL
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    throw RuntimeFailure("oneDNN sgemm of [" + std::to_string(m) + " x " + std::to_string(k) + "] x [" + std::to_string(k) +
                         " x " + std::to_string(n) + "] failed (status " + std::to_string(static_cast<int>(status)) + ")");
#else
  (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta,
      (void)c, (void)ldc;
  throw RuntimeFailure("kernels::sgemm: this build has no oneDNN (install libdnnl-dev and reconfigure)");
#endif
}

}  // namespace kernels
}  // namespace hftrain
