// Tensors as the fused CPU kernels (kernels/) take them: bf16 data as its 16-bit patterns.
#pragma once

#include <cstdint>

#include "util/torch_compat.h"

namespace hftrain {

inline uint16_t* bf16_bits(const torch::Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>()); }

}  // namespace hftrain
