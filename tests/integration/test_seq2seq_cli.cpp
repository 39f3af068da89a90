// Seq2Seq through the real binary: a t5 trained on jsonl translation files (source / target columns,
// a source prefix, max lengths, sortish sampling) with predict_with_generate, so that evaluation generates
// and bleu / rouge / exact_match score the decoded text; `hftrain eval --num-beams --max-length` and
// `hftrain predict` as HF's evaluate() / predict() with generation arguments; the example config
// configs/t5_translation.yaml reaching its documented score (training on the built-in seq2seq task, then
// predicting by generation); a t5 trained on 2 workers at ZeRO stage 2
// following the one-process run, and ZeRO-3 evaluation generating what one process generates.
#include <catch2/catch.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>

#include <fstream>
#include <random>

#include "cli_runner.h"
#include "test_dist_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::vector<std::string> kEnglish = {"one", "two", "three", "four", "five", "six", "seven", "eight"};
const std::vector<std::string> kGerman = {"eins", "zwei", "drei", "vier", "fuenf", "sechs", "sieben", "acht"};

// A WordLevel tokenizer.json over the words, split on whitespace, with T5's specials (<pad> 0, </s> 1,
// <unk> 2) and a post-processor that appends </s> as T5's tokenizer does.
void write_word_tokenizer(const std::string& dir) {
  std::string vocab = R"("<pad>": 0, "</s>": 1, "<unk>": 2, "translate": 3)";
  int id = 4;
  for (const auto* words : {&kEnglish, &kGerman})
    for (const auto& w : *words) vocab += ", \"" + w + "\": " + std::to_string(id++);
  std::string added;
  const char* specials[] = {"<pad>", "</s>", "<unk>"};
  for (int i = 0; i < 3; ++i)
    added += std::string(i ? ", " : "") + "{\"id\": " + std::to_string(i) + ", \"content\": \"" + specials[i] +
             "\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}";
  fs::create_directories(dir + "/tok");
  write_text(dir + "/tok/tokenizer.json", R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [)" + added + R"(],
  "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
    "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}},
  "decoder": null,
  "model": {"type": "WordLevel", "unk_token": "<unk>", "vocab": {)" + vocab + "}}}");
}

// `rows` sentences of 2-5 words with their word-by-word translation, as jsonl {"en", "de"}; with
// `drop_targets`, only {"en"} (a test file without references).
void write_translation_rows(const std::string& path, int rows, unsigned seed, bool drop_targets = false) {
  std::mt19937 gen(seed);
  std::ofstream out(path);
  for (int r = 0; r < rows; ++r) {
    const int n = 2 + static_cast<int>(gen() % 4);
    std::string en, de;
    for (int w = 0; w < n; ++w) {
      const auto k = gen() % kEnglish.size();
      en += (w ? " " : "") + kEnglish[k];
      de += (w ? " " : "") + kGerman[k];
    }
    json row = {{"en", en}};
    if (!drop_targets) row["de"] = de;
    out << row.dump() << "\n";
  }
}

}  // namespace

