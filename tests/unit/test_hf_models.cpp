// HF model families (gpt2, bert, bert_mlm, llama): HF parameter names and _init_weights, masks
// honoured, HF directory save/load (single file and sharded, tied weights once, bitwise round trip),
// loader errors naming tensor / file / shapes, from_pretrained resolving the type from config.json,
// and generation (HF warpers by hand, top-k 1 = greedy, seeded determinism, eos stop).
// Numerics against an independent forward: tests/reference/hf_models_reference.py.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>

#include "builtins/register_builtins.h"
#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "generate/generate.h"
#include "models/checkpointing.h"
#include "runspec/run_spec.h"
#include "train/model_and_data.h"
#include "util/error.h"
#include "util/fs.h"
#include "scratch_files.h"
#include "seq2seq_model_helpers.h"

using hftrain_test::scratch;
using namespace hftrain;
namespace fs = std::filesystem;
namespace fx = hftrain_test;  // the shared model and file fixtures

namespace {

const char* kGpt2 = "{vocab_size: 29, n_positions: 16, n_embd: 32, n_layer: 2, n_head: 4, resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0}";
const char* kBert = "{vocab_size: 31, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 48, "
                    "max_position_embeddings: 16, num_labels: 3, hidden_dropout_prob: 0, attention_probs_dropout_prob: 0}";
const char* kBertMlm = "{vocab_size: 31, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 48, "
                       "max_position_embeddings: 16, hidden_dropout_prob: 0, attention_probs_dropout_prob: 0}";
const char* kLlama = "{vocab_size: 37, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
                     "num_key_value_heads: 2, max_position_embeddings: 16, rope_theta: 500000.0}";

double std_of(const torch::Tensor& t) { return t.std().item<double>(); }

}  // namespace

TEST_CASE("gpt2 has HF GPT-2 names, Conv1D layout and HF init", "[unit][hfmodels]") {
  auto m = fx::build_model("gpt2", "{vocab_size: 64, n_positions: 32, n_embd: 64, n_layer: 4, n_head: 4}");
  auto p = fx::parameters_by_name(*m);
  CHECK(p.at("transformer.h.0.attn.c_attn.weight").sizes() == torch::IntArrayRef({64, 192}));  // [in, out]
  CHECK(p.at("transformer.h.3.mlp.c_fc.weight").sizes() == torch::IntArrayRef({64, 256}));
  CHECK(p.at("transformer.h.3.mlp.c_proj.weight").sizes() == torch::IntArrayRef({256, 64}));
  CHECK(p.count("lm_head.weight") == 0);  // tied: stored once, as HF saves it
  CHECK(p.size() == 2 + 4 * 12 + 2);
  CHECK(torch::equal(p.at("transformer.h.1.ln_1.weight"), torch::ones({64})));
  CHECK(torch::equal(p.at("transformer.ln_f.bias"), torch::zeros({64})));
  CHECK(torch::equal(p.at("transformer.h.2.attn.c_attn.bias"), torch::zeros({192})));
  CHECK(std_of(p.at("transformer.wte.weight")) == Approx(0.02).epsilon(0.08));
  CHECK(std_of(p.at("transformer.h.0.mlp.c_fc.weight")) == Approx(0.02).epsilon(0.08));
  // GPT-2's scaled residual init: initializer_range / sqrt(2 * n_layer) on both c_proj weights
  CHECK(std_of(p.at("transformer.h.0.attn.c_proj.weight")) == Approx(0.02 / std::sqrt(8.0)).epsilon(0.08));
  CHECK(std_of(p.at("transformer.h.3.mlp.c_proj.weight")) == Approx(0.02 / std::sqrt(8.0)).epsilon(0.08));
  auto config = m->config_json();
  CHECK(config["model_type"] == "gpt2");
  CHECK(config["architectures"] == nlohmann::json::array({"GPT2LMHeadModel"}));
  CHECK(config["n_positions"] == 32);
  CHECK(config["activation_function"] == "gelu_new");
}

