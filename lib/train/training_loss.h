// The loss the trainer optimises and evaluation reports: the model's own loss, or HF's LabelSmoother
// when label_smoothing_factor != 0 (HF Trainer.compute_loss).
#pragma once

#include "models/model.h"

namespace hftrain {

struct TrainingArgs;

// Runs the model on `batch`; returns its output with `loss` replaced by the label-smoothed loss when
// label_smoothing_factor != 0.
ModelOutput compute_loss(Model& model, const Batch& batch, double label_smoothing_factor);

}  // namespace hftrain
