// Padding-free encoder-decoder rows (training.padding_free on t5 and bart): the segmented attention,
// positions and decoder inputs that make one packed row compute, example by example, what each example
// computes alone in a padded batch. The sources of a micro-batch are concatenated into the encoder's row
// (Batch::packed_lengths), their targets into the decoder's (Batch::packed_label_lengths), in the same order.
#pragma once

#include <functional>
#include <vector>

#include "models/model.h"

namespace hftrain {

// Whether `batch` is a padding-free encoder-decoder row (both lengths lists set).
bool is_packed_seq2seq(const Batch& batch);

// The additive bias of one attention: `full`, broadcast over the whole score matrix (padded batches; may be
// undefined), or, for a padding-free row, segments: query segment i attends to key segment i only, with
// per_segment(query length, key length) as its bias (undefined = none). Segments cost the sum of each
// example's q x k scores, where a full mask over the row costs (sum of lengths)^2.
struct AttentionBias {
  AttentionBias(torch::Tensor full_bias = {}) : full(std::move(full_bias)) {}  // NOLINT: a tensor is a full bias
  torch::Tensor full;
  std::vector<int64_t> query_segments, key_segments;  // empty = not segmented
  std::function<torch::Tensor(int64_t, int64_t)> per_segment;
  bool segmented() const { return !query_segments.empty(); }
};

// One attention computed per segment of `bias` (or once over the whole row): `block(q, k, v, bias)` gives
// the attention output [B, H, q, D] of one block; the segments' outputs are concatenated along the queries.
using AttentionBlock = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                                   const torch::Tensor&)>;
torch::Tensor attend_by_segments(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const AttentionBias& bias, const AttentionBlock& block);

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
