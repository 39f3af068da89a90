// TrainingArguments' mappings for long-context training: `gradient_checkpointing_kwargs` (its `offload` is
// training.gradient_checkpointing_offload; torch's checkpoint options are checked) and `parallelism_config`
// (Accelerate's ParallelismConfig as HF TrainingArguments takes it: `sp_size` is
// distributed.sequence_parallel_size; the other axes are refused unless they ask for nothing). Called by the HF
// name mover (hf_names) with the field's value, before the sections are parsed.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/issues.h"

namespace hftrain {

// Where a mapped HF field writes: `name` is the TrainingArguments field (training.<name>); place() puts a
// value at section.key remembering that it was written there (hf_names' place_setting).
struct HfFieldTarget {
  YAML::Node& root;
  Issues& issues;
  std::map<std::string, std::string>& origins;
  std::vector<std::string>& notes;
  std::string name;

  void place(const std::string& section, const std::string& key, const YAML::Node& value, const YAML::Node& located,
             const std::string& shown) const;
};

// HF gradient_checkpointing_kwargs (a mapping, or its JSON text as HF's command line passes it): `offload` is
// training.gradient_checkpointing_offload; torch.utils.checkpoint's use_reentrant (either value: the same
// gradients), preserve_rng_state true (what hftrain does), determinism_check and debug at their defaults ask
// for nothing; anything else is refused by name.
void move_gradient_checkpointing_kwargs(const HfFieldTarget& target, const YAML::Node& value);

// HF parallelism_config (Accelerate's ParallelismConfig fields, a mapping or its JSON text): sp_size is
// distributed.sequence_parallel_size, sp_backend deepspeed only, sp_handler's settings and dp_shard_size
// accepted with no effect (logged); dp_replicate_size, tp_size and cp_size other than 1 and a tp_handler are
// refused; cp_backend / cp_handler are never used (cp_size 1). Unknown keys are refused with a did-you-mean.
void move_parallelism_config(const HfFieldTarget& target, const YAML::Node& value);

}  // namespace hftrain