TEST_CASE("bert heads have HF names, pad row zero and no stored decoder copy", "[unit][hfmodels]") {
  auto cls = fx::build_model("bert", kBert);
  auto p = fx::parameters_by_name(*cls);
  CHECK(p.count("bert.pooler.dense.weight") == 1);
  CHECK(p.at("classifier.weight").sizes() == torch::IntArrayRef({3, 32}));
  CHECK(p.at("bert.encoder.layer.1.attention.self.query.weight").sizes() == torch::IntArrayRef({32, 32}));
  CHECK(p.at("bert.encoder.layer.1.intermediate.dense.weight").sizes() == torch::IntArrayRef({48, 32}));
  CHECK(torch::equal(p.at("bert.embeddings.word_embeddings.weight")[0], torch::zeros({32})));  // pad_token_id 0
  CHECK(torch::equal(p.at("bert.encoder.layer.0.output.LayerNorm.weight"), torch::ones({32})));
  CHECK(cls->config_json()["id2label"].size() == 3);
  CHECK(cls->config_json()["problem_type"] == "single_label_classification");

  auto mlm = fx::build_model("bert_mlm", kBertMlm);
  auto q = fx::parameters_by_name(*mlm);
  CHECK(q.count("bert.pooler.dense.weight") == 0);  // BertForMaskedLM has no pooler
  CHECK(q.count("cls.predictions.decoder.weight") == 0);
  CHECK(q.count("cls.predictions.transform.LayerNorm.weight") == 1);
  CHECK(torch::equal(q.at("cls.predictions.bias"), torch::zeros({31})));

  auto reg = fx::build_model("bert", "{vocab_size: 31, hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 4, "
                                "intermediate_size: 48, max_position_embeddings: 16, num_labels: 1}");
  CHECK(reg->config_json()["problem_type"] == "regression");
}

TEST_CASE("llama has HF names, grouped-query shapes and optional tied head", "[unit][hfmodels]") {
  auto m = fx::build_model("llama", kLlama);
  auto p = fx::parameters_by_name(*m);
  CHECK(p.at("model.layers.0.self_attn.q_proj.weight").sizes() == torch::IntArrayRef({32, 32}));
  CHECK(p.at("model.layers.0.self_attn.k_proj.weight").sizes() == torch::IntArrayRef({16, 32}));  // 2 kv heads x 8
  CHECK(p.at("model.layers.1.mlp.gate_proj.weight").sizes() == torch::IntArrayRef({48, 32}));
  CHECK(p.count("model.layers.0.self_attn.q_proj.bias") == 0);
  CHECK(p.count("lm_head.weight") == 1);
  CHECK(torch::equal(p.at("model.norm.weight"), torch::ones({32})));
  CHECK(m->config_json()["num_key_value_heads"] == 2);
  CHECK(m->config_json()["rope_theta"] == 500000.0);
  auto tied = fx::build_model("llama", "{vocab_size: 37, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 1, "
                                  "num_attention_heads: 4, max_position_embeddings: 16, tie_word_embeddings: true}");
  CHECK(fx::parameters_by_name(*tied).count("lm_head.weight") == 0);
  CHECK_THROWS_WITH(fx::build_model("llama", "{vocab_size: 5, hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 3, "
                                        "max_position_embeddings: 8}"),
                    Catch::Contains("num_key_value_heads (3) must divide num_attention_heads (4)"));
}

