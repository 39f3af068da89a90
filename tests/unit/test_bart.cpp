// The `bart` family (HF BartForConditionalGeneration): HF parameter names and _init_weights, the shape
// function and the published bart-base size, labels shifted into decoder inputs, BART's position offset
// of 2, padding honoured, cached decoding and greedy generation equal to the full forward, gradient
// checkpointing, HF directory save / load (the embedding stored once, tied copies and BartModel files
// without the model. prefix accepted), sharded construction, ZeRO stage 3 gather units and training, and
// the options it refuses. Numerics against an independent forward: tests/reference/bart_reference.py.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "builtins/register_builtins.h"
#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "distributed/comm.h"
#include "engine/zero_engine.h"
#include "generate/generate.h"
#include "models/bart.h"
#include "optim/adamw.h"
#include "runspec/run_spec.h"
#include "train/model_and_data.h"
#include "util/error.h"
#include "util/fs.h"
#include "seq2seq_model_helpers.h"
#include "scratch_files.h"

using hftrain_test::scratch;

using namespace hftrain;
namespace fs = std::filesystem;

namespace {

const char* kBart = "{vocab_size: 29, d_model: 24, encoder_layers: 2, decoder_layers: 3, encoder_attention_heads: 4, "
                    "decoder_attention_heads: 2, encoder_ffn_dim: 40, decoder_ffn_dim: 36, max_position_embeddings: 16, "
                    "dropout: 0}";
const char* kBartUntied = "{vocab_size: 29, d_model: 24, encoder_layers: 1, decoder_layers: 2, encoder_attention_heads: 2, "
                          "decoder_attention_heads: 3, encoder_ffn_dim: 32, decoder_ffn_dim: 32, max_position_embeddings: 16, "
                          "dropout: 0, scale_embedding: true, tie_word_embeddings: false, activation_function: relu, "
                          "init_std: 0.2}";

std::shared_ptr<Model> make_bart(const std::string& options, uint64_t seed = 0, ModelContext context = {}) {
  return hftrain_test::build_model("bart", options, seed, context);
}
std::map<std::string, torch::Tensor> named(Model& m) { return hftrain_test::parameters_by_name(m); }
Batch bart_batch() { return hftrain_test::seq2seq_batch(1, 2); }  // BART's ids: pad 1, eos 2

// Non-zero final_logits_bias and LayerNorm affine terms, so that the tests see them.
void perturb(Model& m) {
  torch::NoGradGuard no_grad;
  for (auto& np : m.named_parameters())
    if (np.key().find("norm") != std::string::npos) np.value().add_(torch::randn_like(np.value()) * 0.1);
  m.named_buffers()["final_logits_bias"].copy_(torch::randn({1, 29}) * 0.5);
}

}  // namespace

