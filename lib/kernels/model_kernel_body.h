// One instruction set's table of model kernels: the attention, GELU, SwiGLU, LayerNorm, RMSNorm, cross-entropy and 4-bit
// dequantisation bodies instantiated over lane V.
// Included only by the per-ISA files (isa_*.cpp); internal linkage.
#pragma once

#include "kernels/activation_body.h"
#include "kernels/attention_body.h"
#include "kernels/cross_entropy_body.h"
#include "kernels/normalization_body.h"
#include "kernels/quant4bit_body.h"

namespace hftrain {
namespace kernels {
namespace {

template <class V>
const ModelKernelTable* make_model_kernel_table() {
  static const ModelKernelTable table = {V::kName,
                                         V::kWidth,
                                         &GeluBody<V>::forward,
                                         &GeluBody<V>::backward,
                                         &GeluBody<V>::forward_bf16,
                                         &GeluBody<V>::backward_bf16,
                                         &SwiGluBody<V>::forward,
                                         &SwiGluBody<V>::backward,
                                         &SwiGluBody<V>::forward_bf16,
                                         &SwiGluBody<V>::backward_bf16,
                                         &LayerNormBody<V>::forward_rows,
                                         &LayerNormBody<V>::backward_rows,
                                         &RmsNormBody<V>::forward_rows,
                                         &RmsNormBody<V>::backward_rows,
                                         &RmsNormBody<V>::forward_rows_bf16,
                                         &RmsNormBody<V>::backward_rows_bf16,
                                         &AttentionBody<V>::forward_head,
                                         &AttentionBody<V>::backward_head,
                                         &CrossEntropyBody<V>::row,
                                         &Dequant4Body<V>::to_float,
                                         &Dequant4Body<V>::to_bf16};
  return &table;
}

}  // namespace
}  // namespace kernels
}  // namespace hftrain
