// The avx2 attention kernels (this file alone is compiled with -mavx2 -mfma -mf16c on x86-64).
#include "kernels/attention_table.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include "kernels/attention_body.h"
#include "kernels/simd_avx2.h"

namespace hftrain {
namespace kernels {
const AttentionTable* attention_avx2_table() { return make_attention_table<simd::Avx2Isa>(); }
}  // namespace kernels
}  // namespace hftrain
#else
namespace hftrain {
namespace kernels {
const AttentionTable* attention_avx2_table() { return nullptr; }
}  // namespace kernels
}  // namespace hftrain
#endif
