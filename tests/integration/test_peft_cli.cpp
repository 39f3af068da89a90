// LoRA / DoRA fine-tuning through the binary (PEFT's layout and behaviour): only the adapters train and are
// saved (adapter_config.json + adapter_model.safetensors, PEFT's tensor names, never the base), the run
// prints print_trainable_parameters' line, checkpoints resume bitwise, eval of an adapter run equals eval of
// the merged model (hftrain merge-adapter), model.peft_adapter continues an adapter, and bad targets are
// refused naming the key.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <regex>

#include "checkpoint/safetensors.h"
#include "cli_runner.h"
#include "fixture_text.h"
#include "test_tensor_files.h"

#include "test_dist_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* const kPeftData = "data: {type: digit_reversal, num_digits: 3, train_size: 48, eval_size: 16}\n";

// dir/base: a gpt2 HF directory (2 blocks, n_embd 16, no dropout, so that runs on 1 and 2 workers can agree)
// trained a few steps here, as a pretrained base.
std::string with_base(const std::string& name) {
  const std::string dir = fresh_dir(name);
  write_text(dir + "/make.yaml", std::string("model: {type: gpt2, n_layer: 2, n_head: 2, n_embd: 16, resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0}\n") + kPeftData +
                                     "training: {output_dir: base, max_steps: 3, learning_rate: 0.01, save_strategy: \"no\"}\n");
  CliResult r = run_hftrain("train make.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return dir;
}

std::string lora_spec(const std::string& peft, const std::string& training) {
  return std::string("model: {from_pretrained: base}\n") + kPeftData + "peft: " + peft + "\ntraining: " + training + "\n";
}

int64_t elements(const std::map<std::string, torch::Tensor>& tensors) {
  int64_t n = 0;
  for (const auto& [name, t] : tensors) n += t.numel();
  return n;
}

// Two adapters with the same tensors, equal to 1e-4 of each tensor's scale.
void check_same_adapter(const std::map<std::string, torch::Tensor>& a, const std::map<std::string, torch::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) {
    INFO(name);
    REQUIRE(b.count(name));
    CHECK((b.at(name) - t).abs().max().item<double>() <= 1e-4 * std::max(1.0, t.abs().max().item<double>()));
  }
}

double json_number(const std::string& path, const std::string& key) { return json::parse(read_text(path)).at(key).get<double>(); }

}  // namespace

