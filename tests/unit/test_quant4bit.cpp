// 4-bit (NF4 / FP4) weight quantisation and the quantised linear layer (QLoRA). The hidden cases are the
// hftrain side of tests/reference/nf4_reference.py, which sets HFTRAIN_NF4_REFERENCE_DIR: "[nf4_ref]" quantises
// the tables of inputs.safetensors as tables.json says and writes the storage and dequantised values;
// "[qlora_ref]" loads each llama case quantised, attaches its PEFT adapter and writes logits, loss and the
// adapter's gradients. The visible cases check the layer against float64 products over the dequantised weight.
#include "adapter_pairs.h"
#include "reference_case.h"

#include "models/adaptable_linear.h"
#include "models/lora.h"
#include "models/quantize_model.h"
#include "models/quantized_weight.h"
#include "runspec/quantized_checkpoint.h"
#include "util/autocast.h"

using namespace hftrain;
using namespace hftrain_test;

namespace {

QuantSettings settings_of(const nlohmann::json& c) {
  QuantSettings s;
  s.type = c["type"].get<std::string>() == "nf4" ? kernels::Quant4Type::kNf4 : kernels::Quant4Type::kFp4;
  s.blocksize = c["blocksize"].get<int64_t>();
  s.double_quant = c["double_quant"].get<bool>();
  return s;
}

// A layer with a quantised base, and the plain float64 layer over its dequantised weight.
struct LayerPair {
  AdaptableLinear quantised{nullptr}, plain{nullptr};
};

LayerPair layer_pair(int64_t in, int64_t out, const QuantSettings& s, bool bias) {
  torch::manual_seed(7);
  const torch::Tensor w = torch::randn({out, in}), b = bias ? torch::randn({out}) : torch::Tensor();
  LayerPair p;
  p.quantised = AdaptableLinear(w.clone(), bias ? b.clone() : torch::Tensor(), AdaptableLinearImpl::Layout::kOutIn);
  p.quantised->quantize_base(s);
  const torch::Tensor deq = p.quantised->quantized()->dequantize(torch::kFloat).to(torch::kDouble);
  p.plain = AdaptableLinear(deq, bias ? b.to(torch::kDouble) : torch::Tensor(), AdaptableLinearImpl::Layout::kOutIn);
  return p;
}

struct TileGuard {
  explicit TileGuard(int64_t elements) { set_quant_tile_elements(elements); }
  ~TileGuard() { set_quant_tile_elements(0); }
};

}  // namespace

TEST_CASE("4-bit quantisation of the reference tables (driven by nf4_reference.py)", "[.][nf4_ref]") {
  const char* root = std::getenv("HFTRAIN_NF4_REFERENCE_DIR");
  REQUIRE(root != nullptr);
  const std::string dir(root);
  const auto cases = nlohmann::json::parse(read_text_file(dir + "/tables.json"));
  const auto inputs = load_safetensors(dir + "/inputs.safetensors").tensors;
  NamedTensors out;
  for (const auto& c : cases) {
    const std::string name = c["name"].get<std::string>();
    const QuantizedWeight q = quantize_weight(inputs.at(name), settings_of(c));
    out.emplace_back(name + ".packed", q.packed);
    out.emplace_back(name + ".absmax", q.absmax);
    if (q.nested()) {
      out.emplace_back(name + ".nested_absmax", q.nested_absmax);
      out.emplace_back(name + ".offset", torch::full({1}, q.offset));
    }
    out.emplace_back(name + ".dequantized", q.dequantize(torch::kFloat).reshape({-1}));
    out.emplace_back(name + ".dequantized_bf16", q.dequantize(torch::kBFloat16).reshape({-1}).view(torch::kByte));  // its bytes
  }
  save_safetensors(dir + "/hftrain_tables.safetensors", out);
}

