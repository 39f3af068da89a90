// Padding-free encoder-decoder rows (training.padding_free on t5 and bart): the attention masks, positions
// and decoder inputs that make one packed row compute, example by example, what each example computes
// alone in a padded batch. The sources of a micro-batch are concatenated into the encoder's row
// (Batch::packed_lengths), their targets into the decoder's (Batch::packed_label_lengths), in the same order.
#pragma once

#include <vector>

#include "models/model.h"

namespace hftrain {

// Whether `batch` is a padding-free encoder-decoder row (both lengths lists set).
bool is_packed_seq2seq(const Batch& batch);

// Additive attention bias [1, 1, sum(q_lengths), sum(k_lengths)]: query segment i sees key segment i only
// (and, when `causal`, only the keys up to its own position in it; the lengths must then agree), every
// other entry holds the dtype's lowest finite value, as HF's masks. The score matrix spans the whole row,
// so attention costs (sum of lengths)^2 where a padded batch costs batch x longest^2.
torch::Tensor segment_bias(const std::vector<int64_t>& q_lengths, const std::vector<int64_t>& k_lengths, bool causal,
                           torch::ScalarType dtype, torch::Device device);

// Position ids [1, sum(lengths)] restarting at 0 for each segment.
torch::Tensor restarting_positions(const std::vector<int64_t>& lengths, torch::Device device);

// HF shift_tokens_right applied to each target segment of a packed labels row [1, T] (segments of
// `lengths`, summing to T): each segment starts with decoder_start_token_id and continues with its own
// labels but the last, -100 read as pad_token_id.
torch::Tensor shift_segments_right(const torch::Tensor& labels, const std::vector<int64_t>& lengths, int64_t pad_token_id,
                                   int64_t decoder_start_token_id);

// The decoder's input ids for `batch`'s labels: shift_segments_right for a padding-free row, else HF's
// shift_tokens_right over each padded row.
torch::Tensor decoder_input_ids(const Batch& batch, int64_t pad_token_id, int64_t decoder_start_token_id);

}  // namespace hftrain
