// `hftrain estimate`'s pieces: each family's module tree built on the meta device lists exactly the
// parameters its real construction registers (names, shapes, order), the parameter counts of GPT-2 small,
// Llama-2-7B and Llama-2-70B are the published ones, and DeepSpeed's estimator figures are recomputed here
// from its formulas.
#include <catch2/catch.hpp>

#include <map>

#include "builtins/register_builtins.h"
#include "engine/memory_estimate.h"
#include "models/construction.h"

using namespace hftrain;

namespace {

OptionsPtr parse_options(const std::string& type, const std::string& options) {
  Issues issues("test");
  auto opts = builtin_components().models.parse(type, YAML::Load(options), "model", issues, {});
  REQUIRE(issues.empty());
  return opts;
}

// The shapes read from the family's module tree built on meta, in named_parameters() order.
std::vector<ParameterShape> meta_shapes(const std::string& type, const std::string& options, const ModelContext& context = {}) {
  return model_parameter_shapes(builtin_components().models, type, parse_options(type, options), context);
}

std::map<std::string, std::vector<int64_t>> shapes_of(const std::string& type, const std::string& options,
                                                      const ModelContext& context = {}) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& p : meta_shapes(type, options, context)) {
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

TEST_CASE("each family built on meta lists exactly what its real construction registers, in order", "[unit][estimate]") {
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
    // The same order as the built model's named_parameters() (what the engine's flat layout follows).
    auto built = builtin_components().models.build(type, parse_options(type, options), context)->named_parameters();
    const std::vector<ParameterShape> meta = meta_shapes(type, options, context);
    REQUIRE(meta.size() == built.size());
    for (std::size_t i = 0; i < meta.size(); ++i) {
      CHECK(meta[i].name == built[i].key());
      CHECK(meta[i].shape == built[i].value().sizes().vec());
    }
  }
}

TEST_CASE("a model built on meta holds no storage, draws no random numbers and skips nothing it registers",
          "[unit][estimate]") {
  const auto& c = builtin_components();
  torch::manual_seed(7);
  const torch::Tensor before = torch::rand({4});
  torch::manual_seed(7);
  {
    MetaConstruction meta;
    auto model = c.models.build("llama", parse_options("llama", "{num_hidden_layers: 2, hidden_size: 32, "
                                                                "num_attention_heads: 4, intermediate_size: 48}"),
                                ModelContext{37, 12, 0, 0});
    REQUIRE(model->parameters().size() > 0);
    for (const auto& np : model->named_parameters()) {
      INFO(np.key());
      CHECK(np.value().device().type() == torch::kMeta);
    }
  }
  CHECK(torch::equal(torch::rand({4}), before));  // the global generator is where it was
  CHECK_FALSE(MetaConstruction::active());
  // Outside the scope, construction is real again.
  auto real = c.models.build("gpt", parse_options("gpt", "{n_layer: 1, n_head: 2, n_embd: 8}"), ModelContext{11, 6, 0, 0});
  for (const auto& p : real->parameters()) CHECK(p.device().type() == torch::kCPU);
}

TEST_CASE("parameter counts from shapes match the published GPT-2 small and Llama-2-7B sizes", "[unit][estimate]") {
  // GPT-2 small (124M): 124,439,808 parameters with the tied head (HF gpt2 model card / num_parameters()).
  CHECK(count(shapes_of("gpt2", "{n_layer: 12, n_head: 12, n_embd: 768, vocab_size: 50257, n_positions: 1024}")) ==
        124439808);
  // Llama-2-7B: 6,738,415,616 parameters (meta-llama/Llama-2-7b-hf config: 32 layers, 4096 wide, 11008 MLP, 32000 vocab).
  CHECK(count(shapes_of("llama", "{num_hidden_layers: 32, hidden_size: 4096, num_attention_heads: 32, intermediate_size: "
                                 "11008, vocab_size: 32000, max_position_embeddings: 4096, tie_word_embeddings: false}")) ==
        6738415616);
  // Llama-2-70B: 68,976,648,192 parameters (meta-llama/Llama-2-70b-hf config: 80 layers, 8192 wide, 64 heads, 8
  // key/value heads, 28672 MLP, 32000 vocab). Built on meta: no storage.
  CHECK(count(shapes_of("llama", "{num_hidden_layers: 80, hidden_size: 8192, num_attention_heads: 64, num_key_value_heads: 8, "
                                 "intermediate_size: 28672, vocab_size: 32000, max_position_embeddings: 4096}")) ==
        68976648192);
}

TEST_CASE("each family declares its HF config dimensions from its own options", "[unit][estimate]") {
  auto dims = [](const std::string& type, const std::string& options) {
    return builtin_components().models.facts(type, parse_options(type, options));
  };
  auto same = [](const ModelDimensions& d, int64_t hidden, int64_t layers, int64_t heads) {
    return d.hidden_size == hidden && d.layers == layers && d.attention_heads == heads;
  };
  CHECK(same(dims("gpt", "{n_layer: 3, n_head: 2, n_embd: 16}"), 16, 3, 2));
  CHECK(same(dims("gpt2", "{n_layer: 5, n_head: 4, n_embd: 32}"), 32, 5, 4));
  CHECK(same(dims("llama", "{num_hidden_layers: 6, hidden_size: 64, num_attention_heads: 8, num_key_value_heads: 2}"), 64, 6, 8));
  CHECK(same(dims("bert", "{hidden_size: 48, num_hidden_layers: 2, num_attention_heads: 4}"), 48, 2, 4));
  CHECK(same(dims("bert_mlm", "{hidden_size: 48, num_hidden_layers: 3, num_attention_heads: 4}"), 48, 3, 4));
  // Encoder-decoder models: both stacks hold activations; T5's num_decoder_layers null = num_layers.
  CHECK(same(dims("t5", "{d_model: 32, num_layers: 2, num_heads: 4}"), 32, 4, 4));
  CHECK(same(dims("t5", "{d_model: 32, num_layers: 2, num_decoder_layers: 3, num_heads: 4}"), 32, 5, 4));
  CHECK(same(dims("bart", "{d_model: 32, encoder_layers: 2, decoder_layers: 1, encoder_attention_heads: 4, "
                          "decoder_attention_heads: 2}"), 32, 3, 4));
  // HF's DeepSpeed integration: max(config.hidden_sizes) when the config has no hidden_size; no blocks.
  CHECK(same(dims("mlp", "{hidden_sizes: [7, 19, 9]}"), 19, 0, 0));
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

TEST_CASE("a quantised base's codes and scales are whole at stages 0-2 and partitioned at stage 3 above the threshold",
          "[unit][estimate][qlora]") {
  ModelSize model;
  model.tensors = {{"lora_A", 64}};
  // one 4-bit layer of 1024 weights: 512 code bytes, 16 uint8 absmax codes, a float32 nested absmax
  model.quantized_elements = 1024;
  model.quantized_storage = {{512, 512}, {16, 16}, {1, 4}};
  model.quantized_bytes = 532;
  StateLayout layout{2, 4, false, "none", false, 0, 0};
  CHECK(estimate_state_bytes(model, layout).params == 4 * 64 + 532);
  layout.stage = 3;
  CHECK(estimate_state_bytes(model, layout).params == 4 * 64 / 4 + 512 / 4 + 16 / 4 + 1);  // each tensor's bytes / 4, rounded up
  layout.persistence_threshold = 20;  // the absmax codes and the nested absmax stay whole
  CHECK(estimate_state_bytes(model, layout).params == 4 * 64 / 4 + 512 / 4 + 16 + 4);
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
