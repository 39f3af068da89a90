// Token-exact loss over an optimizer step (HF >= 4.46, transformers#34191 / #35207): a label-token loss
// (causal, seq2seq, masked LM) is summed over the step's micro-batches and divided by the step's
// label-token count (HF num_items_in_batch), with average_tokens_across_devices that count summed over
// every worker and each worker's loss scaled by the world size (the gradient all-reduce averages). The
// update then equals the one-process full-batch update for any batch x accumulation x workers split.
// Per-example losses (classifiers, regression) keep HF's per-batch mean divided by the window.
// Sequence parallelism: the ranks of a group hold slices of the same batches, so without
// average_tokens_across_devices the count is summed over the group (its whole sequences') and each slice's loss scaled
// by the group's size; the sum over the group is then the group's loss, and the gradient average over the world the
// mean of the groups', as data parallelism over whole batches gives.

#pragma once

#include <cstdint>
#include <vector>

#include "models/model.h"

namespace hftrain {

class Comm;

// A micro-batch's loss is multiplied by `multiplier` and divided by `divisor` before backward.
struct LossScale {
  double multiplier = 1;
  double divisor = 1;
};

class LossNormaliser {
 public:
  // `sequence_group`: this rank's sequence-parallel group (null: none).
  LossNormaliser(const Model& model, bool average_tokens_across_devices, Comm& comm, Comm* sequence_group = nullptr)
      : model_(model), across_workers_(average_tokens_across_devices), comm_(comm), sequence_group_(sequence_group) {}

  // Sets each micro-batch's Batch::loss_denominator for the step `window` and returns how each
  // micro-batch's loss is scaled before backward. `input_tokens` (this worker's tokens seen in the
  // window, HF include_num_input_tokens_seen) is summed over the workers in the same collective when
  // `sum_input_tokens` is set.
  LossScale prepare(std::vector<Batch>& window, int64_t& input_tokens, bool sum_input_tokens);

 private:
  const Model& model_;
  bool across_workers_;
  Comm& comm_;
  Comm* sequence_group_;
};

}  // namespace hftrain