TEST_CASE("bart has HF names, one embedding, offset positions, final_logits_bias and HF init", "[unit][bart]") {
  auto m = make_bart("{vocab_size: 300, d_model: 64, encoder_layers: 2, decoder_layers: 3, encoder_attention_heads: 4, "
                      "decoder_attention_heads: 8, encoder_ffn_dim: 128, decoder_ffn_dim: 96, max_position_embeddings: 40}");
  auto p = named(*m);
  CHECK(p.count("model.shared.weight"));
  CHECK_FALSE(p.count("model.encoder.embed_tokens.weight"));
  CHECK_FALSE(p.count("model.decoder.embed_tokens.weight"));
  CHECK_FALSE(p.count("lm_head.weight"));  // tied by default
  CHECK(p.at("model.encoder.embed_positions.weight").sizes() == torch::IntArrayRef({42, 64}));
  CHECK(p.at("model.decoder.embed_positions.weight").sizes() == torch::IntArrayRef({42, 64}));
  CHECK(p.count("model.encoder.layernorm_embedding.bias"));
  CHECK(p.count("model.decoder.layernorm_embedding.weight"));
  CHECK(p.count("model.encoder.layers.1.self_attn.q_proj.bias"));
  CHECK(p.count("model.encoder.layers.1.self_attn_layer_norm.weight"));
  CHECK_FALSE(p.count("model.encoder.layers.1.encoder_attn.q_proj.weight"));
  CHECK(p.count("model.decoder.layers.2.encoder_attn.out_proj.weight"));
  CHECK(p.count("model.decoder.layers.2.encoder_attn_layer_norm.bias"));
  CHECK(p.at("model.encoder.layers.0.fc1.weight").sizes() == torch::IntArrayRef({128, 64}));
  CHECK(p.at("model.decoder.layers.0.fc2.weight").sizes() == torch::IntArrayRef({64, 96}));
  CHECK_FALSE(p.count("model.decoder.layers.3.fc1.weight"));
  auto buffers = m->named_buffers();
  REQUIRE(buffers.contains("final_logits_bias"));
  CHECK(torch::equal(buffers["final_logits_bias"], torch::zeros({1, 300})));
  // HF _init_weights: N(0, init_std) weights, zero biases, zero padding row, LayerNorms 1 / 0.
  auto near = [](const torch::Tensor& t, double std) { return std::abs(t.std().item<double>() / std - 1.0) < 0.1; };
  CHECK(near(p.at("model.shared.weight"), 0.02));
  CHECK(torch::equal(p.at("model.shared.weight")[1], torch::zeros({64})));  // pad_token_id 1
  CHECK(near(p.at("model.decoder.embed_positions.weight"), 0.02));
  CHECK(near(p.at("model.decoder.layers.1.encoder_attn.k_proj.weight"), 0.02));
  CHECK(near(p.at("model.encoder.layers.1.fc2.weight"), 0.02));
  CHECK(torch::equal(p.at("model.encoder.layers.1.fc2.bias"), torch::zeros({64})));
  CHECK(torch::equal(p.at("model.decoder.layers.0.final_layer_norm.weight"), torch::ones({64})));
  CHECK(torch::equal(p.at("model.encoder.layernorm_embedding.bias"), torch::zeros({64})));

  auto untied = named(*make_bart(kBartUntied));
  CHECK(untied.count("lm_head.weight"));
  CHECK(near(untied.at("lm_head.weight"), 0.2));

  auto config = make_bart(kBartUntied)->config_json();
  CHECK(config["model_type"] == "bart");
  CHECK(config["architectures"] == nlohmann::json::array({"BartForConditionalGeneration"}));
  CHECK(config["is_encoder_decoder"] == true);
  CHECK(config["scale_embedding"] == true);
  CHECK(config["tie_word_embeddings"] == false);
  CHECK(config["activation_function"] == "relu");
  CHECK(config["decoder_attention_heads"] == 3);
  CHECK(config["decoder_start_token_id"] == 2);
  CHECK(config["pad_token_id"] == 1);
  CHECK(config["max_position_embeddings"] == 16);
}

TEST_CASE("bart shapes match the built model and the published bart-base size", "[unit][bart][estimate]") {
  auto shapes = [](const std::string& options) { return hftrain_test::listed_shapes("bart", options); };
  for (const char* options : {kBart, kBartUntied}) {
    INFO(options);
    hftrain_test::check_shapes_match_model("bart", options);
  }
  int64_t n = 0;
  for (const auto& s : shapes("{vocab_size: 50265, d_model: 768, encoder_layers: 6, decoder_layers: 6, encoder_attention_heads: "
                              "12, decoder_attention_heads: 12, encoder_ffn_dim: 3072, decoder_ffn_dim: 3072}"))
    n += s.numel();
  CHECK(n == 139420416);  // facebook/bart-base (HF num_parameters())
}

