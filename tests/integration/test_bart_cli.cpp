// The bart family through the real binary: a tiny bart trains on the built-in seq2seq task
// (digit_reversal_seq2seq, whose tokenizer has pad 0 / eos 1, so the model options set BART's ids to
// those), writes an HF directory (config.json model_type bart, the embedding once, final_logits_bias),
// continues from it with model.from_pretrained and no type at ZeRO stage 3 with gradient checkpointing,
// and `hftrain predict` generates (greedy and beam search) from the encoded sources.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "checkpoint/safetensors.h"
#include "cli_runner.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string bart_spec(const std::string& model, const std::string& output_dir, const std::string& extra = "") {
  return "model: " + model + "\n" +
         "data: {type: digit_reversal_seq2seq, num_digits: 3, train_size: 256, eval_size: 16, test_size: 4}\n"
         "training: {output_dir: " + output_dir + ", per_device_train_batch_size: 16, max_steps: 16, logging_steps: 1, "
         "learning_rate: 0.03, save_strategy: \"no\"" + extra + "}\n";
}


}  // namespace

TEST_CASE("bart trains on the seq2seq task into an HF directory, continues from it and predicts", "[integration][bart]") {
  const std::string dir = fresh_dir("bart_train");
  const std::string model = "{type: bart, d_model: 32, encoder_layers: 2, decoder_layers: 1, encoder_attention_heads: 4, "
                            "decoder_attention_heads: 2, encoder_ffn_dim: 64, decoder_ffn_dim: 48, max_position_embeddings: 32, "
                            "dropout: 0.0, pad_token_id: 0, eos_token_id: 1, bos_token_id: 1, decoder_start_token_id: 1, "
                            "forced_eos_token_id: 1}";
  write_text(dir + "/spec.yaml", bart_spec(model, "out"));
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json config = json::parse(read_text(dir + "/out/config.json"));
  CHECK(config["model_type"] == "bart");
  CHECK(config["architectures"] == json::array({"BartForConditionalGeneration"}));
  CHECK(config["decoder_layers"] == 1);
  CHECK(config["decoder_start_token_id"] == 1);
  const auto file = hftrain::load_safetensors(dir + "/out/model.safetensors").tensors;
  CHECK(file.count("model.shared.weight"));
  CHECK(file.count("final_logits_bias"));
  CHECK_FALSE(file.count("model.encoder.embed_tokens.weight"));
  CHECK_FALSE(file.count("lm_head.weight"));
  const auto first = logged_losses(dir + "/out/trainer_state.json");
  REQUIRE(first.size() == 16u);
  CHECK(first.back() < 0.8 * first.front());

  // Continue from the directory (type from config.json) at ZeRO stage 3 with gradient checkpointing.
  write_text(dir + "/more.yaml", bart_spec("{from_pretrained: out}", "more", ", gradient_checkpointing: true") +
                                     "zero: {stage: 3}\n");
  CliResult more = run_hftrain("train more.yaml", dir);
  INFO(more.output);
  REQUIRE(more.exit_code == 0);
  const auto second = logged_losses(dir + "/more/trainer_state.json");
  REQUIRE(second.size() == 16u);
  CHECK(second.front() < first.front());  // it starts from the trained weights
  CHECK(json::parse(read_text(dir + "/more/config.json"))["model_type"] == "bart");

  // predict generates: the encoder reads each source, the decoder starts from decoder_start_token_id.
  for (const char* generation : {"{max_new_tokens: 5}", "{max_new_tokens: 5, num_beams: 3}"}) {
    INFO(generation);
    write_text(dir + "/predict.yaml", bart_spec("{from_pretrained: more}", "more") + "generation: " + generation + "\n");
    CliResult p = run_hftrain("predict predict.yaml", dir);
    INFO(p.output);
    REQUIRE(p.exit_code == 0);
    std::ifstream in(dir + "/more/predictions.jsonl");
    int lines = 0;
    for (std::string line; std::getline(in, line); ++lines) {
      const json j = json::parse(line);
      REQUIRE(j.contains("prediction_ids"));  // seq2seq data: source, prediction, reference
      CHECK(j["prediction_ids"].size() >= 1u);
      CHECK(j["prediction_ids"].size() <= 5u);
      CHECK(j.contains("source"));
      CHECK(j.contains("reference"));
    }
    CHECK(lines == 4);
  }
  fs::remove_all(dir);
}
