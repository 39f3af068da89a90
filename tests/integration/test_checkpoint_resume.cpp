// Resume continues exactly, through the real binary on CPU: an uninterrupted run and a run resumed from
// its checkpoint (saved at an odd step in the middle of an epoch, with gradient accumulation and
// dropout) log bitwise-identical losses, gradient norms and learning rates and end with identical
// weights. Negative controls show the comparison is sensitive: skipping the RNG restore or the data
// skip changes the result. SIGTERM / SIGINT stop a run after the current step with a checkpoint, exit
// 143 / 130 and print the resume command, which then finishes the run exactly.
#include <catch2/catch.hpp>

#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "test_checkpoint_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// 160 examples / batch 8 = 20 batches per epoch; accumulation 3 -> 7 steps per epoch (the last window
// has 2 batches); 14 steps = 2 epochs. Saves at 5 (mid-epoch, odd), 10 and 14.
std::string exact_spec(const std::string& extra_training = "") {
  return R"(model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16, dropout: 0.1}
data: {type: digit_reversal, num_digits: 3, train_size: 160, eval_size: 8, test_size: 2}
training:
  output_dir: out
  per_device_train_batch_size: 8
  gradient_accumulation_steps: 3
  max_steps: 14
  learning_rate: 0.003
  warmup_steps: 2
  logging_steps: 1
  save_strategy: steps
  save_steps: 5
  seed: 11
)" + extra_training + "distributed: {intra_op_threads: 1}\ngeneration: {max_new_tokens: 3}\n";
}

// Steps `from`..`to` of two log histories are identical (loss, grad_norm, learning_rate, epoch, step).
void require_same_logs(const json& a, const json& b, int64_t from, int64_t to) {
  auto la = train_logs(a), lb = train_logs(b);
  for (int64_t s = from; s <= to; ++s) {
    INFO("step " << s);
    REQUIRE(la.count(s) == 1);
    REQUIRE(lb.count(s) == 1);
    CHECK(la[s].dump() == lb[s].dump());
    CHECK(la[s].at("grad_norm").get<double>() == lb[s].at("grad_norm").get<double>());
  }
}

bool same_grad_norms(const json& a, const json& b, int64_t from, int64_t to) {
  auto la = train_logs(a), lb = train_logs(b);
  for (int64_t s = from; s <= to; ++s)
    if (!la.count(s) || !lb.count(s) || la[s].at("grad_norm").get<double>() != lb[s].at("grad_norm").get<double>())
      return false;
  return true;
}

// A run resumed from <full>/out/checkpoint-5 copied into the fresh directory `dir`.
CliResult resume_copy(const std::string& full, const std::string& dir, const std::string& fault,
                      const std::string& extra_args = "") {
  write_text(dir + "/spec.yaml", exact_spec());
  copy_tree(full + "/out/checkpoint-5", dir + "/out/checkpoint-5");
  return run_with_fault(fault, "train spec.yaml --resume " + extra_args, dir);
}

}  // namespace

