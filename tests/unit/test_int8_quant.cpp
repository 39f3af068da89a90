// 8-bit weights (load_in_8bit: bitsandbytes' Linear8bitLt, LLM.int8()). The hidden cases are the hftrain side of
// tests/reference/int8_reference.py (HFTRAIN_INT8_REFERENCE_DIR): "[int8_ref]" quantises the weight tables and runs
// the product cases of tables.json, writing codes, scales, dequantised weights, the activations' codes and the
// outputs and input gradients; "[int8_llama_ref]" runs each llama case (quantised at load with a PEFT adapter, or
// a checkpoint saved 8-bit in bitsandbytes' layout, loaded as it is and saved again). The visible cases check the
// layer where LLM.int8() has an exact answer: every feature an outlier (the product over the dequantised weight)
// and activations on the int8 grid (exact codes), LoRA / DoRA over it, the storage, the round trip and refusals.
#include "adapter_pairs.h"
#include "reference_case.h"

#include "kernels/gemm.h"
#include "models/adaptable_linear.h"
#include "models/int8_weight.h"
#include "models/lora.h"
#include "models/quantize_model.h"
#include "models/quantized_state.h"
#include "scratch_files.h"

namespace int8_quant_test {
using namespace hftrain;

QuantSettings int8_settings(double threshold) {
  QuantSettings s;
  s.bits = 8;
  s.threshold = threshold;
  return s;
}

struct Int8TileGuard {
  explicit Int8TileGuard(int64_t elements) { set_quant_tile_elements(elements); }
  ~Int8TileGuard() { set_quant_tile_elements(0); }
};

// A layer with an 8-bit base and the float64 layer over its dequantised weight.
struct Int8Pair {
  AdaptableLinear quantised{nullptr}, plain{nullptr};
};

Int8Pair int8_pair(int64_t in, int64_t out, double threshold, bool bias) {
  torch::manual_seed(11);
  const torch::Tensor w = torch::randn({out, in}), b = bias ? torch::randn({out}) : torch::Tensor();
  Int8Pair p;
  p.quantised = AdaptableLinear(w.clone(), bias ? b.clone() : torch::Tensor(), AdaptableLinearImpl::Layout::kOutIn);
  p.quantised->quantize_base(int8_settings(threshold));
  const torch::Tensor deq = p.quantised->quantized()->dequantize(torch::kFloat).to(torch::kDouble);
  p.plain = AdaptableLinear(deq, bias ? b.to(torch::kDouble) : torch::Tensor(), AdaptableLinearImpl::Layout::kOutIn);
  return p;
}

torch::Tensor as_row(const torch::Tensor& t) { return t.detach().reshape({-1}).contiguous(); }

// The product cases of tables.json: y, dx (for dy) and the activations' quantisation.
void run_product_case(const nlohmann::json& c, const std::map<std::string, torch::Tensor>& in, NamedTensors& out) {
  const std::string name = c["name"].get<std::string>();
  Int8TileGuard tiles(c["tile"].get<int64_t>());
  QuantSettings s = int8_settings(c["threshold"].get<double>());
  auto w = std::make_shared<QuantizedWeight>(quantize_weight(in.at(c["weight"].get<std::string>()), s));
  const bool bf16 = c["dtype"].get<std::string>() == "bfloat16";
  torch::Tensor x = in.at(name + ".x");
  if (bf16) x = x.to(torch::kBFloat16);
  x = x.detach().requires_grad_(true);
  const torch::Tensor bias = in.count(name + ".bias") ? in.at(name + ".bias") : torch::Tensor();
  const torch::Tensor y = quantized_linear(x, w, bias);
  y.backward(in.at(name + ".dy").to(y.scalar_type()));
  const Int8Activations a = quantize_int8_activations(x.detach().reshape({-1, w->in}), s.threshold);
  out.emplace_back(name + ".y", as_row(y).to(torch::kFloat));
  out.emplace_back(name + ".dx", as_row(x.grad()).to(torch::kFloat));
  out.emplace_back(name + ".codes", as_row(a.codes).to(torch::kChar));
  out.emplace_back(name + ".row_absmax", as_row(a.row_absmax));
  out.emplace_back(name + ".outlier_columns", as_row(a.outlier_columns));
}

// A directory loaded as a run loads it: model.from_pretrained, the checkpoint's quantization_config.
std::shared_ptr<Model> int8_loaded(const std::string& dir, RunSpec& spec) {
  const Components& c = builtin_components();
  spec = load_run_spec_text("model: {from_pretrained: '" + dir + "'}\ndata: {type: digit_reversal}\ntraining: {output_dir: '" + dir +
                                "/out'}\n", dir + "/spec.yaml", c.catalog());
  torch::manual_seed(0);
  std::shared_ptr<Model> model = c.models.build(spec.model.type, spec.model.options, ModelContext{});
  keep_loaded_config(*model, dir);
  load_pretrained(dir, *model);
  if (spec.model.quantization) quantize_linear_layers(*model, *spec.model.quantization);
  return model;
}

const char* const kInt8Llama =
    "type: llama, vocab_size: 40, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 2, num_attention_heads: 2, "
    "max_position_embeddings: 16, tie_word_embeddings: false";

}  // namespace int8_quant_test

