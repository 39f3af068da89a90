// Crash safety through the real binary: the process is SIGKILLed at write steps of a save covering
// every file and every kind of step (HFTRAIN_FAULT_INJECT=save:<k>); earlier checkpoints stay byte-identical, resume never loads the
// partial one and still finishes exactly like an uninterrupted run. Disk full, permission denied,
// an unwritable output_dir, truncated / corrupt files and a wrongly shaped weight each stop the run with
// exit 1 and a message naming the file (and tensor) without touching existing checkpoints.
// save_total_limit end to end: a resumed run keeps the checkpoint it resumed from.
#include <catch2/catch.hpp>

#include "checkpoint/checkpoint_finder.h"
#include "checkpoint/manifest.h"
#include "test_checkpoint_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// 64 examples / batch 8 = 8 batches per epoch, accumulation 2 -> 4 steps per epoch; saves at 3, 6, 9.
const char* kFaultSpec = R"(model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16, dropout: 0.1}
data: {type: digit_reversal, num_digits: 3, train_size: 64, eval_size: 8, test_size: 2}
training:
  output_dir: out
  per_device_train_batch_size: 8
  gradient_accumulation_steps: 2
  max_steps: 9
  learning_rate: 0.003
  logging_steps: 1
  save_strategy: steps
  save_steps: 3
  seed: 5
distributed: {intra_op_threads: 1}
generation: {max_new_tokens: 3}
)";

struct WriteStep {
  int n;
  std::string what;
};

// An uninterrupted reference run with the write steps traced.
struct Reference {
  std::string dir;
  std::vector<WriteStep> steps;
  // The number of the first write step named `what` after step `after`, or -1.
  int first_step_of(const std::string& what, int after = 0) const {
    for (const auto& s : steps)
      if (s.n > after && s.what == what) return s.n;
    return -1;
  }
  const std::string& what(int n) const { return steps.at(static_cast<std::size_t>(n - 1)).what; }
};

Reference reference_run(const std::string& name, const std::string& extra_args = "") {
  Reference ref;
  ref.dir = scratch_dir(name);
  write_text(ref.dir + "/spec.yaml", kFaultSpec);
  CliResult r = run_with_fault("trace", "train spec.yaml " + extra_args, ref.dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::regex line("fault-inject: write step ([0-9]+): ([^\n]*)");
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), line), end; it != end; ++it)
    ref.steps.push_back({std::stoi((*it)[1]), (*it)[2]});
  REQUIRE(!ref.steps.empty());
  return ref;
}

std::string fresh_run_dir(const std::string& name) {
  const std::string dir = scratch_dir(name);
  write_text(dir + "/spec.yaml", kFaultSpec);
  return dir;
}

}  // namespace

