// Ulysses sequence parallelism through the binary (distributed.sequence_parallel_size): a llama with grouped-query
// heads on 2 workers of one sequence-parallel group follows 1 worker over the same global batch, step by step (loss
// and grad_norm), padded and padding-free, at ZeRO stages 1 and 3 (with gradient checkpointing); a checkpoint of the
// group resumes bit for bit on the group and continues on 1 worker as the 1-worker run does; a layout the world
// cannot hold is refused by name before anything is written. A LoRA adapter (q_proj / v_proj) trains the same way
// at ZeRO-2. Two groups on 4 workers are two data-parallel replicas,
// with the label tokens counted over the world or over each group. One group of 4 workers on sequences of up to
// 1024 tokens, with checkpointing offloaded and the MLP tiled, follows 1 worker; through the binary a run with
// activation-checkpoint offload follows the run without it.
#include <catch2/catch.hpp>

#include "test_dist_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* kSequenceSpec =
    "model: {type: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, "
    "num_key_value_heads: 2, max_position_embeddings: 256}\n"
    "data: {type: jsonl, train_file: train.jsonl, tokenizer: bytes, max_length: 256}\n"
    "training: {output_dir: out, max_steps: 4, per_device_train_batch_size: 2, gradient_accumulation_steps: 2, "
    "learning_rate: 0.003, max_grad_norm: 1.0, logging_steps: 1, save_strategy: \"no\", do_eval: false, seed: 5}\n"
    "distributed: {ddp_timeout: 60, intra_op_threads: 1}\n";

const std::string kGroup = "--nproc-per-node 2 --set distributed.sequence_parallel_size=2 ";

void train_ok(const std::string& dir, const std::string& args) { run_ok("train spec.yaml " + args, dir); }

// Steps `from`.. of `got` follow `expected`: the loss within the logged rounding (4 decimals), grad_norm to 1e-5.
void check_follows(const std::string& got_state, const std::string& expected_state, std::size_t from = 0) {
  const std::vector<json> got = train_logs(got_state), expected = train_logs(expected_state);
  REQUIRE(expected.size() == 4);
  REQUIRE(got.size() == expected.size() - from);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const json& e = expected[i + from];
    INFO("step " << e["step"]);
    CHECK(got[i]["step"] == e["step"]);
    CHECK(std::abs(got[i]["loss"].get<double>() - e["loss"].get<double>()) <= 1.0001e-4);
    CHECK(std::abs(got[i]["grad_norm"].get<double>() - e["grad_norm"].get<double>()) <= 1e-5 * e["grad_norm"].get<double>());
  }
}

}  // namespace

