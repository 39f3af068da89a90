// The recent TrainingArguments through the binary: include_num_input_tokens_seen's modes (counted over
// every worker, checked against the row lengths of the file), eval_on_start, and
// average_tokens_across_devices (the token-exact loss itself: tests/reference/token_loss_reference.py).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

using namespace hftrain_test;
using json = nlohmann::json;

namespace {

const std::vector<int> kRowLengths = {3, 19, 5, 24, 9, 2, 14, 11};

// A directory with rows.jsonl: rows of kRowLengths bytes (the bytes tokenizer gives one token per byte).
std::string data_dir(const std::string& name) {
  const std::string dir = fresh_dir(name);
  std::string rows;
  for (int n : kRowLengths) rows += "{\"text\": \"" + std::string(static_cast<std::size_t>(n), 'a' + n % 7) + "\"}\n";
  write_text(dir + "/rows.jsonl", rows);
  return dir;
}

std::string spec(const std::string& training) {
  return "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n"
         "data: {type: jsonl, train_file: rows.jsonl, validation_file: rows.jsonl, tokenizer: bytes}\n"
         "training:\n  output_dir: out\n  overwrite_output_dir: true\n  num_train_epochs: 1\n  learning_rate: 0.001\n  save_strategy: \"no\"\n"
         "  logging_steps: 1\n" + training;
}

json train(const std::string& dir, const std::string& training, const std::string& flags = "") {
  write_text(dir + "/spec.yaml", spec(training));
  CliResult r = run_hftrain("train spec.yaml " + flags, dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return json::parse(read_text(dir + "/out/trainer_state.json"));
}

int64_t total_row_tokens() {
  int64_t n = 0;
  for (int v : kRowLengths) n += v;
  return n;
}

}  // namespace

TEST_CASE("include_num_input_tokens_seen counts all or non-padding tokens over every worker", "[integration]") {
  const std::string dir = data_dir("tokens_seen");
  // non_padding: the attention mask's ones, i.e. every byte of every row once per epoch, whatever the split.
  json one = train(dir, "  per_device_train_batch_size: 4\n  include_num_input_tokens_seen: non_padding\n");
  CHECK(one["num_input_tokens_seen"] == total_row_tokens());
  CHECK(one["log_history"][0].contains("num_input_tokens_seen"));
  json two = train(dir, "  per_device_train_batch_size: 2\n  include_num_input_tokens_seen: non_padding\n",
                   "--nproc-per-node 2");
  CHECK(two["num_input_tokens_seen"] == total_row_tokens());
  // all (and true, as HF maps it): input_ids elements, padding included -- with one row per batch there is none.
  json unpadded = train(dir, "  per_device_train_batch_size: 1\n  include_num_input_tokens_seen: true\n");
  CHECK(unpadded["num_input_tokens_seen"] == total_row_tokens());
  json padded = train(dir, "  per_device_train_batch_size: 4\n  include_num_input_tokens_seen: all\n");
  CHECK(padded["num_input_tokens_seen"].get<int64_t>() > total_row_tokens());  // rows of different lengths pad
  // no / false: not tracked in the logs.
  json off = train(dir, "  per_device_train_batch_size: 4\n  include_num_input_tokens_seen: false\n");
  CHECK_FALSE(off["log_history"][0].contains("num_input_tokens_seen"));
  write_text(dir + "/spec.yaml", spec("  include_num_input_tokens_seen: some\n"));
  CliResult bad = run_hftrain("train spec.yaml", dir);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("training.include_num_input_tokens_seen"));
}

TEST_CASE("eval_on_start evaluates before the first step", "[integration]") {
  const std::string dir = data_dir("eval_on_start");
  json state = train(dir, "  per_device_train_batch_size: 4\n  eval_on_start: true\n");
  const json& first = state["log_history"][0];
  CHECK(first.contains("eval_loss"));
  CHECK(first["step"] == 0);
  json plain = train(dir, "  per_device_train_batch_size: 4\n");
  CHECK_FALSE(plain["log_history"][0].contains("eval_loss"));
}

TEST_CASE("average_tokens_across_devices false divides by each worker's own token count", "[integration]") {
  const std::string dir = data_dir("average_tokens");
  auto first_norm = [](const json& state) { return state["log_history"][0]["grad_norm"].get<double>(); };
  const std::string base = "  per_device_train_batch_size: 2\n  max_steps: 1\n";
  // One worker: the flag changes nothing. Two workers whose rows differ in length: the summed count (true,
  // HF's current default) and each worker's own count give different gradients.
  const double single_on = first_norm(train(dir, "  per_device_train_batch_size: 4\n  max_steps: 1\n"));
  const double single_off =
      first_norm(train(dir, "  per_device_train_batch_size: 4\n  max_steps: 1\n  average_tokens_across_devices: false\n"));
  CHECK(single_on == single_off);
  const double two_on = first_norm(train(dir, base, "--nproc-per-node 2"));
  const double two_off = first_norm(train(dir, base + "  average_tokens_across_devices: false\n", "--nproc-per-node 2"));
  CHECK(two_on == Approx(single_on).epsilon(1e-5));  // the token-exact rule: the split does not matter
  CHECK(std::abs(two_off - two_on) > 1e-4 * two_on);
}
