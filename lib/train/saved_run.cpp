// Reading what a checkpoint records of its run (see saved_run.h).
#include "train/saved_run.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/checkpoint_files.h"
#include "checkpoint/checkpoint_reader.h"
#include "engine/zero_checkpoint.h"
#include "util/error.h"

namespace hftrain {
namespace fs = std::filesystem;

namespace {

// The number of workers that saved a checkpoint: one rng_state file each (rng_state.safetensors alone = 1).
int64_t saved_world_size(const CheckpointReader& ckpt) {
  int64_t n = 0;
  for (const auto& f : ckpt.manifest().files)
    if (f.name.rfind("rng_state_", 0) == 0) ++n;
  return std::max<int64_t>(1, n);
}

}  // namespace

SavedRun read_saved_run(const CheckpointReader& ckpt, int64_t num_examples) {
  SavedRun run;
  run.dir = ckpt.dir();
  run.state = TrainerState::from_json_text(ckpt.text(ckpt::kTrainerStateFile), ckpt.path(ckpt::kTrainerStateFile));
  run.world_size = saved_world_size(ckpt);
  run.zero_stage = saved_zero_stage(ckpt.dir());
  run.per_device_batch = run.state.train_batch_size;
  if (ckpt.has(ckpt::kRunSpecFile)) run.spec_text = ckpt.text(ckpt::kRunSpecFile);
  if (!ckpt.has(ckpt::kLoopStateFile)) return run;  // save_only_model: refused as a resume source before this
  const std::string path = ckpt.path(ckpt::kLoopStateFile);
  try {
    const nlohmann::json sampler = ckpt.json(ckpt::kLoopStateFile).at("sampler");
    DataPosition& at = run.position;
    at.epoch = sampler.at("epoch").get<int64_t>();
    const int64_t batch = sampler.value("batch_size", run.per_device_batch);
    if (batch > 0) run.per_device_batch = batch;
    if (sampler.contains("samples_consumed")) {
      at.samples_consumed = sampler.at("samples_consumed").get<int64_t>();
      at.samples_seen = sampler.at("samples_seen").get<int64_t>();
    } else {  // written before samples were recorded: every worker read batches_consumed full batches
      const int64_t consumed = sampler.at("batches_consumed").get<int64_t>();
      const int64_t per_epoch = sampler.value("batches_per_epoch", int64_t{0});
      at.samples_consumed = per_epoch > 0 && consumed >= per_epoch
                                ? num_examples
                                : std::min(num_examples, consumed * run.per_device_batch * run.world_size);
      at.samples_seen = at.epoch * num_examples + at.samples_consumed;
    }
    if (at.epoch < 0 || at.samples_consumed < 0)
      throw RuntimeFailure("'" + path + "': the sampler position (epoch " + std::to_string(at.epoch) + ", " +
                           std::to_string(at.samples_consumed) + " samples) is negative");
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure("'" + path + "' is malformed: " + e.what());
  }
  return run;
}

std::string older_weights_problem(const std::string& output_dir, const std::string& checkpoint_dir, int64_t final_step) {
  const fs::path state_path = fs::path(output_dir) / ckpt::kTrainerStateFile;
  std::error_code ec;
  if (!fs::is_regular_file(state_path, ec)) return "";
  std::ifstream in(state_path);
  std::stringstream text;
  text << in.rdbuf();
  int64_t step = 0;
  try {
    step = TrainerState::from_json_text(text.str(), state_path.string()).global_step;
  } catch (const RuntimeFailure& e) {
    return std::string(e.what()) + " (it is compared with the resumed run's last step; move it away to resume)";
  }
  if (step <= final_step) return "";
  return "'" + checkpoint_dir + "' resumes a run that ends at step " + std::to_string(final_step) + ", but '" +
         output_dir + "' already holds the model of step " + std::to_string(step) + " (" + state_path.string() +
         "): finishing would replace it with older weights. Resume from a later checkpoint, raise training.max_steps "
         "past " + std::to_string(step) + ", write to another training.output_dir, or set "
         "training.resume_over_newer_model=true to replace that model";
}

}  // namespace hftrain
