// The one place where LibTorch version differences (1.13 vs 2.x) and CUDA are guarded.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

#define HFTRAIN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// scaled_dot_product_attention exists from LibTorch 2.0.
#define HFTRAIN_HAS_SDPA HFTRAIN_TORCH_AT_LEAST(2, 0)

// CUDA: lib/CMakeLists.txt defines HFTRAIN_WITH_CUDA=1 when the LibTorch it found is a CUDA build (the
// Debian package is not, so that build is unchanged). Code that calls CUDA is compiled under
// `#if HFTRAIN_WITH_CUDA` (distributed/device_probe.cpp, distributed/comm_nccl.cpp); everything else asks kCudaBuild.
#ifndef HFTRAIN_WITH_CUDA
#define HFTRAIN_WITH_CUDA 0
#endif

namespace hftrain {

inline constexpr bool kCudaBuild = HFTRAIN_WITH_CUDA != 0;

inline std::string torch_version_string() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

}  // namespace hftrain
