// oneDNN's sgemm behind kernels::sgemm (see gemm.h).
#include "kernels/gemm.h"

#include <string>

#include "kernels/cpu_features.h"
#include "kernels/kernel_choice.h"
#include "util/error.h"

#if HFTRAIN_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace hftrain {
namespace kernels {

namespace {

struct GemmProbe {
  bool usable = false;
  std::string description;
};

// One exact product of small integers through dnnl_sgemm: [2 x 3] x [3 x 2] with beta 0 over a non-zero C.
GemmProbe probe_gemm() {
#if HFTRAIN_WITH_DNNL
  const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12}, expected[4] = {58, 64, 139, 154};
  float c[4] = {-1, -1, -1, -1};
  const dnnl_status_t status = dnnl_sgemm('N', 'N', 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
  if (status != dnnl_success)
    return {false, "LibTorch's matmul (oneDNN sgemm refused a test product: status " +
                       std::to_string(static_cast<int>(status)) + ")"};
  for (int i = 0; i < 4; ++i)
    if (c[i] != expected[i]) return {false, "LibTorch's matmul (oneDNN sgemm computed a test product wrongly)"};
  return {true, "oneDNN sgemm"};
#else
  return {false, "LibTorch's matmul (built without oneDNN)"};
#endif
}

// Extreme codes through dnnl_gemm_s8s8s32 against the products summed here in int64: rows of +127 and of alternating
// -127 / +127 against rows of +127 and -127, over 256 columns (where 16-bit intermediate sums would saturate).
bool probe_int8_gemm() {
#if HFTRAIN_WITH_DNNL
  constexpr int64_t k = 256;
  int8_t a[2 * k], b[2 * k];
  for (int64_t j = 0; j < k; ++j) {
    a[j] = 127, a[k + j] = static_cast<int8_t>(j % 2 ? 127 : -127);
    b[j] = 127, b[k + j] = static_cast<int8_t>(j % 3 ? -127 : 127);
  }
  int32_t c[4] = {-1, -1, -1, -1};
  const int32_t zero = 0;
  if (dnnl_gemm_s8s8s32('N', 'T', 'F', 2, 2, k, 1.0f, a, k, 0, b, k, 0, 0.0f, c, 2, &zero) != dnnl_success) return false;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      int64_t expected = 0;
      for (int64_t t = 0; t < k; ++t) expected += static_cast<int64_t>(a[i * k + t]) * b[j * k + t];
      if (c[i * 2 + j] != expected) return false;
    }
  return true;
#else
  return false;
#endif
}

const GemmProbe& gemm_probe() {
  static const GemmProbe probe = probe_gemm();
  return probe;
}

}  // namespace

bool gemm_available() { return gemm_probe().usable; }

std::string gemm_description() {
  if (!fused_kernels_enabled()) return "LibTorch's matmul (HFTRAIN_KERNELS=torch)";
  if (gemm_probe().usable && !simd::cpu_has_bf16_gemm())  // models/fused_linear.h
    return gemm_probe().description + ", bf16 ones too (no bf16 multiply on this CPU)";
  return gemm_probe().description;
}

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

bool int8_gemm_available() {
  static const bool usable = fused_kernels_enabled() && probe_int8_gemm();
  return usable;
}

void gemm_s8s8s32_nt(int64_t m, int64_t n, int64_t k, const int8_t* a, const int8_t* b, int32_t* c) {
#if HFTRAIN_WITH_DNNL
  const int32_t zero = 0;
  const dnnl_status_t status = dnnl_gemm_s8s8s32('N', 'T', 'F', m, n, k, 1.0f, a, k, 0, b, k, 0, 0.0f, c, n, &zero);
  if (status != dnnl_success)
    throw RuntimeFailure("oneDNN gemm_s8s8s32 of [" + std::to_string(m) + " x " + std::to_string(k) + "] x [" +
                         std::to_string(k) + " x " + std::to_string(n) + "] failed (status " +
                         std::to_string(static_cast<int>(status)) + ")");
#else
  (void)m, (void)n, (void)k, (void)a, (void)b, (void)c;
  throw RuntimeFailure("kernels::gemm_s8s8s32_nt: this build has no oneDNN (install libdnnl-dev and reconfigure)");
#endif
}

}  // namespace kernels
}  // namespace hftrain
