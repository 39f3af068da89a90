// Checkpoints already quantised by bitsandbytes: config.json's quantization_config and, for each 4-bit layer,
// its packed codes and quant state in the safetensors files. The hidden case "[bnb_ref]" is the hftrain side of
// tests/reference/bnb_checkpoint_reference.py (HFTRAIN_BNB_REFERENCE_DIR): each case's model directory loads as
// it is through model.from_pretrained; the 4-bit model's logits and loss, the directory saved again, and with
// the case's PEFT adapter the logits, loss, adapter gradients and the loss after one SGD step are written. The
// visible cases: a save / load round trip, the logical parameter count, and malformed tensors refused by name.
#include "reference_case.h"

#include <torch/optim/sgd.h>

#include "models/lora.h"
#include "models/parameter_counts.h"
#include "models/quantize_model.h"
#include "models/quantized_state.h"
#include "scratch_files.h"

using namespace hftrain;
using namespace hftrain_test;

namespace {

// A model loaded as a run loads it: model.from_pretrained `dir` (plus `extra` model keys), its config kept,
// its layers quantised as model.quantization_config (the checkpoint's, when it is quantised) says.
struct Loaded {
  RunSpec spec;
  std::shared_ptr<Model> model;
  QuantizationSummary summary;
};

Loaded load_dir(const std::string& dir, const std::string& extra = "") {
  const Components& c = builtin_components();
  Loaded l{load_run_spec_text("model: {from_pretrained: '" + dir + "'" + extra + "}\ndata: {type: digit_reversal}\n"
                              "training: {output_dir: '" + dir + "/out'}\n", dir + "/spec.yaml", c.catalog()),
           nullptr, {}};
  torch::manual_seed(0);
  l.model = c.models.build(l.spec.model.type, l.spec.model.options, ModelContext{});
  keep_loaded_config(*l.model, dir);
  load_pretrained(dir, *l.model);
  if (l.spec.model.quantization) l.summary = quantize_linear_layers(*l.model, *l.spec.model.quantization);
  return l;
}

Batch batch_of(const std::string& path) {
  const auto inputs = load_safetensors(path).tensors;
  Batch b;
  b.input_ids = inputs.at("input_ids");
  b.attention_mask = inputs.at("attention_mask");
  b.labels = inputs.at("labels");
  return b;
}

torch::Tensor scalar(const torch::Tensor& t) { return t.detach().reshape({1}).contiguous(); }

const char* const kLlama =
    "type: llama, vocab_size: 40, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 2, num_attention_heads: 2, "
    "max_position_embeddings: 16, tie_word_embeddings: false";

// A tiny llama quantised at load (`quantization` the keys of model.quantization_config), saved to dir.
std::shared_ptr<Model> saved_4bit_llama(const std::string& dir, const std::string& quantization) {
  const Components& c = builtin_components();
  const RunSpec spec = load_run_spec_text(std::string("model: {") + kLlama + ", quantization_config: {" + quantization +
                                              "}}\ndata: {type: digit_reversal}\ntraining: {output_dir: out}\n", "spec", c.catalog());
  torch::manual_seed(1);
  std::shared_ptr<Model> model = c.models.build(spec.model.type, spec.model.options, ModelContext{});
  quantize_linear_layers(*model, *spec.model.quantization);
  save_model_dir(dir, *model);
  return model;
}

Batch tiny_batch() {
  torch::manual_seed(2);
  Batch b;
  b.input_ids = torch::randint(0, 40, {2, 7}, torch::kLong);
  b.attention_mask = torch::ones({2, 7}, torch::kLong);
  b.labels = b.input_ids.clone();
  return b;
}

}  // namespace

