// The AVX2 + FMA + F16C kernels (this file alone is compiled with -mavx2 -mfma -mf16c on x86-64).
#include "optim/kernels/kernel_table.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "optim/kernels/kernel_body.h"
#include "kernels/simd_avx2.h"

namespace hftrain {
namespace optim_kernels {
const KernelTable* avx2_table() { return make_table<simd::Avx2Isa>(); }
}  // namespace optim_kernels
}  // namespace hftrain
#else
namespace hftrain {
namespace optim_kernels {
const KernelTable* avx2_table() { return nullptr; }
}  // namespace optim_kernels
}  // namespace hftrain
#endif
