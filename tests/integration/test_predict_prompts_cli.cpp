// `hftrain predict --prompts` and where eval / predict write, through the real binary, on a tiny gpt2
// trained with the bytes tokenizer: one prediction per prompt with the prompt verbatim (txt and jsonl, no
// data file needed), data.max_predict_samples, SIGINT leaving no complete-looking predictions.jsonl, progress
// lines in a pipe, --set training.output_dir leaving the run directory byte-identical, --model of a
// checkpoint writing beside the run's own results, and test_runtime covering generation.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <fcntl.h>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_runner.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string corpus(int rows) {
  const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far"};
  std::string text;
  for (int r = 0; r < rows; ++r) {
    std::string line;
    for (int w = 0; w < 4 + r % 5; ++w) line += std::string(w ? " " : "") + words[(r * 3 + w) % 10];
    text += "{\"text\": \"" + line + ".\"}\n";
  }
  return text;
}

// A tiny gpt2 (bytes tokenizer, n_positions 64) trained for 4 steps into DIR/run, checkpoint-2 kept.
void train_tiny_run(const std::string& dir, int n_embd = 16) {
  write_text(dir + "/train.jsonl", corpus(80));
  write_text(dir + "/val.jsonl", corpus(12));
  write_text(dir + "/spec.yaml", "model: {type: gpt2, n_layer: 1, n_head: 2, n_embd: " + std::to_string(n_embd) +
                                     ", n_positions: 64}\n"
                                     "data: {type: jsonl, train_file: train.jsonl, validation_file: val.jsonl, "
                                     "block_size: 32, cache_dir: cache}\n"
                                     "training: {output_dir: run, per_device_train_batch_size: 4, max_steps: 4, "
                                     "learning_rate: 0.003, save_strategy: steps, save_steps: 2, report_to: none}\n");
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

// Every file under `dir` (relative path -> bytes).
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = read_bytes(e.path().string());
  return files;
}

}  // namespace

