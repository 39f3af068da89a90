// The portable kernels: one float at a time, compiled for the baseline target.
#include "optim/kernels/kernel_body.h"
#include "kernels/simd_scalar.h"

namespace hftrain {
namespace optim_kernels {

const KernelTable* scalar_table() { return make_table<simd::ScalarIsa>(); }

}  // namespace optim_kernels
}  // namespace hftrain