TEST_CASE("SIGKILL during a save: resume never loads a partial checkpoint", "[integration][checkpoint]") {
  const Reference ref = reference_run("ckpt_kill_ref");
  const int begin = ref.first_step_of("create .checkpoint-6.partial");
  const int end = ref.first_step_of("create .checkpoint-9.partial");
  REQUIRE(begin > 0);
  REQUIRE(end > begin + 20);  // 8 files x 3 steps + manifest + fsyncs + rename
  const auto ckpt3 = tree(ref.dir + "/out/checkpoint-3");
  const auto ckpt6 = tree(ref.dir + "/out/checkpoint-6");
  const std::string final_model = file_bytes(ref.dir + "/out/model.safetensors");
  const int rename_step = ref.first_step_of("rename .checkpoint-6.partial to checkpoint-6");
  REQUIRE(rename_step > begin);

  // Kill points: every directory-level step (create, manifest, fsyncs, rename, the output_dir fsync)
  // and, for each data file, one of its three steps (first half / rest / fsync) in rotation, so every
  // file and every kind of step is covered while the test stays fast.
  std::vector<int> points;
  int file_index = 0;
  for (int k = begin; k < end; ++k) {
    const std::string& w = ref.what(k);
    const bool file_step = w.rfind("write first half of ", 0) == 0 || w.rfind("write rest of ", 0) == 0 ||
                           (w.rfind("fsync ", 0) == 0 && w.find('.') != std::string::npos && w.find("partial") == std::string::npos);
    const bool manifest = w.find("manifest.json") != std::string::npos;
    if (!file_step || manifest) {
      points.push_back(k);
      continue;
    }
    const int kind = w.rfind("write first half", 0) == 0 ? 0 : w.rfind("write rest", 0) == 0 ? 1 : 2;
    if (kind == file_index % 3) points.push_back(k);
    if (kind == 2) ++file_index;
  }
  REQUIRE(points.size() >= 14);

  for (int k : points) {
    INFO("killed at write step " << k << ": " << ref.what(k));
    const std::string dir = fresh_run_dir("ckpt_kill");
    CliResult killed = run_with_fault("save:" + std::to_string(k), "train spec.yaml", dir);
    INFO(killed.output);
    REQUIRE(killed.exit_code == 128 + SIGKILL);
    // The earlier checkpoint is untouched, byte for byte.
    CHECK(tree(dir + "/out/checkpoint-3") == ckpt3);
    // checkpoint-6 exists only once renamed into place, and then it is complete.
    const bool has6 = fs::exists(dir + "/out/checkpoint-6");
    CHECK(has6 == (k > rename_step));
    if (has6) CHECK(tree(dir + "/out/checkpoint-6") == ckpt6);
    CHECK(!fs::exists(dir + "/out/checkpoint-9"));

    CliResult resumed = run_with_fault("", "train spec.yaml --resume", dir);
    INFO(resumed.output);
    REQUIRE(resumed.exit_code == 0);
    CHECK_THAT(resumed.output, Catch::Contains(has6 ? "resuming from out/checkpoint-6" : "resuming from out/checkpoint-3"));
    CHECK(file_bytes(dir + "/out/model.safetensors") == final_model);
    CHECK(hidden_leftovers(dir + "/out").empty());  // the stale .partial was removed by the next save
  }
}

TEST_CASE("SIGKILL while rotation deletes an old checkpoint leaves no half-deleted checkpoint", "[integration][checkpoint]") {
  const Reference ref = reference_run("ckpt_kill_rot_ref", "--set training.save_total_limit=1");
  const std::string final_model = file_bytes(ref.dir + "/out/model.safetensors");
  for (const char* what : {"hide checkpoint-3 for deletion", "remove .checkpoint-3.deleting"}) {
    const int k = ref.first_step_of(what);
    INFO(what << " = write step " << k);
    REQUIRE(k > 0);
    const std::string dir = fresh_run_dir("ckpt_kill_rot");
    CliResult killed = run_with_fault("save:" + std::to_string(k), "train spec.yaml --set training.save_total_limit=1", dir);
    REQUIRE(killed.exit_code == 128 + SIGKILL);
    CHECK(hftrain::verify_checkpoint(dir + "/out/checkpoint-6").empty());
    // checkpoint-3 is either whole or gone (hidden), never half-deleted.
    if (fs::exists(dir + "/out/checkpoint-3")) CHECK(hftrain::verify_checkpoint(dir + "/out/checkpoint-3").empty());
    CliResult resumed = run_with_fault("", "train spec.yaml --set training.save_total_limit=1 --resume", dir);
    INFO(resumed.output);
    REQUIRE(resumed.exit_code == 0);
    CHECK_THAT(resumed.output, Catch::Contains("resuming from out/checkpoint-6"));
    CHECK(file_bytes(dir + "/out/model.safetensors") == final_model);
  }
}

