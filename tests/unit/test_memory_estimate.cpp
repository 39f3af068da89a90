// `hftrain estimate`'s pieces: each family's shape function lists exactly the parameters its model
// registers (compared with the built model), the parameter counts of GPT-2 small and Llama-2-7B are the
// published ones, and DeepSpeed's estimator figures are recomputed here from its formulas.
#include <catch2/catch.hpp>

#include <map>

#include "builtins/register_builtins.h"
#include "engine/memory_estimate.h"

using namespace hftrain;

namespace {

OptionsPtr parse_options(const std::string& type, const std::string& options) {
  Issues issues("test");
  auto opts = builtin_components().models.parse(type, YAML::Load(options), "model", issues, {});
  REQUIRE(issues.empty());
  return opts;
}

std::map<std::string, std::vector<int64_t>> shapes_of(const std::string& type, const std::string& options,
                                                      const ModelContext& context = {}) {
  const auto& c = builtin_components();
  const OptionsPtr opts = parse_options(type, options);
  std::map<std::string, std::vector<int64_t>> out;
  const std::unique_ptr<ModelShapes> shapes = c.model_shapes.build(type, opts, context);
  for (const auto& p : shapes->parameters) {
    INFO(p.name);
    CHECK(out.count(p.name) == 0);  // each parameter once
    out[p.name] = p.shape;
  }
  return out;
}

std::map<std::string, std::vector<int64_t>> built_shapes(const std::string& type, const std::string& options,
                                                         const ModelContext& context = {}) {
  auto model = builtin_components().models.build(type, parse_options(type, options), context);
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& np : model->named_parameters()) out[np.key()] = np.value().sizes().vec();
  return out;
}

int64_t count(const std::map<std::string, std::vector<int64_t>>& shapes) {
  int64_t n = 0;
  for (const auto& [name, shape] : shapes) {
    int64_t e = 1;
    for (int64_t d : shape) e *= d;
    n += e;
  }
  return n;
}

}  // namespace

TEST_CASE("each family's shape function lists exactly what its model registers", "[unit][estimate]") {
  const ModelContext lm{37, 12, 0, 0}, classes{0, 0, 3, 5};
  const std::vector<std::tuple<std::string, std::string, ModelContext>> cases = {
      {"gpt", "{n_layer: 2, n_head: 2, n_embd: 16}", lm},
      {"gpt", "{n_layer: 1, n_head: 2, n_embd: 16, bias: false, vocab_size: 50, block_size: 20}", lm},
      {"gpt2", "{n_layer: 2, n_head: 4, n_embd: 32, n_inner: 40}", lm},
      {"gpt2", "{n_layer: 1, n_head: 4, n_embd: 32, tie_word_embeddings: false, n_positions: 24}", lm},
      {"llama", "{num_hidden_layers: 2, hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 48}", lm},
      {"llama", "{num_hidden_layers: 1, hidden_size: 32, num_attention_heads: 4, head_dim: 16, intermediate_size: 40, "
                "tie_word_embeddings: false, attention_bias: true, mlp_bias: true}", lm},
      {"bert", "{hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 48}", ModelContext{37, 12, 3, 0}},
      {"bert_mlm", "{hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 4, intermediate_size: 48}", lm},
      {"mlp", "{hidden_sizes: [7, 9]}", classes},
      {"t5", "{d_model: 32, d_kv: 8, d_ff: 48, num_layers: 2, num_decoder_layers: 3, num_heads: 4}", lm},
      {"t5", "{d_model: 32, d_kv: 12, d_ff: 40, num_layers: 1, num_heads: 3, feed_forward_proj: gated-gelu, "
             "tie_word_embeddings: false}", lm},
  };
  for (const auto& [type, options, context] : cases) {
    INFO(type << " " << options);
    CHECK(shapes_of(type, options, context) == built_shapes(type, options, context));
  }
}

TEST_CASE("parameter counts from shapes match the published GPT-2 small and Llama-2-7B sizes", "[unit][estimate]") {
  // GPT-2 small (124M): 124,439,808 parameters with the tied head (HF gpt2 model card / num_parameters()).
  CHECK(count(shapes_of("gpt2", "{n_layer: 12, n_head: 12, n_embd: 768, vocab_size: 50257, n_positions: 1024}")) ==
        124439808);
  // Llama-2-7B: 6,738,415,616 parameters (meta-llama/Llama-2-7b-hf config: 32 layers, 4096 wide, 11008 MLP, 32000 vocab).
  CHECK(count(shapes_of("llama", "{num_hidden_layers: 32, hidden_size: 4096, num_attention_heads: 32, intermediate_size: "
                                 "11008, vocab_size: 32000, max_position_embeddings: 4096, tie_word_embeddings: false}")) ==
        6738415616);
}