TEST_CASE("t5 on seq2seq jsonl files with predict_with_generate: eval and predict generate and score the text", "[integration][seq2seq]") {
  const std::string dir = fresh_dir("seq2seq_files");
  write_word_tokenizer(dir);
  write_translation_rows(dir + "/train.jsonl", 600, 1);
  write_translation_rows(dir + "/valid.jsonl", 24, 2);
  write_translation_rows(dir + "/test.jsonl", 8, 3);
  write_translation_rows(dir + "/unlabelled.jsonl", 3, 4, /*drop_targets=*/true);
  write_text(dir + "/spec.yaml",
             "model: {type: t5, d_model: 48, d_ff: 96, d_kv: 12, num_layers: 2, num_heads: 4, dropout_rate: 0.0}\n"
             "data: {type: jsonl, train_file: train.jsonl, validation_file: valid.jsonl, test_file: test.jsonl, "
             "task: seq2seq, source_column: en, target_column: de, source_prefix: 'translate ', max_source_length: 8, "
             "max_target_length: 7, tokenizer: tok/tokenizer.json, cache_dir: cache}\n"
             "metrics: [bleu, rouge, exact_match]\n"
             "training: {output_dir: out, per_device_train_batch_size: 16, max_steps: 600, learning_rate: 0.005, "
             "warmup_steps: 10, logging_steps: 100, eval_strategy: steps, eval_steps: 600, save_strategy: \"no\", "
             "predict_with_generate: true, generation_max_length: 8, sortish_sampler: true, report_to: none}\n");
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json eval = read_json(dir + "/out/eval_results.json");
  for (const char* key : {"eval_bleu", "eval_rouge1", "eval_rouge2", "eval_rougeL", "eval_rougeLsum", "eval_exact_match", "eval_gen_len"})
    REQUIRE(eval.contains(key));
  // A word-by-word translation is learned: BLEU on the 0-100 scale, ROUGE and exact match on 0-1.
  CHECK(eval["eval_bleu"].get<double>() > 50);
  CHECK(eval["eval_bleu"].get<double>() <= 100);
  CHECK(eval["eval_rouge1"].get<double>() > 0.7);
  CHECK(eval["eval_rouge1"].get<double>() <= 1.0);
  // max_source_length 8 keeps 'translate' + up to 5 words + </s>; targets are 2-5 words + </s>; the decoder
  // start token is <pad>, which gen_len does not count, so gen_len lies in [3, 7] (max_length 8 - 1).
  CHECK(eval["eval_gen_len"].get<double>() >= 3);
  CHECK(eval["eval_gen_len"].get<double>() <= 7);

  // eval --max-length 3 --num-beams 2 (HF evaluate(max_length=3, num_beams=2)): at most 2 generated tokens.
  r = run_hftrain("eval out --max-length 3 --num-beams 2 --metric-key-prefix short", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json short_eval = read_json(dir + "/out/short_results.json");
  CHECK(short_eval["short_gen_len"].get<double>() <= 2.0);
  CHECK(short_eval["short_bleu"].get<double>() < eval["eval_bleu"].get<double>());
  CHECK(short_eval["short_loss"] == eval["eval_loss"]);  // the loss does not depend on generation

  // The run directory keeps the spec's own generation keys only, so a training setting given at eval time
  // resolves again (HF evaluate() after changing Seq2SeqTrainingArguments).
  r = run_hftrain("eval out --set training.generation_max_length=3 --metric-key-prefix g3", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(read_json(dir + "/out/g3_results.json")["g3_gen_len"].get<double>() <= 2.0);
  // Generation flags would change nothing without predict_with_generate.
  r = run_hftrain("eval out --num-beams 2 --set training.predict_with_generate=false", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("apply when evaluation generates"));

  // predict: source (with the prefix, no special tokens), prediction and reference per row; the test
  // metrics score exactly the predictions written (greedy, as evaluation).
  r = run_hftrain("predict out", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::ifstream lines(dir + "/out/predictions.jsonl");
  int rows = 0, exact = 0;
  for (std::string line; std::getline(lines, line); ++rows) {
    const json row = json::parse(line);
    const std::string source = row.at("source");
    CHECK(source.rfind("translate ", 0) == 0);
    CHECK(source.find("</s>") == std::string::npos);
    // generation stopped at </s>: nothing after it, and a row without it ran to the limit (8 - 1 new tokens)
    const std::vector<int64_t> ids = row.at("prediction_ids").get<std::vector<int64_t>>();
    const auto eos = std::find(ids.begin(), ids.end(), 1);
    CHECK((eos == ids.end() ? ids.size() == 7 : eos + 1 == ids.end()));
    exact += row.at("prediction") == row.at("reference");
  }
  CHECK(rows == 8);
  const json test = read_json(dir + "/out/test_results.json");
  CHECK(test.at("test_exact_match").get<double>() == Approx(exact / 8.0));

  // A test file without targets: predictions only, no scores (the memory metrics remain).
  r = run_hftrain("predict out --set data.test_file=unlabelled.jsonl", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::ifstream unlabelled(dir + "/out/predictions.jsonl");
  rows = 0;
  for (std::string line; std::getline(unlabelled, line); ++rows) CHECK_FALSE(json::parse(line).contains("reference"));
  CHECK(rows == 3);
  const json unscored = read_json(dir + "/out/test_results.json");
  CHECK_FALSE(unscored.contains("test_loss"));
  CHECK_FALSE(unscored.contains("test_exact_match"));

  // A generation_config.json setting generation does not build: training goes on (noted), generating refuses.
  write_text(dir + "/gen.json", R"({"num_beams": 2, "repetition_penalty": 1.3})");
  r = run_hftrain("predict out --set training.generation_config=gen.json", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("gen.json: repetition_penalty: 1.3") && Catch::Contains("cannot generate"));
  write_text(dir + "/start.json", R"({"decoder_start_token_id": 5})");
  r = run_hftrain("predict out --set training.generation_config=start.json", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("start.json: decoder_start_token_id 5 differs from the model's 0"));
  r = run_hftrain("train spec.yaml --set training.generation_config=gen.json --set training.max_steps=2 "
                  "--set training.output_dir=refused", dir);
  CHECK(r.exit_code == 2);  // evaluation would generate: refused before training
  CHECK_THAT(r.output, Catch::Contains("cannot generate"));
  CHECK_FALSE(fs::exists(dir + "/refused/model.safetensors"));
  r = run_hftrain("train spec.yaml --set training.generation_config=gen.json --set training.max_steps=2 "
                  "--set training.predict_with_generate=false --set metrics=[exact_match] --set training.output_dir=short", dir);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("repetition_penalty") && Catch::Contains("training without generating is not affected"));
  fs::remove_all(dir);
}

TEST_CASE("seq2seq data needs an encoder-decoder model, and text metrics predict_with_generate and a tokenizer", "[integration][seq2seq]") {
  const std::string dir = fresh_dir("seq2seq_metric_errors");
  write_text(dir + "/spec.yaml",
             "model: {type: t5, d_model: 16, d_ff: 32, d_kv: 4, num_layers: 1, num_heads: 2}\n"
             "data: {type: digit_reversal_seq2seq, num_digits: 3, train_size: 16, eval_size: 4}\n"
             "metrics: [rouge]\ntraining: {output_dir: never, max_steps: 1}\n");
  CliResult r = run_hftrain("train spec.yaml", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("'rouge' scores generated text") && Catch::Contains("predict_with_generate"));
  CHECK_FALSE(fs::exists(dir + "/never"));
  r = run_hftrain("train spec.yaml --set 'metrics=[{type: rouge, rouge_types: [rougeX]}]' --set training.predict_with_generate=true", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("unknown ROUGE type 'rougeX'"));
  // Decoded text needs a tokenizer: pre-tokenized token files have none.
  {
    std::ofstream bin(dir + "/train.bin", std::ios::binary);
    for (uint16_t t = 0; t < 256; ++t) {
      const uint16_t v = t % 16;
      bin.write(reinterpret_cast<const char*>(&v), 2);
    }
  }
  write_text(dir + "/tokens.yaml", "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n"
                                   "data: {type: token_files, train_file: train.bin, validation_file: train.bin, vocab_size: 16, block_size: 8}\n"
                                   "metrics: [exact_match, bleu]\ntraining: {output_dir: never, max_steps: 1, predict_with_generate: true}\n");
  r = run_hftrain("train tokens.yaml", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("'bleu' scores decoded text") && Catch::Contains("no tokenizer"));
  CHECK_FALSE(fs::exists(dir + "/never"));
  // A seq2seq task needs an encoder-decoder model.
  write_text(dir + "/gpt.yaml", "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n"
                                "data: {type: digit_reversal_seq2seq, num_digits: 4, train_size: 8}\n"
                                "training: {output_dir: never, max_steps: 1}\n");
  r = run_hftrain("train gpt.yaml", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("sequence-to-sequence task") && Catch::Contains("needs an encoder-decoder model"));
  CHECK_FALSE(fs::exists(dir + "/never"));
  fs::remove_all(dir);
}

TEST_CASE("configs/t5_translation.yaml reaches eval exact match of at least 0.9, scored on generated text", "[integration][seq2seq][slow]") {
  const std::string dir = fresh_dir("seq2seq_config");
  CliResult r = run_hftrain(std::string("train '") + HFTRAIN_SOURCE_DIR + "/configs/t5_translation.yaml' --set training.output_dir=out", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json eval = read_json(dir + "/out/eval_results.json");
  CHECK(eval.at("eval_exact_match").get<double>() >= 0.9);
  CHECK(eval.at("eval_gen_len").get<double>() == Approx(7.0).margin(0.5));  // 6 digits + eos
  r = run_hftrain("predict out", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::ifstream lines(dir + "/out/predictions.jsonl");
  int rows = 0, right = 0;
  for (std::string line; std::getline(lines, line); ++rows) {
    const json row = json::parse(line);
    const std::string source = row.at("source");  // decoded without the eos '$'
    CHECK(row.at("reference").get<std::string>() == std::string(source.rbegin(), source.rend()));
    right += row.at("prediction") == row.at("reference");
  }
  CHECK(rows == 16);
  CHECK(right >= 14);
  fs::remove_all(dir);
}

TEST_CASE("t5 on 2 workers at ZeRO stage 2 follows the one-process run, and ZeRO-3 evaluation generates the same", "[integration][seq2seq][dist]") {
  const std::string dir = dist_dir("seq2seq_dist");
  write_text(dir + "/spec.yaml",
             "model: {type: t5, d_model: 32, d_ff: 64, d_kv: 8, num_layers: 2, num_decoder_layers: 1, num_heads: 4, "
             "dropout_rate: 0.0}\n"
             "data: {type: digit_reversal_seq2seq, num_digits: 3, train_size: 256, eval_size: 16, test_size: 4}\n"
             "metrics: [exact_match]\n"
             "training: {output_dir: ref, per_device_train_batch_size: 8, max_steps: 12, learning_rate: 0.003, "
             "max_grad_norm: 1.0, logging_steps: 1, eval_strategy: steps, eval_steps: 12, save_strategy: \"no\", "
             "predict_with_generate: true, generation_num_beams: 2}\n");
  CliResult ref = run_hftrain("train spec.yaml", dir);
  INFO(ref.output);
  REQUIRE(ref.exit_code == 0);
  const auto expected = train_logs(dir + "/ref/trainer_state.json");
  REQUIRE(expected.size() == 12);
  const json ref_eval = read_json(dir + "/ref/eval_results.json");
  for (int stage : {2, 3}) {
    const std::string out = "s" + std::to_string(stage);
    CliResult r = run_hftrain("train spec.yaml --nproc-per-node 2 --set zero.stage=" + std::to_string(stage) +
                                  " --set training.per_device_train_batch_size=4 --set training.output_dir=" + out,
                              dir);
    INFO("stage " << stage << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    const auto got = train_logs(dir + "/" + out + "/trainer_state.json");
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("step " << got[i]["step"]);
      const double want_loss = expected[i]["loss"], loss = got[i]["loss"];
      CHECK(std::abs(loss - want_loss) <= 5e-5 + 1e-5 * std::abs(want_loss));  // logged to 4 decimals
      const double want_norm = expected[i]["grad_norm"], norm = got[i]["grad_norm"];
      CHECK(std::abs(norm - want_norm) <= 1e-5 * std::abs(want_norm));
    }
    // Evaluation generated with beam search and agrees: at stage 2 each rank generated half of the examples
    // (gathered in order), at ZeRO-3 every rank generated all of them (each generation step gathers the units).
    if (stage == 2)
      CHECK_THAT(r.output, Catch::Contains("eval: generation split over 2 workers (this rank generated 8 of 16 examples)"));
    else
      CHECK_THAT(r.output, !Catch::Contains("generation split over"));
    const json eval = read_json(dir + "/" + out + "/eval_results.json");
    CHECK(eval.at("eval_loss").get<double>() == Approx(ref_eval.at("eval_loss").get<double>()).epsilon(1e-4));
    CHECK(eval.at("eval_exact_match") == ref_eval.at("eval_exact_match"));
    CHECK(eval.at("eval_gen_len") == ref_eval.at("eval_gen_len"));
  }
  fs::remove_all(dir);
}
