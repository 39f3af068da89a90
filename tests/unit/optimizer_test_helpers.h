// Shared by the optimizer tests: building a registered optimizer from YAML options, and two named fp32
// parameters ("w", a matrix, and "v", a vector) with deterministic gradients, on any device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "builtins/register_builtins.h"
#include "optim/adamw.h"
#include "optim/optimizer.h"

namespace hftrain_test {

// AdamW with its defaults over `groups` (the engine tests' optimizer).
inline std::unique_ptr<hftrain::Optimizer> adamw(std::vector<hftrain::ParamGroup> groups) {
  return std::make_unique<hftrain::AdamW>(hftrain::AdamW::Options{}, std::move(groups), hftrain::OptimizerHyper{});
}

inline std::unique_ptr<hftrain::Optimizer> make_optimizer(const std::string& type, const std::string& yaml,
                                                          std::vector<hftrain::ParamGroup> groups,
                                                          hftrain::OptimizerHyper hyper = {}) {
  const auto& c = hftrain::builtin_components();
  hftrain::Issues issues("test.yaml");
  auto options = c.optimizers.parse(type, YAML::Load(yaml), "optimizer", issues, {"type"});
  issues.throw_if_any();
  return c.optimizers.build(type, options, std::move(groups), hyper);
}

// Named fp32 parameters with a fixed seed: "w" (rows x cols), "v" (a vector), on `device`; the same values on any.
struct NamedParams {
  torch::Tensor w, v;
  explicit NamedParams(int64_t rows = 24, int64_t cols = 10, uint64_t seed = 3, torch::Device device = torch::kCPU) {
    torch::manual_seed(seed);
    w = torch::randn({rows, cols}).to(device).set_requires_grad(true);
    v = torch::randn({cols}).to(device).set_requires_grad(true);
  }
  std::vector<hftrain::ParamGroup> groups() const {
    hftrain::ParamGroup g;
    g.names = {"w", "v"};
    g.params = {w, v};
    g.weight_decay = 0.1;
    return {g};
  }
  // A deterministic gradient for step k, on the parameters' device.
  void set_grads(int k) {
    torch::manual_seed(100 + static_cast<uint64_t>(k));
    w.mutable_grad() = torch::randn(w.sizes()).to(w.device());
    v.mutable_grad() = torch::randn(v.sizes()).to(v.device());
  }
};

}  // namespace hftrain_test
