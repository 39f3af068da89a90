// Batches on the worker's device: the loader collates on the host; the step, evaluation and generation
// read the batch where the model is.
#pragma once

#include <functional>

#include "models/model.h"

namespace hftrain {

// `batch` with each tensor on `device` (the batch itself when that is the host). For a CUDA device with
// `pin_memory` (HF dataloader_pin_memory) the host tensors are pinned first and copied without blocking,
// so the copy overlaps the work already queued on the device.
// Tensors pinned already (pin_stage) are copied as they are.
Batch batch_on(const Batch& batch, torch::Device device, bool pin_memory = true);

// What the batch prefetcher does to each batch for a worker on `device`: pins its host tensors when the device
// is CUDA and `pin_memory` holds (so batch_on's copy needs no pinning of its own on the step's path); nothing
// (an empty function) otherwise.
std::function<void(Batch&)> pin_stage(torch::Device device, bool pin_memory);

}  // namespace hftrain
