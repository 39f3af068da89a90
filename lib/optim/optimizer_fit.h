// Whether the run's optimizer can train the way the run spec asks, from the optimizer's declared traits
// (OptimizerTraits): checked before workers start (the launcher) and again when the engine is built.
#pragma once

#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "runspec/run_spec.h"

namespace hftrain {

// ConfigError when: a layer-wise optimizer (steps inside backward) meets gradient_accumulation_steps > 1,
// or max_grad_norm > 0 without LOMO's second-backward clipping; ZeRO stages 1-3 meet an optimizer that is
// not element-wise (`element_wise_names`, the registry's element-wise optimizers, are named as alternatives).
void check_optimizer_fits(const RunSpec& spec, const OptimizerTraits& traits, const std::vector<std::string>& element_wise_names);

}  // namespace hftrain