TEST_CASE("causal LMs ignore the future, attention_mask padding changes nothing for real tokens", "[unit][hfmodels]") {
  torch::NoGradGuard no_grad;
  SECTION("gpt2: later tokens do not change earlier logits") {
    auto m = fx::build_model("gpt2", kGpt2);
    m->eval();
    Batch a, b;
    a.input_ids = torch::tensor({{3, 5, 7, 9, 11}}, torch::kLong);
    b.input_ids = torch::tensor({{3, 5, 7, 2, 1}}, torch::kLong);
    auto la = m->forward(a).logits, lb = m->forward(b).logits;
    CHECK(torch::allclose(la.slice(1, 0, 3), lb.slice(1, 0, 3), 0, 0));
    CHECK_FALSE(torch::allclose(la.slice(1, 3), lb.slice(1, 3)));
  }
  SECTION("llama: left padding with the mask gives the unpadded logits (rotary is relative)") {
    auto m = fx::build_model("llama", kLlama);
    m->eval();
    Batch plain, padded;
    plain.input_ids = torch::tensor({{4, 8, 15, 16, 23}}, torch::kLong);
    padded.input_ids = torch::tensor({{0, 0, 4, 8, 15, 16, 23}}, torch::kLong);
    padded.attention_mask = torch::tensor({{0, 0, 1, 1, 1, 1, 1}}, torch::kLong);
    auto lp = m->forward(plain).logits, lq = m->forward(padded).logits.slice(1, 2);
    CHECK(torch::allclose(lp, lq, 1e-5, 1e-5));
    Batch unmasked = padded;
    unmasked.attention_mask = torch::Tensor();
    CHECK_FALSE(torch::allclose(lp, m->forward(unmasked).logits.slice(1, 2), 1e-3, 1e-3));
  }
  SECTION("bert: right padding with the mask gives the unpadded logits; token types matter") {
    auto m = fx::build_model("bert", kBert);
    m->eval();
    Batch plain, padded;
    plain.input_ids = torch::tensor({{2, 9, 4, 3}}, torch::kLong);
    plain.token_type_ids = torch::tensor({{0, 0, 1, 1}}, torch::kLong);
    padded.input_ids = torch::tensor({{2, 9, 4, 3, 0, 0}}, torch::kLong);
    padded.token_type_ids = torch::tensor({{0, 0, 1, 1, 0, 0}}, torch::kLong);
    padded.attention_mask = torch::tensor({{1, 1, 1, 1, 0, 0}}, torch::kLong);
    auto lp = m->forward(plain).logits;
    CHECK(torch::allclose(lp, m->forward(padded).logits, 1e-5, 1e-5));
    Batch other_types = plain;
    other_types.token_type_ids = torch::zeros({1, 4}, torch::kLong);
    CHECK_FALSE(torch::allclose(lp, m->forward(other_types).logits, 1e-4, 1e-4));
  }
}

TEST_CASE("HF directories: save then load is bitwise, sharded with an index, tied weights once", "[unit][hfmodels]") {
  for (auto [type, options] : std::vector<std::pair<std::string, std::string>>{
           {"gpt2", kGpt2}, {"bert", kBert}, {"bert_mlm", kBertMlm}, {"llama", kLlama}}) {
    INFO(type);
    auto saved = fx::build_model(type, options, 1);
    const std::string one = scratch(type + "_single"), sharded = scratch(type + "_sharded");
    save_model_dir(one, *saved);
    CHECK(fs::exists(one + "/model.safetensors"));
    CHECK_FALSE(fs::exists(one + "/model.safetensors.index.json"));
    const std::map<std::string, std::string> pt_format = {{"format", "pt"}};
    CHECK(load_safetensors(one + "/model.safetensors").metadata == pt_format);
    auto config = nlohmann::json::parse(read_text_file(one + "/config.json"));
    CHECK(config["torch_dtype"] == "float32");
    CHECK(config["architectures"].size() == 1);

    save_model_dir(sharded, *saved, /*max_shard_bytes=*/20000);
    CHECK_FALSE(fs::exists(sharded + "/model.safetensors"));
    auto index = nlohmann::json::parse(read_text_file(sharded + "/model.safetensors.index.json"));
    int64_t total = 0;
    std::set<std::string> files;
    for (auto& t : model_tensors(*saved)) {
      total += t.second.numel() * 4;
      REQUIRE(index["weight_map"].contains(t.first));
      files.insert(index["weight_map"][t.first].get<std::string>());
    }
    CHECK(index["metadata"]["total_size"] == total);
    CHECK(index["weight_map"].size() == model_tensors(*saved).size());
    REQUIRE(files.size() > 1);
    const std::string n = std::to_string(files.size());
    CHECK(*files.begin() == "model-00001-of-0000" + n + ".safetensors");
    CHECK(*files.rbegin() == "model-0000" + n + "-of-0000" + n + ".safetensors");
    for (const auto& f : files) {
      CHECK(fs::exists(sharded + "/" + f));
      CHECK(load_safetensors(sharded + "/" + f).metadata.at("format") == "pt");
    }

    for (const std::string& dir : {one, sharded}) {
      auto loaded = fx::build_model(type, options, 2);
      auto before = fx::parameters_by_name(*loaded);
      bool differed = false;
      for (auto& kv : fx::parameters_by_name(*saved)) differed = differed || !torch::equal(kv.second, before.at(kv.first).clone());
      CHECK(differed);  // the second seed starts elsewhere
      load_pretrained_dir(dir, *loaded);
      auto after = fx::parameters_by_name(*loaded);
      for (auto& kv : fx::parameters_by_name(*saved)) CHECK(torch::equal(kv.second, after.at(kv.first)));
    }
  }
}