TEST_CASE("a LoRA run trains only the adapters and saves them in PEFT's layout", "[integration][peft]") {
  const std::string dir = with_base("peft_layout");
  write_text(dir + "/spec.yaml", lora_spec("{r: 4, lora_alpha: 8, init_lora_weights: gaussian}",
                                           "{output_dir: out, max_steps: 4, learning_rate: 0.01, save_steps: 2, logging_steps: 1}"));
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  // PEFT's print_trainable_parameters: c_attn (16 -> 48) of 2 blocks, r = 4: 2 * 4 * (16 + 48) = 512.
  const auto base = hftrain::load_safetensors(dir + "/base/model.safetensors").tensors;
  const int64_t all = elements(base) + 512;
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.4f", 100.0 * 512 / static_cast<double>(all));
  std::string all_text = std::to_string(all);
  for (int i = static_cast<int>(all_text.size()) - 3; i > 0; i -= 3) all_text.insert(static_cast<std::size_t>(i), ",");
  CHECK_THAT(r.output, Catch::Contains("trainable params: 512 || all params: " + all_text + " || trainable%: " + pct));
  CHECK_THAT(r.output, Catch::Contains("fan_in_fan_out is set to true"));

  // The output and every checkpoint hold the adapter only, under PEFT's names.
  for (const std::string sub : {"out", "out/checkpoint-2", "out/checkpoint-4"}) {
    INFO(sub);
    CHECK_FALSE(fs::exists(dir + "/" + sub + "/model.safetensors"));
    const json config = json::parse(read_text(dir + "/" + sub + "/adapter_config.json"));
    CHECK(config["peft_type"] == "LORA");
    CHECK(config["r"] == 4);
    CHECK(config["lora_alpha"] == 8);
    CHECK(config["target_modules"] == json::array({"c_attn"}));
    CHECK(config["fan_in_fan_out"] == true);
    CHECK(config["base_model_name_or_path"] == "base");
    const auto adapter = hftrain::load_safetensors(dir + "/" + sub + "/adapter_model.safetensors").tensors;
    CHECK(adapter.size() == 4);
    for (const std::string layer : {"0", "1"}) {
      const std::string path = "base_model.model.transformer.h." + layer + ".attn.c_attn.";
      REQUIRE(adapter.count(path + "lora_A.weight"));
      REQUIRE(adapter.count(path + "lora_B.weight"));
      CHECK(adapter.at(path + "lora_A.weight").sizes() == torch::IntArrayRef({4, 16}));
      CHECK(adapter.at(path + "lora_B.weight").sizes() == torch::IntArrayRef({48, 4}));
      CHECK(adapter.at(path + "lora_B.weight").abs().max().item<float>() > 0);  // B starts at zero and trained
    }
  }
  // A checkpoint is the adapter and its optimizer state, far from a copy of the base.
  CHECK(fs::file_size(dir + "/out/checkpoint-4/optimizer.safetensors") < fs::file_size(dir + "/base/model.safetensors") / 4);

  // The frozen base is what merge-adapter starts from: merged tensors other than c_attn.weight equal the base's.
  CliResult merge = run_hftrain("merge-adapter base out merged", dir);
  INFO(merge.output);
  REQUIRE(merge.exit_code == 0);
  const auto merged = hftrain::load_safetensors(dir + "/merged/model.safetensors").tensors;
  REQUIRE(merged.size() == base.size());
  for (const auto& [name, t] : base) {
    INFO(name);
    REQUIRE(merged.count(name));
    if (name.find("c_attn.weight") != std::string::npos) CHECK_FALSE(merged.at(name).equal(t));
    else CHECK(merged.at(name).equal(t));
  }
  CHECK(json::parse(read_text(dir + "/merged/config.json"))["model_type"] == "gpt2");

  // Eval of the adapter run (base + adapter) equals eval of the merged plain model.
  CliResult eval = run_hftrain("eval out", dir);
  INFO(eval.output);
  REQUIRE(eval.exit_code == 0);
  write_text(dir + "/merged.yaml", std::string("model: {from_pretrained: merged}\n") + kPeftData + "training: {output_dir: merged_eval}\n");
  CliResult eval_merged = run_hftrain("eval merged.yaml", dir);
  INFO(eval_merged.output);
  REQUIRE(eval_merged.exit_code == 0);
  const double a = json_number(dir + "/out/eval_results.json", "eval_loss");
  const double b = json_number(dir + "/merged_eval/eval_results.json", "eval_loss");
  CHECK(std::abs(a - b) <= 1e-5 * std::max(1.0, std::abs(b)));
}

TEST_CASE("a DoRA run resumes from its checkpoint bitwise", "[integration][peft]") {
  const std::string dir = with_base("peft_resume");
  const std::string peft = "{r: 2, lora_alpha: 4, use_dora: true, target_modules: [c_attn, c_fc], lora_dropout: 0.1}";
  write_text(dir + "/spec.yaml", lora_spec(peft, "{output_dir: out, max_steps: 4, learning_rate: 0.01, save_steps: 2}"));
  CliResult full = run_hftrain("train spec.yaml", dir);
  INFO(full.output);
  REQUIRE(full.exit_code == 0);
  const auto adapter = hftrain::load_safetensors(dir + "/out/adapter_model.safetensors").tensors;
  CHECK(adapter.size() == 12);  // lora_A, lora_B, lora_magnitude_vector of c_attn and c_fc in 2 blocks
  CHECK(adapter.count("base_model.model.transformer.h.1.mlp.c_fc.lora_magnitude_vector"));

  fs::create_directories(dir + "/resumed");
  fs::copy(dir + "/out/checkpoint-2", dir + "/resumed/checkpoint-2", fs::copy_options::recursive);
  CliResult resumed = run_hftrain("train spec.yaml --set training.output_dir=resumed --resume resumed/checkpoint-2", dir);
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(same_tensors(dir + "/out/adapter_model.safetensors", dir + "/resumed/adapter_model.safetensors"));
  CHECK(same_tensors(dir + "/out/checkpoint-4/optimizer.safetensors", dir + "/resumed/checkpoint-4/optimizer.safetensors"));

  // model.peft_adapter continues the trained adapter (PeftModel.from_pretrained(..., is_trainable=True)).
  write_text(dir + "/more.yaml", std::string("model: {from_pretrained: base, peft_adapter: out}\n") + kPeftData +
                                     "training: {output_dir: more, max_steps: 1, learning_rate: 0.01, save_strategy: \"no\"}\n");
  CliResult more = run_hftrain("train more.yaml", dir);
  INFO(more.output);
  REQUIRE(more.exit_code == 0);
  CHECK_THAT(more.output, Catch::Contains("peft: adapter loaded from out"));
  const auto continued = hftrain::load_safetensors(dir + "/more/adapter_model.safetensors").tensors;
  REQUIRE(continued.size() == adapter.size());
  CHECK_FALSE(continued.at("base_model.model.transformer.h.0.attn.c_attn.lora_B.weight")
                  .equal(adapter.at("base_model.model.transformer.h.0.attn.c_attn.lora_B.weight")));
}

