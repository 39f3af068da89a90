// Batches on the worker's device: the loader collates on the host; the step, evaluation and generation
// read the batch where the model is.
#pragma once

#include "models/model.h"

namespace hftrain {

// `batch` with each tensor on `device` (the batch itself when that is the host). For a CUDA device with
// `pin_memory` (HF dataloader_pin_memory) the host tensors are pinned first and copied without blocking,
// so the copy overlaps the work already queued on the device.
Batch batch_on(const Batch& batch, torch::Device device, bool pin_memory = true);

}  // namespace hftrain
