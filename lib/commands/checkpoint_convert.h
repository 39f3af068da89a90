// `hftrain checkpoint convert CHECKPOINT_DIR --nproc-per-node N --stage S OUT_DIR`: the re-partitioning
// that `hftrain train --resume` does at load time (engine/universal_state.h), done offline: writes
// OUT_DIR/checkpoint-<step>, a complete checkpoint (manifest, atomic commit) whose optimizer state is laid
// out for N workers at ZeRO stage S (0, 1 or 2), so it can be handed on or resumed with the same layout.
// Rank r takes the RNG stream of saved rank r mod W. Stage 3's layout follows the model's modules and
// zero.stage3_param_persistence_threshold, so a stage-3 run re-partitions when it loads instead.
#pragma once

#include <string>

namespace hftrain {

struct ConvertRequest {
  std::string checkpoint_dir;
  std::string out_dir;
  int nproc_per_node = 1;
  int stage = 0;
};

int run_checkpoint_convert(const ConvertRequest& request);

}  // namespace hftrain
