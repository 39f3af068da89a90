// Optimizer traits against the run spec (see optimizer_fit.h).
#include "optim/optimizer_fit.h"

#include "config/schema.h"
#include "util/error.h"

namespace hftrain {

void check_optimizer_fits(const RunSpec& spec, const OptimizerTraits& traits, const std::vector<std::string>& element_wise_names) {
  const TrainingArgs& args = spec.training;
  const std::string& type = spec.optimizer.type;
  if (traits.steps_in_backward) {  // HF refuses accumulation for these too
    if (args.gradient_accumulation_steps != 1)
      throw ConfigError("training.gradient_accumulation_steps: optimizer '" + type +
                        "' updates each parameter inside backward, so gradients cannot accumulate; it needs 1, got " +
                        std::to_string(args.gradient_accumulation_steps));
    if (args.max_grad_norm > 0 && !traits.clips_with_second_backward)
      throw ConfigError("training.max_grad_norm: optimizer '" + type +
                        "' updates each parameter inside backward, before the global gradient norm exists, so it "
                        "cannot clip; set training.max_grad_norm: 0 (got " + format_number(args.max_grad_norm) + ")");
  }
  if (spec.zero.stage >= 1 && !traits.element_wise) {
    std::string names;
    for (const auto& n : element_wise_names) names += (names.empty() ? "" : ", ") + n;
    throw ConfigError("zero.stage " + std::to_string(spec.zero.stage) + ": optimizer '" + type +
                      "' does not update element by element, so it cannot step a flat partition of the parameters; "
                      "use zero.stage 0 or one of " + names);
  }
}

}  // namespace hftrain
