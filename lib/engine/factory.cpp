// Engine factory keyed by ZeRO stage (see factory.h).
#include "engine/factory.h"

#include <functional>
#include <map>

#include "util/error.h"

namespace hftrain {
namespace {

struct EngineInputs {
  const EngineSettings& config;
  const std::vector<std::pair<std::string, torch::Tensor>>& named_params;
  std::vector<ParamGroup>& groups;
  const OptimizerFactory& build_optimizer;
  Comm& comm;
};

std::vector<std::string> trainable_names(const EngineInputs& in) {
  std::vector<std::string> names;
  for (const auto& [n, p] : in.named_params)
    if (p.requires_grad()) names.push_back(n);
  return names;
}

// The settings with the model's frozen parameters (an adapter's base) and frozen storage added.
EngineSettings zero_options(const EngineInputs& in) {
  EngineSettings o = in.config;
  o.frozen = in.config.frozen_storage;
  for (const auto& [name, p] : in.named_params)
    if (!p.requires_grad()) o.frozen.emplace_back(name, p);
  return o;
}

std::unique_ptr<Engine> make_stage0(const EngineInputs& in) {
  if (in.comm.world_size() == 1 && !in.config.precision.enabled()) {
    // One process: the plain engine, bitwise the single-process reference.
    std::vector<torch::Tensor> params;
    for (const auto& np : in.named_params) params.push_back(np.second);
    return std::make_unique<LocalEngine>(params, in.build_optimizer(std::move(in.groups)), in.config.max_grad_norm);
  }
  return std::make_unique<ZeroEngine>(std::move(in.groups), trainable_names(in), in.build_optimizer,
                                              zero_options(in), in.comm);
}

std::unique_ptr<Engine> make_partitioned(const EngineInputs& in) {
  if (!in.config.optimizer_traits.element_wise)  // the run spec's check (check_optimizer_fits) names the alternatives
    throw ConfigError("zero.stage " + std::to_string(in.config.stage) + ": optimizer '" + in.config.optimizer_type +
                      "' does not update element by element, so it cannot step a flat partition of the parameters");
  return std::make_unique<ZeroEngine>(std::move(in.groups), trainable_names(in), in.build_optimizer,
                                              zero_options(in), in.comm);
}

const std::map<int, std::function<std::unique_ptr<Engine>(const EngineInputs&)>>& makers() {
  static const std::map<int, std::function<std::unique_ptr<Engine>(const EngineInputs&)>> m = {
      {0, make_stage0}, {1, make_partitioned}, {2, make_partitioned}, {3, make_partitioned}};
  return m;
}

}  // namespace

std::unique_ptr<Engine> make_engine(const EngineSettings& config,
                                    const std::vector<std::pair<std::string, torch::Tensor>>& named_params,
                                    std::vector<ParamGroup> groups, const OptimizerFactory& build_optimizer, Comm& comm) {
  auto it = makers().find(config.stage);
  if (it == makers().end())
    throw ConfigError("zero.stage " + std::to_string(config.stage) + " is not available in this version (stages 0 to 3)");
  if (config.precision.enabled()) {
    torch::NoGradGuard no_grad;
    for (const auto& named : named_params) {
      torch::Tensor p = named.second;  // a handle on the model's parameter
      if (!p.requires_grad() && p.is_floating_point()) {
        if (config.initial_values)  // released until the engine materialises it: it cannot be converted here
          throw ConfigError("zero.zero3_init_flag: frozen parameter '" + named.first +
                            "' cannot be built sharded with mixed precision; set zero.zero3_init_flag: false");
        p.set_data(p.to(config.precision.param_dtype));
      }
    }
  }
  if (config.optimizer_traits.steps_in_backward && config.stage == 0) {
    const std::string what = "optimizer '" + config.optimizer_type + "' updates each parameter inside backward, ";
    if (comm.world_size() > 1)
      throw ConfigError("distributed.nproc_per_node: " + what + "which runs in one process only (world size " +
                        std::to_string(comm.world_size()) + ")");
    if (config.precision.enabled())
      throw ConfigError("precision: " + what + "which runs in float32 only (no bf16 / fp16 master weights)");
  }
  EngineInputs in{config, named_params, groups, build_optimizer, comm};
  return it->second(in);
}

}  // namespace hftrain
