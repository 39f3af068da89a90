// The optimizer updates on a CUDA device, as host functions over device pointers (no LibTorch, so nvcc compiles
// them alone): each queues one kernel over the whole stream on `stream` (a cudaStream_t) and returns the CUDA error
// of its launch (0 = none; error_text names it). optim/kernels/cuda_table.cpp gives them the current stream.
#pragma once

#include "optim/kernels/update_kernels.h"

namespace hftrain {
namespace optim_kernels {
namespace cuda {

const char* error_text(int code);

int adam_update(const Stream& s, float* exp_avg, float* exp_avg_sq, const AdamCoef& c, void* stream);
int sgd_update(const Stream& s, float* momentum_buffer, const SgdCoef& c, void* stream);
int lion_update(const Stream& s, float* exp_avg, const LionCoef& c, void* stream);
int adagrad_update(const Stream& s, float* state_sum, const AdagradCoef& c, void* stream);

}  // namespace cuda
}  // namespace optim_kernels
}  // namespace hftrain
