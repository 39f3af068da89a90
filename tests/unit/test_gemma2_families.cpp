// gemma2 and gemma3_text on the shared decoder (models/gemma2, models/gemma3): with soft-caps and windows that bind,
// the KV cache, batched left-padded generation and padding-free rows follow the full forward, and cached greedy
// generation is the full forward's argmax one token at a time; the chunked fused loss with the final soft-cap
// equals the full logits' loss with its gradients; config.json is the declaration and loads back (v5's
// rope_parameters keyed by layer type too); keys neither family builds are refused by name; ZeRO-3, zero.Init and
// gradient checkpointing behave as for the other decoder families. Semantics against HF's architecture:
// tests/reference/gemma_reference.py.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "checkpoint/model_io.h"
#include "generate/batch_generate.h"
#include "generate/generate.h"
#include "seq2seq_model_helpers.h"
#include "spec_test_helpers.h"
#include "util/error.h"

using namespace hftrain;

namespace {

const std::string gemma_sizes = "vocab_size: 29, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 3, "
                          "num_attention_heads: 4, num_key_value_heads: 2, head_dim: 12, max_position_embeddings: 40, "
                          "initializer_range: 0.3, query_pre_attn_scalar: 20";

// Each family with small caps and short windows; `plain` drops what `options` adds (windows, caps).
struct GemmaCase {
  std::string type, options, plain;
};

const std::vector<GemmaCase>& cases() {
  static const std::vector<GemmaCase> c = {
      {"gemma2", "{" + gemma_sizes + ", sliding_window: 3, attn_logit_softcapping: 1.0, final_logit_softcapping: 2.0, "
                 "layer_types: [sliding_attention, full_attention, sliding_attention]}",
       "{" + gemma_sizes + ", sliding_window: 100, attn_logit_softcapping: null, final_logit_softcapping: null}"},
      {"gemma3_text", "{" + gemma_sizes + ", sliding_window: 4, sliding_window_pattern: 2, rope_local_base_freq: 100, "
                      "rope_scaling: {rope_type: linear, factor: 8.0}, attn_logit_softcapping: 1.5, "
                      "final_logit_softcapping: 3.0, tie_word_embeddings: false}",
       "{" + gemma_sizes + ", sliding_window: 100, sliding_window_pattern: 2, rope_local_base_freq: 100, "
                     "rope_scaling: {rope_type: linear, factor: 8.0}, tie_word_embeddings: false}"}};
  return c;
}

torch::Tensor gemma_ids_of(const std::vector<int64_t>& v) { return torch::tensor(v, torch::kLong).unsqueeze(0); }

Batch padded_batch() {
  Batch batch;
  batch.input_ids = torch::tensor(std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3}).view({2, 8}) + 2;
  batch.attention_mask = torch::ones({2, 8}, torch::kLong);
  batch.attention_mask[1].slice(0, 6).fill_(0);
  batch.labels = batch.input_ids.masked_fill(batch.attention_mask.eq(0), -100);
  return batch;
}

}  // namespace

TEST_CASE("gemma2 and gemma3_text: soft-capped windowed attention in the KV cache, batched generation and padding-free "
          "rows follows the full forward", "[unit][hfmodels][decoder_families][gemma2]") {
  for (const GemmaCase& f : cases()) {
    INFO(f.type);
    auto m = hftrain_test::build_model(f.type, f.options, 3);
    m->eval();
    torch::NoGradGuard no_grad;
    const std::vector<int64_t> seq = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
    Batch full;
    full.input_ids = gemma_ids_of(seq);
    const auto expected = m->forward(full).logits;
    {  // the windows and caps bind: the same weights without them give other logits
      auto plain = hftrain_test::build_model(f.type, f.plain, 3);
      plain->eval();
      CHECK((plain->forward(full).logits - expected).abs().max().item<double>() > 1e-3);
    }
    KvCache cache;
    std::vector<torch::Tensor> parts = {m->forward_cached(full.input_ids.slice(1, 0, 2), cache)};
    for (int64_t t = 2; t < 10; ++t) parts.push_back(m->forward_cached(full.input_ids.slice(1, t, t + 1), cache));
    parts.push_back(m->forward_cached(full.input_ids.slice(1, 10, 12), cache));
    CHECK(torch::allclose(torch::cat(parts, 1), expected, 1e-5, 1e-5));

    Batch packed;  // a padding-free row of two examples: each as it is alone
    packed.input_ids = gemma_ids_of({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 7, 7, 2, 1, 4, 4, 6});
    packed.position_ids = torch::cat({torch::arange(12), torch::arange(7)}).unsqueeze(0);
    packed.packed_lengths = {12, 7};
    Batch second;
    second.input_ids = gemma_ids_of({7, 7, 2, 1, 4, 4, 6});
    const auto logits = m->forward(packed).logits;
    CHECK(torch::allclose(logits.slice(1, 0, 12), expected, 1e-5, 1e-5));
    CHECK(torch::allclose(logits.slice(1, 12, 19), m->forward(second).logits, 1e-5, 1e-5));

    // greedy generation past the windows: batched (left padding) equals one prompt at a time, which is the full
    // forward's argmax one token at a time
    const std::vector<std::vector<int64_t>> prompts = {{3, 4}, {5, 9, 2, 6, 5, 3, 5}, {8}, {4, 4, 6, 1}};
    GenerationConfig config;
    config.max_new_tokens = 8;
    at::Generator generator = make_generator(0);
    std::vector<std::vector<int64_t>> alone;
    for (const auto& p : prompts) {
      alone.push_back(generate(*m, p, config, generator));
      std::vector<int64_t> row = p;
      for (const int64_t token : alone.back()) {
        Batch b;
        b.input_ids = gemma_ids_of(row);
        CHECK(m->forward(b).logits[0][static_cast<int64_t>(row.size()) - 1].argmax().item<int64_t>() == token);
        row.push_back(token);
      }
    }
    CHECK(generate_batch(*m, prompts, config, generator) == alone);
  }
}