TEST_CASE("LoRA and DoRA over a quantised llama (driven by nf4_reference.py)", "[.][qlora_ref]") {
  TileGuard tiles(100);  // several tiles of rows in every layer
  for (const std::string& dir : reference_case_dirs("HFTRAIN_NF4_REFERENCE_DIR")) {
    INFO(dir);
    ReferenceCase rc = load_reference_case(dir);
    Model& model = *rc.model;
    const auto q = nlohmann::json::parse(read_text_file(dir + "/quantization.json"));
    QuantizationArgs args;
    args.load_in_4bit = true;
    args.bnb_4bit_quant_type = q["bnb_4bit_quant_type"].get<std::string>();
    args.bnb_4bit_use_double_quant = q["bnb_4bit_use_double_quant"].get<bool>();
    const QuantizationSummary summary = quantize_linear_layers(model, args);
    REQUIRE(summary.quantized.size() == 14);  // seven per layer; lm_head stays
    attach_adapter_dir(model, rc.type, dir + "/adapter", dir + "/model");
    model.eval();
    ModelOutput out = model.forward(rc.batch);
    out.loss.backward();
    NamedTensors written = {{"logits", out.logits.detach().contiguous()}, {"loss", out.loss.detach().reshape({1}).contiguous()}};
    append_adapter_gradients(model, written);
    save_safetensors(dir + "/hftrain_output.safetensors", written);
  }
}

TEST_CASE("a quantised linear layer equals the float64 layer over its dequantised weight, tile by tile", "[unit][qlora]") {
  for (const bool nf4 : {true, false})
    for (const bool double_quant : {false, true})
      for (const int64_t tile : {0, 40, 1}) {  // one tile; several; one row a tile
        TileGuard tiles(tile);
        QuantSettings s;
        s.type = nf4 ? kernels::Quant4Type::kNf4 : kernels::Quant4Type::kFp4;
        s.double_quant = double_quant;
        s.compute_dtype = torch::kDouble;
        LayerPair p = layer_pair(13, 9, s, /*bias=*/true);
        const torch::Tensor x = torch::randn({2, 3, 13}, torch::kDouble).requires_grad_(true);
        const torch::Tensor x64 = x.detach().clone().requires_grad_(true);
        const torch::Tensor y = p.quantised->forward(x), want = p.plain->forward(x64);
        REQUIRE(y.scalar_type() == torch::kDouble);
        CHECK(torch::allclose(y, want, 1e-12, 1e-12));
        const torch::Tensor dy = torch::randn_like(want);
        y.backward(dy);
        want.backward(dy);
        CHECK(torch::allclose(x.grad(), x64.grad(), 1e-12, 1e-12));
        CHECK(torch::allclose(p.quantised->bias.grad().to(torch::kDouble), p.plain->bias.grad(), 1e-6, 1e-6));  // a float32 bias
        CHECK(p.quantised->weight.scalar_type() == torch::kByte);
        CHECK(p.quantised->weight.numel() == (13 * 9 + 1) / 2);
        CHECK_FALSE(p.quantised->weight.requires_grad());
        CHECK(p.quantised->in_features() == 13);
        CHECK(p.quantised->out_features() == 9);
      }
}

TEST_CASE("LoRA and DoRA on a quantised layer train against the float64 layer over the dequantised weight", "[unit][qlora]") {
  TileGuard tiles(30);
  for (const bool dora : {false, true}) {
    QuantSettings s;
    s.compute_dtype = torch::kDouble;
    s.double_quant = true;
    LayerPair p = layer_pair(16, 12, s, false);
    hftrain_test::attach_equal_adapters(p.quantised, p.plain, dora, /*check_magnitude=*/true);
    p.quantised->to(torch::kDouble);  // the adapters in float64 (the codes stay)
    p.plain->to(torch::kDouble);
    const torch::Tensor x = torch::randn({5, 16}, torch::kDouble);
    const torch::Tensor y = p.quantised->forward(x), want = p.plain->forward(x);
    CHECK(torch::allclose(y, want, 1e-5, 1e-6));
    y.sum().backward();
    want.sum().backward();
    const auto* a = p.quantised->adapter();
    const auto* b = p.plain->adapter();
    CHECK(torch::allclose(a->lora_A.grad().to(torch::kDouble), b->lora_A.grad(), 1e-5, 1e-6));
    CHECK(torch::allclose(a->lora_B.grad().to(torch::kDouble), b->lora_B.grad(), 1e-5, 1e-6));
    if (dora) CHECK(torch::allclose(a->magnitude.grad().to(torch::kDouble), b->magnitude.grad(), 1e-5, 1e-6));
    CHECK_FALSE(p.quantised->weight.grad().defined());
    // merging dequantises: W + s B A over the dequantised base
    CHECK(torch::allclose(p.quantised->merged_weight_out_in().to(torch::kDouble), p.plain->merged_weight_out_in().to(torch::kDouble), 1e-5, 1e-6));
  }
}

