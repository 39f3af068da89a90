// HF's optim_target_modules matching (see target_modules.h).
#include "optim/target_modules.h"

#include <regex>

#include "log/logger.h"
#include "models/adaptable_linear.h"
#include "util/error.h"

namespace hftrain {
namespace {

std::regex compile(const std::string& pattern) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw ConfigError("training.optim_target_modules: '" + pattern + "' is not a valid regular expression (" +
                      e.what() + ")");
  }
}

}  // namespace

std::set<std::string> resolve_target_modules(const TargetModules& targets, const std::vector<ModuleEntry>& modules) {
  std::set<std::string> selected;
  for (const std::string& pattern : targets.patterns) {
    const std::regex re = compile(pattern);
    int linear = 0;
    std::vector<std::string> other;
    for (const ModuleEntry& m : modules) {
      bool hit;
      if (targets.single) {
        hit = std::regex_match(m.name, re);
      } else {
        hit = m.name == pattern || m.name.find(pattern) != std::string::npos ||
              std::regex_search(m.name, re, std::regex_constants::match_continuous);
      }
      if (!hit) continue;
      if (m.is_linear) {
        selected.insert(m.name + ".weight");
        ++linear;
      } else if (other.size() < 3) {
        other.push_back(m.name.empty() ? "(the model)" : m.name);
      }
    }
    if (linear == 0) {
      std::string detail;
      for (const auto& o : other) detail += (detail.empty() ? "" : ", ") + o;
      throw ConfigError("training.optim_target_modules: '" + pattern + "' selects no Linear module" +
                        (detail.empty() ? std::string(" (it matches no module name)")
                                        : " (it matches only modules that are not Linear layers: " + detail + ")"));
    }
  }
  return selected;
}

std::vector<ModuleEntry> module_entries(const torch::nn::Module& model) {
  std::vector<ModuleEntry> out{{"", false}};  // the model itself (a whole model is never one Linear layer)
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    ModuleEntry e{item.key(), false};
    // nn.Linear layers (HF's GaLore targets); gpt2's Conv1D is not one.
    if (const auto* linear = dynamic_cast<const AdaptableLinearImpl*>(item.value().get()))
      e.is_linear = linear->layout() == AdaptableLinearImpl::Layout::kOutIn && linear->weight.defined() &&
                    linear->weight.requires_grad();
    out.push_back(e);
  }
  return out;
}

std::set<std::string> low_rank_targets(const torch::nn::Module& model, const TargetModules& targets,
                                       const std::string& optimizer_type) {
  const bool galore = optimizer_type.rfind("galore_", 0) == 0;
  if (!targets.given()) {
    if (galore)
      throw ConfigError("training.optim_target_modules: optimizer '" + optimizer_type +
                        "' needs the modules whose weights it projects (e.g. [attn, mlp] or '.*(attn|mlp).*')");
    return {};
  }
  if (!galore)
    throw ConfigError("training.optim_target_modules: only the galore_* optimizers use it; optimizer.type is '" +
                      optimizer_type + "'");
  std::set<std::string> names = resolve_target_modules(targets, module_entries(model));
  int64_t elements = 0;
  for (const auto& p : model.named_parameters())
    if (names.count(p.key())) elements += p.value().numel();
  log_info("optim_target_modules: " + std::to_string(names.size()) + " weight tensors (" + std::to_string(elements) +
           " parameters) take the low-rank update of " + optimizer_type);
  return names;
}

}  // namespace hftrain
