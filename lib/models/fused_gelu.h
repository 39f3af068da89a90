// GELU through the fused CPU kernels (kernels/activation.h) as one autograd operation: the exact form
// ("gelu") and the tanh form ("tanh": HF gelu_new / gelu_pytorch_tanh). Used for contiguous fp32 host tensors
// while the fused kernels are on; anything else (bf16 under autocast, another device, HFTRAIN_KERNELS=torch)
// takes torch::gelu.
#pragma once

#include <string>

#include "util/torch_compat.h"

namespace hftrain {

// `approximate`: "none" (exact) or "tanh", as torch::gelu's argument.
torch::Tensor gelu_activation(const torch::Tensor& x, const std::string& approximate = "none");

}  // namespace hftrain
