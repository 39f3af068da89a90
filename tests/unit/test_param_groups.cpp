// Weight decay groups: biases and normalisation weights never decay (HF's rule), shown on a gpt.
#include <catch2/catch.hpp>

#include "builtins/register_builtins.h"
#include "optim/optimizer.h"

using namespace hftrain;

TEST_CASE("gpt parameters split into decay and no-decay groups as HF does", "[unit][optim]") {
  const auto& c = builtin_components();
  Issues issues("test");
  auto opts = c.models.parse("gpt", YAML::Load("{n_layer: 1, n_head: 2, n_embd: 8}"), "model", issues, {});
  REQUIRE(issues.empty());
  auto model = c.models.build("gpt", opts, ModelContext{11, 13, 0, 0});
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (auto& np : model->named_parameters()) named.emplace_back(np.key(), np.value());
  auto groups = make_param_groups(named, 0.1);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].weight_decay == 0.1);
  CHECK(groups[1].weight_decay == 0.0);
  CHECK(groups[0].names == std::vector<std::string>{
                               "transformer.wte.weight", "transformer.wpe.weight",
                               "transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_proj.weight",
                               "transformer.h.0.mlp.c_fc.weight", "transformer.h.0.mlp.c_proj.weight"});
  CHECK(groups[1].names == std::vector<std::string>{
                               "transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias",
                               "transformer.h.0.attn.c_attn.bias", "transformer.h.0.attn.c_proj.bias",
                               "transformer.h.0.ln_2.weight", "transformer.h.0.ln_2.bias",
                               "transformer.h.0.mlp.c_fc.bias", "transformer.h.0.mlp.c_proj.bias",
                               "transformer.ln_f.weight", "transformer.ln_f.bias"});
  CHECK(is_no_decay_parameter("model.layers.0.input_layernorm.weight"));
  CHECK(is_no_decay_parameter("model.norm.weight"));
  CHECK_FALSE(is_no_decay_parameter("model.layers.0.self_attn.q_proj.weight"));
}