TEST_CASE("gemma2's chunked loss with the final soft-cap equals the full logits' loss and gradients",
          "[unit][hfmodels][decoder_families][gemma2]") {
  const Batch batch = padded_batch();
  std::map<std::string, torch::Tensor> grads[2];
  double losses[2];
  for (const bool chunked : {false, true}) {
    auto m = hftrain_test::build_model("gemma2", cases()[0].options, 5);
    m->train();
    LmLossSettings settings;
    settings.chunked = chunked;
    settings.chunk_tokens = 3;  // several chunks
    m->set_lm_loss(settings);
    ModelOutput out = m->forward(batch);
    CHECK(out.logits.defined() != chunked);
    out.loss.backward();
    losses[chunked] = out.loss.item<double>();
    for (auto& np : m->named_parameters()) grads[chunked][np.key()] = np.value().grad();
  }
  CHECK(losses[1] == Approx(losses[0]).epsilon(1e-6));
  for (const auto& [name, g] : grads[0]) {
    INFO(name);
    CHECK(torch::allclose(g, grads[1].at(name), 1e-5, 1e-6));
  }
}

TEST_CASE("gemma2 and gemma3_text config.json is the declaration, loads back (v5 too), and keys they do not build are "
          "refused by name", "[unit][hfmodels][decoder_families][gemma2]") {
  const auto dir = std::filesystem::temp_directory_path() / ("hftrain_unit_gemma2_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto write = [](const std::filesystem::path& path, const std::string& text) { std::ofstream(path) << text; };
  for (const GemmaCase& f : cases()) {
    INFO(f.type);
    const bool gemma3 = f.type == "gemma3_text";
    auto m = hftrain_test::build_model(f.type, f.options, 5);
    const nlohmann::json config = m->config_json();
    CHECK(config["model_type"] == f.type);
    CHECK(config["architectures"] == nlohmann::json::array({gemma3 ? "Gemma3ForCausalLM" : "Gemma2ForCausalLM"}));
    CHECK(config["hidden_activation"] == "gelu_pytorch_tanh");  // HF's MLP reads it: never null
    CHECK(config["query_pre_attn_scalar"] == 20.0);
    CHECK(config["sliding_window"] == (gemma3 ? 4 : 3));
    CHECK(config["attn_logit_softcapping"] == (gemma3 ? 1.5 : 1.0));
    CHECK(config["layer_types"].is_array() != gemma3);  // a list read back from config.json as a list
    if (gemma3) {  // 4.x keys and v5's rope_parameters keyed by layer type
      CHECK(config["rope_local_base_freq"] == 100.0);
      CHECK(config["rope_parameters"]["full_attention"] ==
            nlohmann::json({{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1000000.0}}));
      CHECK(config["rope_parameters"]["sliding_attention"] ==
            nlohmann::json({{"rope_type", "default"}, {"rope_theta", 100.0}}));
      CHECK(m->named_parameters().find("model.layers.2.self_attn.k_norm.weight") != nullptr);
    }
    for (auto& np : m->named_parameters())  // HF initialises every (1 + weight) norm to zero
      if (np.key().find("norm") != std::string::npos) CHECK(np.value().abs().max().item<double>() == 0.0);
    CHECK(m->named_parameters().find("model.layers.0.pre_feedforward_layernorm.weight") != nullptr);
    CHECK(m->named_parameters().find("model.layers.0.post_feedforward_layernorm.weight") != nullptr);
    CHECK(family_of_type(f.type)->lora_target_modules == std::vector<std::string>{"q_proj", "v_proj"});  // PEFT's

    const auto saved = dir / f.type;
    save_model_dir(saved.string(), *m);
    write(dir / "spec.yaml", "model: {from_pretrained: " + saved.string() + "}\ndata: {type: digit_reversal}\n"
                             "training: {output_dir: " + (dir / "out").string() + "}\n");
    auto load_back = [&] {
      RunSpec spec = hftrain_test::load((dir / "spec.yaml").string());
      CHECK(spec.model.type == f.type);
      auto loaded = builtin_components().models.build(spec.model.type, spec.model.options, ModelContext{});
      CHECK(loaded->config_json() == config);
      load_pretrained_dir(spec.model.from_pretrained, *loaded);
      for (auto& np : m->named_parameters()) CHECK(torch::equal(np.value(), loaded->named_parameters()[np.key()]));
    };
    load_back();
    if (gemma3) {  // v5's file alone: the rotary keys only in rope_parameters
      nlohmann::json v5 = config;
      for (const char* key : {"rope_theta", "rope_scaling", "rope_local_base_freq"}) v5.erase(key);
      write(saved / "config.json", v5.dump());
      load_back();
    }
    auto refused = [&](const std::string& key, const nlohmann::json& value) {
      INFO(key);
      nlohmann::json edited = config;
      edited[key] = value;
      write(saved / "config.json", edited.dump());
      const std::string message = hftrain_test::load_error((dir / "spec.yaml").string());
      CHECK_THAT(message, Catch::Contains(key) && Catch::Contains((saved / "config.json").string()));
    };
    refused("num_experts", 8);
    refused("quantization_config", {{"bits", 4}});
    refused("use_bidirectional_attention", true);
    if (gemma3)  // the sliding layers' rotary is unscaled
      refused("rope_parameters", {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}},
                                  {"sliding_attention", {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 100.0}}}});
    else  // rope_parameters keyed by layer type is gemma3's
      refused("rope_parameters", {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}});
  }
  std::filesystem::remove_all(dir);
  // a layer type neither builds; hidden_act without hidden_activation, which HF's Gemma2 / Gemma3 MLPs read instead;
  // a negative cap
  CHECK_THROWS_WITH(hftrain_test::build_model("gemma2", "{" + gemma_sizes + ", layer_types: [sliding_attention, "
                                              "chunked_attention, full_attention]}"),
                    Catch::Contains("layer_types") && Catch::Contains("chunked_attention"));
  CHECK_THROWS_WITH(hftrain_test::build_model("gemma3_text", "{" + gemma_sizes + ", hidden_act: silu}"),
                    Catch::Contains("hidden_act") && Catch::Contains("hidden_activation"));
  CHECK_THROWS_WITH(hftrain_test::build_model("gemma2", "{" + gemma_sizes + ", final_logit_softcapping: -1}"),
                    Catch::Contains("final_logit_softcapping"));
}

