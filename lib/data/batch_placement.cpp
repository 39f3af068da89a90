// Batches on the worker's device (see batch_placement.h).
#include "data/batch_placement.h"

namespace hftrain {

Batch batch_on(const Batch& batch, torch::Device device, bool pin_memory) {
  if (device.is_cpu()) return batch;
  const bool async = device.is_cuda() && pin_memory;
  auto move = [&](const torch::Tensor& t) {
    if (!t.defined() || t.device() == device) return t;
    return (async ? t.pin_memory() : t).to(device, /*non_blocking=*/async);
  };
  Batch out = batch;
  out.input_ids = move(batch.input_ids);
  out.attention_mask = move(batch.attention_mask);
  out.token_type_ids = move(batch.token_type_ids);
  out.labels = move(batch.labels);
  out.features = move(batch.features);
  out.position_ids = move(batch.position_ids);
  return out;
}

}  // namespace hftrain