TEST_CASE("HF loading rules: base-model names, ignored buffers, fresh classifier, errors name tensor, file, shapes",
          "[unit][hfmodels]") {
  auto gpt2 = fx::build_model("gpt2", kGpt2, 1);
  const std::string dir = scratch("rules");
  save_model_dir(dir, *gpt2);
  auto tensors = load_safetensors(dir + "/model.safetensors").tensors;

  SECTION("names without transformer. and attn.bias buffers load (GPT2Model files)") {
    NamedTensors base;
    for (auto& kv : tensors) base.emplace_back(kv.first.substr(std::string("transformer.").size()), kv.second);
    base.emplace_back("h.0.attn.bias", torch::ones({1, 1, 16, 16}));
    base.emplace_back("lm_head.weight", tensors.at("transformer.wte.weight"));
    save_safetensors(dir + "/model.safetensors", base);
    auto loaded = fx::build_model("gpt2", kGpt2, 2);
    load_pretrained_dir(dir, *loaded);
    for (auto& kv : fx::parameters_by_name(*gpt2)) CHECK(torch::equal(kv.second, fx::parameters_by_name(*loaded).at(kv.first)));
  }
  SECTION("a wrongly shaped tensor") {
    NamedTensors bad;
    for (auto& kv : tensors)
      bad.emplace_back(kv.first, kv.first == "transformer.wpe.weight" ? torch::zeros({8, 32}) : kv.second);
    save_safetensors(dir + "/model.safetensors", bad);
    auto loaded = fx::build_model("gpt2", kGpt2, 2);
    CHECK_THROWS_AS(load_pretrained_dir(dir, *loaded), ConfigError);
    CHECK_THROWS_WITH(load_pretrained_dir(dir, *loaded),
                      Catch::Contains("transformer.wpe.weight") && Catch::Contains("[8, 32]") &&
                          Catch::Contains("[16, 32]") && Catch::Contains(dir + "/model.safetensors"));
  }
  SECTION("a missing tensor") {
    NamedTensors bad;
    for (auto& kv : tensors)
      if (kv.first != "transformer.h.1.ln_2.bias") bad.emplace_back(kv.first, kv.second);
    save_safetensors(dir + "/model.safetensors", bad);
    auto loaded = fx::build_model("gpt2", kGpt2, 2);
    CHECK_THROWS_WITH(load_pretrained_dir(dir, *loaded),
                      Catch::Contains("missing") && Catch::Contains("transformer.h.1.ln_2.bias"));
  }
  SECTION("an unexpected tensor") {
    NamedTensors bad(tensors.begin(), tensors.end());
    bad.emplace_back("transformer.h.7.attn.c_attn.weight", torch::zeros({2}));
    save_safetensors(dir + "/model.safetensors", bad);
    auto loaded = fx::build_model("gpt2", kGpt2, 2);
    CHECK_THROWS_AS(load_pretrained_dir(dir, *loaded), ConfigError);
    CHECK_THROWS_WITH(load_pretrained_dir(dir, *loaded), Catch::Contains("transformer.h.7.attn.c_attn.weight"));
  }
  SECTION("a sharded index naming a shard that does not exist") {
    fs::remove(dir + "/model.safetensors");
    fx::write(dir + "/model.safetensors.index.json",
               R"({"metadata": {"total_size": 4}, "weight_map": {"transformer.wte.weight": "model-00001-of-00002.safetensors"}})");
    auto loaded = fx::build_model("gpt2", kGpt2, 2);
    CHECK_THROWS_WITH(load_pretrained_dir(dir, *loaded), Catch::Contains("model-00001-of-00002.safetensors"));
  }
  SECTION("a bert_mlm checkpoint fine-tuned as bert: classifier fresh, MLM head skipped, encoder loaded") {
    auto mlm = fx::build_model("bert_mlm", kBertMlm, 3);
    auto mlm_with_pooler = fx::build_model("bert", kBert, 5);
    const std::string d = scratch("mlm_to_cls");
    NamedTensors t = model_tensors(*mlm);
    t.emplace_back("bert.pooler.dense.weight", fx::parameters_by_name(*mlm_with_pooler).at("bert.pooler.dense.weight"));
    t.emplace_back("bert.pooler.dense.bias", fx::parameters_by_name(*mlm_with_pooler).at("bert.pooler.dense.bias"));
    save_safetensors(d + "/model.safetensors", t);
    auto cls = fx::build_model("bert", kBert, 4);
    auto classifier_before = fx::parameters_by_name(*cls).at("classifier.weight").clone();
    load_pretrained_dir(d, *cls);
    CHECK(torch::equal(fx::parameters_by_name(*cls).at("bert.encoder.layer.1.output.dense.weight"),
                       fx::parameters_by_name(*mlm).at("bert.encoder.layer.1.output.dense.weight")));
    CHECK(torch::equal(fx::parameters_by_name(*cls).at("classifier.weight"), classifier_before));
  }
}

