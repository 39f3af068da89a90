// What the wrappers of the CUDA kernels share (kernels/row_kernels_cuda.cpp, optim/kernels/cuda_table.cpp): whether
// this file is compiled with the kernels (HFTRAIN_WITH_CUDA_KERNELS, set by lib/CMakeLists.txt on the wrappers
// alone), the current device's current CUDA stream as the launchers take it, and a launch's error as RuntimeFailure.
#pragma once

#include <string>

#ifndef HFTRAIN_WITH_CUDA_KERNELS
#define HFTRAIN_WITH_CUDA_KERNELS 0
#endif

namespace hftrain {
namespace kernels {

// A cudaStream_t, as void*. Defined only where the build has the CUDA kernels.
void* current_cuda_stream();

// Why the CUDA kernels do not run in this process ("no CUDA kernels in this build", or the CUDA error of loading them
// on the current device, asked once), or "" when they do. Without them the CUDA tensors take LibTorch's ops.
const std::string& cuda_kernels_unusable();

// Throws RuntimeFailure "CUDA kernel <what>: <error_text>" when code is not 0 (cudaSuccess).
void check_cuda_launch(int code, const char* error_text, const std::string& what);

}  // namespace kernels
}  // namespace hftrain
