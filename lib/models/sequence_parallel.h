// The seam through which a model's attention runs Ulysses sequence parallelism (distributed.sequence_parallel_size,
// DeepSpeed-Ulysses, arXiv:2309.14509): the run hands the model the group of ranks that share each sequence
// (Model::set_sequence_parallel), and the attention of a sliced batch (Batch::slice) trades its slice of the sequence
// for all heads into the whole sequence for a share of the heads before attending, and back after it
// (distributed/sequence_exchange). The model holds this object and knows no ranks.
#pragma once

#include <memory>
#include <string>

#include "distributed/comm.h"
#include "util/torch_compat.h"

namespace hftrain {

class SequenceParallel {
 public:
  explicit SequenceParallel(std::shared_ptr<Comm> group) : group_(std::move(group)) {}
  // Ranks per group: the slices each sequence is cut into.
  int64_t size() const { return group_->world_size(); }
  // [B, H, S, D] (this rank's slice, every head) -> [B, H / size, size * S, D] (the whole sequence, this rank's heads).
  torch::Tensor to_heads(const torch::Tensor& x, const std::string& what) const;
  // The inverse, after attention.
  torch::Tensor to_sequence(const torch::Tensor& y, const std::string& what) const;
  // "" when `heads` query heads and `kv_heads` key / value heads divide over the group, else why not (naming both).
  std::string heads_problem(int64_t heads, int64_t kv_heads) const;

 private:
  std::shared_ptr<Comm> group_;
};

}  // namespace hftrain