TEST_CASE("LoRA targets that match nothing or no linear layer are refused naming the key", "[integration][peft]") {
  const std::string dir = with_base("peft_errors");
  const std::string training = "{output_dir: out, max_steps: 1, save_strategy: \"no\"}";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{target_modules: [c_attn, nope]}", "peft.target_modules: 'nope' matches no module of model 'gpt2'"},
      {"{target_modules: [attn]}", "peft.target_modules: 'transformer.h.0.attn' is not a linear layer"},
      {"{target_modules: '.*\\.ln_1'}", "is not a linear layer"},
      {"{r: 0}", "peft.r"},
      {"{rank: 8}", "peft.rank: unknown key"},
      {"{init_lora_weights: pissa}", "not built in hftrain"},
      {"{modules_to_save: [classifier]}", "peft.modules_to_save: 'classifier' matches no module"},
  };
  for (const auto& [peft, message] : cases) {
    INFO(peft);
    write_text(dir + "/spec.yaml", lora_spec(peft, training));
    CliResult r = run_hftrain("train spec.yaml", dir);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(message));
  }
}

TEST_CASE("LoRA under ZeRO-3 on 2 workers follows one process, in fp32 and bf16, with the base partitioned",
          "[integration][peft][distributed]") {
  const std::string dir = with_base("peft_zero3");
  const std::string peft = "{r: 4, lora_alpha: 8, target_modules: [c_attn, c_proj], init_lora_weights: gaussian}";
  const std::string training = "{output_dir: one, max_steps: 4, learning_rate: 0.01, per_device_train_batch_size: 4, "
                               "gradient_accumulation_steps: 2, save_strategy: \"no\", logging_steps: 1}";
  write_text(dir + "/spec.yaml", lora_spec(peft, training));
  CliResult one = run_hftrain("train spec.yaml", dir);
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  const auto a = hftrain::load_safetensors(dir + "/one/adapter_model.safetensors").tensors;
  const int64_t base_elements = elements(hftrain::load_safetensors(dir + "/base/model.safetensors").tensors);
  // The same global batch (4 x 2 x 1 = 4 x 1 x 2) on two workers at stage 3. With the threshold at 20 elements
  // every base tensor but the biases is partitioned too, and gathered per block.
  const std::string two_workers = "train spec.yaml --nproc-per-node 2 --set zero.stage=3 --set training.gradient_accumulation_steps=1 "
                                  "--set zero.stage3_param_persistence_threshold=20 ";
  for (const std::string checkpointing : {"false", "true"}) {
    INFO("gradient checkpointing " << checkpointing);  // recomputation gathers and holds the base in backward too
    const std::string out = "two_" + checkpointing;
    CliResult two = run_hftrain(two_workers + "--set training.output_dir=" + out + " --set training.gradient_checkpointing=" + checkpointing, dir);
    INFO(two.output);
    REQUIRE(two.exit_code == 0);
    CHECK_THAT(two.output, Catch::Contains("1408 trainable elements"));
    CHECK_THAT(two.output, Catch::Contains("the adapters and the frozen base are partitioned"));
    const json report = engine_memory_report(two.output);
    REQUIRE(report.is_object());
    for (const json& rank : report["ranks"]) {  // about half the base each (fp32), far from the whole of it
      const int64_t frozen = rank["frozen_param_bytes"].get<int64_t>();
      CHECK(frozen > 4 * base_elements * 45 / 100);
      CHECK(frozen < 4 * base_elements * 55 / 100);
    }
    const auto b = hftrain::load_safetensors(dir + "/" + out + "/adapter_model.safetensors").tensors;
    check_same_adapter(a, b);
    // Evaluation after training runs through the gathered base as well: the same loss as one process.
    const double eval_one = json_number(dir + "/one/eval_results.json", "eval_loss");
    CHECK(std::abs(json_number(dir + "/" + out + "/eval_results.json", "eval_loss") - eval_one) <= 1e-4 * std::abs(eval_one));
  }
  // bf16: the base held in bfloat16 (and partitioned), fp32 masters of the adapters; the loss follows the fp32 run.
  CliResult bf16 = run_hftrain(two_workers + "--set training.output_dir=bf16 --set precision.bf16=true", dir);
  INFO(bf16.output);
  REQUIRE(bf16.exit_code == 0);
  const double loss_fp32 = json_number(dir + "/one/train_results.json", "train_loss");
  const double loss_bf16 = json_number(dir + "/bf16/train_results.json", "train_loss");
  CHECK(std::abs(loss_fp32 - loss_bf16) < 2e-2 * std::abs(loss_fp32));
  CHECK(hftrain::load_safetensors(dir + "/bf16/adapter_model.safetensors").tensors.size() == a.size());
}