TEST_CASE("model.from_pretrained takes the type and options from config.json", "[unit][hfmodels]") {
  const Components& c = builtin_components();
  auto llama = fx::build_model("llama", kLlama, 1);
  const std::string dir = scratch("from_pretrained");
  save_model_dir(dir + "/m", *llama);
  auto spec_with = [&](const std::string& model_yaml) {
    fx::write(dir + "/spec.yaml", "model: " + model_yaml + "\ndata: {type: digit_reversal}\ntraining: {output_dir: " + dir + "/out}\n");
    return load_run_spec(dir + "/spec.yaml", {}, c.catalog());
  };
  SECTION("type omitted: llama from config.json, its keys as options, spec keys override") {
    RunSpec spec = spec_with("{from_pretrained: " + dir + "/m, attention_dropout: 0.25}");
    CHECK(spec.model.type == "llama");
    auto built = c.models.build(spec.model.type, spec.model.options, ModelContext{});
    auto config = built->config_json();
    CHECK(config["num_key_value_heads"] == 2);
    CHECK(config["rope_theta"] == 500000.0);
    CHECK(config["vocab_size"] == 37);
    CHECK(config["attention_dropout"] == 0.25);
    load_pretrained(spec.model.from_pretrained, *built);
    for (auto& kv : fx::parameters_by_name(*llama)) CHECK(torch::equal(kv.second, fx::parameters_by_name(*built).at(kv.first)));
  }
  SECTION("a type that disagrees with config.json is refused naming both") {
    CHECK_THROWS_AS(spec_with("{type: gpt2, from_pretrained: " + dir + "/m}"), ConfigError);
    CHECK_THROWS_WITH(spec_with("{type: gpt2, from_pretrained: " + dir + "/m}"),
                      Catch::Contains("gpt2") && Catch::Contains("llama") && Catch::Contains("config.json"));
  }
  SECTION("unknown model_type and an unbuilt rope_scaling type are refused") {
    auto config = nlohmann::json::parse(read_text_file(dir + "/m/config.json"));
    config.erase("rope_parameters");  // hftrain writes both spellings; this edits the 4.x one alone
    config["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {1, 1, 2}}};
    fx::write(dir + "/m/config.json", config.dump());
    CHECK_THROWS_WITH(spec_with("{from_pretrained: " + dir + "/m}"), Catch::Contains("rope_scaling") && Catch::Contains("'mrope'"));
    config["model_type"] = "xlnet";
    fx::write(dir + "/m/config.json", config.dump());
    CHECK_THROWS_WITH(spec_with("{from_pretrained: " + dir + "/m}"), Catch::Contains("'xlnet'"));
  }
  SECTION("llama keeps keys no family builds, refuses what only other families build, switched off or not") {
    const auto original = nlohmann::json::parse(read_text_file(dir + "/m/config.json"));
    auto config = original;
    config["my_own_key"] = {{"nested", 1}};  // no family's: kept for the saved config.json
    config["sliding_window"] = nullptr;       // other families' keys left off: nothing to build
    config["use_sliding_window"] = false;
    fx::write(dir + "/m/config.json", config.dump());
    CHECK(spec_with("{from_pretrained: " + dir + "/m}").model.type == "llama");
    // a window, sliding switched on, gemma's activation key, phi3's partial rotary: other families' settings
    for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
             {"sliding_window", 4096}, {"use_sliding_window", true}, {"hidden_activation", "gelu_pytorch_tanh"},
             {"partial_rotary_factor", 0.5}}) {
      INFO(key);
      auto edited = original;
      edited[key] = value;
      fx::write(dir + "/m/config.json", edited.dump());
      CHECK_THROWS_WITH(spec_with("{from_pretrained: " + dir + "/m}"),
                        Catch::Contains("\"" + key + "\"") && Catch::Contains("m/config.json") && Catch::Contains("llama"));
    }
    fx::write(dir + "/m/config.json", original.dump());
  }
  SECTION("bert num_labels comes from id2label") {
    auto bert = fx::build_model("bert", kBert, 1);
    save_model_dir(dir + "/b", *bert);
    auto config = nlohmann::json::parse(read_text_file(dir + "/b/config.json"));
    config.erase("num_labels");
    fx::write(dir + "/b/config.json", config.dump());
    RunSpec spec = spec_with("{from_pretrained: " + dir + "/b}");
    CHECK(spec.model.type == "bert");
    CHECK(c.models.build(spec.model.type, spec.model.options, ModelContext{})->config_json()["id2label"].size() == 3);
  }
}