TEST_CASE("bitsandbytes 4-bit checkpoints load as they are (driven by bnb_checkpoint_reference.py)", "[.][bnb_ref]") {
  for (const std::string& dir : reference_case_dirs("HFTRAIN_BNB_REFERENCE_DIR")) {
    INFO(dir);
    Loaded l = load_dir(dir + "/model");
    REQUIRE(l.spec.model.quantization);
    Model& model = *l.model;
    const Batch batch = batch_of(dir + "/inputs.safetensors");
    model.eval();
    NamedTensors written;
    {
      torch::NoGradGuard no_grad;
      const ModelOutput out = model.forward(batch);
      written = {{"logits", out.logits.detach().contiguous()}, {"loss", scalar(out.loss)}};
    }
    written.emplace_back("quantized_layers", torch::full({1}, static_cast<int64_t>(l.summary.quantized.size()), torch::kLong));
    written.emplace_back("total_parameters", torch::full({1}, count_parameters(model).total, torch::kLong));
    save_model_dir(dir + "/resaved", model);
    // QLoRA: the case's adapter over the 4-bit base, its gradients, then one SGD step of lr 0.1
    attach_adapter_dir(model, l.spec.model.type, dir + "/adapter", dir + "/model");
    const ModelOutput out = model.forward(batch);
    out.loss.backward();
    written.emplace_back("adapted_logits", out.logits.detach().contiguous());
    written.emplace_back("adapted_loss", scalar(out.loss));
    std::vector<torch::Tensor> trained = append_adapter_gradients(model, written);
    torch::optim::SGD(trained, torch::optim::SGDOptions(0.1)).step();
    {
      torch::NoGradGuard no_grad;
      written.emplace_back("stepped_loss", scalar(model.forward(batch).loss));
    }
    save_safetensors(dir + "/hftrain_output.safetensors", written);
  }
}

