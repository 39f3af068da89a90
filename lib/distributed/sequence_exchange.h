// Ulysses sequence parallelism's exchange (DeepSpeed-Ulysses, arXiv:2309.14509): the ranks of a
// sequence-parallel group each hold consecutive slices of every sequence; before attention an all-to-all
// trades the slices of all heads for whole sequences of a share of the heads, and after it a second
// all-to-all trades them back, so each rank attends over the whole sequence for its heads. Both are autograd
// functions whose backward is the other exchange, so gradients reach the slice that produced them. Models
// stay free of parallelism: the attention dispatch calls these when a group is set.
#pragma once

#include "distributed/comm.h"
#include "util/torch_compat.h"

namespace hftrain {

// x [B, H, S, D], this rank's slice of S positions (slice `group.rank()` of the sequence) for all H heads ->
// [B, H / P, P * S, D]: the whole sequence for heads [rank * H / P, (rank + 1) * H / P), P = group.world_size().
// RuntimeFailure naming `what` when P does not divide H.
torch::Tensor sequence_to_heads(const torch::Tensor& x, Comm& group, const std::string& what);

// The inverse: y [B, H / P, P * S, D] -> [B, H, S, D], this rank's slice of the sequence for every head.
torch::Tensor heads_to_sequence(const torch::Tensor& y, Comm& group, const std::string& what);

}  // namespace hftrain
