// The portable model kernels (one float per lane): the fallback on every CPU, and ARM's for now.
#include "kernels/model_kernel_body.h"
#include "kernels/simd_scalar.h"

namespace hftrain {
namespace kernels {
const ModelKernelTable* scalar_model_kernels() { return make_model_kernel_table<simd::ScalarIsa>(); }
}  // namespace kernels
}  // namespace hftrain
