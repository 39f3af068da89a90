// training.optim_target_modules -> the weights GaLore projects, with HF's matching rules
// (transformers' check_target_module_exists, applied by the Trainer to every module name of
// model.named_modules()):
//   - one string: the module name must match it as a regular expression in full (re.fullmatch);
//   - a list: a module matches when its name equals an entry, or contains an entry as a substring, or an
//     entry matches as a regular expression at the start of the name (re.match);
// and only Linear modules are taken (their `weight`), as HF's GaLore setup skips other modules. HF raises
// only when nothing at all is selected and warns about matched non-Linear modules; hftrain is stricter:
// each pattern must select at least one Linear weight, else ConfigError naming the pattern.
// Patterns are ECMAScript regular expressions (std::regex), which agree with Python's `re` for the usual
// module patterns (alternation, classes, `.*`, `\d`).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "runspec/sections.h"
#include "util/torch_compat.h"

namespace hftrain {

struct ModuleEntry {
  std::string name;         // as in named_modules(): "transformer.h.0.attn.c_attn"
  bool is_linear = false;   // a Linear layer with a trainable `weight`
};

// The parameter names ("<module>.weight") of the selected Linear modules.
std::set<std::string> resolve_target_modules(const TargetModules& targets, const std::vector<ModuleEntry>& modules);

// The modules of `model` (root included, as HF's named_modules()).
std::vector<ModuleEntry> module_entries(const torch::nn::Module& model);

// For the run: the weights to project for optimizer `type`. A galore_* type requires targets; any other type
// with targets given is a ConfigError (only GaLore reads them). Logs how many tensors and elements are targeted.
std::set<std::string> low_rank_targets(const torch::nn::Module& model, const TargetModules& targets,
                                       const std::string& optimizer_type);

}  // namespace hftrain
