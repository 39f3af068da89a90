// TrainingArguments' own names for the optimizer, the learning-rate schedule and mixed precision:
// `training.optim`, `training.optim_args`, `training.lr_scheduler_type`, `training.lr_scheduler_kwargs`,
// `training.bf16` and `training.fp16`. They are the same settings as the `optimizer`, `scheduler` and
// `precision` sections, so before the sections are parsed they are moved there (HF optim values mapped to hftrain optimizer types), and every value remembers where it
// was written: validation problems and --dump-config name the HF spelling and its file:line.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/issues.h"
#include "config/schema.h"

namespace hftrain {

// Moves the HF names out of root's `training` section into the `optimizer` / `scheduler` sections.
// An unknown HF optim value, a malformed optim_args / lr_scheduler_kwargs, or a value that disagrees
// with the same setting written in its own section goes to `issues`. `origins` receives, per moved
// value, its dotted path in the section -> "training.<hf name>: <value> (file:line:col)".
// Old names HF renamed (per_gpu_*, evaluation_strategy, no_cuda) are taken as the new ones, and HF's
// deprecation warning goes to `notes` (logged at start). A null is HF's None: not given. FairScale's
// sharded_ddp becomes zero.stage (and CPU offload), with a note saying so.
void move_hf_training_names(YAML::Node& root, Issues& issues, std::map<std::string, std::string>& origins,
                            std::vector<std::string>& notes);

// A setting written under another name than its section's key: `written` is that name ("training.optim",
// "training.deepspeed zero_optimization.stage"), `node` its value, located in `file_issues`' file.
struct SettingSource {
  std::string written;
  YAML::Node node;
  Issues& file_issues;
};

// Puts `value` at root's section.key, remembering where it was written (problems found later at that key
// are located there; `origins` gets "<written>: <shown> (file:line:col)"). The same key already written
// in the section with another value is a conflict, reported at the source, unless exactly one of the two
// was given on the command line (--set, or a flag turned into one): that one wins, as in HF and Accelerate
// (the origin names the file's value it replaced). With the same value the section's own spelling stays.
void place_setting(YAML::Node& root, Issues& issues, std::map<std::string, std::string>& origins, const std::string& section,
                   const std::string& key, const YAML::Node& value, const std::string& shown, const SettingSource& source);

// FSDP's sharding strategies as ZeRO stages (HF's fsdp words, lower case): full_shard = 3, shard_grad_op = 2,
// no_shard = 0; nullopt for any other word.
std::optional<int> fsdp_sharding_stage(const std::string& word);

// The accepted HF names with their help text (for `hftrain components`).
std::vector<OptionInfo> hf_training_names();

}  // namespace hftrain
