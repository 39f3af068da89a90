// The mixture-of-experts families (mixtral, qwen2_moe, qwen3_moe; models/moe, models/moe_decoder): a token's
// routing does not depend on the rest of its batch; an expert no token chose gets a zero gradient (defined, so
// every rank reduces the same tensors); the KV cache, batched greedy generation and padding-free rows follow the
// full forward; a 1-expert top-1 mixtral is llama; config.json round trips and refuses keys by name; the
// load-balancing loss is added with output_router_logits; the reported expert fractions count the top-k slots
// (padding and recomputation left out); ZeRO-3 trains as stage 0; LoRA reaches the experts.
// Also the hftrain side of tests/reference/moe_reference.py (hidden "[moe_ref]").
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "generate/batch_generate.h"
#include "generate/generate.h"
#include "models/lora.h"
#include "models/moe_decoder.h"
#include "reference_case.h"
#include "runspec/run_spec.h"
#include "seq2seq_model_helpers.h"
#include "spec_test_helpers.h"
#include "util/error.h"

using namespace hftrain;

namespace {

const std::string moe_sizes = "vocab_size: 29, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, "
                          "num_key_value_heads: 2, max_position_embeddings: 40";

// Each family small, its routing binding (several experts, top-k below them).
const std::vector<std::pair<std::string, std::string>>& families() {
  static const std::vector<std::pair<std::string, std::string>> f = {
      {"mixtral", "{" + moe_sizes + ", intermediate_size: 24, num_local_experts: 4, num_experts_per_tok: 2, sliding_window: 5}"},
      {"qwen2_moe", "{" + moe_sizes + ", intermediate_size: 40, num_experts: 4, num_experts_per_tok: 2, moe_intermediate_size: 16, "
                    "shared_expert_intermediate_size: 20, mlp_only_layers: [0], output_router_logits: true, router_aux_loss_coef: 0.1}"},
      {"qwen3_moe", "{" + moe_sizes + ", intermediate_size: 40, head_dim: 12, num_experts: 6, num_experts_per_tok: 3, "
                    "moe_intermediate_size: 16, norm_topk_prob: true}"}};
  return f;
}

torch::Tensor moe_ids_of(const std::vector<int64_t>& v) { return torch::tensor(v, torch::kLong).unsqueeze(0); }

Batch lm_batch() {
  Batch batch;
  batch.input_ids = torch::tensor(std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3}).view({2, 8}) + 2;
  batch.attention_mask = torch::ones({2, 8}, torch::kLong);
  batch.attention_mask[1].slice(0, 6).fill_(0);
  batch.labels = batch.input_ids.masked_fill(batch.attention_mask.eq(0), -100);
  return batch;
}

}  // namespace

