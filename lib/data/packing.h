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
// Batch::packed_lengths the examples' lengths. The label tokens scored are those of the padded batch. An
// example that is itself a packed row (Example::segment_lengths) contributes each of its segments.
Batch flatten_examples(const std::vector<Example>& examples);

// One encoder-decoder row (sequence-to-sequence examples: input_ids the source, labels the target): the
// sources concatenated into input_ids [1, S] (attention_mask all 1, position_ids restarting, packed_lengths
// their lengths) and the targets into labels [1, T] (every label scored, as in the padded batch;
// packed_label_lengths their lengths). The model masks each example's attention to itself and shifts each
// target on its own (models/packed_seq2seq.h). An example with a target but no source is refused.
Batch flatten_seq2seq_examples(const std::vector<Example>& examples);

// The padding-free row of `examples` for a task: flatten_seq2seq_examples for sequence-to-sequence data,
// flatten_examples for causal LMs; RuntimeFailure for other tasks.
Batch flatten_for_task(const std::vector<Example>& examples, TaskKind task);

}  // namespace hftrain
