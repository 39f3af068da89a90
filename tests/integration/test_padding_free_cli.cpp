// Padding-free batches (training.padding_free) and the chunked language-model loss (training.chunked_lm_loss)
// through the binary: 10 steps of a packed run follow the padded run on variable-length jsonl (gpt2 and
// llama, with group_by_length; t5 and bart on source / target pairs), the chunked loss follows full logits
// (llama, label smoothing), and families or tasks that cannot pack are refused with the reason before
// anything is written.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>

#include "cli_runner.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The logged loss and grad_norm of every step.
std::vector<std::pair<double, double>> step_logs(const std::string& trainer_state) {
  std::vector<std::pair<double, double>> out;
  const json state = json::parse(read_text(trainer_state));  // alive while its entries are read
  for (const auto& e : state.at("log_history"))
    if (e.contains("loss") && e.contains("grad_norm")) out.emplace_back(e["loss"].get<double>(), e["grad_norm"].get<double>());
  return out;
}

void check_follows(const std::string& a, const std::string& b, double grad_tolerance) {
  const auto x = step_logs(a), y = step_logs(b);
  REQUIRE(x.size() == 10);
  REQUIRE(y.size() == x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(std::abs(x[i].first - y[i].first) <= 2e-4);  // HF rounds the logged loss to 4 decimals
    CHECK(std::abs(x[i].second - y[i].second) <= grad_tolerance * y[i].second);
  }
}

// Trains `name`.yaml padded and padding-free (10 steps each) and checks that the packed run follows.
void packed_follows_padded(const std::string& dir, const std::string& name) {
  CliResult padded = run_hftrain("train " + name + ".yaml --set training.output_dir=" + name + "_padded", dir);
  INFO(padded.output);
  REQUIRE(padded.exit_code == 0);
  CliResult packed = run_hftrain("train " + name + ".yaml --set training.output_dir=" + name + "_packed "
                                 "--set training.padding_free=true", dir);
  INFO(packed.output);
  REQUIRE(packed.exit_code == 0);
  check_follows(dir + "/" + name + "_packed/trainer_state.json", dir + "/" + name + "_padded/trainer_state.json", 1e-3);
}

}  // namespace

TEST_CASE("a padding-free run follows the padded run step by step", "[integration][padding_free]") {
  const std::string dir = fresh_dir("padding_free_follows");
  write_text(dir + "/train.jsonl", variable_rows(48));
  const std::vector<std::pair<std::string, std::string>> models = {
      {"gpt2", "{type: gpt2, n_layer: 2, n_head: 2, n_embd: 32, n_positions: 256, resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0}"},
      {"llama", "{type: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, "
                "num_key_value_heads: 2, max_position_embeddings: 256}"}};
  for (const auto& [name, model] : models) {
    INFO(name);
    write_text(dir + "/" + name + ".yaml",
               "model: " + model + "\ndata: {type: jsonl, train_file: train.jsonl, tokenizer: bytes, max_length: 256}\n"
               "training: {output_dir: out, max_steps: 10, per_device_train_batch_size: 4, gradient_accumulation_steps: 2, "
               "learning_rate: 0.003, logging_steps: 1, save_strategy: \"no\", do_eval: false, group_by_length: true, seed: 5}\n");
    packed_follows_padded(dir, name);
  }
}

TEST_CASE("the chunked language-model loss follows full logits through training", "[integration][padding_free]") {
  const std::string dir = fresh_dir("chunked_loss_follows");
  write_text(dir + "/train.jsonl", variable_rows(48));
  write_text(dir + "/spec.yaml",
             "model: {type: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, "
             "max_position_embeddings: 256, vocab_size: 300}\n"
             "data: {type: jsonl, train_file: train.jsonl, tokenizer: bytes, max_length: 256}\n"
             "training: {output_dir: out, max_steps: 10, per_device_train_batch_size: 4, learning_rate: 0.003, "
             "logging_steps: 1, save_strategy: \"no\", do_eval: false, label_smoothing_factor: 0.1, seed: 5, "
             "lm_loss_chunk_tokens: 64}\n");
  CliResult chunked = run_hftrain("train spec.yaml --set training.output_dir=chunked", dir);
  INFO(chunked.output);
  REQUIRE(chunked.exit_code == 0);
  CliResult full = run_hftrain("train spec.yaml --set training.output_dir=full --set training.chunked_lm_loss=false", dir);
  INFO(full.output);
  REQUIRE(full.exit_code == 0);
  check_follows(dir + "/chunked/trainer_state.json", dir + "/full/trainer_state.json", 1e-4);
}

TEST_CASE("a padding-free encoder-decoder run follows the padded run step by step (t5, bart)",
          "[integration][padding_free]") {
  const std::string dir = fresh_dir("padding_free_seq2seq");
  {  // sources of 3 to 40 words, targets of 1 to 12: the bytes tokenizer gives 15-250 and 4-70 tokens
    const char* words[] = {"the", "king", "shall", "not", "speak", "of", "this", "night", "my", "lord"};
    std::string rows;
    for (int i = 0; i < 48; ++i) {
      std::string source, target;
      for (int w = 0; w < 3 + (i * 17) % 38; ++w) source += std::string(words[(i + w * 3) % 10]) + " ";
      for (int w = 0; w < 1 + (i * 7) % 12; ++w) target += std::string(words[(i * 3 + w) % 10]) + " ";
      rows += "{\"src\": \"" + source + "\", \"tgt\": \"" + target + "\"}\n";
    }
    write_text(dir + "/pairs.jsonl", rows);
  }
  const std::vector<std::pair<std::string, std::string>> models = {
      {"t5", "{type: t5, d_model: 32, d_kv: 8, d_ff: 64, num_layers: 2, num_heads: 4, dropout_rate: 0}"},
      {"bart", "{type: bart, d_model: 32, encoder_layers: 2, decoder_layers: 2, encoder_attention_heads: 4, "
               "decoder_attention_heads: 4, encoder_ffn_dim: 64, decoder_ffn_dim: 64, max_position_embeddings: 256, "
               "dropout: 0}"}};
  for (const auto& [name, model] : models) {
    INFO(name);
    write_text(dir + "/" + name + ".yaml",
               "model: " + model + "\ndata: {type: jsonl, train_file: pairs.jsonl, task: seq2seq, source_column: src, "
               "target_column: tgt, tokenizer: bytes, max_source_length: 256, max_target_length: 80}\n"
               "training: {output_dir: out, max_steps: 10, per_device_train_batch_size: 4, gradient_accumulation_steps: 2, "
               "learning_rate: 0.003, logging_steps: 1, save_strategy: \"no\", do_eval: false, group_by_length: true, seed: 5}\n");
    packed_follows_padded(dir, name);
  }
}

TEST_CASE("padding_free is refused for a family or task that cannot pack, before anything is written",
          "[integration][padding_free]") {
  const std::string dir = fresh_dir("padding_free_refused");
  write_text(dir + "/spec.yaml",
             "model: {type: mlp, hidden_sizes: [16]}\n"
             "data: {type: gaussian_blobs, train_size: 64, eval_size: 16, test_size: 2}\n"
             "training: {output_dir: out, max_steps: 1, padding_free: true}\n");
  CliResult r = run_hftrain("train spec.yaml", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("training.padding_free:") && Catch::Contains("is neither task"));
  CHECK_FALSE(fs::exists(dir + "/out"));
}
