// The Arm NEON kernels (AArch64 only; every AArch64 CPU has NEON).
#include "optim/kernels/kernel_table.h"

#if defined(__aarch64__)
#include "optim/kernels/kernel_body.h"
#include "kernels/simd_neon.h"

namespace hftrain {
namespace optim_kernels {
const KernelTable* neon_table() { return make_table<simd::NeonIsa>(); }
}  // namespace optim_kernels
}  // namespace hftrain
#else
namespace hftrain {
namespace optim_kernels {
const KernelTable* neon_table() { return nullptr; }
}  // namespace optim_kernels
}  // namespace hftrain
#endif