TEST_CASE("bart decoder inputs are the labels shifted right, the loss scores every label", "[unit][bart]") {
  auto m = make_bart(kBart, 1);
  auto& bart = dynamic_cast<Bart&>(*m);
  auto labels = torch::tensor({{5, 6, 2, -100}, {7, -100, -100, -100}}, torch::kLong);
  CHECK(torch::equal(bart.shift_right(labels), torch::tensor({{2, 5, 6, 2}, {2, 7, 1, 1}}, torch::kLong)));
  m->eval();
  torch::NoGradGuard no_grad;
  Batch b = bart_batch();
  auto out = m->forward(b);
  CHECK(out.logits.sizes() == torch::IntArrayRef({2, 5, 29}));
  auto expected = torch::nn::functional::cross_entropy(out.logits.reshape({-1, 29}), b.labels.reshape({-1}),
                                                       torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
  CHECK(out.loss.item<double>() == Approx(expected.item<double>()).epsilon(1e-6));
  CHECK_FALSE(m->is_causal_lm());
  CHECK(m->is_encoder_decoder());
  CHECK(m->decoder_start_token_id() == 2);
  Batch no_labels;
  no_labels.input_ids = b.input_ids;
  CHECK_THROWS_WITH(m->forward(no_labels), Catch::Contains("labels"));
}

TEST_CASE("bart reads position p at row p + 2 and refuses sequences beyond max_position_embeddings", "[unit][bart]") {
  auto m = make_bart(kBart, 2);
  m->eval();
  torch::NoGradGuard no_grad;
  Batch b = bart_batch();  // sources of 7, targets of 5 tokens
  const auto base = m->forward(b).logits;
  for (const char* stack : {"encoder", "decoder"}) {
    INFO(stack);
    auto table = named(*m).at(std::string("model.") + stack + ".embed_positions.weight");
    const auto saved = table.clone();
    table.slice(0, 0, 2).normal_();  // rows 0 and 1 are never read
    table.slice(0, std::string(stack) == "encoder" ? 9 : 7).normal_();  // nor rows past the last position + 2
    CHECK(torch::equal(m->forward(b).logits, base));
    table.copy_(saved);
    table[2].add_(torch::randn({24}));  // position 0 (a constant shift would vanish in layernorm_embedding)
    CHECK_FALSE(torch::allclose(m->forward(b).logits, base, 1e-4, 1e-4));
    table.copy_(saved);
    table[std::string(stack) == "encoder" ? 8 : 6].add_(torch::randn({24}));  // the last position
    CHECK_FALSE(torch::allclose(m->forward(b).logits, base, 1e-4, 1e-4));
    table.copy_(saved);
  }
  Batch too_long;
  too_long.input_ids = torch::full({1, 17}, 5, torch::kLong);
  too_long.labels = torch::full({1, 3}, 5, torch::kLong);
  CHECK_THROWS_WITH(m->forward(too_long), Catch::Contains("max_position_embeddings"));
}

TEST_CASE("bart honours the source padding mask, cached decoding and greedy generation equal the full forward", "[unit][bart]") {
  for (const char* options : {kBart, kBartUntied}) {
    INFO(options);
    auto m = make_bart(options, 3);
    perturb(*m);
    auto& bart = dynamic_cast<Bart&>(*m);
    Batch b = bart_batch();
    hftrain_test::check_padding_and_cached_decoding(*m, b, bart.shift_right(b.labels), bart.options().decoder_layers);
    torch::NoGradGuard no_grad;

    // Greedy generation (KV-cached) picks, at every step, the argmax of a full uncached forward.
    const std::vector<int64_t> prompt = {12, 13, 14, 15};
    GenerationConfig config;
    config.max_new_tokens = 8;
    auto generator = make_generator(0);
    const auto generated = generate(*m, prompt, config, generator);
    REQUIRE(generated.size() == 8u);
    std::vector<int64_t> decoded = {2};
    const auto source = torch::tensor(prompt, torch::kLong).view({1, -1});
    for (std::size_t step = 0; step < generated.size(); ++step) {
      KvCache fresh;
      auto ids = torch::tensor(decoded, torch::kLong).view({1, -1});
      auto logits = m->forward_encoder_decoder_cached(source, torch::Tensor(), ids, fresh);
      decoded.push_back(logits[0][-1].argmax().item<int64_t>());
      CHECK(decoded.back() == generated[step]);
    }
  }
}

TEST_CASE("bart gradient checkpointing gives the same gradients", "[unit][bart]") {
  for (const char* options : {kBart, kBartUntied}) {
    INFO(options);
    hftrain_test::check_checkpointing_keeps_gradients([&] { return make_bart(options, 4); }, bart_batch());
    // With dropout on, the recomputation replays the forward's dropout masks.
    std::string dropping = options;
    dropping.replace(dropping.find("dropout: 0"), 10, "dropout: 0.2, attention_dropout: 0.1, activation_dropout: 0.1");
    auto with_dropout = [&](bool checkpointing) {
      auto m = make_bart(dropping, 5);
      if (checkpointing) m->enable_gradient_checkpointing();
      m->train();
      torch::manual_seed(42);
      m->forward(bart_batch()).loss.backward();
      return named(*m).at("model.encoder.layers.0.fc1.weight").grad().clone();
    };
    CHECK(torch::allclose(with_dropout(false), with_dropout(true), 1e-5, 1e-7));
  }
}

TEST_CASE("bart HF directories: save then load is bitwise, the embedding stored once, copies and BartModel files accepted",
          "[unit][bart]") {
  for (const char* options : {kBart, kBartUntied}) {
    INFO(options);
    const bool tied = std::string(options) == kBart;
    auto saved = make_bart(options, 6);
    perturb(*saved);
    const std::string dir = scratch("save");
    save_model_dir(dir, *saved);
    auto file = load_safetensors(dir + "/model.safetensors").tensors;
    CHECK(file.count("model.shared.weight"));
    CHECK(file.count("final_logits_bias"));
    CHECK_FALSE(file.count("model.encoder.embed_tokens.weight"));
    CHECK_FALSE(file.count("model.decoder.embed_tokens.weight"));
    CHECK(file.count("lm_head.weight") == (tied ? 0u : 1u));
    CHECK(file.size() == saved->named_parameters().size() + 1);

    // from_pretrained: the type from config.json (type omitted), weights and the bias buffer bitwise.
    std::ofstream(dir + "/spec.yaml") << "model: {from_pretrained: '" << dir << "'}\ndata: {type: digit_reversal}\n"
                                      << "training: {output_dir: '" << dir << "/out'}\n";
    const auto& c = builtin_components();
    RunSpec spec = load_run_spec(dir + "/spec.yaml", {}, c.catalog());
    CHECK(spec.model.type == "bart");
    auto fresh = [&] {
      torch::manual_seed(9);
      return c.models.build(spec.model.type, spec.model.options, ModelContext{});
    };
    auto want = named(*saved);
    const auto bias = saved->named_buffers()["final_logits_bias"];
    auto same = [&](Model& m) {
      for (auto& kv : named(m)) CHECK(torch::equal(kv.second, want.at(kv.first)));
      CHECK(torch::equal(m.named_buffers()["final_logits_bias"], bias));
    };
    auto loaded = fresh();
    load_pretrained(spec.model.from_pretrained, *loaded);
    same(*loaded);

    // A file that names the embedding only through its encoder / decoder copies (and a tied lm_head copy).
    NamedTensors copies;
    for (auto& kv : file)
      if (kv.first != "model.shared.weight") copies.emplace_back(kv.first, kv.second);
    copies.emplace_back("model.encoder.embed_tokens.weight", file.at("model.shared.weight"));
    copies.emplace_back("model.decoder.embed_tokens.weight", file.at("model.shared.weight"));
    if (tied) copies.emplace_back("lm_head.weight", file.at("model.shared.weight"));
    save_safetensors(dir + "/model.safetensors", copies, {{"format", "pt"}});
    auto from_copies = fresh();
    load_pretrained(dir, *from_copies);
    same(*from_copies);

    // A BartModel file: names without "model.", shared plus both copies (no head, no final_logits_bias:
    // those start fresh, as HF initialises them).
    NamedTensors base;
    for (auto& kv : file)
      if (kv.first.rfind("model.", 0) == 0) base.emplace_back(kv.first.substr(6), kv.second);
    base.emplace_back("encoder.embed_tokens.weight", file.at("model.shared.weight"));
    base.emplace_back("decoder.embed_tokens.weight", file.at("model.shared.weight"));
    save_safetensors(dir + "/model.safetensors", base, {{"format", "pt"}});
    auto from_base = fresh();
    load_pretrained(dir, *from_base);
    for (auto& kv : named(*from_base))
      if (kv.first != "lm_head.weight") CHECK(torch::equal(kv.second, want.at(kv.first)));

    // Without any embedding: a ConfigError naming the tensor.
    NamedTensors none;
    for (auto& kv : copies)
      if (kv.first.find("embed_tokens") == std::string::npos && kv.first.find("shared") == std::string::npos)
        none.push_back(kv);
    save_safetensors(dir + "/model.safetensors", none, {{"format", "pt"}});
    CHECK_THROWS_AS(load_pretrained(dir, *from_copies), ConfigError);
    CHECK_THROWS_WITH(load_pretrained(dir, *from_copies), Catch::Contains("model.shared.weight"));
    fs::remove_all(dir);
  }
}

TEST_CASE("bart built under DeferredInit materialises the whole construction's values", "[unit][bart][zero3]") {
  hftrain_test::check_deferred_init_matches_whole([] { return make_bart(kBartUntied, 7); });
}

TEST_CASE("bart gather units cover every parameter and ZeRO stage 3 trains as stage 0 does", "[unit][bart][zero3]") {
  for (const char* options : {kBart, kBartUntied}) {
    INFO(options);
    {
      auto model = make_bart(options);
      std::vector<std::string> names;
      for (auto& np : model->named_parameters()) names.push_back(np.key());
      const auto units = resolve_gather_units(*model, names);
      CHECK(units.size() == model->gather_units().size());
      std::set<std::string> covered;
      for (const auto& u : units) covered.insert(u.begin(), u.end());
      CHECK(covered == std::set<std::string>(names.begin(), names.end()));
    }
    hftrain_test::check_zero3_trains_as_stage0([&] { return make_bart(options, 11); }, bart_batch(),
                                               "model.decoder.layers.1.encoder_attn.q_proj.weight");
  }
}

TEST_CASE("bart refuses what it does not build with a ConfigError naming the key", "[unit][bart]") {
  auto refused = [](const std::string& extra, const std::string& key) {
    INFO(extra);
    const std::string options = "{vocab_size: 29, d_model: 24, encoder_layers: 1, decoder_layers: 1, "
                                "encoder_attention_heads: 2, decoder_attention_heads: 2, " + extra + "}";
    CHECK_THROWS_AS(make_bart(options), ConfigError);
    CHECK_THROWS_WITH(make_bart(options), Catch::Contains(key));
  };
  refused("normalize_before: true", "normalize_before");
  refused("add_final_layer_norm: true", "add_final_layer_norm");
  refused("normalize_embedding: false", "normalize_embedding");
  refused("static_position_embeddings: true", "static_position_embeddings");
  refused("add_bias_logits: true", "add_bias_logits");
  refused("encoder_layerdrop: 0.1", "encoder_layerdrop");
  refused("activation_function: swishy", "activation_function");
  refused("decoder_attention_heads: 5", "decoder_attention_heads");
  refused("pad_token_id: 29", "pad_token_id");
  refused("decoder_start_token_id: 40", "decoder_start_token_id");
  CHECK_THROWS_WITH(make_bart("{d_model: 8, encoder_attention_heads: 2, decoder_attention_heads: 2}"),
                    Catch::Contains("vocab_size"));
  CHECK_THROWS_WITH(make_bart("{vocab_size: 29, d_model: 8, encoder_attention_heads: 2, decoder_attention_heads: 2, "
                               "max_position_embeddings: 10}",
                               0, ModelContext{29, 12, 0, 0}),
                    Catch::Contains("max_position_embeddings"));

  // An HF config.json with a key hftrain does not build: refused by name through from_pretrained.
  const std::string dir = scratch("refused");
  auto m = make_bart(kBart);
  save_model_dir(dir, *m);
  auto config = nlohmann::json::parse(read_text_file(dir + "/config.json"));
  config["normalize_before"] = true;
  std::ofstream(dir + "/config.json") << config.dump();
  std::ofstream(dir + "/spec.yaml") << "model: {from_pretrained: '" << dir << "'}\ndata: {type: digit_reversal}\n"
                                    << "training: {output_dir: '" << dir << "/out'}\n";
  const auto& c = builtin_components();
  CHECK_THROWS_WITH(
      [&] {
        RunSpec spec = load_run_spec(dir + "/spec.yaml", {}, c.catalog());
        c.models.build(spec.model.type, spec.model.options, ModelContext{});
      }(),
      Catch::Contains("normalize_before"));
  fs::remove_all(dir);
}
