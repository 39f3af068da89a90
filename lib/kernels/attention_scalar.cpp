// The portable attention kernels (one float per lane): the fallback on every CPU, and ARM's for now.
#include "kernels/attention_body.h"
#include "kernels/simd_scalar.h"

namespace hftrain {
namespace kernels {
const AttentionTable* attention_scalar_table() { return make_attention_table<simd::ScalarIsa>(); }
}  // namespace kernels
}  // namespace hftrain