TEST_CASE("MoE families: routing is per token, the KV cache, batched generation and padding-free rows follow the full forward",
          "[unit][moe]") {
  for (const auto& [type, options] : families()) {
    INFO(type);
    auto m = hftrain_test::build_model(type, options, 3);
    m->eval();
    torch::NoGradGuard no_grad;
    const std::vector<int64_t> seq = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
    Batch alone;
    alone.input_ids = moe_ids_of(seq);
    const auto expected = m->forward(alone).logits;
    // in a batch beside another row (padded), the row's tokens route and come out as alone
    Batch pair;
    pair.input_ids = torch::cat({alone.input_ids, moe_ids_of({7, 7, 2, 1, 4, 4, 6, 0, 0, 0, 0, 0})});
    pair.attention_mask = torch::ones({2, 12}, torch::kLong);
    pair.attention_mask[1].slice(0, 7).fill_(0);
    CHECK(torch::allclose(m->forward(pair).logits[0], expected[0], 1e-5, 1e-5));

    KvCache cache;
    std::vector<torch::Tensor> parts = {m->forward_cached(alone.input_ids.slice(1, 0, 2), cache)};
    for (int64_t t = 2; t < 12; ++t) parts.push_back(m->forward_cached(alone.input_ids.slice(1, t, t + 1), cache));
    CHECK(torch::allclose(torch::cat(parts, 1), expected, 1e-5, 1e-5));

    Batch packed;  // a padding-free row of two examples: each as it is alone
    packed.input_ids = moe_ids_of({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 7, 7, 2, 1, 4, 4, 6});
    packed.position_ids = torch::cat({torch::arange(12), torch::arange(7)}).unsqueeze(0);
    packed.packed_lengths = {12, 7};
    Batch second;
    second.input_ids = moe_ids_of({7, 7, 2, 1, 4, 4, 6});
    const auto logits = m->forward(packed).logits;
    CHECK(torch::allclose(logits.slice(1, 0, 12), expected, 1e-5, 1e-5));
    CHECK(torch::allclose(logits.slice(1, 12, 19), m->forward(second).logits, 1e-5, 1e-5));

    const std::vector<std::vector<int64_t>> prompts = {{3, 4}, {5, 9, 2, 6, 5, 3, 5}, {8}, {4, 4, 6, 1}};
    GenerationConfig config;
    config.max_new_tokens = 6;
    at::Generator generator = make_generator(0);
    std::vector<std::vector<int64_t>> one_at_a_time;
    for (const auto& p : prompts) one_at_a_time.push_back(generate(*m, p, config, generator));
    CHECK(generate_batch(*m, prompts, config, generator) == one_at_a_time);
  }
}

TEST_CASE("an expert no token chose gets a zero gradient, the chosen ones a non-zero one", "[unit][moe]") {
  // 8 experts, top-1, one token: in each layer one expert runs on it and seven on no token
  auto m = hftrain_test::build_model("mixtral", "{" + moe_sizes + ", intermediate_size: 16, num_local_experts: 8, "
                                                "num_experts_per_tok: 1}", 4);
  m->train();
  Batch batch;
  batch.input_ids = moe_ids_of({5, 6});
  batch.labels = batch.input_ids.clone();
  m->forward(batch).loss.backward();
  for (int layer = 0; layer < 2; ++layer) {
    int zero = 0, used = 0;
    for (int e = 0; e < 8; ++e) {
      const std::string p = "model.layers." + std::to_string(layer) + ".block_sparse_moe.experts." + std::to_string(e) + ".";
      const torch::Tensor g = m->named_parameters()[p + "w1.weight"].grad();
      REQUIRE(g.defined());
      for (const char* w : {"w2.weight", "w3.weight"}) REQUIRE(m->named_parameters()[p + w].grad().defined());
      (g.abs().max().item<double>() == 0.0 ? zero : used) += 1;
    }
    CHECK(used >= 1);
    CHECK(used <= 2);  // the two positions' choices
    CHECK(zero + used == 8);
  }
}

TEST_CASE("a 1-expert top-1 mixtral is llama with the expert as its MLP", "[unit][moe]") {
  const std::string dense = "{" + moe_sizes + ", intermediate_size: 24, rms_norm_eps: 1e-5, rope_theta: 1000000.0";
  auto mixtral = hftrain_test::build_model("mixtral", dense + ", num_local_experts: 1, num_experts_per_tok: 1}", 3);
  auto llama = hftrain_test::build_model("llama", dense + "}", 4);
  {
    torch::NoGradGuard no_grad;
    auto p = mixtral->named_parameters();
    for (auto& np : llama->named_parameters()) {
      std::string name = np.key();
      for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
               {"mlp.gate_proj", "block_sparse_moe.experts.0.w1"}, {"mlp.up_proj", "block_sparse_moe.experts.0.w3"},
               {"mlp.down_proj", "block_sparse_moe.experts.0.w2"}})
        if (name.find(from) != std::string::npos) name.replace(name.find(from), from.size(), to);
      np.value().copy_(p[name]);
    }
  }
  mixtral->eval();
  llama->eval();
  Batch batch = lm_batch();
  CHECK(torch::allclose(mixtral->forward(batch).logits, llama->forward(batch).logits, 1e-5, 1e-6));
}

