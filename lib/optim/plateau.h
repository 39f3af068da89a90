// `reduce_lr_on_plateau`: torch.optim.lr_scheduler.ReduceLROnPlateau (PyTorch 1.13) as HF uses it:
// no warmup, the learning rate starts at training.learning_rate and is multiplied by `factor` (never
// below min_lr) when metric_for_best_model has not improved for more than `patience` evaluations.
// HF steps it after each evaluation, never after an optimizer step.
#pragma once

#include <string>

#include "optim/schedule.h"

namespace hftrain {

class ReduceLrOnPlateauSchedule : public Schedule {
 public:
  struct Options {
    std::string mode = "min";
    double factor = 0.1;
    int64_t patience = 10;
    double threshold = 1e-4;
    std::string threshold_mode = "rel";
    int64_t cooldown = 0;
    double min_lr = 0.0;
    double eps = 1e-8;
    static void declare(Schema<Options>& s);
  };
  ReduceLrOnPlateauSchedule(const Options& options, const ScheduleContext& context);
  double lr(int64_t) const override { return lr_; }
  bool steps_per_optimizer_step() const override { return false; }
  void observe_metric(double value) override;
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& state) override;

 private:
  bool is_better(double a) const;
  Options o_;
  double lr_;
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  int64_t last_epoch_ = 0;
};

}  // namespace hftrain