TEST_CASE("resuming mid-epoch with accumulation and dropout continues bitwise exactly", "[integration][checkpoint]") {
  const std::string full = scratch_dir("ckpt_exact_full");
  write_text(full + "/spec.yaml", exact_spec());
  CliResult a = run_with_fault("", "train spec.yaml", full);
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  for (int s : {5, 10, 14}) {
    const std::string ckpt = full + "/out/checkpoint-" + std::to_string(s);
    REQUIRE(fs::is_directory(ckpt));
    CHECK(hftrain::verify_checkpoint(ckpt).empty());
  }

  // The checkpoint records the sampler position HF's formula gives: epoch 0, (5 % 7) * 3 = 15 batches.
  json loop = read_json(full + "/out/checkpoint-5/loop_state.json");
  CHECK(loop["sampler"]["epoch"] == 0);
  CHECK(loop["sampler"]["batches_consumed"] == 15);
  CHECK(loop["loss"]["last_logged_step"] == 5);

  const std::string resumed = scratch_dir("ckpt_exact_resumed");
  CliResult b = resume_copy(full, resumed, "");
  INFO(b.output);
  REQUIRE(b.exit_code == 0);
  CHECK_THAT(b.output, Catch::Contains("resuming from out/checkpoint-5"));
  const json state_a = read_json(full + "/out/trainer_state.json");
  const json state_b = read_json(resumed + "/out/trainer_state.json");
  require_same_logs(state_a, state_b, 1, 14);
  CHECK(file_bytes(full + "/out/model.safetensors") == file_bytes(resumed + "/out/model.safetensors"));
  CHECK(read_json(full + "/out/train_results.json")["train_loss"] ==
        read_json(resumed + "/out/train_results.json")["train_loss"]);
  // Later checkpoints are byte-identical too (all but the run spec, which records the resume, and the
  // manifest that hashes it).
  for (int s : {10, 14}) {
    auto ta = tree(full + "/out/checkpoint-" + std::to_string(s));
    auto tb = tree(resumed + "/out/checkpoint-" + std::to_string(s));
    for (const char* f : {"run_spec.yaml", "manifest.json"}) {
      ta.erase(f);
      tb.erase(f);
    }
    INFO("checkpoint-" << s);
    CHECK(ta == tb);
  }

  // Negative controls (the comparison above would catch these): without restoring the RNG, dropout
  // masks differ; without skipping the consumed batches, the data differs.
  const std::string norng = scratch_dir("ckpt_exact_norng");
  CliResult c = resume_copy(full, norng, "skip_rng_restore");
  INFO(c.output);
  REQUIRE(c.exit_code == 0);
  CHECK(!same_grad_norms(state_a, read_json(norng + "/out/trainer_state.json"), 6, 14));
  CHECK(file_bytes(full + "/out/model.safetensors") != file_bytes(norng + "/out/model.safetensors"));

  const std::string noskip = scratch_dir("ckpt_exact_noskip");
  CliResult d = resume_copy(full, noskip, "", "--set training.ignore_data_skip=true");
  INFO(d.output);
  REQUIRE(d.exit_code == 0);
  CHECK(!same_grad_norms(state_a, read_json(noskip + "/out/trainer_state.json"), 6, 14));
}

