// Padding-free encoder-decoder rows (see packed_seq2seq.h).
#include "models/packed_seq2seq.h"

#include <numeric>
#include <string>

#include "models/hf_layers.h"
#include "util/error.h"

namespace hftrain {
bool is_packed_seq2seq(const Batch& batch) { return !batch.packed_lengths.empty() && !batch.packed_label_lengths.empty(); }

torch::Tensor attend_by_segments(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const AttentionBias& bias, const AttentionBlock& block) {
  if (!bias.segmented()) return block(q, k, v, bias.full);
  const auto& qs = bias.query_segments;
  const auto& ks = bias.key_segments;
  if (qs.size() != ks.size())
    throw RuntimeFailure("padding_free: " + std::to_string(qs.size()) + " query segments against " +
                         std::to_string(ks.size()) + " key segments");
  std::vector<torch::Tensor> outputs;
  int64_t q_start = 0, k_start = 0;
  for (std::size_t i = 0; i < qs.size(); ++i) {
    if (qs[i] > 0)
      outputs.push_back(block(q.narrow(2, q_start, qs[i]), k.narrow(2, k_start, ks[i]), v.narrow(2, k_start, ks[i]),
                              bias.per_segment ? bias.per_segment(qs[i], ks[i]) : torch::Tensor()));
    q_start += qs[i];
    k_start += ks[i];
  }
  if (q_start != q.size(2) || k_start != k.size(2))
    throw RuntimeFailure("padding_free: segments of " + std::to_string(q_start) + " queries and " + std::to_string(k_start) +
                         " keys against a row of " + std::to_string(q.size(2)) + " and " + std::to_string(k.size(2)));
  return outputs.size() == 1 ? outputs[0] : torch::cat(outputs, 2);
}

torch::Tensor restarting_positions(const std::vector<int64_t>& lengths, torch::Device device) {
  std::vector<int64_t> positions;
  for (const int64_t length : lengths)
    for (int64_t t = 0; t < length; ++t) positions.push_back(t);
  const auto n = static_cast<int64_t>(positions.size());
  return torch::tensor(positions, torch::kLong).view({1, n}).to(device);
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
