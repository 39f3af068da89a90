// A tensor whose memory comes and goes while the tensor (and every view of it) stays: ZeRO-3 releases
// a gathered parameter group's buffer and re-allocates it for the next gather (the technique PyTorch
// FSDP uses), and sharded model construction releases each parameter as soon as it is built. Shapes,
// strides and views survive; reading a released tensor is an error the caller must avoid.
#pragma once

#include "util/torch_compat.h"

namespace hftrain {

// Frees the memory of `t`'s storage (it then holds 0 bytes).
void release_storage(const torch::Tensor& t);
// Gives `t`'s storage fresh, uninitialised memory for t.numel() elements.
void allocate_storage(const torch::Tensor& t);
// Points `t`'s storage at `data` (t.numel() elements; not owned: the caller keeps it alive until
// release_storage). NVMe offload steps a swapped parameter slice in place in its I/O buffer this way.
void borrow_storage(const torch::Tensor& t, void* data);

}  // namespace hftrain
