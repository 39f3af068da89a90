// What one parameter's update reads and writes, shared by the optimizers: the gradient as stored (fp32, or the
// 16-bit gradient of a mixed-precision run), the optional 16-bit parameter to write, and the conversion to a
// kernel stream (optim/kernels) or, where no kernel applies, to the fp32 tensors of the op-by-op path.
#pragma once

#include "optim/kernels/update_kernels.h"
#include "optim/optimizer.h"

namespace hftrain {

struct StepTensors {
  torch::Tensor grad;   // undefined: the parameter has no gradient and is not stepped
  torch::Tensor out16;  // undefined: no 16-bit copy to write
};

StepTensors step_tensors(const ParamGroup& group, std::size_t i);

// Fills `stream` for a kernel update of `param` and returns true when every tensor is contiguous, of a type the
// kernels take (fp32 parameter; fp32 / bf16 / fp16 gradient and 16-bit output of the same size) and in one memory that
// has the kernels: the host's, or a CUDA device where this build has the CUDA updates (Stream::on_cuda).
bool kernel_stream(const torch::Tensor& param, const StepTensors& t, double grad_scale, optim_kernels::Stream* stream);
// Optimizer state a kernel can update in place beside `stream`'s parameter: a contiguous fp32 tensor in its memory.
bool kernel_state(const torch::Tensor& state, const optim_kernels::Stream& stream);

// What the run-start line says of an optimizer over `groups` that updates through the kernels: the CPU kernels'
// instruction set and threads, or, for parameters on a CUDA device, the CUDA updates (or LibTorch's ops on a build
// without them).
std::string kernel_description(const std::vector<ParamGroup>& groups);

// Op-by-op path: a 16-bit gradient as fp32 (others as they are), multiplied by grad_scale (the stored
// gradient is not changed).
torch::Tensor fp32_gradient(const torch::Tensor& grad, double grad_scale);
// Op-by-op path: after the update, the 16-bit copy of the parameter (round to nearest even).
void write_out16(const StepTensors& t, const torch::Tensor& param);

}  // namespace hftrain