TEST_CASE("an adapter checkpoint of 2 workers resumes on 1 and at ZeRO-2", "[integration][peft][distributed]") {
  const std::string dir = with_base("peft_universal");
  write_text(dir + "/spec.yaml",
             lora_spec("{r: 2, lora_alpha: 4, init_lora_weights: gaussian}",
                       "{output_dir: out, max_steps: 4, learning_rate: 0.01, per_device_train_batch_size: 4, save_steps: 2}"));
  CliResult two = run_hftrain("train spec.yaml --nproc-per-node 2", dir);
  INFO(two.output);
  REQUIRE(two.exit_code == 0);
  for (const std::string stage : {"0", "2"}) {
    INFO("resumed at stage " << stage);
    const std::string out = "one_stage" + stage;
    fs::create_directories(dir + "/" + out);
    fs::copy(dir + "/out/checkpoint-2", dir + "/" + out + "/checkpoint-2", fs::copy_options::recursive);
    // One worker with twice the batch: the same global batch of 8.
    CliResult one = run_hftrain("train spec.yaml --set training.output_dir=" + out + " --set zero.stage=" + stage +
                                    " --set training.per_device_train_batch_size=8 --resume " + out + "/checkpoint-2",
                                dir);
    INFO(one.output);
    REQUIRE(one.exit_code == 0);
    const auto a = hftrain::load_safetensors(dir + "/out/adapter_model.safetensors").tensors;
    const auto b = hftrain::load_safetensors(dir + "/" + out + "/adapter_model.safetensors").tensors;
    check_same_adapter(a, b);
  }
}

