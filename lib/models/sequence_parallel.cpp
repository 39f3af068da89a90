// SequenceParallel (see sequence_parallel.h): the exchanges over the model's sequence-parallel group.
#include "models/sequence_parallel.h"

#include "distributed/sequence_exchange.h"

namespace hftrain {

torch::Tensor SequenceParallel::to_heads(const torch::Tensor& x, const std::string& what) const {
  return sequence_to_heads(x, *group_, what);
}

torch::Tensor SequenceParallel::to_sequence(const torch::Tensor& y, const std::string& what) const {
  return heads_to_sequence(y, *group_, what);
}

std::string SequenceParallel::heads_problem(int64_t heads, int64_t kv_heads) const {
  const int64_t p = size();
  if (heads % p == 0 && kv_heads % p == 0) return "";
  return "distributed.sequence_parallel_size " + std::to_string(p) + " must divide the attention heads (num_attention_heads " +
         std::to_string(heads) + ") and the key / value heads (num_key_value_heads " + std::to_string(kv_heads) +
         "): each rank attends with a share of both";
}

}  // namespace hftrain