TEST_CASE("HF logits warpers: temperature, top-k, top-p by hand", "[unit][hfmodels]") {
  const float inf = std::numeric_limits<float>::infinity();
  GenerationConfig g;
  g.top_k = 2;
  g.top_p = 1.0;
  auto w = warp_logits(torch::tensor({1.0f, 3.0f, 2.0f, 0.0f}), g);
  CHECK(torch::equal(w, torch::tensor({-inf, 3.0f, 2.0f, -inf})));
  g.top_k = 0;
  g.temperature = 0.5;
  CHECK(torch::allclose(warp_logits(torch::tensor({1.0f, -2.0f}), g), torch::tensor({2.0f, -4.0f})));
  // probabilities 0.5, 0.3, 0.15, 0.05: ascending cumulative 0.05, 0.2, 0.5, 1.0
  auto logits = torch::log(torch::tensor({0.5f, 0.3f, 0.15f, 0.05f}));
  g.temperature = 1.0;
  g.top_p = 0.7;  // drop cumulative <= 0.3: 0.05 and 0.15
  auto kept = warp_logits(logits, g).isfinite();
  CHECK(torch::equal(kept, torch::tensor({true, true, false, false})));
  g.top_p = 0.45;  // drop cumulative <= 0.55: only 0.5 stays
  CHECK(torch::equal(warp_logits(logits, g).isfinite(), torch::tensor({true, false, false, false})));
  g.top_p = 0.01;  // at least one token is always kept
  CHECK(torch::equal(warp_logits(logits, g).isfinite(), torch::tensor({true, false, false, false})));
}