TEST_CASE("a llama on a sequence-parallel group of 2 workers follows 1 worker, padded and padding-free, at ZeRO "
          "stages 1 and 3, and its checkpoint resumes on the group and on 1 worker",
          "[integration][sequence_parallel]") {
  const std::string dir = dist_dir("sequence_parallel");
  write_text(dir + "/train.jsonl", variable_rows(32));
  write_text(dir + "/spec.yaml", kSequenceSpec);
  train_ok(dir, "--set training.output_dir=one_padded");
  train_ok(dir, "--set training.output_dir=one_packed --set training.padding_free=true");
  train_ok(dir, kGroup + "--set zero.stage=1 --set training.output_dir=sp_padded --set training.save_strategy=steps "
                      "--set training.save_steps=2");
  // (the label tokens summed over the group rather than the world: the same count with one group)
  train_ok(dir, kGroup + "--set zero.stage=3 --set training.gradient_checkpointing=true "
                      "--set training.average_tokens_across_devices=false --set training.output_dir=sp_padded_z3");
  train_ok(dir, kGroup + "--set zero.stage=3 --set training.padding_free=true --set training.output_dir=sp_packed_z3");
  {
    INFO("padded, stage 1");
    check_follows(dir + "/sp_padded/trainer_state.json", dir + "/one_padded/trainer_state.json");
  }
  {
    INFO("padded, stage 3, checkpointed, label tokens over the group");
    check_follows(dir + "/sp_padded_z3/trainer_state.json", dir + "/one_padded/trainer_state.json");
  }
  {
    INFO("padding-free, stage 3");
    check_follows(dir + "/sp_packed_z3/trainer_state.json", dir + "/one_packed/trainer_state.json");
  }
  // The group's checkpoint of step 2 resumes on the group bit for bit ...
  train_ok(dir, kGroup + "--set zero.stage=1 --set training.output_dir=sp_resumed --resume sp_padded/checkpoint-2");
  const std::vector<json> uninterrupted = train_logs(dir + "/sp_padded/trainer_state.json"),
                          resumed = train_logs(dir + "/sp_resumed/trainer_state.json");
  REQUIRE(resumed.size() == 4);  // the checkpoint's logs, then steps 3 and 4
  for (std::size_t i = 2; i < 4; ++i) {
    INFO("step " << i + 1);
    CHECK(resumed[i]["loss"].get<double>() == uninterrupted[i]["loss"].get<double>());
    CHECK(resumed[i]["grad_norm"].get<double>() == uninterrupted[i]["grad_norm"].get<double>());
  }
  // ... and on 1 worker (its 2 ranks' ZeRO-1 shards cut into one), continuing as the 1-worker run does.
  CliResult one = run_hftrain("train spec.yaml --set training.output_dir=one_resumed --resume sp_padded/checkpoint-2", dir);
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  CHECK_THAT(one.output, Catch::Contains("resumed at step 2"));
  const std::vector<json> continued = train_logs(dir + "/one_resumed/trainer_state.json"),
                          one_worker = train_logs(dir + "/one_padded/trainer_state.json");
  REQUIRE(continued.size() == 4);
  for (std::size_t i = 2; i < 4; ++i) {
    INFO("step " << i + 1);
    CHECK(std::abs(continued[i]["loss"].get<double>() - one_worker[i]["loss"].get<double>()) <= 1.0001e-4);
    CHECK(std::abs(continued[i]["grad_norm"].get<double>() - one_worker[i]["grad_norm"].get<double>()) <=
          1e-5 * one_worker[i]["grad_norm"].get<double>());
  }
  fs::remove_all(dir);
}

TEST_CASE("a LoRA adapter on a sequence-parallel group of 2 workers at ZeRO-2 follows 1 worker",
          "[integration][sequence_parallel][peft]") {
  const std::string dir = dist_dir("sequence_parallel_lora");
  write_text(dir + "/train.jsonl", variable_rows(32));
  write_text(dir + "/spec.yaml", std::string(kSequenceSpec) + "peft: {r: 4, lora_alpha: 8, init_lora_weights: gaussian}\n");
  train_ok(dir, "--set training.output_dir=one");
  train_ok(dir, kGroup + "--set zero.stage=2 --set training.output_dir=group");
  check_follows(dir + "/group/trainer_state.json", dir + "/one/trainer_state.json");
  fs::remove_all(dir);
}

TEST_CASE("two sequence-parallel groups on 4 workers are 2 data-parallel replicas: they follow 1 worker over the "
          "global batch, and 2 workers without average_tokens_across_devices",
          "[integration][sequence_parallel]") {
  const std::string dir = dist_dir("sequence_parallel_groups");
  write_text(dir + "/train.jsonl", variable_rows(32));
  write_text(dir + "/spec.yaml", kSequenceSpec);
  const std::string four = "--nproc-per-node 4 --set distributed.sequence_parallel_size=2 --set zero.stage=2 ";
  train_ok(dir, "--set training.per_device_train_batch_size=4 --set training.output_dir=one");
  train_ok(dir, four + "--set training.output_dir=groups");
  {
    INFO("label tokens over the world");
    check_follows(dir + "/groups/trainer_state.json", dir + "/one/trainer_state.json");
  }
  // Without the count over the world each replica takes its own mean, as 2 data-parallel workers do.
  train_ok(dir, "--nproc-per-node 2 --set zero.stage=2 --set training.average_tokens_across_devices=false "
             "--set training.output_dir=replicas");
  train_ok(dir, four + "--set training.average_tokens_across_devices=false --set training.output_dir=groups_own_mean");
  {
    INFO("label tokens over each group");
    check_follows(dir + "/groups_own_mean/trainer_state.json", dir + "/replicas/trainer_state.json");
  }
  fs::remove_all(dir);
}

