// Rotary position embedding of a head tensor as one autograd operation over the fused row kernels
// (kernels/rotary.h; the host's, or a CUDA device's: kernels/row_kernels.h): t * cos + rotate_half(t) * sin on the
// first cos.size(-1) dims of each head, the rest as is, in the dtype LibTorch's ops would give (t's and the tables'
// promoted). Taken for fp32 / bf16 t [B, H, T, d] whose last dim is contiguous and tables [B or 1, 1, T, rotary]
// in a memory that has the kernels while the fused kernels are on; otherwise LibTorch's ops (HF's apply_rotary_pos_emb).
#pragma once

#include "util/torch_compat.h"

namespace hftrain {

torch::Tensor apply_rotary(const torch::Tensor& t, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace hftrain