using namespace int8_quant_test;

TEST_CASE("8-bit quantisation and LLM.int8() products of the reference tables (driven by int8_reference.py)", "[.][int8_ref]") {
  const char* root = std::getenv("HFTRAIN_INT8_REFERENCE_DIR");
  REQUIRE(root != nullptr);
  const std::string dir(root);
  const auto tables = nlohmann::json::parse(hftrain::read_text_file(dir + "/tables.json"));
  const auto inputs = hftrain::load_safetensors(dir + "/inputs.safetensors").tensors;
  hftrain::NamedTensors out;
  for (const auto& name : tables["weights"]) {
    const hftrain::QuantizedWeight q = hftrain::quantize_weight(inputs.at(name.get<std::string>()), int8_settings(6.0));
    out.emplace_back(name.get<std::string>() + ".CB", q.packed);
    out.emplace_back(name.get<std::string>() + ".SCB", q.absmax);
    out.emplace_back(name.get<std::string>() + ".dequantized", q.dequantize(torch::kFloat));
  }
  for (const auto& c : tables["products"]) run_product_case(c, inputs, out);
  hftrain::save_safetensors(dir + "/hftrain_tables.safetensors", out);
}

TEST_CASE("an 8-bit llama with an adapter, and a bitsandbytes 8-bit checkpoint (driven by int8_reference.py)", "[.][int8_llama_ref]") {
  using namespace hftrain;
  Int8TileGuard tiles(100);  // several tiles of rows in every layer
  for (const std::string& dir : hftrain_test::reference_case_dirs("HFTRAIN_INT8_REFERENCE_DIR")) {
    INFO(dir);
    const auto q = nlohmann::json::parse(read_text_file(dir + "/case.json"));
    RunSpec spec;
    std::shared_ptr<Model> model;
    if (q["prequantized"].get<bool>()) {
      model = int8_loaded(dir + "/model", spec);
      REQUIRE(spec.model.quantization);
      CHECK(spec.model.quantization->load_in_8bit);
    } else {
      hftrain_test::ReferenceCase rc = hftrain_test::load_reference_case(dir);
      model = rc.model;
      spec.model.type = rc.type;
      QuantizationArgs args;
      args.load_in_8bit = true;
      args.llm_int8_threshold = q["threshold"].get<double>();
      REQUIRE(quantize_linear_layers(*model, args).quantized.size() == 14);  // seven per layer; lm_head stays
    }
    model->eval();
    if (q["prequantized"].get<bool>()) save_model_dir(dir + "/resaved", *model);
    attach_adapter_dir(*model, spec.model.type, dir + "/adapter", dir + "/model");
    const auto inputs = load_safetensors(dir + "/inputs.safetensors").tensors;
    Batch batch;
    batch.input_ids = inputs.at("input_ids");
    batch.attention_mask = inputs.at("attention_mask");
    batch.labels = inputs.at("labels");
    const ModelOutput out = model->forward(batch);
    out.loss.backward();
    NamedTensors written = {{"logits", out.logits.detach().contiguous()}, {"loss", out.loss.detach().reshape({1}).contiguous()}};
    hftrain_test::append_adapter_gradients(*model, written);
    save_safetensors(dir + "/hftrain_output.safetensors", written);
  }
}