TEST_CASE("predict --prompts continues each prompt of a txt or jsonl file, verbatim, without the data files",
          "[integration][predict]") {
  const std::string dir = fresh_dir("predict_prompts");
  train_tiny_run(dir);
  // The data files are gone: predicting for prompts needs only the tokenizer and the model.
  fs::remove(dir + "/train.jsonl");
  fs::remove(dir + "/val.jsonl");
  const std::vector<std::string> prompts = {"ROMEO: ", "  two leading spaces", "caf\xc3\xa9 \"quoted\"", "tab\there"};
  std::string txt;
  for (const auto& p : prompts) txt += p + "\n\n";  // blank lines are no prompts
  write_text(dir + "/prompts.txt", txt);
  std::string jsonl;
  for (const auto& p : prompts) jsonl += json{{"text", p}, {"q", "Q:" + p}}.dump() + "\n";
  write_text(dir + "/prompts.jsonl", jsonl);

  for (const std::string& args : {std::string("--prompts prompts.txt --set training.output_dir=txt"),
                                  std::string("--prompts prompts.jsonl --set training.output_dir=jsonl"),
                                  std::string("--prompts prompts.jsonl --prompt-column q --set training.output_dir=q")}) {
    INFO(args);
    CliResult r = run_hftrain("predict run " + args + " --max-new-tokens 5", dir);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const std::string out = dir + "/" + args.substr(args.rfind('=') + 1);
    const auto rows = read_jsonl(out + "/predictions.jsonl");
    REQUIRE(rows.size() == prompts.size());
    const bool column_q = args.find("--prompt-column q") != std::string::npos;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      CHECK(rows[i].at("prompt") == (column_q ? "Q:" : "") + prompts[i]);
      CHECK(rows[i].at("generated_ids").size() >= 1u);
      CHECK(rows[i].at("generated_ids").size() <= 5u);
      CHECK_FALSE(rows[i].contains("prompt_tokens_dropped"));
    }
    CHECK_FALSE(fs::exists(out + "/predictions.jsonl.partial"));
    // HF's speed metrics, saved as test_results.json
    const json test = json::parse(read_text(out + "/test_results.json"));
    CHECK(test.at("test_runtime").get<double>() > 0);
    CHECK(test.at("test_gen_tokens_per_second").get<double>() > 0);
    // Progress lines in a pipe: at the start and at the end of the loop.
    CHECK_THAT(r.output, Catch::Contains("predict 0/4 (0%)") && Catch::Contains("predict 4/4 (100%)"));
    CHECK_THAT(r.output, Catch::Contains("train.jsonl' does not exist; this command reads no split"));
  }
  // The same prompt gives the same continuation from either file.
  CHECK(read_jsonl(dir + "/txt/predictions.jsonl") == read_jsonl(dir + "/jsonl/predictions.jsonl"));

  // data.max_predict_samples bounds the predictions (HF max_predict_samples).
  CliResult r = run_hftrain("predict run --prompts prompts.txt --set data.max_predict_samples=2 --set training.output_dir=two", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto two = read_jsonl(dir + "/two/predictions.jsonl");
  REQUIRE(two.size() == 2u);
  CHECK(two[1].at("prompt") == prompts[1]);

  // A prompt longer than the context: its last 64 - 5 tokens (bytes) are continued; the line says how many were left out.
  const std::string long_prompt(100, 'a');
  write_text(dir + "/long.txt", long_prompt + "\n");
  r = run_hftrain("predict run --prompts long.txt --max-new-tokens 5 --set training.output_dir=long", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto long_rows = read_jsonl(dir + "/long/predictions.jsonl");
  REQUIRE(long_rows.size() == 1u);
  CHECK(long_rows[0].at("prompt") == long_prompt);
  CHECK(long_rows[0].at("prompt_tokens_dropped") == 100 - (64 - 5));
  CHECK(long_rows[0].at("generated_ids").size() <= 5u);

  // Bad prompt files: exit 2 naming file and line.
  write_text(dir + "/bad.jsonl", "{\"text\": \"ok\"}\n{\"other\": \"x\"}\n");
  r = run_hftrain("predict run --prompts bad.jsonl --set training.output_dir=bad", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("bad.jsonl:2: no field 'text'"));
  CHECK_FALSE(fs::exists(dir + "/bad"));
  // Without --prompts the test split is needed, and its file is gone: a clear error.
  r = run_hftrain("predict run --set training.output_dir=split", dir);
  CHECK(r.exit_code == 2);
  fs::remove_all(dir);
}

TEST_CASE("eval and predict write only where training.output_dir says, and --model of a checkpoint keeps the run's results",
          "[integration][predict]") {
  const std::string dir = fresh_dir("predict_output_dir");
  train_tiny_run(dir);
  CliResult r = run_hftrain("eval run", dir);  // the run's own eval_results.json / all_results.json
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("results go to run (the run directory)"));
  CHECK_THAT(r.output, Catch::Contains("eval 0/") && Catch::Contains("(100%)"));
  const auto before = snapshot(dir + "/run");
  REQUIRE(before.count("eval_results.json"));
  REQUIRE(before.count("checkpoint-2/model.safetensors"));

  write_text(dir + "/prompts.txt", "the cat\nand dog\n");
  for (const std::string& cmd : {std::string("eval run --set training.output_dir=elsewhere/e"),
                                 std::string("predict run --set training.output_dir=elsewhere/p"),
                                 std::string("predict run --prompts prompts.txt --set training.output_dir=elsewhere/q")}) {
    r = run_hftrain(cmd, dir);
    INFO(cmd << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("results go to elsewhere/"));
  }
  CHECK(fs::exists(dir + "/elsewhere/e/eval_results.json"));
  CHECK(fs::exists(dir + "/elsewhere/e/all_results.json"));
  CHECK(fs::exists(dir + "/elsewhere/p/predictions.jsonl"));
  CHECK(fs::exists(dir + "/elsewhere/p/test_results.json"));
  CHECK(fs::exists(dir + "/elsewhere/q/predictions.jsonl"));
  CHECK(snapshot(dir + "/run") == before);

  // --model names another model than the run's: its results go to run/results-checkpoint-2.
  for (const char* cmd : {"eval run --model run/checkpoint-2", "predict run --model run/checkpoint-2"}) {
    r = run_hftrain(cmd, dir);
    INFO(cmd << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("results go to run/results-checkpoint-2"));
  }
  auto after = snapshot(dir + "/run");
  for (const char* file : {"eval_results.json", "all_results.json", "model.safetensors", "checkpoint-2/model.safetensors"})
    CHECK(after.at(file) == before.at(file));
  for (const auto& [name, bytes] : before) CHECK(after.count(name) == 1);
  const json own = json::parse(before.at("eval_results.json"));
  const json other = json::parse(after.at("results-checkpoint-2/eval_results.json"));
  CHECK(own.at("eval_loss") != other.at("eval_loss"));  // step 4's model and step 2's differ
  CHECK(after.count("results-checkpoint-2/predictions.jsonl") == 1);
  fs::remove_all(dir);
}