TEST_CASE("estimate counts a t5-base LoRA as PEFT does, from shapes alone", "[integration][peft][estimate]") {
  const std::string dir = fresh_dir("peft_estimate");
  // t5-base's shapes (HF config), no weights: PEFT's docstring figure for r = 8 on q, v is 884,736 trainable.
  write_text(dir + "/spec.yaml",
             "model: {type: t5, vocab_size: 32128, d_model: 768, d_kv: 64, d_ff: 3072, num_layers: 12, num_heads: 12, "
             "feed_forward_proj: relu}\n"
             "data: {type: digit_reversal_seq2seq}\n"
             "peft: {task_type: SEQ_2_SEQ_LM, r: 8, lora_alpha: 32, target_modules: [q, v]}\n"
             "training: {output_dir: out}\n");
  CliResult r = run_hftrain("estimate spec.yaml --memory-per-rank 24GiB", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // The base, from T5's shapes: the shared embedding; per encoder block 4 d^2 attention + 2 d d_ff + 2 norms;
  // per decoder block twice the attention and 3 norms; a relative bias table and a final norm per stack.
  const int64_t d = 768, ff = 3072, vocab = 32128, layers = 12;
  const int64_t encoder = layers * (4 * d * d + 2 * d * ff + 2 * d) + 32 * 12 + d;
  const int64_t decoder = layers * (8 * d * d + 2 * d * ff + 3 * d) + 32 * 12 + d;
  const int64_t base = vocab * d + encoder + decoder;
  CHECK(base == 222903552);  // HF's count for t5-base
  CHECK_THAT(r.output, Catch::Contains("trainable params: 884,736 || all params: 223,788,288 || trainable%: 0.3953"));
  CHECK_THAT(r.output, Catch::Contains("884,736 parameters in 144 tensors trained, 222,903,552 frozen"));
}

TEST_CASE("a llama fine-tuned with all-linear LoRA on jsonl keeps its best adapter, with gradient checkpointing",
          "[integration][peft]") {
  const std::string dir = fresh_dir("peft_llama");
  std::string rows, val;
  const char* words[] = {"the", "king", "shall", "speak", "of", "this", "night", "my", "lord"};
  for (int i = 0; i < 48; ++i) {
    std::string text;
    for (int w = 0; w < 6 + i % 5; ++w) text += std::string(w ? " " : "") + words[(i * 7 + w * 3) % 9];
    rows += json{{"text", text}}.dump() + "\n";
    if (i < 12) val += json{{"text", text}}.dump() + "\n";
  }
  write_text(dir + "/train.jsonl", rows);
  write_text(dir + "/val.jsonl", val);
  const std::string data = "data: {type: jsonl, train_file: train.jsonl, validation_file: val.jsonl, block_size: 32}\n";
  write_text(dir + "/make.yaml", "model: {type: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, "
                                 "num_attention_heads: 4, num_key_value_heads: 2}\n" + data +
                                     "training: {output_dir: base, max_steps: 2, save_strategy: \"no\"}\n");
  CliResult made = run_hftrain("train make.yaml", dir);
  INFO(made.output);
  REQUIRE(made.exit_code == 0);
  write_text(dir + "/spec.yaml", "model: {from_pretrained: base}\n" + data +
                                     "peft: {r: 4, lora_alpha: 8, target_modules: all-linear}\n"
                                     "training: {output_dir: out, max_steps: 6, learning_rate: 0.02, gradient_checkpointing: true, "
                                     "eval_strategy: steps, eval_steps: 2, save_steps: 2, load_best_model_at_end: true}\n");
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("peft: LoRA on 14 layers, base frozen"));  // 7 linear layers per block
  const json config = json::parse(read_text(dir + "/out/adapter_config.json"));
  CHECK(config["target_modules"].size() == 14);
  const json state = json::parse(read_text(dir + "/out/trainer_state.json"));
  const std::string best = state["best_model_checkpoint"].get<std::string>();
  CHECK_THAT(r.output, Catch::Contains("loading best model from " + best));
  CHECK(same_tensors(dir + "/" + best + "/adapter_model.safetensors", dir + "/out/adapter_model.safetensors"));
}

TEST_CASE("t5 and bart train PEFT's default targets", "[integration][peft]") {
  const std::string dir = fresh_dir("peft_families");
  const std::string seq2seq = "data: {type: digit_reversal_seq2seq, num_digits: 3, train_size: 32, eval_size: 8}\n";
  const std::string training = "training: {output_dir: %s, max_steps: 2, learning_rate: 0.01, save_strategy: \"no\"}\n";
  struct Case {
    std::string name, model, data, peft, expected_tensor;
    std::size_t tensors;
  };
  const std::vector<Case> cases = {
      // t5: q and v of 2 encoder self-attentions, 1 decoder self- and 1 cross-attention: 4 x 2 layers x (A, B)
      {"t5", "{type: t5, d_model: 32, d_kv: 8, d_ff: 64, num_layers: 2, num_decoder_layers: 1, num_heads: 4}", seq2seq,
       "{task_type: SEQ_2_SEQ_LM}", "base_model.model.decoder.block.0.layer.1.EncDecAttention.v.lora_B.weight", 16},
      // bart: q_proj and v_proj of 2 encoder, 1 decoder self- and 1 cross-attention
      {"bart", "{type: bart, d_model: 32, encoder_layers: 2, decoder_layers: 1, encoder_attention_heads: 4, "
               "decoder_attention_heads: 2, encoder_ffn_dim: 64, decoder_ffn_dim: 48, max_position_embeddings: 32, "
               "pad_token_id: 0, eos_token_id: 1, bos_token_id: 1, decoder_start_token_id: 1}",
       seq2seq, "{}", "base_model.model.model.decoder.layers.0.encoder_attn.q_proj.lora_A.weight", 16},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    char text[256];
    std::snprintf(text, sizeof text, training.c_str(), c.name.c_str());
    write_text(dir + "/" + c.name + ".yaml", "model: " + c.model + "\n" + c.data + "peft: " + c.peft + "\n" + text);
    CliResult r = run_hftrain("train " + c.name + ".yaml", dir);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto adapter = hftrain::load_safetensors(dir + "/" + c.name + "/adapter_model.safetensors").tensors;
    CHECK(adapter.size() == c.tensors);
    CHECK(adapter.count(c.expected_tensor));
  }
}

