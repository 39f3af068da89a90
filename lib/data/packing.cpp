// Padding-free batches (see packing.h).
#include "data/packing.h"

#include "util/error.h"

namespace hftrain {

Batch flatten_examples(const std::vector<Example>& examples) {
  std::vector<int64_t> ids, labels, positions, lengths;
  for (const Example& e : examples) {
    const auto n = static_cast<int64_t>(e.input_ids.size());
    if (n == 0) continue;
    lengths.push_back(n);
    for (int64_t t = 0; t < n; ++t) {
      ids.push_back(e.input_ids[static_cast<std::size_t>(t)]);
      positions.push_back(t);
      const bool has_label = t > 0 && t < static_cast<int64_t>(e.labels.size());
      labels.push_back(has_label ? e.labels[static_cast<std::size_t>(t)] : -100);
    }
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

}  // namespace hftrain
