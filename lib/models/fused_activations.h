// Activations through the fused CPU kernels (kernels/activation.h), each as one autograd operation: GELU in
// the exact form ("gelu") and the tanh form ("tanh": HF gelu_new / gelu_pytorch_tanh), and SwiGLU's
// silu(gate) * up. Used for contiguous fp32 host tensors while the fused kernels are on; anything else (bf16
// under autocast, another device, HFTRAIN_KERNELS=torch) takes LibTorch's ops.
#pragma once

#include <string>

#include "util/torch_compat.h"

namespace hftrain {

// `approximate`: "none" (exact) or "tanh", as torch::gelu's argument.
torch::Tensor gelu_activation(const torch::Tensor& x, const std::string& approximate = "none");

// silu(gate) * up (Llama's MLP with hidden_act silu / swish).
torch::Tensor silu_gated(const torch::Tensor& gate, const torch::Tensor& up);

}  // namespace hftrain