TEST_CASE("an adapter's optimizer state offloaded to NVMe gives bitwise the run without it", "[integration][peft][offload]") {
  const std::string dir = with_base("peft_nvme");
  fs::create_directories(dir + "/nvme");
  write_text(dir + "/spec.yaml", lora_spec("{r: 4, lora_alpha: 8, init_lora_weights: gaussian, target_modules: [c_attn, c_fc]}",
                                           "{output_dir: plain, max_steps: 3, learning_rate: 0.01, save_strategy: \"no\"}") +
                                     "zero: {stage: 1}\n");
  CliResult plain = run_hftrain("train spec.yaml", dir);
  INFO(plain.output);
  REQUIRE(plain.exit_code == 0);
  CliResult nvme = run_hftrain("train spec.yaml --set training.output_dir=nvme_run --set zero.offload_optimizer.device=nvme "
                               "--set zero.offload_optimizer.nvme_path=nvme",
                               dir);
  INFO(nvme.output);
  REQUIRE(nvme.exit_code == 0);
  CHECK(same_tensors(dir + "/plain/adapter_model.safetensors", dir + "/nvme_run/adapter_model.safetensors"));
}

TEST_CASE("a bert classifier trains LoRA with its head saved whole (task_type SEQ_CLS) and predicts", "[integration][peft]") {
  const std::string dir = fresh_dir("peft_bert");
  write_text(dir + "/train.csv", sentiment_csv(64, 0));
  write_text(dir + "/val.csv", sentiment_csv(16, 1));
  const std::string data = "data: {type: csv, train_file: train.csv, validation_file: val.csv, task: sequence_classification, "
                           "text_column: sentence, max_length: 32}\n";
  write_text(dir + "/make.yaml", "model: {type: bert, hidden_size: 16, num_hidden_layers: 2, num_attention_heads: 2, "
                                 "intermediate_size: 32}\n" + data + "training: {output_dir: base, max_steps: 2, save_strategy: \"no\"}\n");
  CliResult made = run_hftrain("train make.yaml", dir);
  INFO(made.output);
  REQUIRE(made.exit_code == 0);
  write_text(dir + "/spec.yaml", "model: {from_pretrained: base}\n" + data +
                                     "peft: {task_type: SEQ_CLS, r: 4, lora_alpha: 8, bias: lora_only}\n"
                                     "training: {output_dir: out, max_steps: 4, learning_rate: 0.01, save_strategy: \"no\"}\n");
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto adapter = hftrain::load_safetensors(dir + "/out/adapter_model.safetensors").tensors;
  // query and value of 2 layers (A, B, and their biases as base_layer.bias), and the classifier whole.
  CHECK(adapter.size() == 4 * 3 + 2);
  CHECK(adapter.count("base_model.model.bert.encoder.layer.1.attention.self.value.base_layer.bias"));
  CHECK(adapter.count("base_model.model.classifier.weight"));
  CHECK(adapter.count("base_model.model.classifier.bias"));
  CHECK(json::parse(read_text(dir + "/out/adapter_config.json"))["modules_to_save"] == json::array({"classifier"}));
  CliResult p = run_hftrain("predict out", dir);
  INFO(p.output);
  CHECK(p.exit_code == 0);
  CHECK(fs::exists(dir + "/out/predictions.jsonl"));
}

