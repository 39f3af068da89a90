// The bytes a tensor's elements take (0 for an undefined tensor), for memory accounting.
#pragma once

#include <cstdint>

#include "util/torch_compat.h"

namespace hftrain {

inline int64_t tensor_bytes(const torch::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

}  // namespace hftrain
