// Sequence parallelism's share of a batch (Ulysses, distributed.sequence_parallel_size): every rank of a group reads
// the same causal-LM batch and keeps one of `parts` equal, consecutive slices of each row. The labels are shifted
// on the whole rows first, so the token at a slice's end is scored against the first token of the next slice.
#pragma once

#include <cstdint>

#include "models/model.h"

namespace hftrain {

// Slice `index` of `parts` of `whole` (a padded causal-LM batch, or a padding-free row): the rows are padded to a
// multiple of `parts` (input_ids `pad_id`, attention_mask 0, labels -100; a padding-free row gets the padding as one
// more example of its own), labels become labels[:, 1:] followed by -100 (each position's target), and the slice
// keeps its tokens' global position_ids, the whole row's packed_lengths and, in Batch::slice, the whole rows' mask.
// The slices' label tokens add up to the whole batch's (scored_label_tokens). RuntimeFailure for a batch without
// input_ids and labels of one shape.
Batch slice_sequences(const Batch& whole, int64_t parts, int64_t index, int64_t pad_id);

}  // namespace hftrain
