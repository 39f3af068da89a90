// TrainingPlan arithmetic (see training_plan.h); rules from HF Trainer (hf-deepspeed-facts 1.4).
#include "train/training_plan.h"

#include <algorithm>
#include <cmath>

#include "optim/schedule.h"
#include "runspec/sections.h"
#include "util/error.h"

namespace hftrain {

int64_t windows_for(int64_t batches, int64_t ga) { return batches <= 0 ? 0 : batches / ga + (batches % ga > 0 ? 1 : 0); }

int64_t window_size_for(int64_t batches, int64_t w, int64_t ga) {
  const int64_t remainder = batches % ga == 0 ? ga : batches % ga;
  return w + 1 == windows_for(batches, ga) ? remainder : ga;
}

TrainingPlan make_training_plan(const TrainingArgs& args, int64_t batches_per_epoch, int64_t world_size) {
  if (batches_per_epoch == 0)
    throw ConfigError("training.per_device_train_batch_size: the training split yields no batches (too few examples "
                      "for this batch size with dataloader_drop_last, or no training examples)");
  TrainingPlan p;
  const int64_t ga = args.gradient_accumulation_steps;
  p.batches_per_epoch = batches_per_epoch;
  p.updates_per_epoch = std::max<int64_t>(batches_per_epoch / ga + (batches_per_epoch % ga > 0 ? 1 : 0), 1);
  if (args.max_steps > 0) {
    p.max_steps = args.max_steps;
    p.num_epochs = p.max_steps / p.updates_per_epoch + (p.max_steps % p.updates_per_epoch > 0 ? 1 : 0);
  } else {
    p.max_steps = static_cast<int64_t>(std::ceil(args.num_train_epochs * static_cast<double>(p.updates_per_epoch)));
    p.num_epochs = static_cast<int64_t>(std::ceil(args.num_train_epochs));
  }
  p.warmup_steps = warmup_steps_for(args.warmup_steps, args.warmup_ratio, p.max_steps);
  p.global_batch_size = args.per_device_train_batch_size * ga * world_size;
  return p;
}

std::string describe(const TrainingPlan& p) {
  return "global batch " + std::to_string(p.global_batch_size) + ", " + std::to_string(p.batches_per_epoch) +
         " batches/epoch, " + std::to_string(p.updates_per_epoch) + " steps/epoch, " + std::to_string(p.max_steps) +
         " steps over " + std::to_string(p.num_epochs) + " epochs, " + std::to_string(p.warmup_steps) + " warmup steps";
}

}  // namespace hftrain
