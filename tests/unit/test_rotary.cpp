// Rotary scaling (models/rotary, runspec/rope_scaling): each HF rope_type's inverse frequencies and attention
// factor against values worked out by hand from the published formulas (head size 8, rope_theta 10000, so the
// unscaled frequencies are 1, 0.1, 0.01, 0.001); the refusals of unknown / unbuilt types and of keys a type
// does not use, naming the key and the file; config.json in transformers 4.x (`type` spelling included) and v5
// (`rope_parameters`) form; and the saved config.json giving the same scaling back.
// The logits of scaled llama models against an independent forward: tests/reference/hf_models_reference.py.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "builtins/register_builtins.h"
#include "checkpoint/model_io.h"
#include "models/rotary.h"
#include "runspec/run_spec.h"
#include "util/error.h"
#include "util/fs.h"
#include "scratch_files.h"

using hftrain_test::scratch;

using namespace hftrain;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

RopeSpec spec_of(const json& scaling, int64_t max_positions = 64) {
  return make_rope_spec(10000.0, RopeScaling{scaling}, 8, max_positions, "model.");
}

void check_inv_freq(const RotaryFrequencies& f, const std::vector<double>& expected) {
  REQUIRE(f.inv_freq.numel() == static_cast<int64_t>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("frequency " << i);
    CHECK(f.inv_freq[static_cast<int64_t>(i)].item<double>() == Approx(expected[i]).epsilon(2e-6));
  }
}

json small_llama_config() {
  return {{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 37}, {"hidden_size", 32},
          {"intermediate_size", 48}, {"num_hidden_layers", 1}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}};
}

// The run spec of a directory holding only `config` as config.json.
RunSpec spec_for_config(const std::string& dir, const json& config) {
  fs::create_directories(dir + "/m");
  std::ofstream(dir + "/m/config.json") << config.dump();
  std::ofstream(dir + "/spec.yaml") << "model: {from_pretrained: " + dir + "/m}\ndata: {type: digit_reversal}\n"
                                       "training: {output_dir: " + dir + "/out}\n";
  return load_run_spec(dir + "/spec.yaml", {}, builtin_components().catalog());
}

}  // namespace

