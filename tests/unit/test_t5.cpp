// The `t5` family (HF T5ForConditionalGeneration): HF parameter names and _init_weights scales, the
// shape function and published parameter counts, labels shifted into decoder inputs, padding honoured,
// cached decoding equal to the full forward, gradient checkpointing, HF directory save / load (the
// embedding stored once, tied copies accepted), from_pretrained choosing the family from config.json,
// sharded construction, and ZeRO stage 3 training equal to stage 0.
// Numerics against an independent forward: tests/reference/t5_reference.py.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "builtins/register_builtins.h"
#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "distributed/comm.h"
#include "engine/zero_engine.h"
#include "models/t5.h"
#include "optim/adamw.h"
#include "runspec/run_spec.h"
#include "train/model_and_data.h"
#include "train/training_loss.h"
#include "util/error.h"
#include "util/fs.h"
#include "seq2seq_model_helpers.h"
#include "scratch_files.h"

using hftrain_test::scratch;

using namespace hftrain;
namespace fs = std::filesystem;

namespace {

const char* kT5 = "{vocab_size: 29, d_model: 32, d_kv: 8, d_ff: 48, num_layers: 2, num_decoder_layers: 3, num_heads: 4, "
                  "relative_attention_num_buckets: 8, relative_attention_max_distance: 6, dropout_rate: 0}";
const char* kT5Gated = "{vocab_size: 29, d_model: 32, d_kv: 12, d_ff: 40, num_layers: 1, num_decoder_layers: 2, num_heads: 3, "
                       "feed_forward_proj: gated-gelu, tie_word_embeddings: false, dropout_rate: 0}";

std::shared_ptr<Model> make_t5(const std::string& options, uint64_t seed = 0, ModelContext context = {}) {
  return hftrain_test::build_model("t5", options, seed, context);
}
std::map<std::string, torch::Tensor> named(Model& m) { return hftrain_test::parameters_by_name(m); }
Batch t5_batch() { return hftrain_test::seq2seq_batch(0, 1); }

}  // namespace

TEST_CASE("t5 has HF names, one embedding, block-0 relative biases and HF init scales", "[unit][t5]") {
  auto m = make_t5("{vocab_size: 50, d_model: 64, d_kv: 16, d_ff: 128, num_layers: 2, num_decoder_layers: 3, num_heads: 4}");
  auto p = named(*m);
  CHECK(p.count("shared.weight"));
  CHECK_FALSE(p.count("encoder.embed_tokens.weight"));
  CHECK_FALSE(p.count("lm_head.weight"));  // tied by default
  CHECK(p.count("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"));
  CHECK_FALSE(p.count("encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"));
  CHECK(p.count("decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"));
  CHECK_FALSE(p.count("decoder.block.2.layer.1.EncDecAttention.relative_attention_bias.weight"));
  CHECK(p.count("encoder.block.1.layer.1.DenseReluDense.wi.weight"));
  CHECK(p.count("decoder.block.2.layer.2.DenseReluDense.wo.weight"));
  CHECK(p.count("decoder.block.2.layer.1.EncDecAttention.q.weight"));
  CHECK(p.count("decoder.final_layer_norm.weight"));
  CHECK_FALSE(p.count("decoder.block.3.layer.0.layer_norm.weight"));
  CHECK(p.at("encoder.block.0.layer.0.SelfAttention.q.weight").sizes() == torch::IntArrayRef({64, 64}));
  CHECK(p.at("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight").sizes() == torch::IntArrayRef({32, 4}));
  CHECK(torch::equal(p.at("encoder.final_layer_norm.weight"), torch::ones({64})));
  // HF T5 _init_weights (factor 1): shared N(0, 1), q (d_model d_kv)^-0.5, k / wi d_model^-0.5, o (heads d_kv)^-0.5, wo d_ff^-0.5.
  auto near = [](const torch::Tensor& t, double std) { return std::abs(t.std().item<double>() / std - 1.0) < 0.1; };
  CHECK(near(p.at("shared.weight"), 1.0));
  CHECK(near(p.at("decoder.block.1.layer.0.SelfAttention.q.weight"), 1.0 / 32.0));
  CHECK(near(p.at("decoder.block.1.layer.1.EncDecAttention.k.weight"), 1.0 / 8.0));
  CHECK(near(p.at("encoder.block.1.layer.0.SelfAttention.o.weight"), 1.0 / 8.0));
  CHECK(near(p.at("encoder.block.1.layer.1.DenseReluDense.wi.weight"), 1.0 / 8.0));
  CHECK(near(p.at("encoder.block.1.layer.1.DenseReluDense.wo.weight"), 1.0 / std::sqrt(128.0)));

  auto gated = named(*make_t5(kT5Gated));
  CHECK(gated.count("lm_head.weight"));
  CHECK(gated.count("encoder.block.0.layer.1.DenseReluDense.wi_0.weight"));
  CHECK(gated.count("encoder.block.0.layer.1.DenseReluDense.wi_1.weight"));
  CHECK_FALSE(gated.count("encoder.block.0.layer.1.DenseReluDense.wi.weight"));
  CHECK(gated.at("decoder.block.1.layer.1.EncDecAttention.o.weight").sizes() == torch::IntArrayRef({32, 36}));

  auto config = make_t5(kT5Gated)->config_json();
  CHECK(config["model_type"] == "t5");
  CHECK(config["architectures"] == nlohmann::json::array({"T5ForConditionalGeneration"}));
  CHECK(config["is_encoder_decoder"] == true);
  CHECK(config["dense_act_fn"] == "gelu_new");
  CHECK(config["is_gated_act"] == true);
  CHECK(config["num_decoder_layers"] == 2);
  CHECK(config["decoder_start_token_id"] == 0);

  CHECK_THROWS_WITH(make_t5("{vocab_size: 9, feed_forward_proj: fancy-relu}"), Catch::Contains("feed_forward_proj"));
  CHECK_THROWS_WITH(make_t5("{vocab_size: 9, feed_forward_proj: gated-swishy}"), Catch::Contains("swishy"));
  CHECK_THROWS_WITH(make_t5("{d_model: 8}"), Catch::Contains("vocab_size"));
}

