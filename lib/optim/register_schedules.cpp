// Registers the built-in learning-rate schedules (called from register_builtins()).
#include "optim/deepspeed_schedules.h"
#include "optim/hf_schedules.h"
#include "optim/plateau.h"
#include "registry/registry.h"

namespace hftrain {

void register_schedules(Registry<Schedule, const ScheduleContext&>& schedules) {
  schedules.add<LinearSchedule>("linear", "Linear warmup, then linear decay to 0 (HF 'linear').");
  schedules.add<CosineSchedule>("cosine", "Linear warmup, then cosine decay (HF 'cosine').");
  schedules.add<CosineWithRestartsSchedule>("cosine_with_restarts",
                                            "Linear warmup, then cosine decay with hard restarts (HF).");
  schedules.add<PolynomialSchedule>("polynomial", "Linear warmup, then polynomial decay to lr_end (HF).");
  schedules.add<ConstantSchedule>("constant", "Constant learning rate; warmup is ignored (HF 'constant').");
  schedules.add<ConstantWithWarmupSchedule>("constant_with_warmup", "Linear warmup, then constant (HF).");
  schedules.add<InverseSqrtSchedule>("inverse_sqrt", "Linear warmup, then inverse square-root decay (HF).");
  schedules.add<CosineWithMinLrSchedule>("cosine_with_min_lr",
                                         "Linear warmup, then cosine decay to a floor min_lr / min_lr_rate (HF).");
  schedules.add<WarmupStableDecaySchedule>("warmup_stable_decay",
                                           "Warmup, stable phase, then decay over num_decay_steps (HF WSD).");
  schedules.add<ReduceLrOnPlateauSchedule>(
      "reduce_lr_on_plateau", "torch ReduceLROnPlateau on metric_for_best_model after each evaluation (HF).");
  schedules.add<DeepSpeedWarmupLR>("WarmupLR", "DeepSpeed WarmupLR: log or linear warmup, then constant.");
  schedules.add<DeepSpeedWarmupDecayLR>("WarmupDecayLR",
                                        "DeepSpeed WarmupDecayLR: log or linear warmup, then linear decay to 0.");
  schedules.add<DeepSpeedWarmupCosineLR>("WarmupCosineLR",
                                         "DeepSpeed WarmupCosineLR: warmup from warmup_min_ratio, then cosine to "
                                         "cos_min_ratio of the learning rate.");
}

}  // namespace hftrain
