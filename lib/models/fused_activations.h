// Activations through the fused row kernels (kernels/activation.h on the host, kernels/cuda/ on a CUDA device:
// kernels/row_kernels.h), each as one autograd operation: GELU in the exact form ("gelu") and the tanh form ("tanh":
// HF gelu_new / gelu_pytorch_tanh), and SwiGLU's silu(gate) * up. Used for contiguous fp32 or bf16 tensors in a
// memory that has the kernels while the fused kernels are on (bf16 computed in fp32 and rounded where bf16 ops round
// their outputs); anything else (a device without kernels, HFTRAIN_KERNELS=torch) takes LibTorch's ops. fp32 GELU
// keeps its output for backward (the host kernel reads the gate back from it): the next linear layer keeps the same
// tensor, so it costs no memory there, but an in-place op on the output would fail at backward (none of the families
// does one).
#pragma once

#include <string>

#include "util/torch_compat.h"

namespace hftrain {

// `approximate`: "none" (exact) or "tanh", as torch::gelu's argument.
torch::Tensor gelu_activation(const torch::Tensor& x, const std::string& approximate = "none");

// silu(gate) * up (Llama's MLP with hidden_act silu / swish).
torch::Tensor silu_gated(const torch::Tensor& gate, const torch::Tensor& up);

}  // namespace hftrain
