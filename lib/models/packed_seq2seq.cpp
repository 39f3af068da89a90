// Padding-free encoder-decoder rows (see packed_seq2seq.h).
#include "models/packed_seq2seq.h"

#include <numeric>
#include <string>

#include "models/hf_layers.h"
#include "util/error.h"

namespace hftrain {
namespace {

// Each position's segment index and its position within the segment.
std::pair<torch::Tensor, torch::Tensor> segment_ids(const std::vector<int64_t>& lengths, torch::Device device) {
  std::vector<int64_t> ids, within;
  for (std::size_t s = 0; s < lengths.size(); ++s)
    for (int64_t t = 0; t < lengths[s]; ++t) {
      ids.push_back(static_cast<int64_t>(s));
      within.push_back(t);
    }
  const auto n = static_cast<int64_t>(ids.size());
  return {torch::tensor(ids, torch::kLong).view({n}).to(device), torch::tensor(within, torch::kLong).view({n}).to(device)};
}

}  // namespace

bool is_packed_seq2seq(const Batch& batch) { return !batch.packed_lengths.empty() && !batch.packed_label_lengths.empty(); }

torch::Tensor segment_bias(const std::vector<int64_t>& q_lengths, const std::vector<int64_t>& k_lengths, bool causal,
                           torch::ScalarType dtype, torch::Device device) {
  if (q_lengths.size() != k_lengths.size())
    throw RuntimeFailure("padding_free: " + std::to_string(q_lengths.size()) + " query segments against " +
                         std::to_string(k_lengths.size()) + " key segments");
  if (causal && q_lengths != k_lengths)
    throw RuntimeFailure("padding_free: a causal segment mask needs the same segments for queries and keys");
  const auto [q_ids, q_pos] = segment_ids(q_lengths, device);
  const auto [k_ids, k_pos] = segment_ids(k_lengths, device);
  auto allowed = q_ids.unsqueeze(1).eq(k_ids.unsqueeze(0));
  if (causal) allowed = allowed.logical_and(k_pos.unsqueeze(0).le(q_pos.unsqueeze(1)));
  auto bias = torch::zeros(allowed.sizes(), torch::TensorOptions().dtype(dtype).device(device))
                  .masked_fill(allowed.logical_not(), lowest_finite(dtype));
  return bias.view({1, 1, q_ids.size(0), k_ids.size(0)});
}

torch::Tensor restarting_positions(const std::vector<int64_t>& lengths, torch::Device device) {
  return segment_ids(lengths, device).second.unsqueeze(0);
}

torch::Tensor shift_segments_right(const torch::Tensor& labels, const std::vector<int64_t>& lengths, int64_t pad_token_id,
                                   int64_t decoder_start_token_id) {
  const int64_t total = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  if (labels.dim() != 2 || labels.size(0) != 1 || labels.size(1) != total)
    throw RuntimeFailure("padding_free: a packed labels row of shape " + c10::str(labels.sizes()) + " against target lengths summing to " +
                         std::to_string(total));
  auto shifted = shift_tokens_right(labels, pad_token_id, decoder_start_token_id);
  int64_t start = 0;
  for (const int64_t length : lengths) {
    if (length > 0) shifted.select(1, start).fill_(decoder_start_token_id);
    start += length;
  }
  return shifted;
}

torch::Tensor decoder_input_ids(const Batch& batch, int64_t pad_token_id, int64_t decoder_start_token_id) {
  return is_packed_seq2seq(batch)
             ? shift_segments_right(batch.labels, batch.packed_label_lengths, pad_token_id, decoder_start_token_id)
             : shift_tokens_right(batch.labels, pad_token_id, decoder_start_token_id);
}

}  // namespace hftrain
