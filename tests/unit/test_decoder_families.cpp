// The llama-like families on the shared decoder (qwen2, qwen3, mistral, phi3, gemma; models/decoder): their sliding
// windows (a window shorter than the sequence, so it binds) in the KV cache, in batched left-padded generation and in
// padding-free rows agree with the full forward; each family's config.json is its declaration (every option
// under its HF name, model_type, architectures, the derived keys) and loads back through model.from_pretrained;
// a config.json key the family does not build is refused naming the key and the file; gather units are the
// declared ones, ZeRO-3 over them trains as stage 0, zero.Init builds the same model, and gradient
// checkpointing gives the same gradients.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "checkpoint/model_io.h"
#include "generate/batch_generate.h"
#include "generate/generate.h"
#include "models/lora.h"
#include "runspec/run_spec.h"
#include "seq2seq_model_helpers.h"
#include "spec_test_helpers.h"
#include "util/error.h"

using namespace hftrain;

namespace {

// Each family with a window of its own shape (`W` stands for it) shorter than the sequences below.
struct Windowed {
  std::string type, options, window, full;  // options with W, the window's text, full attention's
  std::string with(const std::string& w) const {
    std::string o = options;
    return o.replace(o.find('W'), 1, w);
  }
};

const std::vector<Windowed>& windowed() {
  static const std::vector<Windowed> f = {
      {"qwen2", "{vocab_size: 29, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
                "num_key_value_heads: 2, max_position_embeddings: 40, W, max_window_layers: 1}",
       "use_sliding_window: true, sliding_window: 4", "use_sliding_window: false, sliding_window: 4"},
      {"mistral", "{vocab_size: 29, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
                  "num_key_value_heads: 2, max_position_embeddings: 40, W}",
       "sliding_window: 3", "sliding_window: null"},
      {"qwen3", "{vocab_size: 29, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
                "num_key_value_heads: 2, head_dim: 12, max_position_embeddings: 40, W, max_window_layers: 0, "
                "attention_bias: true}",
       "use_sliding_window: true, sliding_window: 5", "use_sliding_window: false, sliding_window: 5"},
      {"phi3", "{vocab_size: 29, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
               "num_key_value_heads: 2, max_position_embeddings: 40, W, partial_rotary_factor: 0.5}",
       "sliding_window: 4", "sliding_window: null"}};
  return f;
}

torch::Tensor ids_of(const std::vector<int64_t>& v) { return torch::tensor(v, torch::kLong).unsqueeze(0); }

}  // namespace

TEST_CASE("sliding windows: the KV cache, batched generation and padding-free rows follow the full forward",
          "[unit][hfmodels][decoder_families]") {
  for (const Windowed& f : windowed()) {
    INFO(f.type);
    auto m = hftrain_test::build_model(f.type, f.with(f.window), 3);
    m->eval();
    torch::NoGradGuard no_grad;
    const std::vector<int64_t> seq = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
    Batch full;
    full.input_ids = ids_of(seq);
    const auto expected = m->forward(full).logits;
    {  // the window binds: the same weights with full attention give other logits
      auto unwindowed = hftrain_test::build_model(f.type, f.with(f.full), 3);
      unwindowed->eval();
      CHECK((unwindowed->forward(full).logits - expected).abs().max().item<double>() > 1e-3);
    }
    KvCache cache;
    std::vector<torch::Tensor> parts = {m->forward_cached(full.input_ids.slice(1, 0, 2), cache)};
    for (int64_t t = 2; t < 10; ++t) parts.push_back(m->forward_cached(full.input_ids.slice(1, t, t + 1), cache));
    parts.push_back(m->forward_cached(full.input_ids.slice(1, 10, 12), cache));
    CHECK(torch::allclose(torch::cat(parts, 1), expected, 1e-5, 1e-5));

    // a padding-free row of two examples: each as it is alone
    Batch packed;
    packed.input_ids = ids_of({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 7, 7, 2, 1, 4, 4, 6});
    packed.position_ids = torch::cat({torch::arange(12), torch::arange(7)}).unsqueeze(0);
    packed.packed_lengths = {12, 7};
    Batch second;
    second.input_ids = ids_of({7, 7, 2, 1, 4, 4, 6});
    const auto logits = m->forward(packed).logits;
    CHECK(torch::allclose(logits.slice(1, 0, 12), expected, 1e-5, 1e-5));
    CHECK(torch::allclose(logits.slice(1, 12, 19), m->forward(second).logits, 1e-5, 1e-5));

    // batched greedy generation (left padding, generations past the window) equals one prompt at a time
    const std::vector<std::vector<int64_t>> prompts = {{3, 4}, {5, 9, 2, 6, 5, 3, 5}, {8}, {4, 4, 6, 1}};
    GenerationConfig config;
    config.max_new_tokens = 8;
    at::Generator generator = make_generator(0);
    std::vector<std::vector<int64_t>> alone;
    for (const auto& p : prompts) alone.push_back(generate(*m, p, config, generator));
    CHECK(generate_batch(*m, prompts, config, generator) == alone);
  }
}