TEST_CASE("output_router_logits adds router_aux_loss_coef times the load-balancing loss, under gradient checkpointing "
          "too, jitter only in training",
          "[unit][moe]") {
  const std::string base = "{" + moe_sizes + ", intermediate_size: 24, num_local_experts: 4, num_experts_per_tok: 2";
  auto plain = hftrain_test::build_model("mixtral", base + "}", 5);
  auto with_aux = hftrain_test::build_model("mixtral", base + ", output_router_logits: true, router_aux_loss_coef: 0.5}", 5);
  plain->train();
  with_aux->train();
  const Batch batch = lm_batch();
  const double loss = plain->forward(batch).loss.item<double>();
  const double total = with_aux->forward(batch).loss.item<double>();
  const torch::Tensor aux = dynamic_cast<MoeDecoder&>(*with_aux).aux_loss();
  REQUIRE(aux.defined());
  CHECK(aux.item<double>() > 0.0);
  CHECK(total == Approx(loss + 0.5 * aux.item<double>()).epsilon(1e-6));
  // gradient checkpointing recomputes each layer, the aux loss's gradient reaching the recomputed router logits
  std::map<std::string, torch::Tensor> grads[2];
  for (const bool checkpointing : {false, true}) {
    auto m = hftrain_test::build_model("mixtral", base + ", output_router_logits: true, router_aux_loss_coef: 0.5}", 6);
    m->train();
    if (checkpointing) m->enable_gradient_checkpointing();
    (m->forward(batch).loss * 3.0).backward();  // a scaled loss (accumulation, loss scaling) scales both parts
    for (auto& np : m->named_parameters()) grads[checkpointing][np.key()] = np.value().grad();
  }
  for (const auto& [name, g] : grads[0]) {
    INFO(name);
    CHECK(torch::allclose(g, grads[1].at(name), 1e-6, 1e-7));
  }
  CHECK(grads[0].at("model.layers.0.block_sparse_moe.gate.weight").abs().max().item<double>() > 0);
  auto jitter = hftrain_test::build_model("mixtral", base + ", router_jitter_noise: 0.2}", 5);
  jitter->eval();
  plain->eval();
  torch::NoGradGuard no_grad;
  CHECK(torch::equal(jitter->forward(batch).logits, plain->forward(batch).logits));
  jitter->train();
  CHECK(!torch::allclose(jitter->forward(batch).logits, plain->forward(batch).logits, 1e-4, 1e-4));
}

TEST_CASE("the reported expert fractions are each expert's share of the top-k slots, padding and recomputation left out",
          "[unit][moe]") {
  // one block: its slots counted against torch::topk over the router logits computed here from its gate weight
  auto record = std::make_shared<RouterRecord>();
  MoeSpec spec;
  spec.hidden_size = 8, spec.expert_size = 6, spec.experts = 5, spec.top_k = 2, spec.record = record;
  torch::manual_seed(11);
  SparseMoe block(spec);
  const torch::Tensor x = torch::randn({12, 8});
  const torch::Tensor mask = (torch::arange(12) % 4).ne(3).to(torch::kLong);  // every fourth token is padding
  record->counting = true;
  record->token_mask = mask;
  {
    torch::NoGradGuard no_grad;
    block.forward(x);
    block.forward(x);  // a second block of the same model: the counts add up
  }
  const torch::Tensor chosen = std::get<1>(torch::topk(x.matmul(block.named_parameters()["gate.weight"].t()), 2, -1));
  std::vector<double> expected(5, 0.0);
  for (int64_t t = 0; t < 12; ++t)
    for (int64_t j = 0; j < 2; ++j)
      if (mask[t].item<int64_t>() == 1) expected[static_cast<std::size_t>(chosen[t][j].item<int64_t>())] += 2.0;
  REQUIRE(record->expert_slots.defined());
  CHECK(record->expert_slots.sum().item<double>() == 2 * 9 * 2);
  for (int64_t e = 0; e < 5; ++e) CHECK(record->expert_slots[e].item<double>() == expected[static_cast<std::size_t>(e)]);
  // the model: the shares sum to 1, named in expert order, the same with gradient checkpointing's recomputation
  const std::string base = "{" + moe_sizes + ", intermediate_size: 24, num_local_experts: 4, num_experts_per_tok: 2}";
  std::vector<std::pair<std::string, double>> reported[2];
  for (const bool checkpointing : {false, true}) {
    auto m = hftrain_test::build_model("mixtral", base, 5);
    m->train();
    if (checkpointing) m->enable_gradient_checkpointing();
    const Batch batch = lm_batch();
    m->forward(batch).loss.backward();
    reported[checkpointing] = m->reported_scalars();
    const torch::Tensor slots = dynamic_cast<MoeDecoder&>(*m).expert_slots();
    REQUIRE(slots.defined());
    CHECK(slots.sum().item<double>() == 2 * 2 * batch.attention_mask.sum().item<double>());  // layers x k x tokens
  }
  REQUIRE(reported[0].size() == 4u);
  double total = 0;
  for (std::size_t e = 0; e < 4; ++e) {
    CHECK(reported[0][e].first == "expert_fraction_" + std::to_string(e));
    total += reported[0][e].second;
  }
  CHECK(total == Approx(1.0).epsilon(1e-12));
  CHECK(reported[0] == reported[1]);
  CHECK(expert_fraction_name(3, 12) == "expert_fraction_03");
  CHECK(expert_fraction_name(127, 128) == "expert_fraction_127");
}

