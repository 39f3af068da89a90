// DeepSpeed configuration files as HF users pass them (`training.deepspeed: ds_config.json`, or the
// same mapping inline). The file's settings are mapped onto hftrain's own sections (zero, precision,
// optimizer, scheduler, distributed), "auto" is filled as HF's HfTrainerDeepSpeedConfig fills it, a
// value that disagrees with the TrainingArguments value is reported as HF reports it, and every key is
// checked: a misspelt key gets a did-you-mean, a DeepSpeed feature hftrain lacks is refused, and a pure
// performance hint that changes no result is accepted with one log line. No LibTorch here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/issues.h"
#include "runspec/model_families.h"

namespace hftrain {

struct RunSpec;
struct ComponentCatalog;

// What the run keeps of a DeepSpeed config once its settings are in the sections.
struct DeepSpeedConfig {
  std::string source;                            // the file, or "training.deepspeed" when inline; "" = none
  std::string written_json;                      // the config as written ("auto" included), JSON text
  std::map<std::string, std::string> locations;  // dotted DeepSpeed key -> where it was written (file:line:col)
  bool present() const { return !source.empty(); }
};

// Before the sections are parsed: reads root's training.deepspeed (a path or a mapping), removes it,
// validates every key and places the settings into root's sections (a conflict with a value written
// there is reported). `notes` receives one line per accepted key that has no effect here.
void apply_deepspeed_config(YAML::Node& root, Issues& issues, std::map<std::string, std::string>& origins,
                            std::vector<std::string>& notes, DeepSpeedConfig& out);

// After the sections are parsed: fills the model-derived "auto" values (reduce_bucket_size = hidden^2;
// at stage 3 stage3_prefetch_bucket_size = 0.9 hidden^2 and stage3_param_persistence_threshold = 10
// hidden) and reports each non-"auto" value that disagrees with its TrainingArguments value.
void finish_deepspeed_config(RunSpec& spec, const ComponentCatalog& catalog, Issues& issues);

// At train start, when the world size and step counts are known: the config with every "auto" filled
// by the value the run uses (HF's trainer_config_finalize), as indented JSON text. A non-"auto"
// train_batch_size, scheduler total_num_steps or warmup_num_steps that disagrees with the run is a
// ConfigError listing each mismatch.
std::string resolve_deepspeed_config(const RunSpec& spec, int64_t world_size, int64_t total_steps, int64_t warmup_steps);

// The dimensions the spec's model family declares for its options (HF's config.hidden_size etc.; the
// "auto" fill reads hidden_size); zeros when the spec names no model.
ModelDimensions model_dimensions(const RunSpec& spec, const ComponentCatalog& catalog);

}  // namespace hftrain
