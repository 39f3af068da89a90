// The training loss as HF Trainer sums it for its logs: tr_loss (the losses since the last log, HF's
// logging_nan_inf_filter applied) and the whole run's total (train_loss). The sums stay on the device the losses
// were computed on, in float64: adding a micro-batch's loss queues device work and waits for nothing, so a GPU step
// is not held up by reading its loss back; the host reads the sums only when it logs, saves or ends.
#pragma once

#include <cstdint>

#include "util/torch_compat.h"

namespace hftrain {

class LossTally {
 public:
  explicit LossTally(bool nan_inf_filter = true) : nan_inf_filter_(nan_inf_filter) {}

  void set_nan_inf_filter(bool on) { nan_inf_filter_ = on; }

  // Adds one micro-batch's loss (0-dim, any float dtype) to the step being accumulated. With the filter on, a
  // non-finite loss adds instead HF's stand-in: the sum since the last log (this step's earlier micro-batches
  // included) over 1 + `steps_since_log`.
  void add_micro_batch(const torch::Tensor& loss, int64_t steps_since_log);
  // Adds the step's sum to the sum since the last log and to the total.
  void end_step();

  // Host reads (they wait for the device's queued work).
  double since_log() const;
  double total() const;

  void clear_since_log();
  // A checkpoint's sums (the next losses move them to their device).
  void restore(double since_log, double total);

 private:
  void place_on(const torch::Device& device);

  bool nan_inf_filter_;
  torch::Tensor step_, since_log_, total_;  // 0-dim float64, all on one device
};

}  // namespace hftrain
