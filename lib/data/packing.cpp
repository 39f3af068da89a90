// Padding-free batches (see packing.h).
#include "data/packing.h"

#include "util/error.h"

namespace hftrain {

Batch flatten_examples(const std::vector<Example>& examples) {
  std::vector<int64_t> ids, labels, positions, lengths;
  for (const Example& e : examples) {
    const auto n = static_cast<int64_t>(e.input_ids.size());
    if (n == 0) continue;
    // A packed row (Example::segment_lengths) is its examples one after the other.
    std::vector<int64_t> segments = e.segment_lengths.empty() ? std::vector<int64_t>{n} : e.segment_lengths;
    int64_t at = 0;
    for (int64_t length : segments) {
      if (length <= 0 || at + length > n)
        throw RuntimeFailure("padding_free: a packed row's segment lengths do not add up to its " + std::to_string(n) + " tokens");
      lengths.push_back(length);
      for (int64_t t = 0; t < length; ++t) {
        const auto i = static_cast<std::size_t>(at + t);
        ids.push_back(e.input_ids[i]);
        positions.push_back(t);
        const bool has_label = t > 0 && i < e.labels.size();
        labels.push_back(has_label ? e.labels[i] : -100);
      }
      at += length;
    }
    if (at != n) throw RuntimeFailure("padding_free: a packed row's segment lengths do not add up to its " + std::to_string(n) + " tokens");
  }
  if (lengths.empty()) throw RuntimeFailure("padding_free: a micro-batch holds no tokens");
  Batch b;
  const auto T = static_cast<int64_t>(ids.size());
  b.input_ids = torch::tensor(ids, torch::kLong).view({1, T});
  b.labels = torch::tensor(labels, torch::kLong).view({1, T});
  b.position_ids = torch::tensor(positions, torch::kLong).view({1, T});
  b.attention_mask = torch::ones({1, T}, torch::kLong);
  b.packed_lengths = std::move(lengths);
  return b;
}

Batch flatten_seq2seq_examples(const std::vector<Example>& examples) {
  std::vector<int64_t> ids, labels, positions, source_lengths, target_lengths;
  for (const Example& e : examples) {
    const auto source = static_cast<int64_t>(e.input_ids.size()), target = static_cast<int64_t>(e.labels.size());
    if (source == 0 && target == 0) continue;
    if (source == 0)
      throw RuntimeFailure("padding_free: an example has a target of " + std::to_string(target) +
                           " tokens but an empty source; a packed row cannot give its decoder an empty encoder "
                           "segment to attend to (drop such rows or set padding_free: false)");
    source_lengths.push_back(source);
    target_lengths.push_back(target);
    for (int64_t t = 0; t < source; ++t) positions.push_back(t);
    ids.insert(ids.end(), e.input_ids.begin(), e.input_ids.end());
    labels.insert(labels.end(), e.labels.begin(), e.labels.end());
  }
  if (source_lengths.empty()) throw RuntimeFailure("padding_free: a micro-batch holds no tokens");
  Batch b;
  const auto S = static_cast<int64_t>(ids.size()), T = static_cast<int64_t>(labels.size());
  b.input_ids = torch::tensor(ids, torch::kLong).view({1, S});
  b.attention_mask = torch::ones({1, S}, torch::kLong);
  b.position_ids = torch::tensor(positions, torch::kLong).view({1, S});
  b.labels = T > 0 ? torch::tensor(labels, torch::kLong).view({1, T}) : torch::empty({1, 0}, torch::kLong);
  b.packed_lengths = std::move(source_lengths);
  b.packed_label_lengths = std::move(target_lengths);
  return b;
}

Batch flatten_for_task(const std::vector<Example>& examples, TaskKind task) {
  if (task == TaskKind::kCausalLm) return flatten_examples(examples);
  if (task == TaskKind::kSeq2Seq) return flatten_seq2seq_examples(examples);
  throw RuntimeFailure("padding_free: packs causal-LM and sequence-to-sequence examples only");
}

}  // namespace hftrain
