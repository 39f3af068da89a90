// The avx2 model kernels (this file alone is compiled with -mavx2 -mfma -mf16c on x86-64).
#include "kernels/kernel_table.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include "kernels/model_kernel_body.h"
#include "kernels/simd_avx2.h"

namespace hftrain {
namespace kernels {
const ModelKernelTable* avx2_model_kernels() { return make_model_kernel_table<simd::Avx2Isa>(); }
}  // namespace kernels
}  // namespace hftrain
#else
namespace hftrain {
namespace kernels {
const ModelKernelTable* avx2_model_kernels() { return nullptr; }
}  // namespace kernels
}  // namespace hftrain
#endif
