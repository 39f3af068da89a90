// Where generation settings come from besides the run spec's `generation` section, merged in HF's order
// of precedence before the section is parsed: the section's own keys (and --set / eval and predict flags)
// first, then Seq2SeqTrainingArguments' training.generation_max_length / generation_num_beams, then an HF
// generation_config.json (training.generation_config, else the one in model.from_pretrained) or, without
// one, the generation settings of model.from_pretrained's config.json, then the built-in defaults. See
// docs/generation.md.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "config/issues.h"
#include "runspec/json_yaml.h"
#include "runspec/sections.h"

namespace hftrain {

// Fills root's `generation` section where it leaves a key out or null (see above). A generation_config.json
// key that hftrain's generation cannot honour (a setting other than HF's neutral value that is not built,
// several eos tokens) goes to facts.unsupported, unless the spec sets that key itself; a value of the wrong
// kind is a problem at file: key. Pad and bos ids the file repeats are the model's config.json's business;
// its decoder_start_token_id is kept in facts to be checked against the model. `origins` records each
// filled key's source.
void fill_generation_section(YAML::Node& root, const TrainingArgs& training, const std::string& model_dir,
                             Issues& issues, std::map<std::string, std::string>& origins, GenerationSourceFacts& facts);

}  // namespace hftrain