TEST_CASE("the per-rank state follows the engine's layout stage by stage", "[unit][estimate]") {
  ModelSize model;
  model.tensors = {{"a.weight", 1000}, {"a.bias", 10}, {"b.weight", 2000}};
  const int64_t psi = 3010;
  StateLayout layout{0, 2, true, "none", false, 0, 2 * psi};
  StateBytes s0 = estimate_state_bytes(model, layout);
  CHECK(s0.params == 2 * psi);
  CHECK(s0.grads == 2 * psi);
  CHECK(s0.master == 4 * psi);
  CHECK(s0.optimizer == 8 * psi);
  layout.stage = 1;
  StateBytes s1 = estimate_state_bytes(model, layout);
  CHECK(s1.grads == 2 * psi);
  CHECK(s1.master == 4 * psi / 2);
  CHECK(s1.optimizer == 8 * psi / 2);
  layout.stage = 2;
  CHECK(estimate_state_bytes(model, layout).grads == 2 * psi / 2);
  layout.stage = 3;
  layout.persistence_threshold = 100;  // the bias stays whole
  CHECK(estimate_state_bytes(model, layout).params == 2 * (3000 / 2 + 10));
  layout.offload = "nvme";
  layout.offload_param = true;
  StateBytes off = estimate_state_bytes(model, layout);
  CHECK(off.nvme == off.master + off.optimizer + off.params);
  CHECK(off.worker == off.grads);
  layout.mixed_precision = false;  // fp32 steps the parameters in place: no master copy
  CHECK(estimate_state_bytes(model, layout).master == 0);
  CHECK(model.largest_layer() == 2000);
}

TEST_CASE("DeepSpeed's estimator figures for Llama-2-7B on 8 GPUs, recomputed from its formulas", "[unit][estimate]") {
  const int64_t psi = 6738415616, largest = 32000LL * 4096;  // embed_tokens / lm_head
  // stage_1_and_2.py: no offload gpu = 2 psi + 18 psi / gpus, cpu = psi * 4 * gpus_per_node * 1.5;
  // cpu offload gpu = 2 psi, cpu = psi * max(4 gpus, 16) * 1.5.
  DeepSpeedEstimate z2 = deepspeed_zero2_estimate(psi, 8, 1, false);
  CHECK(z2.gpu == 2 * psi + static_cast<int64_t>(18.0 * 6738415616.0 / 8.0));
  CHECK(z2.cpu == static_cast<int64_t>(6738415616.0 * 32 * 1.5));
  DeepSpeedEstimate z2off = deepspeed_zero2_estimate(psi, 8, 1, true);
  CHECK(z2off.gpu == 13476831232);
  CHECK(z2off.cpu == static_cast<int64_t>(6738415616.0 * 32 * 1.5));
  // stage3.py (zero_init): gpu = 4 largest + 18 psi / gpus, cpu = largest * 4 * gpus_per_node * 1.5; offloading
  // optimizer and parameters: gpu = 4 largest, cpu = 18 psi * 1.5 / nodes.
  DeepSpeedEstimate z3 = deepspeed_zero3_estimate(psi, largest, 8, 1, false, false);
  CHECK(z3.gpu == 4 * largest + static_cast<int64_t>(18.0 * 6738415616.0 / 8.0));
  CHECK(z3.cpu == static_cast<int64_t>(131072000.0 * 4 * 8 * 1.5));
  DeepSpeedEstimate z3off = deepspeed_zero3_estimate(psi, largest, 8, 1, true, true);
  CHECK(z3off.gpu == 524288000);
  CHECK(z3off.cpu == static_cast<int64_t>(6738415616.0 * 18 * 1.5));
  // As DeepSpeed prints it (bytes / 2^30, "GB"): 14.61GB per GPU for ZeRO-3 without offload.
  CHECK(static_cast<double>(z3.gpu) / (1024.0 * 1024.0 * 1024.0) == Approx(14.61).epsilon(0.01));
}
