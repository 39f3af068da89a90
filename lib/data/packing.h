// Padding-free batches (training.padding_free; HF DataCollatorWithFlattening, TRL padding_free): the
// examples of a micro-batch concatenated into one row, so that no step computes on padding.
#pragma once

#include <vector>

#include "data/dataset.h"
#include "models/model.h"

namespace hftrain {

// One row [1, sum of lengths] holding `examples` (causal-LM examples) one after the other: input_ids,
// labels with each example's first label -100 (HF's separator: the previous example's last token predicts
// nothing across the boundary), attention_mask all 1, position_ids restarting at 0 for each example, and
// Batch::packed_lengths the examples' lengths. The label tokens scored are those of the padded batch.
Batch flatten_examples(const std::vector<Example>& examples);

}  // namespace hftrain