TEST_CASE("t5 shapes match the built model and the published t5-small and t5-v1_1-small sizes", "[unit][t5][estimate]") {
  auto shapes = [](const std::string& options) { return hftrain_test::listed_shapes("t5", options); };
  for (const char* options : {kT5, kT5Gated}) {
    INFO(options);
    hftrain_test::check_shapes_match_model("t5", options);
  }
  auto count = [](const std::vector<ParameterShape>& s) {
    int64_t n = 0;
    for (const auto& p : s) n += p.numel();
    return n;
  };
  // t5-small: 60,506,624 parameters; google/t5-v1_1-small: 76,961,152 (HF num_parameters()).
  CHECK(count(shapes("{vocab_size: 32128}")) == 60506624);
  CHECK(count(shapes("{vocab_size: 32128, d_ff: 1024, num_layers: 8, num_heads: 6, feed_forward_proj: gated-gelu, "
                     "tie_word_embeddings: false}")) == 76961152);
}

TEST_CASE("t5 decoder inputs are the labels shifted right, the loss scores every label", "[unit][t5]") {
  auto m = make_t5(kT5, 1);
  auto& t5 = dynamic_cast<T5&>(*m);
  auto labels = torch::tensor({{3, 4, 1, -100}, {7, -100, -100, -100}}, torch::kLong);
  CHECK(torch::equal(t5.shift_right(labels), torch::tensor({{0, 3, 4, 1}, {0, 7, 0, 0}}, torch::kLong)));
  m->eval();
  torch::NoGradGuard no_grad;
  Batch b = t5_batch();
  auto out = m->forward(b);
  CHECK(out.logits.sizes() == torch::IntArrayRef({2, 5, 29}));
  auto expected = torch::nn::functional::cross_entropy(out.logits.reshape({-1, 29}), b.labels.reshape({-1}),
                                                       torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
  CHECK(out.loss.item<double>() == Approx(expected.item<double>()).epsilon(1e-6));
  CHECK_FALSE(m->is_causal_lm());
  Batch no_labels;
  no_labels.input_ids = b.input_ids;
  CHECK_THROWS_WITH(m->forward(no_labels), Catch::Contains("labels"));
}

TEST_CASE("t5 label smoothing scores labels at their own position, NEFTune noises both embeddings in training", "[unit][t5]") {
  auto m = make_t5(kT5, 6);
  m->eval();
  torch::NoGradGuard no_grad;
  Batch b = t5_batch();
  auto out = m->forward(b);
  // HF's LabelSmoother shifts only causal LMs; a seq2seq model's logits at t score labels at t.
  const auto smoothed = compute_loss(*m, b, 0.1).loss.item<double>();
  CHECK(smoothed == Approx(label_smoothed_loss(out.logits, b.labels, 0.1, false).item<double>()).epsilon(1e-6));
  CHECK(smoothed != Approx(label_smoothed_loss(out.logits, b.labels, 0.1, true).item<double>()).epsilon(1e-3));
  CHECK(compute_loss(*m, b, 0.0).loss.item<double>() == Approx(out.loss.item<double>()).epsilon(1e-7));

  m->set_neftune_noise_alpha(5.0);
  CHECK(torch::equal(m->forward(b).logits, out.logits));  // eval: no noise
  m->train();  // dropout_rate 0: only the noise differs
  CHECK_FALSE(torch::allclose(m->forward(b).logits, out.logits, 1e-4, 1e-4));
  m->set_neftune_noise_alpha(0.0);
  CHECK(torch::allclose(m->forward(b).logits, out.logits, 1e-6, 1e-6));
}

TEST_CASE("t5 honours the source padding mask and cached decoding equals the full forward", "[unit][t5]") {
  for (const char* options : {kT5, kT5Gated}) {
    INFO(options);
    auto m = make_t5(options, 2);
    auto& t5 = dynamic_cast<T5&>(*m);
    CHECK(m->decoder_start_token_id() == 0);
    const Batch b = t5_batch();
    hftrain_test::check_padding_and_cached_decoding(*m, b, t5.shift_right(b.labels), t5.options().num_decoder_layers.value());
  }
}

TEST_CASE("t5 gradient checkpointing gives the same gradients", "[unit][t5]") {
  for (const char* options : {kT5, kT5Gated}) {
    INFO(options);
    hftrain_test::check_checkpointing_keeps_gradients([&] { return make_t5(options, 3); }, t5_batch());
  }
}

TEST_CASE("t5 HF directories: save then load is bitwise, the embedding stored once, tied copies accepted", "[unit][t5]") {
  for (const char* options : {kT5, kT5Gated}) {
    INFO(options);
    auto saved = make_t5(options, 4);
    const std::string dir = scratch("save");
    save_model_dir(dir, *saved);
    auto file = load_safetensors(dir + "/model.safetensors").tensors;
    CHECK(file.count("shared.weight"));
    CHECK_FALSE(file.count("encoder.embed_tokens.weight"));
    CHECK_FALSE(file.count("decoder.embed_tokens.weight"));
    CHECK(file.count("lm_head.weight") == (std::string(options) == kT5Gated ? 1u : 0u));
    CHECK(file.size() == saved->named_parameters().size());

    // from_pretrained: the type from config.json (type omitted), weights bitwise.
    std::ofstream(dir + "/spec.yaml") << "model: {from_pretrained: '" << dir << "'}\ndata: {type: digit_reversal}\n"
                                      << "training: {output_dir: '" << dir << "/out'}\n";
    const auto& c = builtin_components();
    RunSpec spec = load_run_spec(dir + "/spec.yaml", {}, c.catalog());
    CHECK(spec.model.type == "t5");
    torch::manual_seed(9);
    auto loaded = c.models.build(spec.model.type, spec.model.options, ModelContext{});
    load_pretrained(spec.model.from_pretrained, *loaded);
    auto want = named(*saved);
    for (auto& kv : named(*loaded)) CHECK(torch::equal(kv.second, want.at(kv.first)));

    // A file that names the embedding only through its encoder / decoder copies (and a tied lm_head copy).
    auto tensors = load_safetensors(dir + "/model.safetensors").tensors;
    NamedTensors copies;
    for (auto& kv : tensors)
      if (kv.first != "shared.weight") copies.emplace_back(kv.first, kv.second);
    copies.emplace_back("encoder.embed_tokens.weight", tensors.at("shared.weight"));
    copies.emplace_back("decoder.embed_tokens.weight", tensors.at("shared.weight"));
    if (!tensors.count("lm_head.weight")) copies.emplace_back("lm_head.weight", tensors.at("shared.weight"));
    save_safetensors(dir + "/model.safetensors", copies, {{"format", "pt"}});
    torch::manual_seed(10);
    auto from_copies = c.models.build(spec.model.type, spec.model.options, ModelContext{});
    load_pretrained(dir, *from_copies);
    for (auto& kv : named(*from_copies)) CHECK(torch::equal(kv.second, want.at(kv.first)));

    // Without any embedding: a ConfigError naming the tensor.
    NamedTensors none;
    for (auto& kv : copies)
      if (kv.first.find("embed_tokens") == std::string::npos) none.push_back(kv);
    save_safetensors(dir + "/model.safetensors", none, {{"format", "pt"}});
    CHECK_THROWS_AS(load_pretrained(dir, *from_copies), ConfigError);
    CHECK_THROWS_WITH(load_pretrained(dir, *from_copies), Catch::Contains("shared.weight"));
  }
}

TEST_CASE("t5 built under DeferredInit materialises the whole construction's values", "[unit][t5][zero3]") {
  hftrain_test::check_deferred_init_matches_whole([] { return make_t5(kT5Gated, 7); });
}

TEST_CASE("t5 at ZeRO stage 3 gathers per unit and trains as stage 0 does", "[unit][t5][zero3]") {
  for (const char* options : {kT5, kT5Gated}) {
    INFO(options);
    hftrain_test::check_zero3_trains_as_stage0([&] { return make_t5(options, 11); }, t5_batch(),
                                               "decoder.block.1.layer.1.EncDecAttention.q.weight");
  }
}