TEST_CASE("disk full or permission denied during a save exits 1 naming the file and keeps checkpoints intact", "[integration][checkpoint]") {
  const Reference ref = reference_run("ckpt_enospc_ref");
  const auto ckpt3 = tree(ref.dir + "/out/checkpoint-3");
  struct Case {
    std::string fault, step, message, file;
  };
  const std::vector<Case> cases = {
      {"enospc", "write rest of optimizer.safetensors", "No space left on device",
       "out/.checkpoint-6.partial/optimizer.safetensors"},
      {"enospc", "write first half of manifest.json", "No space left on device", "out/.checkpoint-6.partial/manifest.json"},
      {"eacces", "create .checkpoint-6.partial", "Permission denied", "out/.checkpoint-6.partial"},
  };
  const int second_save = ref.first_step_of("create .checkpoint-6.partial");
  REQUIRE(second_save > 0);
  for (const auto& c : cases) {
    INFO(c.fault << " at '" << c.step << "'");
    const int k = ref.first_step_of(c.step, second_save - 1);
    REQUIRE(k > 0);
    const std::string dir = fresh_run_dir("ckpt_enospc");
    CliResult r = run_with_fault(c.fault + ":" + std::to_string(k), "train spec.yaml", dir);
    INFO(r.output);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.output, Catch::Contains(c.message) && Catch::Contains(c.file));
    CHECK(tree(dir + "/out/checkpoint-3") == ckpt3);
    CHECK(!fs::exists(dir + "/out/checkpoint-6"));
    CHECK(hidden_leftovers(dir + "/out").empty());
    CliResult resumed = run_with_fault("", "train spec.yaml --resume", dir);
    INFO(resumed.output);
    CHECK(resumed.exit_code == 0);
    CHECK(file_bytes(dir + "/out/model.safetensors") == file_bytes(ref.dir + "/out/model.safetensors"));
  }
}

TEST_CASE("an unwritable output_dir stops the run with exit 1 naming it", "[integration][checkpoint]") {
  const std::string dir = fresh_run_dir("ckpt_unwritable");
  write_text(dir + "/blocker", "a file where a directory should be");
  CliResult r = run_with_fault("", "train spec.yaml --set training.output_dir=blocker/out", dir);
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("blocker/out"));

  if (geteuid() != 0) {  // permissions do not bind root
    fs::create_directories(dir + "/ro");
    fs::permissions(dir + "/ro", fs::perms::owner_read | fs::perms::owner_exec);
    CliResult ro = run_with_fault("", "train spec.yaml --set training.output_dir=ro --set training.overwrite_output_dir=true",
                                  dir);
    INFO(ro.output);
    CHECK(ro.exit_code == 1);
    CHECK_THAT(ro.output, Catch::Contains("ro/") && Catch::Contains("Permission denied"));
    fs::permissions(dir + "/ro", fs::perms::owner_all);
  } else {
    WARN("running as root: the chmod-based unwritable-directory check is skipped (eacces injection covers it)");
  }
}

