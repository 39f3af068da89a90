// The avx512 model kernels (this file alone is compiled with -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mf16c on x86-64).
#include "kernels/kernel_table.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__)
#include "kernels/model_kernel_body.h"
#include "kernels/simd_avx512.h"

namespace hftrain {
namespace kernels {
const ModelKernelTable* avx512_model_kernels() { return make_model_kernel_table<simd::Avx512Isa>(); }
}  // namespace kernels
}  // namespace hftrain
#else
namespace hftrain {
namespace kernels {
const ModelKernelTable* avx512_model_kernels() { return nullptr; }
}  // namespace kernels
}  // namespace hftrain
#endif
