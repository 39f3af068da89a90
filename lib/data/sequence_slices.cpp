// Sequence-parallel slices of a batch (see sequence_slices.h).
#include "data/sequence_slices.h"

#include "util/error.h"

namespace hftrain {
namespace {

// `t` [B, T] extended by `extra` columns of `value`.
torch::Tensor pad_columns(const torch::Tensor& t, int64_t extra, int64_t value) {
  if (extra == 0) return t;
  return torch::cat({t, torch::full({t.size(0), extra}, value, t.options())}, 1);
}

}  // namespace

Batch slice_sequences(const Batch& whole, int64_t parts, int64_t index, int64_t pad_id) {
  if (parts < 1 || index < 0 || index >= parts)
    throw RuntimeFailure("sequence parallel: slice " + std::to_string(index) + " of " + std::to_string(parts) + " parts");
  if (!whole.input_ids.defined() || !whole.labels.defined() || whole.labels.sizes() != whole.input_ids.sizes())
    throw RuntimeFailure("sequence parallel: slices causal-LM batches (input_ids and labels of one shape) only");
  const int64_t B = whole.input_ids.size(0), T = whole.input_ids.size(1);
  const int64_t S = (T + parts - 1) / parts, extra = S * parts - T, start = index * S;
  // Each position's target, taken on the whole row: the last position has none.
  const torch::Tensor targets =
      torch::cat({whole.labels.slice(1, 1, T), torch::full({B, 1}, -100, whole.labels.options())}, 1);
  const torch::Tensor mask = whole.attention_mask.defined() ? whole.attention_mask : torch::ones({B, T}, torch::kLong);
  torch::Tensor positions;
  Batch b;
  b.packed_lengths = whole.packed_lengths;
  if (whole.position_ids.defined()) {  // padding-free: the padding is an example of its own, positions from 0
    positions = torch::cat({whole.position_ids, torch::arange(extra, whole.position_ids.options()).view({1, extra})}, 1);
    if (extra > 0 && !b.packed_lengths.empty()) b.packed_lengths.push_back(extra);
  } else {
    positions = torch::arange(S * parts, torch::kLong).view({1, S * parts});
  }
  b.slice.parts = parts;
  b.slice.index = index;
  b.slice.length = whole.position_ids.defined() ? whole.position_ids.max().item<int64_t>() + 1 : T;
  b.slice.attention_mask = pad_columns(mask, extra, 0);
  b.input_ids = pad_columns(whole.input_ids, extra, pad_id).narrow(1, start, S).contiguous();
  b.attention_mask = b.slice.attention_mask.narrow(1, start, S).contiguous();
  b.labels = pad_columns(targets, extra, -100).narrow(1, start, S).contiguous();
  b.position_ids = positions.narrow(1, start, S).contiguous();
  b.loss_denominator = whole.loss_denominator;
  b.label_smoothing = whole.label_smoothing;
  return b;
}

}  // namespace hftrain