TEST_CASE("a checkpoint of one optimizer is not resumed by another, unless its optimizer state is ignored", "[integration][checkpoint]") {
  const std::string dir = scratch_dir("resume_other_optimizer");
  write_text(dir + "/spec.yaml", exact_spec());
  CliResult r = run_hftrain("train spec.yaml --set training.max_steps=5", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CliResult lion = run_hftrain("train spec.yaml --set optimizer.type=lion --set training.output_dir=lion --resume out/checkpoint-5", dir);
  INFO(lion.output);
  CHECK(lion.exit_code == 2);
  CHECK_THAT(lion.output, Catch::Contains("holds the state of optimizer 'adamw'") && Catch::Contains("this run uses 'lion'"));
  CHECK_FALSE(std::filesystem::exists(dir + "/lion"));  // refused before anything was written
  CHECK_THAT(lion.output, Catch::Contains("training.ignore_optimizer_state: true"));

  // ignore_optimizer_state: the weights, data position and RNG are restored (step 6's loss and gradient norm,
  // computed before any update, equal those of a plain AdamW resume), the optimizer state is not.
  CliResult adamw = run_hftrain("train spec.yaml --set training.max_steps=6 --set training.output_dir=adamw --resume out/checkpoint-5", dir);
  REQUIRE(adamw.exit_code == 0);
  lion = run_hftrain("train spec.yaml --set optimizer.type=lion --set training.ignore_optimizer_state=true "
                     "--set training.max_steps=6 --set training.output_dir=lion --resume out/checkpoint-5", dir);
  INFO(lion.output);
  REQUIRE(lion.exit_code == 0);
  CHECK_THAT(lion.output, Catch::Contains("its optimizer state is not: the optimizer starts from zero moments"));
  const auto a = read_json(dir + "/adamw/trainer_state.json")["log_history"][5];
  const auto l = read_json(dir + "/lion/trainer_state.json")["log_history"][5];
  REQUIRE(a["step"] == 6);
  REQUIRE(l["step"] == 6);
  CHECK(l["loss"] == a["loss"]);
  CHECK(l["grad_norm"] == a["grad_norm"]);
}

TEST_CASE("a checkpoint holds HF's files and fields", "[integration][checkpoint]") {
  const std::string dir = scratch_dir("ckpt_layout");
  write_text(dir + "/spec.yaml", exact_spec("  eval_strategy: steps\n  eval_steps: 5\n  load_best_model_at_end: true\n"));
  CliResult r = run_with_fault("", "train spec.yaml --set training.max_steps=5", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string ckpt = dir + "/out/checkpoint-5";
  const hftrain::Manifest m = hftrain::read_manifest(ckpt);
  std::vector<std::string> names;
  for (const auto& f : m.files) names.push_back(f.name);
  CHECK(names == std::vector<std::string>{"model.safetensors", "config.json", "optimizer.safetensors", "scheduler.json",
                                          "rng_state.safetensors", "loop_state.json", "trainer_state.json",
                                          "run_spec.yaml"});
  CHECK(m.global_step == 5);

  json state = read_json(ckpt + "/trainer_state.json");
  for (const char* key : {"best_global_step", "best_metric", "best_model_checkpoint", "epoch", "global_step",
                          "log_history", "max_steps", "stateful_callbacks", "train_batch_size", "total_flos"})
    CHECK(state.contains(key));
  CHECK(state["global_step"] == 5);
  CHECK(state["best_global_step"] == 5);
  CHECK(state["best_model_checkpoint"] == "out/checkpoint-5");

  // torch's CPU generator state is 5056 bytes (mt19937 state + normal-distribution cache).
  auto rng = hftrain::load_safetensors(ckpt + "/rng_state.safetensors");
  REQUIRE(rng.tensors.count("cpu"));
  CHECK(rng.tensors.at("cpu").scalar_type() == torch::kUInt8);
  CHECK(rng.tensors.at("cpu").numel() == 5056);
  json sched = read_json(ckpt + "/scheduler.json");
  CHECK(sched["type"] == "linear");
  CHECK(sched["last_step"] == 5);

  // docs/checkpoints.md documents every file a checkpoint holds.
  const std::string docs = file_bytes(std::string(HFTRAIN_SOURCE_DIR) + "/docs/checkpoints.md");
  names.push_back("manifest.json");
  for (const auto& n : names) {
    INFO(n);
    CHECK(docs.find("`" + n + "`") != std::string::npos);
  }
}

// HF's _determine_best_metric runs only with metric_for_best_model set (TrainingArguments sets it to
// "loss" for load_best_model_at_end and save_strategy "best"): without it trainer_state.json keeps
// best_metric, best_global_step and best_model_checkpoint null.
TEST_CASE("without metric_for_best_model the best metric stays null as in HF, and with it is the best evaluation",
          "[integration][checkpoint]") {
  const std::string dir = scratch_dir("ckpt_best_unset");
  write_text(dir + "/spec.yaml", exact_spec("  eval_strategy: steps\n  eval_steps: 5\n"));
  CliResult r = run_with_fault("", "train spec.yaml --set training.max_steps=10", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  json state = read_json(dir + "/out/trainer_state.json");
  CHECK(state["best_metric"].is_null());
  CHECK(state["best_global_step"].is_null());
  CHECK(state["best_model_checkpoint"].is_null());
  CHECK(read_json(dir + "/out/checkpoint-10/trainer_state.json")["best_metric"].is_null());

  r = run_with_fault("", "train spec.yaml --set training.max_steps=10 --set training.metric_for_best_model=loss "
                         "--set training.overwrite_output_dir=true", dir);
  REQUIRE(r.exit_code == 0);
  state = read_json(dir + "/out/trainer_state.json");
  double best = 1e9;
  int64_t best_step = -1;
  for (const auto& entry : state["log_history"])
    if (entry.contains("eval_loss") && entry["eval_loss"].get<double>() < best) {
      best = entry["eval_loss"].get<double>();
      best_step = entry["step"].get<int64_t>();
    }
  REQUIRE(best_step > 0);
  CHECK(state["best_metric"].get<double>() == best);
  CHECK(state["best_global_step"] == best_step);
  CHECK(state["best_model_checkpoint"] == "out/checkpoint-" + std::to_string(best_step));
}

namespace {

// SIGTERM / SIGINT a run mid-way: it exits 128 + signal with a checkpoint and the resume command;
// running that command finishes the run exactly like an uninterrupted one.
void stop_and_resume(int sig, int expected_exit, const std::string& name) {
  const std::string spec = exact_spec().replace(exact_spec().find("max_steps: 14"), 13, "max_steps: 40");
  const std::string ref = scratch_dir(name + "_ref");
  write_text(ref + "/spec.yaml", spec);
  CliResult r = run_with_fault("", "train spec.yaml --set training.save_strategy=no", ref);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  const std::string dir = scratch_dir(name);
  write_text(dir + "/spec.yaml", spec);
  Background bg = spawn_hftrain({"train", "spec.yaml", "--set", "training.save_strategy=no"}, dir, "step_delay_ms:150");
  const bool progressed = wait_for_log(bg, "fault-inject: step delay", 3, 120);
  if (progressed) kill(bg.pid, sig);
  const int code = wait_for(bg, 120);
  const std::string log = file_bytes(bg.log_path);
  INFO(log);
  REQUIRE(progressed);
  REQUIRE(code == expected_exit);
  std::smatch m;
  REQUIRE(std::regex_search(log, m, std::regex("hftrain train spec\\.yaml --set training\\.save_strategy=no --resume "
                                               "(out/checkpoint-([0-9]+))")));
  const std::string ckpt = m[1];
  const int step = std::stoi(m[2]);
  CHECK(step >= 3);
  CHECK(step < 40);
  CHECK(hftrain::verify_checkpoint(dir + "/" + ckpt).empty());
  // The run finished the step it was in: the checkpoint's state is at a step boundary.
  CHECK(read_json(dir + "/" + ckpt + "/trainer_state.json")["global_step"] == step);

  CliResult resumed = run_with_fault("", "train spec.yaml --set training.save_strategy=no --resume " + ckpt, dir);
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  require_same_logs(read_json(ref + "/out/trainer_state.json"), read_json(dir + "/out/trainer_state.json"), 1, 40);
  CHECK(file_bytes(ref + "/out/model.safetensors") == file_bytes(dir + "/out/model.safetensors"));
}

}  // namespace

TEST_CASE("SIGTERM mid-run saves and exits 143 and the printed command resumes exactly", "[integration][checkpoint]") {
  stop_and_resume(SIGTERM, 143, "ckpt_sigterm");
}

TEST_CASE("SIGINT mid-run saves and exits 130 and the printed command resumes exactly", "[integration][checkpoint]") {
  stop_and_resume(SIGINT, 130, "ckpt_sigint");
}

namespace {

// Early stopping with threshold 1e9: only the first evaluation counts as an improvement, so the counter
// after the evaluation at step k is k-1 and patience 7 stops training at step 8 (of 14). Trains that in
// <name>_full (which must stop at step 8), then resumes a copy of its checkpoint-5 (counter 4) in
// <name>_resumed with `training_extra`; returns the two directories and the resumed run's output.
struct EarlyStoppingResume {
  std::string full, resumed, output;
};

EarlyStoppingResume early_stopping_resume(const std::string& name, const std::string& training_extra) {
  const std::string spec = exact_spec("  eval_strategy: steps\n  eval_steps: 1\n" + training_extra) +
                           "callbacks: [{type: early_stopping, early_stopping_patience: 7, early_stopping_threshold: 1.0e9}]\n";
  EarlyStoppingResume r{scratch_dir(name + "_full"), scratch_dir(name + "_resumed"), ""};
  write_text(r.full + "/spec.yaml", spec);
  CliResult a = run_with_fault("", "train spec.yaml", r.full);
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  CHECK(read_json(r.full + "/out/trainer_state.json")["global_step"] == 8);
  CHECK_THAT(a.output, Catch::Contains("early stopping at step 8: eval_loss has not improved on") &&
                           Catch::Contains("for 7 evaluations (early_stopping_patience)"));
  const json saved = read_json(r.full + "/out/checkpoint-5/trainer_state.json");
  CHECK(saved["stateful_callbacks"]["EarlyStoppingCallback"]["attributes"]["early_stopping_patience_counter"] == 4);
  write_text(r.resumed + "/spec.yaml", spec);
  copy_tree(r.full + "/out/checkpoint-5", r.resumed + "/out/checkpoint-5");
  CliResult b = run_with_fault("", "train spec.yaml --resume", r.resumed);
  INFO(b.output);
  REQUIRE(b.exit_code == 0);
  r.output = b.output;
  return r;
}

}  // namespace

TEST_CASE("EarlyStopping's patience counter survives a resume", "[integration][checkpoint]") {
  // With restore_callback_states_from_checkpoint the resume from step 5 must stop at step 8 too; with the
  // counter lost it would run to step 12.
  const EarlyStoppingResume r = early_stopping_resume("ckpt_early", "  restore_callback_states_from_checkpoint: true\n");
  const json state = read_json(r.resumed + "/out/trainer_state.json");
  CHECK(state["global_step"] == 8);
  CHECK(state["best_global_step"] == read_json(r.full + "/out/trainer_state.json")["best_global_step"]);
  require_same_logs(read_json(r.full + "/out/trainer_state.json"), state, 1, 8);
}

TEST_CASE("without restore_callback_states_from_checkpoint the patience counter starts afresh (HF default)",
          "[integration][checkpoint]") {
  // The counter restarts at 0 at step 5 (the best metric, part of the trainer state, is kept), so 7
  // evaluations without improvement end the run at step 12.
  const EarlyStoppingResume r = early_stopping_resume("ckpt_early_default", "");
  CHECK_THAT(r.output, Catch::Contains("callback states of the checkpoint not restored"));
  CHECK(read_json(r.resumed + "/out/trainer_state.json")["global_step"] == 12);
}

TEST_CASE("a stateful schedule (reduce_lr_on_plateau) resumes with its state", "[integration][checkpoint]") {
  // mode max with an absolute threshold of 1e9: only the first evaluation improves, so from the
  // second one on every evaluation halves the learning rate (patience 0). By step 5 the rate is no
  // longer the base one: a resume that lost the schedule's state would log different rates.
  std::string spec = exact_spec("  eval_strategy: steps\n  eval_steps: 1\n  include_num_input_tokens_seen: true\n") +
                     "scheduler: {type: reduce_lr_on_plateau, mode: max, factor: 0.5, patience: 0, threshold: 1.0e9, "
                     "threshold_mode: abs}\n";
  spec.replace(spec.find("  warmup_steps: 2\n"), 17, "");
  const std::string full = scratch_dir("ckpt_plateau_full");
  write_text(full + "/spec.yaml", spec);
  CliResult a = run_with_fault("", "train spec.yaml", full);
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  const json sched = read_json(full + "/out/checkpoint-5/scheduler.json");
  CHECK(sched["type"] == "reduce_lr_on_plateau");
  CHECK(sched["last_lr"].get<double>() < 0.003);

  const std::string dir = scratch_dir("ckpt_plateau_resumed");
  write_text(dir + "/spec.yaml", spec);
  copy_tree(full + "/out/checkpoint-5", dir + "/out/checkpoint-5");
  CliResult b = run_with_fault("", "train spec.yaml --resume", dir);
  INFO(b.output);
  REQUIRE(b.exit_code == 0);
  // Learning rates, losses and num_input_tokens_seen of every step match the uninterrupted run.
  require_same_logs(read_json(full + "/out/trainer_state.json"), read_json(dir + "/out/trainer_state.json"), 1, 14);
  CHECK(file_bytes(full + "/out/model.safetensors") == file_bytes(dir + "/out/model.safetensors"));
}

TEST_CASE("save_only_model checkpoints hold the model only and resuming from one is refused", "[integration][checkpoint]") {
  const std::string dir = scratch_dir("ckpt_model_only");
  write_text(dir + "/spec.yaml", exact_spec("  save_only_model: true\n"));
  CliResult r = run_with_fault("", "train spec.yaml --set training.max_steps=5", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const hftrain::Manifest m = hftrain::read_manifest(dir + "/out/checkpoint-5");
  CHECK(m.save_only_model);
  std::vector<std::string> names;
  for (const auto& f : m.files) names.push_back(f.name);
  CHECK(names == std::vector<std::string>{"model.safetensors", "config.json", "trainer_state.json", "run_spec.yaml"});
  CliResult resumed = run_with_fault("", "train spec.yaml --set training.max_steps=10 --resume out/checkpoint-5", dir);
  INFO(resumed.output);
  CHECK(resumed.exit_code == 2);  // known before the run starts: a config problem
  CHECK_THAT(resumed.output, Catch::Contains("training.resume_from_checkpoint") && Catch::Contains("out/checkpoint-5") &&
                                 Catch::Contains("save_only_model"));
}
