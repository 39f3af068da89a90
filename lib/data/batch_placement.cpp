// Batches on the worker's device (see batch_placement.h).
#include "data/batch_placement.h"

namespace hftrain {

Batch batch_on(const Batch& batch, torch::Device device, bool pin_memory) {
  if (device.is_cpu()) return batch;
  const bool async = device.is_cuda() && pin_memory;
  auto move = [&](const torch::Tensor& t) {
    if (!t.defined() || t.device() == device) return t;
    return (async && !t.is_pinned() ? t.pin_memory() : t).to(device, /*non_blocking=*/async);
  };
  Batch out = batch;
  // Read here, on the host, rather than from the device in every forward: of the mask attention reads (a
  // sequence-parallel slice attends over its whole rows).
  const torch::Tensor& mask = batch.sliced() ? batch.slice.attention_mask : batch.attention_mask;
  if (mask.defined() && mask.is_cpu() && !batch.has_padding) out.has_padding = !mask.all().item<bool>();
  out.input_ids = move(batch.input_ids);
  out.attention_mask = move(batch.attention_mask);
  out.token_type_ids = move(batch.token_type_ids);
  out.labels = move(batch.labels);
  out.features = move(batch.features);
  out.position_ids = move(batch.position_ids);
  out.slice.attention_mask = move(batch.slice.attention_mask);
  return out;
}

std::function<void(Batch&)> pin_stage(torch::Device device, bool pin_memory) {
  if (!device.is_cuda() || !pin_memory) return nullptr;
  return [](Batch& b) {
    for (torch::Tensor* t : {&b.input_ids, &b.attention_mask, &b.token_type_ids, &b.labels, &b.features, &b.position_ids,
                             &b.slice.attention_mask})
      if (t->defined() && t->is_cpu() && !t->is_pinned()) *t = t->pin_memory();
  };
}

}  // namespace hftrain
