// HF TrainingArguments fields whose feature hftrain does not build (hub upload, TPU, torch.compile, apex,
// ...). A TrainingArguments dump (`to_dict()`, a JSON for `HfArgumentParser.parse_json_file`) carries
// every one of them, mostly at values that ask for nothing. Such a value (null, false, HF's default, an
// empty list / string / mapping) is accepted; a value that asks for the unbuilt feature is refused with
// its reason. The same rule as the DeepSpeed keys follow.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/issues.h"
#include "config/schema.h"

namespace hftrain {

// Takes the unbuilt HF fields out of root's `training` section: a value that asks for nothing is dropped
// (the field's name and value stay in no dump), any other value is a problem naming the field, its value
// and why it is not available. A null written for a field of `training` itself is HF's None, which is
// the field's default here: it is dropped too, so that the default applies.
void take_unbuilt_hf_fields(YAML::Node& root, Issues& issues);

// The unbuilt fields with their neutral values and reasons (for `hftrain components` and the flags).
std::vector<OptionInfo> hf_unbuilt_fields();

// Whether `name` is one of them.
bool is_unbuilt_hf_field(const std::string& name);

}  // namespace hftrain
