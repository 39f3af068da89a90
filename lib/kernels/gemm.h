// Single-precision matrix products for the model kernels, row-major as LibTorch lays tensors out, through
// oneDNN's sgemm (dnnl_sgemm: JIT-compiled AVX-512 / AVX2 kernels on the OpenMP threads LibTorch uses) when the
// build found oneDNN (libdnnl-dev; Debian's LibTorch already loads libdnnl). On the shapes of a transformer step
// it runs 1.2-1.5x faster than the OpenBLAS sgemm behind LibTorch's matmul on the development machine (bench/
// RESULTS.md), and it has no separate pass that zero-fills the output first. Without oneDNN gemm_available() is
// false and the callers keep LibTorch's ops; so it is where the oneDNN found at build time does not compute a
// small product exactly on first use (LibTorch 2.x wheels carry their own oneDNN, whose symbols can win over
// the system library's: dnnl_sgemm then answered "unimplemented" on a GPU machine).
#pragma once

#include <cstdint>
#include <string>

namespace hftrain {
namespace kernels {

bool gemm_available();

// For the run-start line: "oneDNN sgemm", or why the linear layers use LibTorch's matmul (also when
// HFTRAIN_KERNELS=torch turns the fused kernels off).
std::string gemm_description();

// C[m x n] = alpha op(A) op(B) + beta C, every matrix row-major with the given row strides (lda, ldb, ldc);
// op(X) = X^T when trans_x. A is m x k after op, B is k x n after op. RuntimeFailure if oneDNN refuses.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Exact int8 products through oneDNN's gemm_s8s8s32: C[m x n] (int32) = A[m x k] B[n x k]^T, A and B int8 and
// row-major (LLM.int8()'s codes against the weight's codes). Available only where oneDNN computed a probe of the
// extreme codes (+-127 over 256 columns) exactly: CPUs without VNNI may saturate oneDNN's 16-bit intermediate sums,
// and there the callers keep their exact float32 path.
bool int8_gemm_available();
void gemm_s8s8s32_nt(int64_t m, int64_t n, int64_t k, const int8_t* a, const int8_t* b, int32_t* c);

}  // namespace kernels
}  // namespace hftrain