TEST_CASE("a 4-bit model saves in bitsandbytes' layout and loads back as it was", "[unit][qlora]") {
  const std::string dir = scratch("round_trip");
  std::shared_ptr<Model> original = saved_4bit_llama(dir + "/model", "load_in_4bit: true, bnb_4bit_quant_type: nf4, "
                                                                     "bnb_4bit_use_double_quant: true, llm_int8_skip_modules: [down_proj]");
  const auto config = nlohmann::json::parse(read_text_file(dir + "/model/config.json"));
  CHECK(config["quantization_config"]["bnb_4bit_quant_type"] == "nf4");
  CHECK(config["quantization_config"]["llm_int8_skip_modules"] ==  // the head is skipped by name whatever the list
        nlohmann::json::array({"model.layers.0.mlp.down_proj", "model.layers.1.mlp.down_proj"}));
  std::map<std::string, SafetensorsHeader::Entry> file;
  for (const auto& e : read_safetensors_header(dir + "/model/model.safetensors").tensors) file[e.name] = e;
  const std::string q = "model.layers.1.self_attn.q_proj.weight";  // [16, 16]: 256 codes in 4 blocks of 64
  CHECK(file.at(q).dtype == "U8");
  CHECK(file.at(q).shape == std::vector<int64_t>{128, 1});
  CHECK(file.at(q + ".absmax").dtype == "U8");
  CHECK(file.at(q + ".absmax").shape == std::vector<int64_t>{4});
  CHECK(file.at(q + ".nested_absmax").shape == std::vector<int64_t>{1});
  CHECK(file.at(q + ".nested_quant_map").shape == std::vector<int64_t>{256});
  CHECK(file.at(q + ".quant_map").shape == std::vector<int64_t>{16});
  CHECK(file.count(q + ".quant_state.bitsandbytes__nf4"));
  CHECK(file.at("model.layers.0.mlp.down_proj.weight").dtype == "F32");  // skipped: a plain weight
  CHECK_FALSE(file.count("model.layers.0.mlp.down_proj.weight.absmax"));
  CHECK(file.at("lm_head.weight").dtype == "F32");

  Loaded back = load_dir(dir + "/model");
  REQUIRE(back.spec.model.quantization);
  CHECK(back.summary.quantized.size() == 12);  // six of seven per layer
  const auto a = quantized_weights(*original), b = quantized_weights(*back.model);
  REQUIRE(a.size() == b.size());
  for (const auto& [name, w] : a) {
    INFO(name);
    REQUIRE(b.count(name));
    CHECK(torch::equal(w->packed, b.at(name)->packed));
    CHECK(torch::equal(w->absmax, b.at(name)->absmax));
    CHECK(torch::equal(w->nested_absmax, b.at(name)->nested_absmax));
    CHECK(w->offset == b.at(name)->offset);
  }
  const Batch batch = tiny_batch();
  original->eval();
  back.model->eval();
  torch::NoGradGuard no_grad;
  CHECK(torch::equal(original->forward(batch).logits, back.model->forward(batch).logits));
  // saved again: the same tensors, byte for byte
  save_model_dir(dir + "/again", *back.model);
  const auto first = load_safetensors(dir + "/model/model.safetensors").tensors;
  const auto second = load_safetensors(dir + "/again/model.safetensors").tensors;
  REQUIRE(first.size() == second.size());
  for (const auto& [name, t] : first) {
    INFO(name);
    CHECK(torch::equal(t, second.at(name)));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("the parameter count of a 4-bit model is its logical count, as before quantisation", "[unit][qlora]") {
  const Components& c = builtin_components();
  const RunSpec spec = load_run_spec_text(std::string("model: {") + kLlama + ", quantization_config: "
                                              "{load_in_4bit: true}}\ndata: {type: digit_reversal}\ntraining: {output_dir: out}\n",
                                          "spec", c.catalog());
  std::shared_ptr<Model> model = c.models.build(spec.model.type, spec.model.options, ModelContext{});
  const ParameterCounts before = count_parameters(*model);
  const QuantizationSummary summary = quantize_linear_layers(*model, *spec.model.quantization);
  int64_t packed = 0;
  for (const auto& [name, w] : quantized_weights(*model)) packed += w->packed.numel();
  const ParameterCounts after = count_parameters(*model);
  CHECK(after.total == before.total);
  CHECK(after.non_embedding == before.non_embedding);
  CHECK(after.trainable == before.trainable - summary.weight_elements);  // the codes are frozen
  CHECK(packed < summary.weight_elements);  // what the packed bytes alone would have counted: about half
}

TEST_CASE("a quantised checkpoint's malformed tensors are refused, each named", "[unit][qlora]") {
  torch::manual_seed(3);
  QuantSettings s;
  s.double_quant = true;
  const QuantizedWeight w = quantize_weight(torch::randn({8, 40}), s);  // 320 weights: 5 blocks of 64
  const std::string name = "m.q_proj.weight", state = "quant_state.bitsandbytes__nf4";
  QuantStateParts parts;
  for (const auto& [n, t] : quant_state_tensors(name, w)) parts[n == name ? "" : n.substr(name.size() + 1)] = t;
  const QuantizedWeight read = quantized_weight_from_state(name, parts, s, 8, 40, "dir");
  CHECK(torch::equal(read.dequantize(torch::kFloat), w.dequantize(torch::kFloat)));
  CHECK(read.settings.blocksize == 64);
  const torch::Tensor json_bytes = parts.at(state);
  const nlohmann::json j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(json_bytes.data_ptr<uint8_t>()), json_bytes.numel()));
  CHECK(j == nlohmann::json::parse(R"({"quant_type": "nf4", "blocksize": 64, "dtype": "float32", "shape": [8, 40],
                                      "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": )" +
                                   nlohmann::json(static_cast<double>(w.offset)).dump() + "}"));

  auto with = [&](const std::string& key, const torch::Tensor& t) {
    QuantStateParts p = parts;
    if (t.defined()) p[key] = t;
    else p.erase(key);
    return p;
  };
  auto text = [](const std::string& t) {
    return torch::from_blob(const_cast<char*>(t.data()), {static_cast<int64_t>(t.size())}, torch::kByte).clone();
  };
  auto state_with = [&](const nlohmann::json& changes) {
    nlohmann::json c = j;
    c.update(changes);
    return with(state, text(c.dump()));
  };
  auto refused = [&](const QuantStateParts& p, const std::string& suffix, const std::string& why, const QuantSettings& expected,
                     int64_t out = 8) {
    const std::string tensor = suffix.empty() ? name : name + "." + suffix;
    CHECK_THROWS_WITH(quantized_weight_from_state(name, p, expected, out, 40, "dir"),
                      Catch::Contains("'dir': tensor '" + tensor + "'") && Catch::Contains(why));
  };
  refused(with("absmax", torch::Tensor()), "absmax", "is missing", s);
  refused(with("absmax", w.block_absmax()), "absmax", "has dtype F32 shape [5], expected U8 [5]", s);
  refused(with("", w.packed.view({-1})), "", "expected U8 [160, 1]", s);
  refused(with("", torch::randn({8, 40})), "", "has dtype F32 shape [8, 40]", s);
  refused(with("quant_map", parts.at("quant_map").flip(0)), "quant_map", "is not bitsandbytes' nf4 code table", s);
  refused(with("nested_absmax", torch::Tensor()), "nested_absmax", "is missing", s);
  refused(with("nested_quant_map", torch::zeros({128})), "nested_quant_map", "expected F32 [256]", s);
  refused(with(state, torch::Tensor()), state, "is missing", s);
  refused(with(state, text("{not json")), state, "is not the UTF-8 JSON", s);
  refused(state_with({{"blocksize", 63}}), state, "blocksize 63", s);
  refused(state_with({{"blocksize", -64}}), state, "expected a positive integer", s);
  refused(state_with({{"shape", {40, 8}}}), state, "has shape [40,8], but the layer is [8, 40]", s);
  refused(state_with({{"quant_type", "fp4"}}), state, "has quant_type \"fp4\", but its name says nf4", s);
  refused(state_with({{"dtype", "int8"}}), state, "expected float32, bfloat16 or float16", s);
  refused(state_with({{"nested_dtype", "float16"}}), state, "nested_dtype", s);
  refused(state_with({{"bits", 4}}), state, "the key 'bits'", s);
  refused(with("offsets", torch::zeros({1})), "offsets", "is not part of bitsandbytes' 4-bit quant state", s);
  refused(parts, state, "has shape [8,40], but the layer is [10, 40]", s, 10);
  QuantSettings fp4 = s;
  fp4.type = kernels::Quant4Type::kFp4;
  refused(parts, state, "is an nf4 quant state, but config.json's quantization_config has bnb_4bit_quant_type fp4", fp4);
  QuantSettings single = s;
  single.double_quant = false;
  refused(parts, state, "is double-quantised (nested_*), but config.json's quantization_config has bnb_4bit_use_double_quant false", single);
}