TEST_CASE("gpt2, llama, qwen3 and gemma2 LoRA runs on jsonl resume bitwise, and their checkpoints hold only the adapter's state",
          "[integration][peft][checkpoint]") {
  const std::string dir = fresh_dir("peft_jsonl_resume");
  std::string rows;
  const char* words[] = {"to", "be", "or", "not", "that", "is", "the", "question", "whether"};
  for (int i = 0; i < 40; ++i) {
    std::string text;
    for (int w = 0; w < 5 + i % 7; ++w) text += std::string(w ? " " : "") + words[(i * 5 + w * 2) % 9];
    rows += json{{"text", text}}.dump() + "\n";
  }
  write_text(dir + "/train.jsonl", rows);
  const std::string data = "data: {type: jsonl, train_file: train.jsonl, tokenizer: bytes, max_length: 48}\n";
  const std::vector<std::pair<std::string, std::string>> bases = {
      {"gpt2", "{type: gpt2, n_layer: 2, n_head: 2, n_embd: 32, n_positions: 64}"},
      {"llama", "{type: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, "
                "num_key_value_heads: 2, max_position_embeddings: 64}"},
      {"qwen3", "{type: qwen3, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, "
                "num_key_value_heads: 2, head_dim: 8, max_position_embeddings: 64}"},
      {"gemma2", "{type: gemma2, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, "
                 "num_key_value_heads: 2, head_dim: 8, query_pre_attn_scalar: 8, sliding_window: 16, "
                 "attn_logit_softcapping: 20.0, final_logit_softcapping: 10.0, max_position_embeddings: 64}"}};
  for (const auto& [family, model] : bases) {
    INFO(family);
    write_text(dir + "/make_" + family + ".yaml", "model: " + model + "\n" + data + "training: {output_dir: base_" + family +
                                                      ", max_steps: 2, save_strategy: \"no\", do_eval: false}\n");
    CliResult made = run_hftrain("train make_" + family + ".yaml", dir);
    INFO(made.output);
    REQUIRE(made.exit_code == 0);
    // Default targets (gpt2 c_attn, the others q_proj / v_proj), dropout on the adapters' input: the RNG state resumes too.
    write_text(dir + "/" + family + ".yaml", "model: {from_pretrained: base_" + family + "}\n" + data +
                                                 "peft: {r: 4, lora_alpha: 8, lora_dropout: 0.1}\n"
                                                 "training: {output_dir: out, max_steps: 6, learning_rate: 0.01, "
                                                 "per_device_train_batch_size: 4, save_steps: 3, do_eval: false}\n");
    const std::string full = family + "_full", resumed = family + "_resumed";
    CliResult a = run_hftrain("train " + family + ".yaml --set training.output_dir=" + full, dir);
    INFO(a.output);
    REQUIRE(a.exit_code == 0);
    fs::create_directories(dir + "/" + resumed);
    fs::copy(dir + "/" + full + "/checkpoint-3", dir + "/" + resumed + "/checkpoint-3", fs::copy_options::recursive);
    CliResult b = run_hftrain("train " + family + ".yaml --set training.output_dir=" + resumed + " --resume " + resumed +
                                  "/checkpoint-3",
                              dir);
    INFO(b.output);
    REQUIRE(b.exit_code == 0);
    CHECK(same_tensors(dir + "/" + full + "/adapter_model.safetensors", dir + "/" + resumed + "/adapter_model.safetensors"));
    CHECK(same_tensors(dir + "/" + full + "/checkpoint-6/optimizer.safetensors",
                       dir + "/" + resumed + "/checkpoint-6/optimizer.safetensors"));
    // A checkpoint: the adapter, its two Adam moments and small files; no copy of the frozen base.
    const std::string checkpoint = dir + "/" + full + "/checkpoint-3";
    CHECK_FALSE(fs::exists(checkpoint + "/model.safetensors"));
    const auto adapter_bytes = static_cast<int64_t>(fs::file_size(checkpoint + "/adapter_model.safetensors"));
    const auto base_bytes = static_cast<int64_t>(fs::file_size(dir + "/base_" + family + "/model.safetensors"));
    int64_t checkpoint_bytes = 0;
    for (const auto& entry : fs::recursive_directory_iterator(checkpoint))
      if (entry.is_regular_file()) checkpoint_bytes += static_cast<int64_t>(entry.file_size());
    INFO("checkpoint " << checkpoint_bytes << " bytes, adapter " << adapter_bytes << ", base " << base_bytes);
    CHECK(checkpoint_bytes < 3 * adapter_bytes + 64 * 1024);
    CHECK(checkpoint_bytes < base_bytes / 2);
  }
}
