// The fused row kernels (norms, activations, rotary embedding, token cross-entropy, the 4-bit and 8-bit
// dequantisation of a tile of rows) of one kind of memory, as function pointers with
// the host kernels' signatures: the host's SIMD kernels, or the CUDA kernels (kernels/cuda/) where this build
// compiled them. The models' autograd operations (models/fused_*) take the set for the device their tensors are on,
// so one operation serves both and nothing in them asks which device it is.
#pragma once

#include <c10/core/Device.h>

#include "kernels/activation.h"
#include "kernels/cross_entropy.h"
#include "kernels/normalization.h"
#include "kernels/quant4bit.h"
#include "kernels/rotary.h"

namespace hftrain {
namespace kernels {

struct RowKernels {
  const char* memory;  // "host" or "cuda"
  decltype(&kernels::layer_norm_forward) layer_norm_forward;
  decltype(&kernels::layer_norm_backward) layer_norm_backward;
  decltype(&kernels::rms_norm_forward) rms_norm_forward;
  decltype(&kernels::rms_norm_backward) rms_norm_backward;
  decltype(&kernels::rms_norm_forward_bf16) rms_norm_forward_bf16;
  decltype(&kernels::rms_norm_backward_bf16) rms_norm_backward_bf16;
  decltype(&kernels::gelu_forward) gelu_forward;
  decltype(&kernels::gelu_backward) gelu_backward;
  decltype(&kernels::gelu_forward_bf16) gelu_forward_bf16;
  decltype(&kernels::gelu_backward_bf16) gelu_backward_bf16;
  decltype(&kernels::swiglu_forward) swiglu_forward;
  decltype(&kernels::swiglu_backward) swiglu_backward;
  decltype(&kernels::swiglu_forward_bf16) swiglu_forward_bf16;
  decltype(&kernels::swiglu_backward_bf16) swiglu_backward_bf16;
  decltype(&kernels::cross_entropy_rows) cross_entropy_rows;
  decltype(&kernels::dequantize_4bit) dequantize_4bit;
  decltype(&kernels::dequantize_4bit_bf16) dequantize_4bit_bf16;
  decltype(&kernels::dequantize_8bit_blockwise) dequantize_8bit_blockwise;
  decltype(&kernels::rotary_rows) rotary_rows;
};

const RowKernels& host_row_kernels();

// The CUDA kernels, or null on a build without them (no CUDA LibTorch, or no nvcc when it was configured). Each
// runs on the current CUDA device's current stream, as LibTorch's own ops do.
const RowKernels* cuda_row_kernels();

// The set for tensors on `device`: the host's for the CPU, the CUDA kernels for a CUDA device where built, else
// null (the models then take LibTorch's ops). Null too while the fused kernels are off (HFTRAIN_KERNELS=torch).
const RowKernels* row_kernels_on(const c10::Device& device);

// row_kernels_on for a device already known to have them (std::logic_error otherwise).
const RowKernels& row_kernels_at(const c10::Device& device);

}  // namespace kernels
}  // namespace hftrain