TEST_CASE("MoE families: config.json round trips, keys not built are refused by name, ZeRO-3 trains as stage 0",
          "[unit][moe][zero3]") {
  const std::map<std::string, std::string> architecture = {
      {"mixtral", "MixtralForCausalLM"}, {"qwen2_moe", "Qwen2MoeForCausalLM"}, {"qwen3_moe", "Qwen3MoeForCausalLM"}};
  const std::string dir = hftrain_test::scratch_dir("moe", "config");
  for (const auto& [type, options] : families()) {
    INFO(type);
    auto make = [&, o = options, t = type] { return hftrain_test::build_model(t, o, 9); };
    auto m = make();
    const nlohmann::json config = m->config_json();
    CHECK(config["model_type"] == type);
    CHECK(config["architectures"] == nlohmann::json::array({architecture.at(type)}));
    CHECK(config["num_experts_per_tok"].is_number_integer());
    CHECK(config["output_router_logits"] == (type == "qwen2_moe"));  // the load-balancing loss at ZeRO-3 too
    CHECK(m->gather_units().size() == 4u);  // a layer, its experts included, is one gather unit
    const std::string saved = dir + "/" + type;
    save_model_dir(saved, *m);
    std::ofstream(dir + "/spec.yaml") << "model: {from_pretrained: " + saved + "}\ndata: {type: digit_reversal}\n"
                                         "training: {output_dir: " + dir + "/out}\n";
    RunSpec spec = hftrain_test::load(dir + "/spec.yaml");
    CHECK(spec.model.type == type);
    auto loaded = builtin_components().models.build(spec.model.type, spec.model.options, ModelContext{});
    CHECK(loaded->config_json() == config);
    load_pretrained_dir(spec.model.from_pretrained, *loaded);
    for (auto& np : m->named_parameters()) CHECK(torch::equal(np.value(), loaded->named_parameters()[np.key()]));
    for (const char* key : {"attn_logit_softcapping", "quantization_config", "moe_layer_freq"}) {
      nlohmann::json edited = config;
      edited[key] = 8;
      std::ofstream(saved + "/config.json") << edited.dump();
      CHECK_THAT(hftrain_test::load_error(dir + "/spec.yaml"), Catch::Contains(key) && Catch::Contains(saved + "/config.json"));
    }
    hftrain_test::check_zero3_trains_as_stage0(make, lm_batch(), "model.layers.0.self_attn.q_proj.weight");
    hftrain_test::check_deferred_init_matches_whole(make);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("LoRA on MoE families: PEFT's defaults, and target_modules naming expert projections reach every expert",
          "[unit][moe][peft]") {
  builtin_components();  // the families' declarations are registered with the components
  REQUIRE(family_of_type("mixtral") != nullptr);
  CHECK(family_of_type("mixtral")->lora_target_modules == std::vector<std::string>({"q_proj", "v_proj"}));
  CHECK(family_of_type("qwen2_moe")->lora_target_modules.empty());  // PEFT has no default for them
  CHECK(family_of_type("qwen3_moe")->lora_target_modules.empty());
  auto mixtral = hftrain_test::build_model("mixtral", families()[0].second, 3);
  PeftArgs args;
  args.target_modules = TargetModules{false, {"w1", "w2"}};
  attach_lora(*mixtral, "mixtral", args, "peft");
  auto params = mixtral->named_parameters();
  for (int e = 0; e < 4; ++e) {
    const std::string p = "model.layers.1.block_sparse_moe.experts." + std::to_string(e) + ".";
    CHECK(params.find(p + "w1.lora_A.weight") != nullptr);
    CHECK(params.find(p + "w2.lora_B.weight") != nullptr);
    CHECK(params.find(p + "w3.lora_A.weight") == nullptr);
  }
  auto qwen = hftrain_test::build_model("qwen2_moe", families()[1].second, 3);
  args.target_modules = TargetModules{false, {"gate_proj"}};
  attach_lora(*qwen, "qwen2_moe", args, "peft");
  params = qwen->named_parameters();
  CHECK(params.find("model.layers.0.mlp.gate_proj.lora_A.weight") != nullptr);  // the dense layer
  CHECK(params.find("model.layers.1.mlp.experts.3.gate_proj.lora_A.weight") != nullptr);
  CHECK(params.find("model.layers.1.mlp.shared_expert.gate_proj.lora_A.weight") != nullptr);
  qwen->train();
  const Batch batch = lm_batch();
  qwen->forward(batch).loss.backward();
  CHECK(params["model.layers.1.mlp.experts.3.gate_proj.lora_B.weight"].grad().defined());
}

// The hftrain side of tests/reference/moe_reference.py (hidden: run by it, which sets HFTRAIN_MOE_REFERENCE_DIR):
// for each case, load case/model through model.from_pretrained (the hub's per-expert tensors or v5's fused ones),
// run the forward in eval mode and backpropagate its loss; case/hftrain_output.safetensors holds {logits, loss,
// aux_loss when computed, expert_fraction (the reported per-expert shares), grad.<parameter>...}; the loaded model is saved to case/resaved.
TEST_CASE("MoE directories made outside hftrain load, run and save with every gradient (driven by moe_reference.py)",
          "[.][moe_ref]") {
  for (const std::string& dir : hftrain_test::reference_case_dirs("HFTRAIN_MOE_REFERENCE_DIR")) {
    INFO(dir);
    hftrain_test::ReferenceCase rc = hftrain_test::load_reference_case(dir);
    rc.model->eval();
    ModelOutput out = rc.model->forward(rc.batch);
    REQUIRE(out.loss.defined());
    out.loss.backward();
    NamedTensors written = {{"logits", out.logits.detach().contiguous()}, {"loss", out.loss.detach().reshape({1}).contiguous()}};
    const torch::Tensor& aux = dynamic_cast<MoeDecoder&>(*rc.model).aux_loss();
    if (aux.defined()) written.emplace_back("aux_loss", aux.reshape({1}).contiguous());
    std::vector<double> fractions;  // the logged per-expert shares, in expert order
    for (const auto& [name, value] : rc.model->reported_scalars())
      if (name.rfind("expert_fraction_", 0) == 0) fractions.push_back(value);
    written.emplace_back("expert_fraction", torch::tensor(fractions, torch::kFloat64));
    for (auto& np : rc.model->named_parameters()) {
      REQUIRE(np.value().grad().defined());
      written.emplace_back("grad." + np.key(), np.value().grad().clone());
    }
    save_safetensors(dir + "/hftrain_output.safetensors", written);
    save_model_dir(dir + "/resaved", *rc.model);
  }
}
