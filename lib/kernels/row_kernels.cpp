// The host's set of fused row kernels and the choice by device (see row_kernels.h).
#include "kernels/row_kernels.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda_launch.h"
#include "kernels/kernel_choice.h"

namespace hftrain {
namespace kernels {

const RowKernels& host_row_kernels() {
  static const RowKernels host{"host",
                               &layer_norm_forward,
                               &layer_norm_backward,
                               &rms_norm_forward,
                               &rms_norm_backward,
                               &rms_norm_forward_bf16,
                               &rms_norm_backward_bf16,
                               &gelu_forward,
                               &gelu_backward,
                               &gelu_forward_bf16,
                               &gelu_backward_bf16,
                               &swiglu_forward,
                               &swiglu_backward,
                               &swiglu_forward_bf16,
                               &swiglu_backward_bf16,
                               &cross_entropy_rows,
                               &dequantize_4bit,
                               &dequantize_4bit_bf16,
                               &dequantize_8bit_blockwise,
                               &rotary_rows};
  return host;
}

const RowKernels* row_kernels_on(const c10::Device& device) {
  if (!fused_kernels_enabled()) return nullptr;
  if (device.is_cpu()) return &host_row_kernels();
  if (device.is_cuda()) return cuda_row_kernels();
  return nullptr;
}

const RowKernels& row_kernels_at(const c10::Device& device) {
  const RowKernels* set = row_kernels_on(device);
  if (set == nullptr) {
    const std::string why = device.is_cuda() ? cuda_kernels_unusable() : std::string();
    throw std::logic_error("no fused row kernels for tensors on " + device.str() + (why.empty() ? "" : " (" + why + ")"));
  }
  return *set;
}

}  // namespace kernels
}  // namespace hftrain