TEST_CASE("a truncated or corrupt checkpoint is skipped by --resume and refused when named", "[integration][checkpoint]") {
  const Reference ref = reference_run("ckpt_corrupt_ref");
  const std::string dir = scratch_dir("ckpt_corrupt");
  write_text(dir + "/spec.yaml", kFaultSpec);
  copy_tree(ref.dir + "/out", dir + "/out");
  fs::resize_file(dir + "/out/checkpoint-9/optimizer.safetensors", 100);
  {  // flip one byte of checkpoint-6's weights, same size
    std::fstream f(dir + "/out/checkpoint-6/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-5, std::ios::end);
    const char c = static_cast<char>(f.get());
    f.seekp(-5, std::ios::end);
    f.put(static_cast<char>(~c));
  }
  const auto ckpt3 = tree(dir + "/out/checkpoint-3");
  const auto ckpt6 = tree(dir + "/out/checkpoint-6");

  CliResult named = run_with_fault("", "train spec.yaml --resume out/checkpoint-9", dir);
  INFO(named.output);
  CHECK(named.exit_code == 2);  // known before the run starts: a config problem
  CHECK_THAT(named.output, Catch::Contains("out/checkpoint-9/optimizer.safetensors") && Catch::Contains("truncated"));
  CHECK(tree(dir + "/out/checkpoint-6") == ckpt6);

  CliResult last = run_with_fault("", "train spec.yaml --resume", dir);
  INFO(last.output);
  REQUIRE(last.exit_code == 0);
  CHECK_THAT(last.output, Catch::Contains("skipping out/checkpoint-9") &&
                              Catch::Contains("out/checkpoint-9/optimizer.safetensors"));
  CHECK_THAT(last.output, Catch::Contains("skipping out/checkpoint-6") &&
                              Catch::Contains("out/checkpoint-6/model.safetensors") && Catch::Contains("corrupt"));
  CHECK_THAT(last.output, Catch::Contains("resuming from out/checkpoint-3"));
  CHECK(file_bytes(dir + "/out/model.safetensors") == file_bytes(ref.dir + "/out/model.safetensors"));
  CHECK(hftrain::verify_checkpoint(dir + "/out/checkpoint-9").empty());  // rewritten whole
}

TEST_CASE("a weight whose shape does not match stops the resume naming file and tensor", "[integration][checkpoint]") {
  const Reference ref = reference_run("ckpt_shape_ref");
  const std::string dir = scratch_dir("ckpt_shape");
  write_text(dir + "/spec.yaml", kFaultSpec);
  copy_tree(ref.dir + "/out", dir + "/out");
  const auto before = tree(dir + "/out/checkpoint-6");
  CliResult r = run_with_fault("", "train spec.yaml --set model.n_embd=32 --resume out/checkpoint-6", dir);
  INFO(r.output);
  CHECK(r.exit_code == 2);  // the spec's model does not describe the checkpoint's weights: a setting to fix
  CHECK_THAT(r.output, Catch::Contains("out/checkpoint-6/model.safetensors") && Catch::Contains("tensor '") &&
                           Catch::Contains("shape"));
  CHECK(tree(dir + "/out/checkpoint-6") == before);
  CHECK(fs::exists(dir + "/out/checkpoint-9"));
}

TEST_CASE("save_total_limit end to end: rotation keeps the newest and the resumed-from checkpoint", "[integration][checkpoint]") {
  const Reference ref = reference_run("ckpt_rotation_ref");
  const std::string dir = fresh_run_dir("ckpt_rotation");
  CliResult limited = run_with_fault("", "train spec.yaml --set training.save_steps=2 --set training.save_total_limit=2", dir);
  INFO(limited.output);
  REQUIRE(limited.exit_code == 0);
  std::vector<int64_t> steps;
  for (const auto& c : hftrain::list_checkpoints(dir + "/out")) steps.push_back(c.step);
  CHECK(steps == std::vector<int64_t>{8, 9});

  // Resume from an earlier checkpoint with limit 1: the resumed-from checkpoint survives every rotation
  // and the higher-numbered checkpoints of the first run are replaced as the run reaches them.
  const std::string dir2 = scratch_dir("ckpt_rotation_resume");
  write_text(dir2 + "/spec.yaml", kFaultSpec);
  copy_tree(ref.dir + "/out", dir2 + "/out");
  CliResult resumed = run_with_fault("", "train spec.yaml --set training.save_total_limit=1 --resume out/checkpoint-3", dir2);
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  steps.clear();
  for (const auto& c : hftrain::list_checkpoints(dir2 + "/out")) steps.push_back(c.step);
  CHECK(steps == std::vector<int64_t>{3, 9});
  CHECK(file_bytes(dir2 + "/out/model.safetensors") == file_bytes(ref.dir + "/out/model.safetensors"));
  CHECK(tree(dir2 + "/out/checkpoint-3") == tree(ref.dir + "/out/checkpoint-3"));
}
