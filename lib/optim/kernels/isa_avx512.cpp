// The AVX-512 kernels (this file alone is compiled with -mavx512f -mavx512bw -mavx512vl -mfma -mf16c on x86-64).
#include "optim/kernels/kernel_table.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__)
#include "optim/kernels/kernel_body.h"
#include "kernels/simd_avx512.h"

namespace hftrain {
namespace optim_kernels {
const KernelTable* avx512_table() { return make_table<simd::Avx512Isa>(); }
}  // namespace optim_kernels
}  // namespace hftrain
#else
namespace hftrain {
namespace optim_kernels {
const KernelTable* avx512_table() { return nullptr; }
}  // namespace optim_kernels
}  // namespace hftrain
#endif
