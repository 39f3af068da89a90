// The NCCL communicator for workers on CUDA GPUs (distributed.backend nccl, or auto on GPUs): the rendezvous of
// rendezvous.h, then c10d::ProcessGroupNCCL behind NativeCollectivesComm (comm_native.h). NCCL runs each
// collective on its own stream, ordered after the work already queued on the caller's stream, so gradient
// buckets reduce while backward goes on (DeepSpeed's overlap_comm); wait() orders the caller's stream after
// it. Only a CUDA build has it.
#pragma once

#include <memory>

#include "distributed/comm.h"

namespace hftrain {

struct DistEnv;
struct RendezvousOptions;

// Throws ConfigError on a build without CUDA, RuntimeFailure when the group cannot be formed.
std::unique_ptr<Comm> make_nccl_comm(const DistEnv& env, const RendezvousOptions& options, int cuda_index);

}  // namespace hftrain
