// The one place where LibTorch version differences (1.13 vs 2.x) are guarded.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

#define HFTRAIN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// scaled_dot_product_attention exists from LibTorch 2.0.
#define HFTRAIN_HAS_SDPA HFTRAIN_TORCH_AT_LEAST(2, 0)

namespace hftrain {

inline std::string torch_version_string() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

}  // namespace hftrain
