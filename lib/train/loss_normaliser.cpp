// LossNormaliser (see loss_normaliser.h).
#include "train/loss_normaliser.h"

#include <algorithm>

#include "distributed/comm.h"

namespace hftrain {

LossScale LossNormaliser::prepare(std::vector<Batch>& window, int64_t& input_tokens, bool sum_input_tokens) {
  const bool token_level = model_.loss_unit() == LossUnit::kLabelToken;
  int64_t label_tokens = 0;
  if (token_level)
    for (Batch& b : window)  // on the host, before the batch moves: the chunked loss then reads nothing back
      label_tokens += note_scored_labels(model_, b);
  const int world = comm_.world_size();
  const bool sum_labels = token_level && across_workers_ && world > 1;
  if (world > 1 && (sum_labels || sum_input_tokens)) {  // one collective for both counts
    torch::Tensor counts = torch::tensor({label_tokens, input_tokens}, torch::kInt64);
    comm_.all_reduce(counts, ReduceOp::kSum, "step token counts");
    if (sum_labels) label_tokens = counts[0].item<int64_t>();
    if (sum_input_tokens) input_tokens = counts[1].item<int64_t>();
  }
  if (!token_level) return {1.0, static_cast<double>(window.size())};
  double multiplier = sum_labels ? static_cast<double>(world) : 1.0;
  const int group = sequence_group_ ? sequence_group_->world_size() : 1;
  if (!sum_labels && group > 1) {  // the group's whole sequences
    torch::Tensor count = torch::tensor({label_tokens}, torch::kInt64);
    sequence_group_->all_reduce(count, ReduceOp::kSum, "sequence-parallel label tokens");
    label_tokens = count[0].item<int64_t>();
    multiplier = static_cast<double>(group);
  }
  // A step whose labels are all ignored: the sum is 0 and so are the gradients (not 0 / 0).
  const double denominator = static_cast<double>(std::max<int64_t>(1, label_tokens));
  for (Batch& b : window) b.loss_denominator = denominator;
  return {multiplier, 1.0};
}

}  // namespace hftrain
