// compute_loss (see training_loss.h).
#include "train/training_loss.h"

namespace hftrain {

ModelOutput compute_loss(Model& model, const Batch& batch, double label_smoothing_factor) {
  if (label_smoothing_factor == 0 || !batch.labels.defined()) return model.forward(batch);
  Batch smoothed = batch;  // a language model that computes its loss without logits smooths it itself
  smoothed.label_smoothing = label_smoothing_factor;
  ModelOutput out = model.forward(smoothed);
  if (out.logits.defined())
    out.loss = label_smoothed_loss(out.logits, batch.labels, label_smoothing_factor, model.is_causal_lm() && !batch.sliced(),
                                   batch.loss_denominator);
  return out;
}

}  // namespace hftrain