TEST_CASE("gemma2 and gemma3_text train at ZeRO-3 as at stage 0, build under zero.Init, and checkpoint exactly",
          "[unit][decoder_families][zero3][gemma2]") {
  const Batch batch = padded_batch();
  for (const GemmaCase& f : cases()) {
    INFO(f.type);
    auto make = [&] { return hftrain_test::build_model(f.type, f.options, 9); };
    hftrain_test::check_zero3_trains_as_stage0(make, batch, "model.layers.0.self_attn.q_proj.weight");
    hftrain_test::check_deferred_init_matches_whole(make);
    std::map<std::string, torch::Tensor> grads[2];
    for (const bool checkpointing : {false, true}) {
      auto m = make();
      m->train();
      if (checkpointing) m->enable_gradient_checkpointing();
      m->forward(batch).loss.backward();
      for (auto& np : m->named_parameters()) grads[checkpointing][np.key()] = np.value().grad();
    }
    for (const auto& [name, g] : grads[0]) CHECK(torch::allclose(g, grads[1].at(name), 1e-6, 1e-7));
  }
}

TEST_CASE("gemma2 and gemma3_text with bf16 weights compute their (1 + weight) norms in float32 and follow the float32 "
          "model", "[unit][hfmodels][decoder_families][gemma2]") {
  for (const GemmaCase& f : cases()) {
    INFO(f.type);
    auto m = hftrain_test::build_model(f.type, f.options, 3);
    {
      torch::NoGradGuard no_grad;
      for (auto& np : m->named_parameters()) np.value().normal_(0.0, 0.3);  // norms away from zero too
      for (auto& np : m->named_parameters()) np.value().copy_(np.value().to(torch::kBFloat16));  // bf16-exact values
    }
    m->eval();
    torch::NoGradGuard no_grad;
    Batch batch;
    batch.input_ids = gemma_ids_of({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8});
    const auto expected = m->forward(batch).logits;
    m->to(torch::kBFloat16);
    const auto logits = m->forward(batch).logits;
    CHECK(logits.scalar_type() == torch::kBFloat16);
    CHECK((logits.to(torch::kFloat) - expected).abs().max().item<double>() < 0.15);
  }
}
