// The names of everything hftrain writes into output_dir/checkpoint-N/ (one place; docs/checkpoints.md
// describes each file) and the checkpoint directory naming rules shared by writer, finder and rotation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hftrain {
namespace ckpt {

inline constexpr const char* kModelFile = "model.safetensors";          // HF SAFE_WEIGHTS_NAME
inline constexpr const char* kConfigFile = "config.json";               // HF model config
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";  // HF: optimizer.pt
inline constexpr const char* kSchedulerFile = "scheduler.json";         // HF: scheduler.pt
inline constexpr const char* kTrainerStateFile = "trainer_state.json";  // HF TRAINER_STATE_NAME
inline constexpr const char* kLoopStateFile = "loop_state.json";        // sampler position + loss accounting
inline constexpr const char* kRunSpecFile = "run_spec.yaml";            // the resolved run spec
inline constexpr const char* kManifestFile = "manifest.json";           // written last: sizes + xxh64

// HF: rng_state.pth for one process, rng_state_{rank}.pth otherwise; here with .safetensors.
std::string rng_state_file(int64_t rank, int64_t world_size);

// "checkpoint-<step>" (HF PREFIX_CHECKPOINT_DIR + "-" + global_step).
std::string checkpoint_dir_name(int64_t step);
// The step of a name matching ^checkpoint-(\d+)$ exactly (HF get_last_checkpoint's regex), else nullopt.
std::optional<int64_t> parse_checkpoint_dir_name(const std::string& name);

// Hidden siblings used while committing or deleting checkpoint-N: never matched by the finder.
std::string partial_dir_name(int64_t step);   // ".checkpoint-N.partial": being written
std::string replaced_dir_name(int64_t step);  // ".checkpoint-N.old": an older checkpoint-N being replaced
std::string deleting_dir_name(int64_t step);  // ".checkpoint-N.deleting": removed by rotation
// True for any of the three hidden names above (left behind by a crash; removed on the next save).
bool is_stale_temporary(const std::string& name);

}  // namespace ckpt
}  // namespace hftrain