TEST_CASE("a quantised checkpoint's directory: a missing or extra 4-bit tensor and a disagreeing spec are refused by name",
          "[unit][qlora]") {
  const std::string dir = scratch("directory");
  saved_4bit_llama(dir + "/model", "load_in_4bit: true, bnb_4bit_quant_type: nf4");
  auto tensors = load_safetensors(dir + "/model/model.safetensors").tensors;
  const std::string v = "model.layers.0.self_attn.v_proj.weight";
  auto rewrite = [&](const std::string& name, const std::map<std::string, torch::Tensor>& files) {
    std::filesystem::create_directories(dir + "/" + name);
    std::filesystem::copy_file(dir + "/model/config.json", dir + "/" + name + "/config.json");
    save_safetensors(dir + "/" + name + "/model.safetensors", NamedTensors(files.begin(), files.end()));
    return dir + "/" + name;
  };
  auto missing = tensors;
  missing.erase(v);
  CHECK_THROWS_WITH(load_dir(rewrite("missing", missing)), Catch::Contains("missing tensors: " + v + " (quantised)"));
  auto extra = tensors;
  extra[v + ".quant_state.bitsandbytes__fp4"] = extra.at(v + ".quant_state.bitsandbytes__nf4");
  CHECK_THROWS_WITH(load_dir(rewrite("extra", extra)),
                    Catch::Contains("tensor '" + v + ".quant_state.bitsandbytes__fp4' is a second quant state"));
  auto unquantised = tensors;
  unquantised["model.norm.weight.absmax"] = torch::ones({1});  // a quant state of a layer that is not 4-bit
  CHECK_THROWS_WITH(load_dir(rewrite("stray", unquantised)),
                    Catch::Contains("unexpected tensors") && Catch::Contains("model.norm.weight.absmax"));
  CHECK_THROWS_WITH(load_dir(dir + "/model", ", quantization_config: {bnb_4bit_quant_type: fp4}"),
                    Catch::Contains("model.quantization_config.bnb_4bit_quant_type") && Catch::Contains("disagrees"));
  // the spec chooses the compute dtype alone
  const Loaded bf16 = load_dir(dir + "/model", ", quantization_config: {load_in_4bit: true, bnb_4bit_quant_type: nf4, "
                                               "bnb_4bit_compute_dtype: bfloat16}");
  for (const auto& [name, w] : quantized_weights(*bf16.model)) CHECK(w->settings.compute_dtype == torch::kBFloat16);
  std::filesystem::remove_all(dir);
}
