// Optimizer-state bytes of every optimizer for one model shape (driven by bench/optimizer_memory.py): builds the
// model through the registry (default: GPT-2 small, 12 x 768, vocabulary 50257, 1024 positions), HF's
// decay / no-decay groups, GaLore targets from optim_target_modules [attn, mlp] (every attention and MLP
// Linear), one step with a random gradient, then sums the bytes of state() (what a checkpoint stores). One
// JSON line per optimizer. Usage: optimizer_memory_bench [n_layer n_embd vocab positions] [optimizer ...]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "builtins/register_builtins.h"
#include "optim/galore.h"
#include "optim/target_modules.h"

using namespace hftrain;

int main(int argc, char** argv) {
  int64_t n_layer = 12, n_embd = 768, vocab = 50257, positions = 1024;
  int first_opt = 1;
  if (argc >= 5 && std::isdigit(static_cast<unsigned char>(argv[1][0]))) {
    n_layer = std::atoll(argv[1]), n_embd = std::atoll(argv[2]), vocab = std::atoll(argv[3]), positions = std::atoll(argv[4]);
    first_opt = 5;
  }
  std::vector<std::string> optimizers;
  for (int i = first_opt; i < argc; ++i) optimizers.push_back(argv[i]);
  if (optimizers.empty())
    optimizers = {"adamw", "adamw_8bit", "adafactor", "galore_adamw", "galore_adamw_8bit", "galore_adafactor", "lomo",
                  "adalomo"};
  const Components& c = builtin_components();
  Issues issues("bench");
  const std::string model_yaml = "{n_layer: " + std::to_string(n_layer) + ", n_head: 12, n_embd: " +
                                 std::to_string(n_embd) + ", vocab_size: " + std::to_string(vocab) +
                                 ", block_size: " + std::to_string(positions) + ", dropout: 0.0}";
  auto model_options = c.models.parse("gpt", YAML::Load(model_yaml), "model", issues, {"type"});
  issues.throw_if_any();
  torch::manual_seed(0);
  auto model = c.models.build("gpt", model_options, ModelContext{});
  std::vector<std::pair<std::string, torch::Tensor>> named;
  int64_t params = 0;
  for (auto& np : model->named_parameters()) {
    named.emplace_back(np.key(), np.value());
    params += np.value().numel();
  }
  TargetModules targets{false, {"attn", "mlp"}};
  for (const auto& type : optimizers) {
    OptimizerHyper hyper;
    if (type.rfind("galore_", 0) == 0) hyper.low_rank_params = low_rank_targets(*model, targets, type);
    auto options = c.optimizers.parse(type, YAML::Load("{}"), "optimizer", issues, {"type"});
    issues.throw_if_any();
    auto opt = c.optimizers.build(type, options, make_param_groups(named, 0.1), hyper);
    for (auto& [name, p] : named) p.mutable_grad() = torch::randn(p.sizes()) * 1e-3;
    opt->step(1e-4);  // every slot now exists (fused-backward optimizers step the same way here)
    for (auto& [name, p] : named) p.mutable_grad() = torch::Tensor();
    int64_t bytes = 0;
    for (const auto& kv : opt->state()) bytes += static_cast<int64_t>(kv.second.nbytes());
    std::printf("{\"optimizer\": \"%s\", \"parameters\": %lld, \"state_bytes\": %lld, \"bytes_per_parameter\": %.3f}\n",
                type.c_str(), static_cast<long long>(params), static_cast<long long>(bytes),
                static_cast<double>(bytes) / static_cast<double>(params));
    std::fflush(stdout);
  }
  return 0;
}