TEST_CASE("sequence_parallel_size that does not divide the world is refused naming both numbers",
          "[integration][sequence_parallel]") {
  const std::string dir = dist_dir("sequence_parallel_refused");
  write_text(dir + "/train.jsonl", variable_rows(8));
  write_text(dir + "/spec.yaml", kSequenceSpec);
  CliResult r = run_hftrain("train spec.yaml --set distributed.sequence_parallel_size=2", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("distributed.sequence_parallel_size: 2 must divide the world size 1"));
  CHECK_FALSE(fs::exists(dir + "/out/trainer_state.json"));
  fs::remove_all(dir);
}

namespace {

// Rows of 300 to 1000 bytes: with max_length 1024, sequences 4x longer than the rows above.
std::string long_sequence_rows(int n) {
  const char* words[] = {"the", "king", "shall", "not", "speak", "of", "this", "night", "my", "lord"};
  std::string out;
  for (int i = 0; i < n; ++i) {
    std::string text;
    for (int w = 0; w < 60 + (i * 53) % 140; ++w) text += std::string(words[(i * 7 + w * 3) % 10]) + " ";
    out += "{\"text\": \"" + text + "\"}\n";
  }
  return out;
}

}  // namespace

TEST_CASE("a llama on one sequence-parallel group of 4 workers, with checkpointing offloaded and the MLP tiled, "
          "follows 1 worker on sequences of up to 1024 tokens",
          "[integration][sequence_parallel][checkpoint_offload]") {
  const std::string dir = dist_dir("sequence_parallel_four");
  write_text(dir + "/train.jsonl", long_sequence_rows(16));
  write_text(dir + "/spec.yaml", kSequenceSpec);
  // 8 query heads over 4 key / value heads: 2 of each per rank
  const std::string shape = "--set model.num_attention_heads=8 --set model.num_key_value_heads=4 "
                            "--set model.max_position_embeddings=1024 --set data.max_length=1024 ";
  train_ok(dir, shape + "--set training.output_dir=one");
  train_ok(dir, shape + "--nproc-per-node 4 --set distributed.sequence_parallel_size=4 --set zero.stage=2 "
                        "--set training.gradient_checkpointing=true --set training.tiled_mlp=true "
                        "--set 'training.gradient_checkpointing_kwargs={offload: true}' --set training.output_dir=group");
  check_follows(dir + "/group/trainer_state.json", dir + "/one/trainer_state.json");
  fs::remove_all(dir);
}

TEST_CASE("activation-checkpoint offload through the binary: a run with gradient_checkpointing_kwargs {offload: true} "
          "follows the run without it, and says that a CPU worker's inputs already live in host memory",
          "[integration][checkpoint_offload]") {
  const std::string dir = dist_dir("checkpoint_offload");
  write_text(dir + "/train.jsonl", variable_rows(32));
  write_text(dir + "/spec.yaml", kSequenceSpec);
  const std::string checkpointed = "--set training.gradient_checkpointing=true --set model.attention_dropout=0.1 ";
  train_ok(dir, checkpointed + "--set training.output_dir=kept");
  const std::string out = run_ok("train spec.yaml " + checkpointed +
                                     "--set 'training.gradient_checkpointing_kwargs={offload: true}' --set training.output_dir=offloaded",
                                 dir);
  CHECK_THAT(out, Catch::Contains("gradient_checkpointing_offload") && Catch::Contains("already live in host memory"));
  const std::vector<json> kept = train_logs(dir + "/kept/trainer_state.json"),
                          offloaded = train_logs(dir + "/offloaded/trainer_state.json");
  REQUIRE(kept.size() == 4);
  REQUIRE(offloaded.size() == kept.size());
  for (std::size_t i = 0; i < kept.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(offloaded[i]["loss"].get<double>() == kept[i]["loss"].get<double>());
    CHECK(offloaded[i]["grad_norm"].get<double>() == kept[i]["grad_norm"].get<double>());
  }
  fs::remove_all(dir);
}
