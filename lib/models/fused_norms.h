// LayerNorm and RMSNorm through the fused row kernels (kernels/normalization.h on the host, kernels/cuda/ on a CUDA
// device: kernels/row_kernels.h), each as one autograd operation: LayerNorm called with the families'
// torch::nn::LayerNorm modules (their parameters, names and construction unchanged), RMSNorm (T5, Llama) with its
// weight. Used for contiguous fp32 input and parameters in a memory that has the kernels while the fused kernels are
// on, and for bf16 ones too (computed in fp32; LayerNorm rounded to bf16 as LibTorch's bf16 layer_norm rounds,
// RMSNorm where HF's rounds: the normalised x, then times the weight); anything else (a device without kernels,
// HFTRAIN_KERNELS=torch) runs the module itself, or RMSNorm's LibTorch ops (HF's: in fp32, weight times the
// normalised input rounded to the input's dtype).
#pragma once

#include <utility>

#include "util/torch_compat.h"

namespace hftrain {

torch::Tensor apply_layer_norm(torch::nn::LayerNorm norm, const torch::Tensor& x);

// weight * x / sqrt(mean(x^2) + eps) over the last dimension.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// The residual add and the norm after it: {s, norm(s)} with s = x + update, as one fused operation (one pass over
// the rows; backward adds s's gradient from the residual stream to the norm's dx) where the fp32 kernels apply,
// else the add and then apply_layer_norm / rms_norm. s is the same float sum either way.
std::pair<torch::Tensor, torch::Tensor> add_layer_norm(torch::nn::LayerNorm norm, const torch::Tensor& x,
                                                       const torch::Tensor& update);
std::pair<torch::Tensor, torch::Tensor> add_rms_norm(const torch::Tensor& x, const torch::Tensor& update,
                                                     const torch::Tensor& weight, double eps);

}  // namespace hftrain
