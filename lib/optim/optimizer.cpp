// Parameter grouping and checkpoint helpers shared by all optimizers (see optimizer.h).
#include "optim/optimizer.h"

#include <algorithm>
#include <regex>

#include "util/error.h"

namespace hftrain {

bool is_no_decay_parameter(const std::string& name) {
  // HF get_decay_parameter_names: regex-search these on the lowercased name; LayerNorm params excluded.
  static const std::regex patterns[] = {std::regex("bias"), std::regex("layernorm"), std::regex("rmsnorm"),
                                        std::regex("(?:^|\\.)norm(?:$|\\.)"), std::regex("_norm(?:$|\\.)"),
                                        std::regex("(?:^|\\.)ln_[a-z0-9]*\\.")};
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const auto& p : patterns)
    if (std::regex_search(lower, p)) return true;
  return false;
}

int64_t Optimizer::state_bytes_in_memory() const {
  int64_t bytes = 0;
  for (const auto& [k, t] : state()) bytes += static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size());
  return bytes;
}

std::vector<ParamGroup> make_param_groups(const std::vector<std::pair<std::string, torch::Tensor>>& named_params,
                                          double weight_decay) {
  ParamGroup decay, no_decay;
  decay.weight_decay = weight_decay;
  no_decay.weight_decay = 0.0;
  for (const auto& [name, p] : named_params) {
    if (!p.requires_grad()) continue;
    ParamGroup& g = is_no_decay_parameter(name) ? no_decay : decay;
    g.names.push_back(name);
    g.params.push_back(p);
  }
  return {decay, no_decay};
}

torch::Tensor find_state(const std::map<std::string, torch::Tensor>& state, const std::string& name,
                         const std::string& slot, c10::optional<torch::IntArrayRef> shape) {
  auto it = state.find(name + "." + slot);
  if (it == state.end()) return torch::Tensor();
  if (shape && !it->second.sizes().equals(*shape)) {
    std::ostringstream got, want;
    got << it->second.sizes();
    want << *shape;
    throw RuntimeFailure("optimizer state '" + name + "." + slot + "' has shape " + got.str() + ", expected " +
                         want.str());
  }
  return it->second.clone();
}

int64_t find_step(const std::map<std::string, torch::Tensor>& state, const std::string& name) {
  auto it = state.find(name + ".step");
  if (it == state.end()) return 0;
  if (it->second.numel() != 1) throw RuntimeFailure("optimizer state '" + name + ".step' is not a scalar");
  return it->second.to(torch::kLong).item<int64_t>();
}

}  // namespace hftrain