TEST_CASE("each rope_type's inverse frequencies and attention factor match the hand-worked values", "[unit][rotary]") {
  SECTION("default and linear (positions / factor)") {
    check_inv_freq(rotary_frequencies(spec_of(nullptr), 48, torch::kCPU), {1, 0.1, 0.01, 0.001});
    auto linear = rotary_frequencies(spec_of({{"rope_type", "linear"}, {"factor", 2.0}}), 48, torch::kCPU);
    check_inv_freq(linear, {0.5, 0.05, 0.005, 0.0005});
    CHECK(linear.attention_factor == 1.0);
  }
  SECTION("dynamic: the base grows by (factor * len / max - (factor - 1))^(d / (d - 2)) past max_position_embeddings") {
    const RopeSpec s = spec_of({{"type", "dynamic"}, {"factor", 2.0}}, 16);  // the older `type` spelling
    check_inv_freq(rotary_frequencies(s, 10, torch::kCPU), {1, 0.1, 0.01, 0.001});  // within 16: unscaled
    check_inv_freq(rotary_frequencies(s, 16, torch::kCPU), {1, 0.1, 0.01, 0.001});
    // length 32: base 10000 * 3^(4/3), so frequency i is 10000^(-i/4) * 3^(-i/3)
    check_inv_freq(rotary_frequencies(s, 32, torch::kCPU), {1, 0.1 * std::pow(3.0, -1.0 / 3), 0.01 * std::pow(3.0, -2.0 / 3), 0.001 / 3});
    CHECK(rope_extends_context(s));
  }
  SECTION("llama3: long wavelengths divided by factor, short ones kept, the middle interpolated") {
    // original 64: wavelengths 2 pi / inv = 6.28 (< 64 / 8: kept), 62.8 (between: smoothed), 628 and 6283 (> 64: / 8)
    auto f = rotary_frequencies(spec_of({{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                                         {"high_freq_factor", 8.0}, {"original_max_position_embeddings", 64}}),
                                48, torch::kCPU);
    const double smooth = (64 * 0.1 / (2 * M_PI) - 1) / (8 - 1);
    check_inv_freq(f, {1, (1 - smooth) * 0.1 / 8 + smooth * 0.1, 0.01 / 8, 0.001 / 8});
    CHECK(f.attention_factor == 1.0);
  }
  SECTION("yarn: ramp over the correction range, attention factor 0.1 ln(factor) + 1") {
    // original = max_position_embeddings = 64; correction dims 8 ln(64 / (2 pi r)) / (2 ln 10000): r 32 -> -0.497
    // (floor -1, clamped to 0), r 1 -> 1.008 (ceil 2); ramp [0, 0.5, 1, 1]
    auto f = rotary_frequencies(spec_of({{"rope_type", "yarn"}, {"factor", 4.0}}), 48, torch::kCPU);
    check_inv_freq(f, {1, 0.5 * 0.1 + 0.5 * 0.1 / 4, 0.01 / 4, 0.001 / 4});
    CHECK(f.attention_factor == Approx(0.1 * std::log(4.0) + 1));
    // DeepSeek's mscale / mscale_all_dim; original_max_position_embeddings 16 makes the factor 64 / 16 (transformers 4.x)
    auto m = rotary_frequencies(spec_of({{"rope_type", "yarn"}, {"factor", 4.0}, {"mscale", 2.0}, {"mscale_all_dim", 1.0},
                                         {"original_max_position_embeddings", 16}}),
                                48, torch::kCPU);
    CHECK(m.attention_factor == Approx((0.2 * std::log(4.0) + 1) / (0.1 * std::log(4.0) + 1)));
    // correction dims with original 16: r 32 -> -0.798 (0), r 1 -> 0.707 (ceil 1): ramp [0, 1, 1, 1]
    check_inv_freq(m, {1, 0.1 / 4, 0.01 / 4, 0.001 / 4});
    CHECK(rotary_frequencies(spec_of({{"rope_type", "yarn"}, {"factor", 4.0}, {"attention_factor", 0.75}}), 8, torch::kCPU)
              .attention_factor == 0.75);
  }
  SECTION("longrope: short factors up to the original length, long ones past it; sqrt(1 + ln f / ln original)") {
    const RopeSpec s = spec_of({{"rope_type", "longrope"}, {"short_factor", {1, 1, 2, 2}}, {"long_factor", {1, 2, 4, 8}},
                                {"original_max_position_embeddings", 16}});
    auto short_f = rotary_frequencies(s, 16, torch::kCPU), long_f = rotary_frequencies(s, 17, torch::kCPU);
    check_inv_freq(short_f, {1, 0.1, 0.005, 0.0005});
    check_inv_freq(long_f, {1, 0.05, 0.0025, 0.000125});
    CHECK(long_f.attention_factor == Approx(std::sqrt(1.5)));  // factor 64 / 16 = 4: 1 + ln 4 / ln 16
    CHECK(short_f.attention_factor == long_f.attention_factor);
  }
  SECTION("the tables carry the attention factor on cos and sin") {
    auto positions = torch::arange(48).unsqueeze(0);
    auto [cos, sin] = rotary_tables(spec_of({{"rope_type", "yarn"}, {"factor", 4.0}}), positions, torch::kFloat);
    CHECK(cos.sizes().vec() == std::vector<int64_t>{1, 1, 48, 8});
    const double a = 0.1 * std::log(4.0) + 1;
    CHECK(cos[0][0][5][0].item<double>() == Approx(a * std::cos(5.0)));
    CHECK(sin[0][0][5][5].item<double>() == Approx(a * std::sin(5.0 * 0.0625)));
  }
}

TEST_CASE("unknown or unbuilt rope_types and keys a type does not use are refused by name", "[unit][rotary]") {
  auto problem = [](const json& scaling) {
    RopeParameters p;
    return read_rope_parameters(scaling, p);
  };
  CHECK(problem({{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                 {"original_max_position_embeddings", 8192}}) == "");
  CHECK_THAT(problem({{"rope_type", "spiral"}, {"factor", 2.0}}), Catch::Contains("unknown rope_type 'spiral'") && Catch::Contains("llama3"));
  CHECK_THAT(problem({{"rope_type", "su"}}), Catch::Contains("'su' is not built") && Catch::Contains("longrope"));
  CHECK_THAT(problem({{"rope_type", "mrope"}, {"mrope_section", {16, 24, 24}}}), Catch::Contains("'mrope' is not built"));
  CHECK_THAT(problem({{"rope_type", "linear"}, {"factor", 2.0}, {"low_freq_factor", 1.0}}),
             Catch::Contains("rope_scaling.low_freq_factor") && Catch::Contains("'linear' does not use it"));
  CHECK_THAT(problem({{"rope_type", "dynamic"}, {"factor", 2.0}, {"original_max_position_embeddings", 16}}),
             Catch::Contains("rope_scaling.original_max_position_embeddings"));
  CHECK_THAT(problem({{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}}),
             Catch::Contains("needs \"original_max_position_embeddings\""));
  CHECK_THAT(problem({{"rope_type", "linear"}, {"factor", "2"}}), Catch::Contains("rope_scaling.factor: expected a number"));
  CHECK_THAT(problem({{"factor", 2.0}}), Catch::Contains("no \"rope_type\""));
  CHECK_THROWS_WITH(spec_of({{"rope_type", "longrope"}, {"short_factor", {1, 1}}, {"long_factor", {1, 2, 4, 8}}}),
                    Catch::Contains("model.rope_scaling.short_factor") && Catch::Contains("needs 4"));

  const std::string dir = scratch("refusals");
  json config = small_llama_config();
  config["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"beta_fast", 32.0}};
  CHECK_THROWS_WITH(spec_for_config(dir, config), Catch::Contains(dir + "/m/config.json") &&
                                                      Catch::Contains("rope_scaling.beta_fast") && Catch::Contains("'linear' does not use it"));
  config["rope_scaling"] = {{"rope_type", "ntk"}, {"factor", 2.0}};
  CHECK_THROWS_WITH(spec_for_config(dir, config), Catch::Contains(dir + "/m/config.json") && Catch::Contains("'ntk' is not built"));
  config.erase("rope_scaling");
  config["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "default"}, {"partial_rotary_factor", 0.5}};
  CHECK_THROWS_WITH(spec_for_config(dir, config), Catch::Contains("rope_scaling.partial_rotary_factor"));

  // a spec's own rope_scaling is checked at its key
  std::ofstream(dir + "/own.yaml") << "model: {type: llama, vocab_size: 37, hidden_size: 32, num_attention_heads: 4,\n"
                                      "        rope_scaling: {rope_type: yarn, factor: 4.0, low_freq_factor: 1.0}}\n"
                                      "data: {type: digit_reversal}\ntraining: {output_dir: out}\n";
  CHECK_THROWS_WITH(load_run_spec(dir + "/own.yaml", {}, builtin_components().catalog()),
                    Catch::Contains("own.yaml:2") && Catch::Contains("model.rope_scaling: low_freq_factor: rope_type 'yarn' does not use it"));
}

TEST_CASE("Llama-3.1 rope_scaling loads from config.json in 4.x and v5 form and is saved back", "[unit][rotary][hfmodels]") {
  const json llama31 = {{"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                        {"original_max_position_embeddings", 16}, {"rope_type", "llama3"}};
  const std::string dir = scratch("forms");
  const Components& c = builtin_components();
  auto built_config = [&](const RunSpec& spec) {
    std::shared_ptr<Model> m = c.models.build(spec.model.type, spec.model.options, ModelContext{});
    return std::make_pair(m, m->config_json());
  };
  json v4 = small_llama_config();
  v4["rope_theta"] = 500000.0;
  v4["rope_scaling"] = llama31;
  auto [model, from_v4] = built_config(spec_for_config(dir + "/v4", v4));
  CHECK(from_v4["rope_scaling"] == llama31);
  CHECK(from_v4["rope_theta"] == 500000.0);
  json expected_parameters = llama31;
  expected_parameters["rope_theta"] = 500000.0;
  CHECK(from_v4["rope_parameters"] == expected_parameters);

  json v5 = small_llama_config();
  v5.erase("rope_theta");
  v5["rope_parameters"] = expected_parameters;
  auto [model5, from_v5] = built_config(spec_for_config(dir + "/v5", v5));
  CHECK(from_v5["rope_scaling"] == llama31);
  CHECK(from_v5["rope_theta"] == 500000.0);

  // the older `type` spelling loads, and is written back with rope_type beside it (as transformers 4.x does)
  json old = small_llama_config();
  old["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  auto [model_old, from_old] = built_config(spec_for_config(dir + "/old", old));
  CHECK(from_old["rope_scaling"] == json({{"type", "linear"}, {"rope_type", "linear"}, {"factor", 2.0}}));

  // round trip: the directory hftrain saves loads again with the same rotary (both spellings agree)
  save_model_dir(dir + "/saved", *model);
  const json saved = json::parse(read_text_file(dir + "/saved/config.json"));
  CHECK(saved["rope_scaling"] == llama31);
  auto [again, from_saved] = built_config(spec_for_config(dir + "/saved_spec", saved));
  CHECK(from_saved["rope_scaling"] == llama31);
  json disagreeing = saved;
  disagreeing["rope_theta"] = 10000.0;
  CHECK_THROWS_WITH(spec_for_config(dir + "/disagree", disagreeing),
                    Catch::Contains("rope_theta 10000.0 disagrees with rope_parameters.rope_theta 500000.0"));
}
