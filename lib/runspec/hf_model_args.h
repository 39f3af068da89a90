// run_clm's (and TRL's) model arguments that are no option of a model type: `torch_dtype` (run_clm's `dtype` in
// newer transformers) and `attn_implementation`, the keyword arguments HF passes to from_pretrained.
// Written in the spec's model section, or as the flags --torch_dtype / --dtype / --attn_implementation
// (hf_flags.h), they are taken out before the section is parsed: a 16-bit dtype is the precision setting
// that gives the model 16-bit weights in forward and backward, float32 is what hftrain loads, an attention
// implementation that computes what hftrain's attention computes is accepted, and any other value is
// refused with the reason. Each accepted value leaves a note saying what it became.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/issues.h"

namespace hftrain {

// Takes model.torch_dtype and model.attn_implementation out of root's model section. torch_dtype bfloat16 /
// float16 is placed as precision.bf16 / precision.fp16 true (origins: "model.torch_dtype: bfloat16 (...)"),
// float32 places nothing, auto is the dtype model.from_pretrained's config.json names (dtype or torch_dtype;
// float32 when it names none); attn_implementation eager, sdpa and flash_attention_2 are accepted. Other
// values go to `issues` naming the key and why; what each accepted value became goes to `notes`.
void move_hf_model_arguments(YAML::Node& root, Issues& issues, std::map<std::string, std::string>& origins,
                             std::vector<std::string>& notes);

// The dtypes run_clm accepts (auto, bfloat16, float16, float32) and the attention implementations hftrain
// accepts (eager, sdpa, flash_attention_2).
const std::vector<std::string>& hf_model_dtypes();
const std::vector<std::string>& hf_attention_implementations();

}  // namespace hftrain