TEST_CASE("bf16 products over a quantised weight dequantise into bf16, under autocast and as the compute dtype", "[unit][qlora]") {
  QuantSettings s;
  s.compute_dtype = torch::kBFloat16;
  LayerPair p = layer_pair(24, 8, s, true);
  const torch::Tensor x = torch::randn({4, 24});
  const torch::Tensor want = p.plain->forward(x.to(torch::kBFloat16).to(torch::kDouble));
  const torch::Tensor y = p.quantised->forward(x);  // compute dtype bf16: the output back in x's dtype
  REQUIRE(y.scalar_type() == torch::kFloat);
  CHECK(torch::allclose(y.to(torch::kDouble), want, 2e-2, 2e-2));
  {
    QuantSettings f32;
    LayerPair q = layer_pair(24, 8, f32, true);
    AutocastScope autocast(torch::kBFloat16);
    const torch::Tensor z = q.quantised->forward(x);
    CHECK(z.scalar_type() == torch::kBFloat16);
    CHECK(torch::allclose(z.to(torch::kDouble), q.plain->forward(x.to(torch::kBFloat16).to(torch::kDouble)), 2e-2, 2e-2));
  }
  // Module::to(dtype) leaves the codes as they are
  p.quantised->to(torch::kBFloat16);
  CHECK(p.quantised->weight.scalar_type() == torch::kByte);
  CHECK(p.quantised->bias.scalar_type() == torch::kBFloat16);
}

TEST_CASE("quantize_linear_layers skips the head and llm_int8_skip_modules, and PEFT counts codes twice", "[unit][qlora]") {
  const Components& c = builtin_components();
  const std::string text =
      "model: {type: llama, vocab_size: 40, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 2, "
      "num_attention_heads: 2, max_position_embeddings: 16, tie_word_embeddings: false,\n"
      "        quantization_config: {load_in_4bit: true, bnb_4bit_quant_type: nf4, llm_int8_skip_modules: [down_proj, layers.1.self_attn]}}\n"
      "data: {type: digit_reversal}\ntraining: {output_dir: out}\n";
  const RunSpec spec = load_run_spec_text(text, "spec", c.catalog());
  REQUIRE(spec.model.quantization);
  torch::manual_seed(0);
  std::shared_ptr<Model> model = c.models.build(spec.model.type, spec.model.options, ModelContext{});
  const QuantizationSummary summary = quantize_linear_layers(*model, *spec.model.quantization);
  // layer 0: q, k, v, o, gate, up; layer 1: gate, up
  CHECK(summary.quantized.size() == 8);
  for (const auto& name : summary.quantized) {
    CHECK(name.find("down_proj") == std::string::npos);
    CHECK(name.find("layers.1.self_attn") == std::string::npos);
  }
  PeftArgs peft;
  peft.target_modules = TargetModules{false, {"q_proj", "v_proj"}};
  const AdapterSummary adapters = attach_lora(*model, "llama", peft, "peft");
  int64_t all = 0;
  for (const auto& p : model->parameters()) all += p.numel();
  const int64_t packed_elements = summary.weight_elements / 2;  // every weight here has an even count
  CHECK(adapters.all == all + packed_elements);
}

TEST_CASE("model.quantization_config refuses what is not built, naming the key", "[unit][qlora]") {
  const Components& c = builtin_components();
  auto load = [&](const std::string& q) {
    return load_run_spec_text("model: {type: llama, quantization_config: " + q + "}\ndata: {type: digit_reversal}\n"
                              "training: {output_dir: out}\n", "spec", c.catalog());
  };
  CHECK_THROWS_WITH(load("{load_in_8bit: true, load_in_4bit: true}"), Catch::Contains("model.quantization_config.load_in_8bit") &&
                                                                          Catch::Contains("both true"));
  CHECK_THROWS_WITH(load("{load_in_8bit: true, llm_int8_has_fp16_weight: true}"),
                    Catch::Contains("model.quantization_config.llm_int8_has_fp16_weight") && Catch::Contains("frozen"));
  CHECK_THROWS_WITH(load("{load_in_8bit: true, llm_int8_threshold: -1}"), Catch::Contains("llm_int8_threshold"));
  CHECK_THROWS_WITH(load("{load_in_4bit: true, bnb_4bit_quant_storage: bfloat16}"),
                    Catch::Contains("bnb_4bit_quant_storage") && Catch::Contains("uint8"));
  CHECK_THROWS_WITH(load("{load_in_4bit: true, bnb_4bit_quant_type: int4}"), Catch::Contains("bnb_4bit_quant_type"));
  CHECK_THROWS_WITH(load("{load_in_4bit: true, bnb_4bit_compute_dtype: float16}"), Catch::Contains("bnb_4bit_compute_dtype"));
  CHECK_THROWS_WITH(load("{bnb_4bit_quant_type: nf4}"), Catch::Contains("nothing to quantise"));
  CHECK_THROWS_WITH(load("{load_in_4bit: true, bnb_4bit_typo: 1}"), Catch::Contains("bnb_4bit_typo"));
  const RunSpec ok = load("{load_in_4bit: true, bnb_4bit_quant_type: nf4, bnb_4bit_use_double_quant: true, "
                          "bnb_4bit_compute_dtype: bfloat16}");
  REQUIRE(ok.model.quantization);
  CHECK(ok.model.quantization->bnb_4bit_use_double_quant);
  CHECK(dump_run_spec(ok, c.catalog()).find("bnb_4bit_use_double_quant: true") != std::string::npos);
}

