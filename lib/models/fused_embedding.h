// Token and position embeddings through the fused CPU gather / scatter (kernels/embedding.h) as one autograd
// operation, called with the families' torch::nn::Embedding modules (their parameters, names and construction
// unchanged). Used for a contiguous fp32 or bf16 host table while the fused kernels are on (padding_idx kept:
// that row gets no gradient); anything else (max_norm, scale_grad_by_freq, sparse, another device,
// HFTRAIN_KERNELS=torch) runs the module itself. An id outside the table is a RuntimeFailure naming it.
#pragma once

#include "util/torch_compat.h"

namespace hftrain {

torch::Tensor apply_embedding(torch::nn::Embedding embedding, const torch::Tensor& ids);

}  // namespace hftrain