TEST_CASE("each family's config.json is its declaration, loads back, and keys it does not build are refused by name",
          "[unit][hfmodels][decoder_families]") {
  const auto dir = std::filesystem::temp_directory_path() / ("hftrain_unit_decoder_families_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto write = [](const std::filesystem::path& path, const std::string& text) { std::ofstream(path) << text; };
  const std::map<std::string, std::string> architecture = {
      {"qwen2", "Qwen2ForCausalLM"}, {"mistral", "MistralForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"},
      {"phi3", "Phi3ForCausalLM"}};
  for (const Windowed& f : windowed()) {
    INFO(f.type);
    auto m = hftrain_test::build_model(f.type, f.with(f.window), 5);
    const nlohmann::json config = m->config_json();
    CHECK(config["model_type"] == f.type);
    CHECK(config["architectures"] == nlohmann::json::array({architecture.at(f.type)}));
    CHECK(config["num_key_value_heads"] == 2);
    CHECK(config["head_dim"] == (f.type == "qwen3" ? 12 : 8));
    CHECK(config["sliding_window"].is_number_integer());
    CHECK(config["rope_parameters"]["rope_type"] == "default");
    CHECK(config["torch_dtype"] == "float32");
    CHECK(m->family() == family_of_type(f.type));
    const auto units = m->gather_units();  // the declared ones, in forward order
    REQUIRE(units.size() == 4);
    CHECK(units[0].prefixes == std::vector<std::string>{"model.embed_tokens."});
    CHECK(units[2].name == "model.layers.1");
    CHECK(units[3].prefixes == std::vector<std::string>{"model.norm.", "lm_head.weight"});

    const auto saved = dir / f.type;
    save_model_dir(saved.string(), *m);
    write(dir / "spec.yaml", "model: {from_pretrained: " + saved.string() + "}\ndata: {type: digit_reversal}\n"
                             "training: {output_dir: " + (dir / "out").string() + "}\n");
    RunSpec spec = hftrain_test::load((dir / "spec.yaml").string());
    CHECK(spec.model.type == f.type);
    auto loaded = builtin_components().models.build(spec.model.type, spec.model.options, ModelContext{});
    CHECK(loaded->config_json() == config);
    load_pretrained_dir(spec.model.from_pretrained, *loaded);
    for (auto& np : m->named_parameters()) CHECK(torch::equal(np.value(), loaded->named_parameters()[np.key()]));

    // a MoE key, a soft-cap this family does not build, quantized weights: refused naming the key and the file
    for (const char* key : {"num_experts", "attn_logit_softcapping", "quantization_config"}) {
      nlohmann::json edited = config;
      edited[key] = 8;
      write(saved / "config.json", edited.dump());
      const std::string message = hftrain_test::load_error((dir / "spec.yaml").string());
      CHECK_THAT(message, Catch::Contains(key) && Catch::Contains((saved / "config.json").string()));
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("qwen2, mistral, qwen3 and phi3 train at ZeRO-3 as at stage 0, build under zero.Init, and checkpoint exactly",
          "[unit][decoder_families][zero3]") {
  Batch batch;
  batch.input_ids = torch::tensor(std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3}).view({2, 8}) + 2;
  batch.attention_mask = torch::ones({2, 8}, torch::kLong);
  batch.attention_mask[1].slice(0, 6).fill_(0);
  batch.labels = batch.input_ids.masked_fill(batch.attention_mask.eq(0), -100);
  for (const Windowed& f : windowed()) {
    INFO(f.type);
    auto make = [&] { return hftrain_test::build_model(f.type, f.with(f.window), 9); };
    hftrain_test::check_zero3_trains_as_stage0(
        make, batch, f.type == "phi3" ? "model.layers.0.self_attn.qkv_proj.weight" : "model.layers.0.self_attn.q_proj.weight");
    hftrain_test::check_deferred_init_matches_whole(make);
    // gradient checkpointing recomputes each layer (its window included) to the same gradients
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

namespace {

const std::string gemma_options = "{vocab_size: 29, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, "
                                  "num_attention_heads: 4, num_key_value_heads: 2, head_dim: 12, max_position_embeddings: 40";

}  // namespace

TEST_CASE("gemma is llama with (1 + weight) norms, embeddings times sqrt(hidden_size) and hidden_activation",
          "[unit][hfmodels][decoder_families]") {
  // hidden_act says silu, hidden_activation (which wins) GELU-tanh; an untied head, so only the input embeddings scale
  auto gemma = hftrain_test::build_model("gemma", gemma_options + ", hidden_act: silu, hidden_activation: gelu_pytorch_tanh, "
                                         "tie_word_embeddings: false}", 3);
  for (auto& np : gemma->named_parameters())  // HF initialises the norms' weights to zero
    if (np.key().find("norm") != std::string::npos) CHECK(np.value().abs().max().item<double>() == 0.0);
  auto llama = hftrain_test::build_model("llama", gemma_options + ", hidden_act: gelu_pytorch_tanh}", 4);
  {
    torch::NoGradGuard no_grad;
    auto g = gemma->named_parameters();
    for (auto& np : g) np.value().normal_(0.0, 0.3);  // norms away from zero too
    for (auto& np : llama->named_parameters()) {
      const torch::Tensor w = g[np.key()];
      if (np.key().find("norm") != std::string::npos) np.value().copy_(w + 1.0);
      else if (np.key() == "model.embed_tokens.weight") np.value().copy_(w * torch::scalar_tensor(std::sqrt(32.0)));
      else np.value().copy_(w);
    }
  }
  gemma->eval();
  llama->eval();
  torch::NoGradGuard no_grad;
  Batch batch;
  batch.input_ids = ids_of({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8});
  const auto expected = llama->forward(batch).logits;
  const auto logits = gemma->forward(batch).logits;
  CHECK(torch::allclose(logits, expected, 1e-4, 1e-5));
  // the KV cache follows the full forward
  KvCache cache;
  std::vector<torch::Tensor> parts = {gemma->forward_cached(batch.input_ids.slice(1, 0, 5), cache)};
  for (int64_t t = 5; t < 12; ++t) parts.push_back(gemma->forward_cached(batch.input_ids.slice(1, t, t + 1), cache));
  CHECK(torch::allclose(torch::cat(parts, 1), logits, 1e-5, 1e-5));
}

TEST_CASE("gemma's config.json is its declaration, loads back, keys it does not build are refused, and it trains at "
          "ZeRO-3 as at stage 0", "[unit][hfmodels][decoder_families][zero3]") {
  auto make = [] { return hftrain_test::build_model("gemma", gemma_options + "}", 5); };
  auto m = make();
  const nlohmann::json config = m->config_json();
  CHECK(config["model_type"] == "gemma");
  CHECK(config["architectures"] == nlohmann::json::array({"GemmaForCausalLM"}));
  CHECK(config["tie_word_embeddings"] == true);  // GemmaConfig's default
  CHECK(config["hidden_act"] == "gelu_pytorch_tanh");
  CHECK(config["hidden_activation"].is_null());
  CHECK(config["head_dim"] == 12);
  CHECK(m->named_parameters().find("lm_head.weight") == nullptr);
  CHECK(m->gather_units().back().prefixes == std::vector<std::string>{"model.norm.", "model.embed_tokens.weight"});

  const auto dir = std::filesystem::temp_directory_path() / ("hftrain_unit_gemma_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto saved = dir / "gemma";
  save_model_dir(saved.string(), *m);
  std::ofstream(dir / "spec.yaml") << "model: {from_pretrained: " + saved.string() + "}\ndata: {type: digit_reversal}\n"
                                      "training: {output_dir: " + (dir / "out").string() + "}\n";
  RunSpec spec = hftrain_test::load((dir / "spec.yaml").string());
  CHECK(spec.model.type == "gemma");
  auto loaded = builtin_components().models.build(spec.model.type, spec.model.options, ModelContext{});
  CHECK(loaded->config_json() == config);
  load_pretrained_dir(spec.model.from_pretrained, *loaded);
  for (auto& np : m->named_parameters()) CHECK(torch::equal(np.value(), loaded->named_parameters()[np.key()]));
  // gemma2's soft-caps and windows, a MoE key, quantized weights: refused naming the key and the file
  for (const char* key : {"attn_logit_softcapping", "sliding_window", "num_experts", "quantization_config"}) {
    nlohmann::json edited = config;
    edited[key] = 8;
    std::ofstream(saved / "config.json") << edited.dump();
    const std::string message = hftrain_test::load_error((dir / "spec.yaml").string());
    CHECK_THAT(message, Catch::Contains(key) && Catch::Contains((saved / "config.json").string()));
  }
  std::filesystem::remove_all(dir);

  Batch batch;
  batch.input_ids = torch::tensor(std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3}).view({2, 8}) + 2;
  batch.attention_mask = torch::ones({2, 8}, torch::kLong);
  batch.attention_mask[1].slice(0, 6).fill_(0);
  batch.labels = batch.input_ids.masked_fill(batch.attention_mask.eq(0), -100);
  hftrain_test::check_zero3_trains_as_stage0(make, batch, "model.layers.0.self_attn.q_proj.weight");
  hftrain_test::check_deferred_init_matches_whole(make);
}

TEST_CASE("phi3 is llama with q/k/v fused into qkv_proj and gate/up into gate_up_proj, its rotary partial",
          "[unit][hfmodels][decoder_families]") {
  const std::string sizes = "{vocab_size: 29, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, "
                            "num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 40, rms_norm_eps: 1e-5";
  auto phi3 = hftrain_test::build_model("phi3", sizes + "}", 3);
  auto llama = hftrain_test::build_model("llama", sizes + "}", 4);
  {
    torch::NoGradGuard no_grad;
    auto p = phi3->named_parameters();
    for (auto& np : llama->named_parameters()) {
      std::string name = np.key();
      const auto layer = name.find("self_attn.") != std::string::npos ? name.substr(0, name.find("self_attn.") + 10)
                                                                        : name.substr(0, name.find("mlp.") + 4);
      auto rows = [&](const std::string& fused, int64_t start, int64_t n) { return p[layer + fused].narrow(0, start, n); };
      if (name.find(".q_proj.") != std::string::npos) np.value().copy_(rows("qkv_proj.weight", 0, 32));  // q rows first
      else if (name.find(".k_proj.") != std::string::npos) np.value().copy_(rows("qkv_proj.weight", 32, 16));
      else if (name.find(".v_proj.") != std::string::npos) np.value().copy_(rows("qkv_proj.weight", 48, 16));
      else if (name.find(".gate_proj.") != std::string::npos) np.value().copy_(rows("gate_up_proj.weight", 0, 48));
      else if (name.find(".up_proj.") != std::string::npos) np.value().copy_(rows("gate_up_proj.weight", 48, 48));
      else np.value().copy_(p[name]);
    }
  }
  CHECK(phi3->named_parameters()["model.layers.1.self_attn.qkv_proj.weight"].sizes() == torch::IntArrayRef({64, 32}));
  CHECK(phi3->named_parameters()["model.layers.1.mlp.gate_up_proj.weight"].sizes() == torch::IntArrayRef({96, 32}));
  phi3->eval();
  llama->eval();
  torch::NoGradGuard no_grad;
  Batch batch;
  batch.input_ids = ids_of({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8});
  const auto logits = phi3->forward(batch).logits;
  CHECK(torch::allclose(logits, llama->forward(batch).logits, 1e-5, 1e-5));
  // a partial rotary turns fewer dims: the same weights give other logits
  auto partial = hftrain_test::build_model("phi3", sizes + ", partial_rotary_factor: 0.5}", 3);
  partial->eval();
  CHECK((partial->forward(batch).logits - logits).abs().max().item<double>() > 1e-4);
  // LongRoPE's factors cover the rotary dims only (2 of each head's 8 / 2 here), past the original length too
  auto longrope = hftrain_test::build_model("phi3", sizes + ", partial_rotary_factor: 0.5, rope_scaling: {rope_type: longrope, "
                                            "short_factor: [1.0, 1.5], long_factor: [2.0, 3.0], "
                                            "original_max_position_embeddings: 10}}", 3);
  longrope->eval();
  CHECK(longrope->forward(batch).logits.isfinite().all().item<bool>());
  // PEFT has no default targets for phi3; an odd rotary share is refused by name
  CHECK(family_of_type("phi3")->lora_target_modules.empty());
  PeftArgs args;
  CHECK_THROWS_WITH(attach_lora(*partial, "phi3", args, "peft"), Catch::Contains("no PEFT default targets"));
  args.target_modules = TargetModules{false, {"qkv_proj", "gate_up_proj"}};
  attach_lora(*partial, "phi3", args, "peft");  // the fused projections adapt as one module each
  const auto params = partial->named_parameters();
  CHECK(params.find("model.layers.0.self_attn.qkv_proj.lora_B.weight") != nullptr);
  CHECK(params["model.layers.1.mlp.gate_up_proj.lora_B.weight"].sizes() == torch::IntArrayRef({96, 8}));
  CHECK(partial->forward(batch).logits.isfinite().all().item<bool>());
  CHECK_THROWS_WITH(hftrain_test::build_model("phi3", sizes + ", partial_rotary_factor: 0.2}"),
                    Catch::Contains("partial_rotary_factor"));
}