TEST_CASE("a config.json quantization_config is read under BitsAndBytesConfig's names, what is not built refused by key",
          "[unit][qlora]") {
  // BitsAndBytesConfig.to_dict() as transformers writes it into a 4-bit model's config.json
  nlohmann::json q = {{"_load_in_4bit", true}, {"_load_in_8bit", false}, {"bnb_4bit_compute_dtype", "bfloat16"},
                      {"bnb_4bit_quant_storage", "uint8"}, {"bnb_4bit_quant_type", "nf4"}, {"bnb_4bit_use_double_quant", true},
                      {"llm_int8_enable_fp32_cpu_offload", false}, {"llm_int8_has_fp16_weight", false},
                      {"llm_int8_skip_modules", nullptr}, {"llm_int8_threshold", 6.0}, {"load_in_4bit", true},
                      {"load_in_8bit", false}, {"quant_method", "bitsandbytes"}};
  auto config = [&](const nlohmann::json& quantization) { return nlohmann::json{{"model_type", "llama"}, {"quantization_config", quantization}}; };
  const auto args = checkpoint_quantization(config(q), "m/config.json");
  REQUIRE(args);
  CHECK(args->bnb_4bit_quant_type == "nf4");
  CHECK(args->bnb_4bit_use_double_quant);
  CHECK(args->bnb_4bit_compute_dtype == "bfloat16");
  CHECK_FALSE(checkpoint_quantization({{"model_type", "llama"}}, "m/config.json"));
  auto with = [&](const nlohmann::json& changes) {
    nlohmann::json c = q;
    c.update(changes);
    return c;
  };
  auto refused = [&](const nlohmann::json& changed, const std::string& key, const std::string& why) {
    CHECK_THROWS_WITH(checkpoint_quantization(config(changed), "m/config.json"),
                      Catch::Contains("m/config.json") && Catch::Contains(key) && Catch::Contains(why));
  };
  refused(nlohmann::json{{"quant_method", "gptq"}, {"bits", 4}}, "quant_method", "only bitsandbytes 4-bit");
  refused(with({{"load_in_8bit", true}, {"_load_in_8bit", true}}), "load_in_4bit", "both true");
  const auto eight = checkpoint_quantization(
      config(with({{"load_in_4bit", false}, {"_load_in_4bit", false}, {"load_in_8bit", true}, {"_load_in_8bit", true}})), "m/config.json");
  REQUIRE(eight);
  CHECK(eight->load_in_8bit);
  CHECK_FALSE(eight->load_in_4bit);
  refused(with({{"_load_in_4bit", false}}), "_load_in_4bit", "disagrees");
  refused(with({{"bnb_4bit_compute_dtype", "float16"}}), "bnb_4bit_compute_dtype", "model.quantization_config");
  refused(with({{"bnb_4bit_quant_storage", "bfloat16"}}), "bnb_4bit_quant_storage", "uint8");
  refused(with({{"bnb_4bit_new_key", 1}}), "bnb_4bit_new_key", "");
  // a float16 checkpoint computes in what the spec chooses
  const auto chosen = checkpoint_quantization(config(with({{"bnb_4bit_compute_dtype", "float16"}})), "m/config.json", "float32");
  REQUIRE(chosen);
  CHECK(chosen->bnb_4bit_compute_dtype == "float32");
}