TEST_CASE("an 8-bit layer with every feature an outlier equals the float64 layer over its dequantised weight", "[unit][int8]") {
  for (const int64_t tile : {0, 40, 1}) {
    Int8TileGuard tiles(tile);
    Int8Pair p = int8_pair(13, 9, /*threshold=*/1e-30, /*bias=*/true);
    const torch::Tensor x = torch::randn({2, 3, 13}, torch::kDouble).requires_grad_(true);
    const torch::Tensor x64 = x.detach().clone().requires_grad_(true);
    const torch::Tensor y = p.quantised->forward(x), want = p.plain->forward(x64);
    REQUIRE(y.scalar_type() == torch::kDouble);
    CHECK(torch::allclose(y, want, 1e-6, 1e-6));  // the bias is added in float32, as bitsandbytes adds it
    const torch::Tensor dy = torch::randn_like(want);
    y.backward(dy);
    want.backward(dy);
    CHECK(torch::allclose(x.grad(), x64.grad(), 1e-12, 1e-12));
    CHECK(torch::allclose(p.quantised->bias.grad().to(torch::kDouble), p.plain->bias.grad(), 1e-6, 1e-6));
    CHECK(p.quantised->weight.scalar_type() == torch::kChar);
    CHECK(p.quantised->weight.sizes().equals({9, 13}));
    CHECK_FALSE(p.quantised->weight.requires_grad());
    CHECK(p.quantised->quantized()->storage_bytes() == 9 * 13 + 4 * 9);
  }
}

TEST_CASE("an 8-bit layer over activations on the int8 grid multiplies exactly", "[unit][int8]") {
  // Rows k * m / 127 with integer k (|k| <= 127, one of 127) and m a power of two: the activations' codes are k exactly,
  // so the int8 product equals the float64 product over the dequantised weight but for the float32 rescaling.
  for (const double threshold : {0.0, 6.0}) {
    Int8Pair p = int8_pair(2100, 5, threshold, false);  // over 1024 columns: the exact product in two pieces
    torch::Tensor k = torch::randint(-127, 128, {3, 2100}, torch::kDouble);
    k.select(1, 7).fill_(127);
    const torch::Tensor x = k * torch::tensor({0.5, 2.0, 4.0}, torch::kDouble).unsqueeze(1) / 127;
    const torch::Tensor y = p.quantised->forward(x.to(torch::kFloat)).to(torch::kDouble), want = p.plain->forward(x);
    const double scale = want.abs().max().item<double>();
    CHECK((y - want).abs().max().item<double>() <= 1e-6 * scale);
    const Int8Activations a = quantize_int8_activations(x.to(torch::kFloat), threshold);
    CHECK(torch::equal(a.codes.to(torch::kDouble), k));
    CHECK(a.outlier_columns.numel() == 0);
  }
}

TEST_CASE("LoRA and DoRA on an 8-bit layer train against the float64 layer over the dequantised weight", "[unit][int8]") {
  for (const bool dora : {false, true}) {
    Int8Pair p = int8_pair(16, 12, 1e-30, false);
    hftrain_test::attach_equal_adapters(p.quantised, p.plain, dora);
    p.plain->to(torch::kDouble);  // its adapter in float64
    const torch::Tensor x = torch::randn({4, 16}, torch::kDouble);
    const torch::Tensor y = p.quantised->forward(x.to(torch::kFloat)).to(torch::kDouble), want = p.plain->forward(x);
    CHECK(torch::allclose(y, want, 1e-5, 1e-5));  // a float32 layer against the float64 one
    y.sum().backward();
    want.sum().backward();
    CHECK(torch::allclose(p.quantised->adapter()->lora_A.grad().to(torch::kDouble), p.plain->adapter()->lora_A.grad(), 1e-4, 1e-5));
    CHECK(torch::allclose(p.quantised->adapter()->lora_B.grad().to(torch::kDouble), p.plain->adapter()->lora_B.grad(), 1e-4, 1e-5));
    CHECK_FALSE(p.quantised->weight.grad().defined());
  }
}