TEST_CASE("generation: top-k 1 equals greedy, seeded sampling repeats, eos stops", "[unit][hfmodels]") {
  auto m = fx::build_model("gpt2", "{vocab_size: 29, n_positions: 32, n_embd: 32, n_layer: 2, n_head: 4, initializer_range: 0.5}", 7);
  m->eval();
  const std::vector<int64_t> prompt = {3, 1, 4, 1, 5};
  GenerationConfig greedy;
  greedy.max_new_tokens = 10;
  at::Generator gen0 = make_generator(0);
  auto g = generate(*m, prompt, greedy, gen0);
  REQUIRE(g.size() == 10);

  GenerationConfig top1 = greedy;
  top1.do_sample = true;
  top1.top_k = 1;
  top1.temperature = 0.7;
  at::Generator gen1 = make_generator(123);
  CHECK(generate(*m, prompt, top1, gen1) == g);

  GenerationConfig sample = greedy;
  sample.do_sample = true;
  sample.top_k = 0;
  sample.temperature = 2.0;
  at::Generator a = make_generator(11), b = make_generator(11);
  auto sa = generate(*m, prompt, sample, a);
  CHECK(sa == generate(*m, prompt, sample, b));
  bool some_seed_differs = false;
  for (uint64_t seed = 12; seed < 17 && !some_seed_differs; ++seed) {
    at::Generator c = make_generator(seed);
    some_seed_differs = generate(*m, prompt, sample, c) != sa;
  }
  CHECK(some_seed_differs);

  GenerationConfig stop = greedy;
  stop.eos_token_id = g[2];
  at::Generator gen2 = make_generator(0);
  auto s = generate(*m, prompt, stop, gen2);
  const auto first_eos = std::find(g.begin(), g.end(), g[2]) - g.begin();
  CHECK(s == std::vector<int64_t>(g.begin(), g.begin() + first_eos + 1));  // eos kept, nothing after it
}

TEST_CASE("gradient checkpointing with a padding mask gives the same gradients", "[unit][hfmodels]") {
  for (auto [type, options] : std::vector<std::pair<std::string, std::string>>{
           {"gpt2", kGpt2}, {"bert_mlm", kBertMlm}, {"llama", kLlama}}) {
    INFO(type);
    Batch batch;
    batch.input_ids = torch::tensor({{5, 6, 7, 8, 9, 10}, {11, 12, 13, 1, 1, 1}}, torch::kLong);
    batch.attention_mask = torch::tensor({{1, 1, 1, 1, 1, 1}, {1, 1, 1, 0, 0, 0}}, torch::kLong);
    batch.labels = torch::tensor({{5, 6, 7, 8, 9, 10}, {11, 12, 13, -100, -100, -100}}, torch::kLong);
    auto grads = [&](bool checkpointing) {
      auto m = fx::build_model(type, options, 3);
      if (checkpointing) m->enable_gradient_checkpointing();
      m->train();
      m->forward(batch).loss.backward();
      std::map<std::string, torch::Tensor> g;
      for (auto& np : m->named_parameters()) g[np.key()] = np.value().grad().clone();
      return g;
    };
    auto plain = grads(false), checkpointed = grads(true);
    for (auto& kv : plain) {
      INFO(kv.first);
      CHECK(torch::allclose(kv.second, checkpointed.at(kv.first), 1e-5, 1e-7));
    }
  }
}

