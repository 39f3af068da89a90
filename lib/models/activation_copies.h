// The copies of activation-checkpoint offload (see checkpointing.h): a block input to host memory in forward, and
// back to its device for the recomputation in backward. From a CUDA device both copies run on a side stream of
// that device, ordered against the compute stream by events, so that they overlap the blocks' compute: the
// forward's copy waits only for the input to be produced, and the compute stream waits only for the copy it reads.
// A CPU input is copied within host memory (which saves nothing, but runs the same path).
#pragma once

#include "util/torch_compat.h"

namespace hftrain {

// A copy of x in host memory (pinned and not yet complete when x is on a CUDA device: copy_back orders against it).
torch::Tensor copy_to_host(const torch::Tensor& x);

// `kept` (from copy_to_host) on `device`, ready for the current stream's work there.
torch::Tensor copy_back(const torch::Tensor& kept, const torch::Device& device);

// Tests: each CUDA copy waits `cycles` GPU clock cycles on the side stream first (0: none), so that a copy the
// compute stream did not wait for would be read unfinished.
void delay_cuda_offload_copies(int64_t cycles);

}  // namespace hftrain