TEST_CASE("SIGINT during predict leaves predictions.jsonl.partial, never predictions.jsonl, and exits 130",
          "[integration][predict]") {
  const std::string dir = fresh_dir("predict_sigint");
  train_tiny_run(dir);
  std::string prompts;
  for (int i = 0; i < 3000; ++i) prompts += "the cat " + std::to_string(i) + "\n";
  write_text(dir + "/prompts.txt", prompts);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(99);
    const int fd = ::open("log.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(HFTRAIN_BINARY, HFTRAIN_BINARY, "predict", "run", "--prompts", "prompts.txt", "--max-new-tokens", "50",
          "--set", "training.output_dir=out", static_cast<char*>(nullptr));
    _exit(98);
  }
  // Wait until predictions are being written, then interrupt.
  const std::string partial = dir + "/out/predictions.jsonl.partial";
  for (int i = 0; i < 1200 && !(fs::exists(partial) && fs::file_size(partial) > 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(fs::exists(partial));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string log = read_text(dir + "/log.txt");
  INFO(log);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK_FALSE(fs::exists(dir + "/out/predictions.jsonl"));
  CHECK_FALSE(fs::exists(dir + "/out/test_results.json"));
  const auto rows = read_jsonl(partial);  // whole lines only
  CHECK(rows.size() >= 1u);
  CHECK(rows.size() < 3000u);
  CHECK_THAT(log, Catch::Contains("predict stopped by SIGINT after " + std::to_string(rows.size()) + " of 3000 predictions") &&
                      Catch::Contains("predictions.jsonl.partial"));
  fs::remove_all(dir);
}

TEST_CASE("predict's test_runtime covers generation", "[integration][predict]") {
  // No clock is read here: HFTRAIN_FAULT_INJECT=generate_delay_ms sleeps inside every generation batch, so a
  // test_runtime that covers generation is at least the sleeps' sum, and one that times the loss pass alone
  // (as before generation was timed) is not, however fast or slow the machine.
  const std::string dir = fresh_dir("predict_runtime");
  train_tiny_run(dir);
  write_text(dir + "/four.txt", "the cat\nthe dog\nthe cow\nthe hen\n");
  const CliResult r = run_shell("cd '" + dir + "' && HFTRAIN_FAULT_INJECT=generate_delay_ms:400 '" + HFTRAIN_BINARY +
                                "' predict run --prompts four.txt --max-new-tokens 3 "
                                "--set training.per_device_eval_batch_size=1 --set training.output_dir=out 2>&1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto test = json::parse(read_text(dir + "/out/test_results.json"));
  INFO(test.dump());
  CHECK(test.at("test_runtime").get<double>() >= 4 * 0.4);  // four batches of one prompt
  // Tokens per second of generation count the generating time, the sleeps included: 12 tokens over >= 1.6 s.
  CHECK(test.at("test_gen_tokens_per_second").get<double>() <= 12 / 1.6);
  fs::remove_all(dir);
}

TEST_CASE("predict --prompts on the shakespeare_char recipe: one continuation per prompt, nothing packed",
          "[integration][predict]") {
  const std::string dir = fresh_dir("predict_shakespeare");
  std::string text;
  for (int i = 0; i < 60; ++i) text += "ROMEO:\nBut soft, what light through yonder window breaks?\nJULIET:\nAy me!\n\n";
  write_text(dir + "/input.txt", text);
  const std::string spec = std::string(HFTRAIN_SOURCE_DIR) + "/configs/shakespeare_char.yaml";
  CliResult r = run_hftrain("train '" + spec + "' --set data.path=input.txt --set training.output_dir=run "
                            "--set training.max_steps=4 --set training.eval_strategy=no --set training.logging_steps=2",
                            dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // Four short prompts (fewer characters than block_size together): four predictions, verbatim.
  write_text(dir + "/prompts.txt", "ROMEO: \nJULIET:\nBut soft\nAy\n");
  r = run_hftrain("predict run --prompts prompts.txt --max-new-tokens 20", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto rows = read_jsonl(dir + "/run/predictions.jsonl");
  REQUIRE(rows.size() == 4u);
  CHECK(rows[0].at("prompt") == "ROMEO: ");
  CHECK(rows[3].at("prompt") == "Ay");
  for (const auto& row : rows) CHECK(row.at("generated_ids").size() <= 20u);
  // The recipe's own 200 new tokens exceed its context of 64: the window slides (nanoGPT sample.py).
  r = run_hftrain("predict run --prompts prompts.txt --set training.output_dir=long", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("the window slides while generating"));
  const auto long_rows = read_jsonl(dir + "/long/predictions.jsonl");
  REQUIRE(long_rows.size() == 4u);
  CHECK(long_rows[1].at("prompt") == "JULIET:");
  CHECK(long_rows[1].at("generated_ids").size() == 200u);  // the chars tokenizer has no eos
  // A character the recipe's vocabulary lacks: exit 2 naming the line.
  write_text(dir + "/odd.txt", "ROMEO\nzebra\n");
  r = run_hftrain("predict run --prompts odd.txt --set training.output_dir=odd", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--prompts: line 2: character 'z' is not in the character vocabulary"));
  fs::remove_all(dir);
}

TEST_CASE("predict generates its prompts in batches with the lines of one at a time, and writes non-UTF-8 bytes as U+FFFD",
          "[integration][predict]") {
  const std::string dir = fresh_dir("predict_batched");
  train_tiny_run(dir);
  write_text(dir + "/prompts.txt", "the cat\nsat on a mat and the dog\nran\nfar far\na\nthe dog ran far and sat on\n");
  std::map<int, std::string> lines;
  for (const int batch : {1, 4}) {
    const std::string out = "b" + std::to_string(batch);
    CliResult r = run_hftrain("predict run --prompts prompts.txt --max-new-tokens 24 --set training.output_dir=" + out +
                                  " --set training.per_device_eval_batch_size=" + std::to_string(batch),
                              dir);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    lines[batch] = read_bytes(dir + "/" + out + "/predictions.jsonl");
    CHECK(read_jsonl(dir + "/" + out + "/predictions.jsonl").size() == 6);
  }
  CHECK(lines[4] == lines[1]);
  // Sampling at a high temperature from a barely trained byte-level model emits bytes that are no UTF-8:
  // they are written as U+FFFD, as HF's decode(errors="replace") writes them, and the file stays valid JSON.
  CliResult hot = run_hftrain("predict run --prompts prompts.txt --max-new-tokens 24 --set training.output_dir=hot "
                              "--set generation.do_sample=true --set generation.temperature=50 --set generation.top_k=0",
                              dir);
  INFO(hot.output);
  REQUIRE(hot.exit_code == 0);
  CHECK(read_jsonl(dir + "/hot/predictions.jsonl").size() == 6);
  CHECK(read_bytes(dir + "/hot/predictions.jsonl").find("\xEF\xBF\xBD") != std::string::npos);
}