TEST_CASE("tiled MLP: a llama's loss and gradients as with the whole MLP, with and without checkpointing", "[unit][hfmodels]") {
  Batch batch;
  batch.input_ids = torch::tensor({{5, 6, 7, 8, 9, 10, 11}, {11, 12, 13, 14, 1, 1, 1}}, torch::kLong);
  batch.attention_mask = torch::tensor({{1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0}}, torch::kLong);
  batch.labels = batch.input_ids.masked_fill(batch.attention_mask.eq(0), -100);
  auto run = [&](int64_t tiles, bool checkpointing) {
    auto m = fx::build_model("llama", kLlama, 3);
    if (tiles > 0) m->enable_tiled_mlp(tiles);
    if (checkpointing) m->enable_gradient_checkpointing();
    m->train();
    auto loss = m->forward(batch).loss;
    loss.backward();
    std::map<std::string, torch::Tensor> g;
    for (auto& np : m->named_parameters()) g[np.key()] = np.value().grad().clone();
    return std::make_pair(loss.item<double>(), g);
  };
  const auto whole = run(0, false);
  for (const auto& [tiles, checkpointing] : std::vector<std::pair<int64_t, bool>>{{3, false}, {7, false}, {2, true}}) {
    INFO(tiles << " tiles, checkpointing " << checkpointing);
    const auto tiled = run(tiles, checkpointing);
    CHECK(tiled.first == Approx(whole.first).epsilon(1e-6));
    for (const auto& [name, grad] : whole.second) {
      INFO(name);
      CHECK(torch::allclose(grad, tiled.second.at(name), 1e-5, 1e-7));
    }
  }
  // DeepSpeed's automatic count: ceil(tokens / hidden size); families without a gated MLP refuse by name
  CHECK(auto_token_tiles(7, 16) == 1);
  CHECK(auto_token_tiles(33, 16) == 3);
  CHECK_THROWS_WITH(fx::build_model("gpt2", kGpt2, 1)->enable_tiled_mlp(0), Catch::Contains("training.tiled_mlp") && Catch::Contains("gpt2"));
}

TEST_CASE("KV cache: cached logits equal full-context logits, generation is the same with and without it", "[unit][hfmodels]") {
  for (auto [type, options] : std::vector<std::pair<std::string, std::string>>{
           {"gpt", "{vocab_size: 29, block_size: 12, n_embd: 32, n_layer: 2, n_head: 4}"},
           {"gpt2", "{vocab_size: 29, n_positions: 12, n_embd: 32, n_layer: 2, n_head: 4, initializer_range: 0.5}"},
           {"llama", "{vocab_size: 29, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
                     "num_key_value_heads: 2, max_position_embeddings: 12, rope_theta: 500000, tie_word_embeddings: false}"}}) {
    INFO(type);
    auto m = fx::build_model(type, options, 5);
    m->eval();
    REQUIRE(m->supports_kv_cache());
    torch::NoGradGuard no_grad;
    const auto ids = torch::tensor(std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, torch::kLong).unsqueeze(0);
    Batch full;
    full.input_ids = ids;
    const auto expected = m->forward(full).logits;
    // The prompt in one piece, then one token at a time, then two at once.
    KvCache cache;
    std::vector<torch::Tensor> parts = {m->forward_cached(ids.slice(1, 0, 4), cache)};
    for (int64_t t = 4; t < 8; ++t) parts.push_back(m->forward_cached(ids.slice(1, t, t + 1), cache));
    parts.push_back(m->forward_cached(ids.slice(1, 8, 10), cache));
    CHECK(cache.length == 10);
    CHECK(torch::allclose(torch::cat(parts, 1), expected, 1e-5, 1e-5));
    // Past the model's positions: a clear error, not a wrong position.
    CHECK_THROWS_WITH(m->forward_cached(ids.slice(1, 0, 3), cache), Catch::Contains("exceeds"));

    // Generation crosses max_context (12), where the window starts to slide: the tokens match the
    // cache-free path (the uncached forward is the one held to HF by the reference test).
    struct NoCache : Model {
      explicit NoCache(Model& inner) : inner(inner) {}
      ModelOutput forward(const Batch& b) override { return inner.forward(b); }
      bool is_causal_lm() const override { return true; }
      nlohmann::json config_json() const override { return inner.config_json(); }
      Model& inner;
    } uncached(*m);
    for (const bool sample : {false, true}) {
      GenerationConfig g;
      g.max_new_tokens = 12;
      g.max_context = model_max_context(*m);
      g.do_sample = sample;
      g.temperature = 1.5;
      at::Generator a = make_generator(3), b = make_generator(3);
      CHECK(generate(*m, {7, 2, 8}, g, a) == generate(uncached, {7, 2, 8}, g, b));
    }
  }
}