TEST_CASE("an 8-bit model saves in bitsandbytes' layout, loads back as it was, and malformed state is refused by name",
          "[unit][int8]") {
  using namespace hftrain;
  const std::string dir = hftrain_test::scratch("int8_round_trip");
  const Components& c = builtin_components();
  const RunSpec spec = load_run_spec_text(std::string("model: {") + kInt8Llama + ", quantization_config: {load_in_8bit: true, "
                                          "llm_int8_threshold: 2.5, llm_int8_skip_modules: [down_proj]}}\ndata: {type: digit_reversal}\n"
                                          "training: {output_dir: out}\n", "spec", c.catalog());
  torch::manual_seed(1);
  std::shared_ptr<Model> original = c.models.build(spec.model.type, spec.model.options, ModelContext{});
  CHECK(quantize_linear_layers(*original, *spec.model.quantization).line().find("to 8 bits") != std::string::npos);
  save_model_dir(dir + "/model", *original);
  const auto config = nlohmann::json::parse(read_text_file(dir + "/model/config.json"));
  CHECK(config["quantization_config"]["load_in_8bit"] == true);
  CHECK(config["quantization_config"]["llm_int8_threshold"] == 2.5);
  std::map<std::string, SafetensorsHeader::Entry> file;
  for (const auto& e : read_safetensors_header(dir + "/model/model.safetensors").tensors) file[e.name] = e;
  const std::string m = "model.layers.1.mlp.up_proj";  // [24, 16]
  CHECK(file.at(m + ".weight").dtype == "I8");
  CHECK((file.at(m + ".weight").shape == std::vector<int64_t>{24, 16}));
  CHECK(file.at(m + ".SCB").dtype == "F32");
  CHECK((file.at(m + ".SCB").shape == std::vector<int64_t>{24}));
  CHECK(file.at(m + ".weight_format").dtype == "U8");
  CHECK(file.at(m + ".weight_format").shape.empty());
  CHECK(file.at("model.layers.0.mlp.down_proj.weight").dtype == "F32");
  CHECK_FALSE(file.count("model.layers.0.mlp.down_proj.SCB"));

  RunSpec back_spec;
  std::shared_ptr<Model> back = int8_loaded(dir + "/model", back_spec);
  REQUIRE(back_spec.model.quantization);
  CHECK(back_spec.model.quantization->llm_int8_threshold == 2.5);
  Batch batch;
  torch::manual_seed(2);
  batch.input_ids = torch::randint(0, 40, {2, 7}, torch::kLong);
  batch.attention_mask = torch::ones({2, 7}, torch::kLong);
  batch.labels = batch.input_ids.clone();
  torch::NoGradGuard no_grad;
  CHECK(torch::equal(original->forward(batch).logits, back->forward(batch).logits));

  // malformed: a tiled format, a missing SCB, a weight of another dtype
  const QuantSettings s = int8_settings(6.0);
  std::map<std::string, torch::Tensor> parts = {{"", torch::zeros({3, 4}, torch::kChar)}, {"SCB", torch::ones({3})},
                                                {"weight_format", torch::full({}, 2, torch::kByte)}};
  CHECK_THROWS_WITH(quantized_weight_from_state("l.weight", parts, s, 3, 4, "f"), Catch::Contains("'l.weight_format'") &&
                                                                                   Catch::Contains("col_turing"));
  parts.erase("weight_format");
  CHECK_NOTHROW(quantized_weight_from_state("l.weight", parts, s, 3, 4, "f"));
  parts.erase("SCB");
  CHECK_THROWS_WITH(quantized_weight_from_state("l.weight", parts, s, 3, 4, "f"), Catch::Contains("'l.SCB'") && Catch::Contains("missing"));
  parts = {{"", torch::zeros({3, 4}, torch::kByte)}, {"SCB", torch::ones({3})}};
  CHECK_THROWS_WITH(quantized_weight_from_state("l.weight", parts, s, 3, 4, "f"), Catch::Contains("'l.weight'") && Catch::Contains("I8"));
}

TEST_CASE("oneDNN's int8 GEMM, where the probe admits it, equals the int64 sum of the code products", "[unit][int8][kernels]") {
  if (!kernels::int8_gemm_available()) {
    WARN("oneDNN's int8 GEMM is not used on this machine (no oneDNN, or its probe of extreme codes was inexact)");
    return;
  }
  torch::manual_seed(17);
  const int64_t m = 37, n = 29, k = 1500;  // over the float path's 1024 exact columns
  const torch::Tensor a = torch::randint(-127, 128, {m, k}, torch::kLong), b = torch::randint(-127, 128, {n, k}, torch::kLong);
  a.select(0, 0).fill_(127), b.select(0, 0).fill_(127);  // a row of the largest products
  const torch::Tensor a8 = a.to(torch::kChar).contiguous(), b8 = b.to(torch::kChar).contiguous();
  torch::Tensor c = torch::empty({m, n}, torch::kInt);
  kernels::gemm_s8s8s32_nt(m, n, k, a8.data_ptr<int8_t>(), b8.data_ptr<int8_t>(), c.data_ptr<int32_t>());
  CHECK(torch::equal(c.to(torch::kLong), a.matmul(b.t())));
  CHECK(c[0][0].item<int64_t>() == 127 * 127 * k);
}
