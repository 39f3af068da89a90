// Precision names (see precision.h).
#include "engine/precision.h"

namespace hftrain {

std::string precision_name(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kBFloat16: return "bf16";
    case torch::kHalf: return "fp16";
    case torch::kFloat: return "fp32";
    default: return c10::toString(dtype);
  }
}

int64_t dtype_bytes(torch::ScalarType dtype) { return static_cast<int64_t>(c10::elementSize(dtype)); }

}  // namespace hftrain
