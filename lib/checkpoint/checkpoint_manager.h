// CheckpointManager: what the trainer calls to save, rotate and finish. It owns the policy (output_dir,
// save_total_limit, whether the best checkpoint is protected) and the run's resume point; the files
// themselves come from the caller as name -> bytes, so this layer knows nothing of models or optimizers.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hftrain {

class CheckpointWriter;

struct CheckpointPolicy {
  std::string output_dir;
  int64_t save_total_limit = 0;  // 0 = keep all
  bool protect_best = false;     // HF: only when metric_for_best_model is in use
};

using CheckpointFiles = std::vector<std::pair<std::string, std::string>>;  // file name -> bytes

class CheckpointManager {
 public:
  explicit CheckpointManager(CheckpointPolicy policy) : policy_(std::move(policy)) {}

  // output_dir/checkpoint-<step>.
  std::string dir_for(int64_t step) const;
  // Removes crash leftovers, writes checkpoint-<step> atomically (manifest last, then rename), then
  // applies save_total_limit. `best_step` is the best checkpoint's step when known. Returns the path.
  // Throws RuntimeFailure naming the file on any write error; existing checkpoints stay intact.
  // `before_commit`, when given, runs with the writer after `files` are written and before the commit:
  // the place where every rank of a data-parallel job writes its own files (ZeRO shards, RNG state) into
  // writer.tmp_dir() and rank 0 adopt()s them into the manifest.
  std::string save(int64_t step, const CheckpointFiles& files, bool save_only_model, std::optional<int64_t> best_step,
                   const std::function<void(CheckpointWriter&)>& before_commit = {});
  // The checkpoint this run resumed from: never deleted by rotation.
  void set_resumed_from(int64_t step) { resumed_from_ = step; }
  std::optional<int64_t> resumed_from() const { return resumed_from_; }
  // HF end-of-training cleanup (save_total_limit == 1 keeps only the best checkpoint).
  void on_train_end(int64_t final_step, std::optional<int64_t> best_step);

 private:
  std::vector<int64_t> present_steps() const;
  CheckpointPolicy policy_;
  std::optional<int64_t> resumed_from_;
};

}  // namespace hftrain
