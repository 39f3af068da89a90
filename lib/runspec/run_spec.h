// RunSpec: a YAML/JSON run spec loaded, overridden (--set), validated strictly and resolved into one
// typed struct per section. Component sections (model, data, optimizer, scheduler) are validated
// against the registered component's own option schema. Each consumer receives only its section.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "registry/registry.h"
#include "runspec/accelerate_config.h"
#include "runspec/deepspeed_config.h"
#include "runspec/model_families.h"
#include "runspec/peft_args.h"
#include "runspec/quantization_args.h"
#include "runspec/search_args.h"
#include "runspec/sections.h"

namespace hftrain {

// A chosen component: its registered type name and its validated options.
struct ComponentChoice {
  std::string type;
  OptionsPtr options;
};

// The model section: a component choice plus where its initial weights come from.
struct ModelChoice : ComponentChoice {
  std::string from_pretrained;  // directory holding model.safetensors; "" = fresh initialisation
  std::string peft_adapter;     // a PEFT adapter directory to load onto the model (PeftModel.from_pretrained)
  std::optional<QuantizationArgs> quantization;  // model.quantization_config: a 4-bit base (QLoRA)
};

// A metric: its component choice and the key it reports under (eval_<key>); `name` defaults to the type.
struct MetricChoice : ComponentChoice {
  std::string key;
};

// The registries the spec's component sections are validated against.
struct ComponentCatalog {
  const RegistryBase& models;
  const RegistryBase& data;
  const RegistryBase& optimizers;
  const RegistryBase& schedulers;
  const RegistryBase& metrics;
  const RegistryBase& callbacks;
  // The dimensions model `type` declares for these parsed options (Model::Facts; DeepSpeed "auto" values).
  std::function<ModelDimensions(const std::string& type, const OptionsPtr& options)> model_dimensions;
};

struct RunSpec {
  std::string source;  // the file it came from
  ModelChoice model;
  ComponentChoice data;
  DataSampleLimits data_limits;  // data.max_train_samples / max_eval_samples / max_predict_samples
  ComponentChoice optimizer;
  ComponentChoice scheduler;
  std::vector<MetricChoice> metrics;  // empty = the data source's default metrics
  std::vector<ComponentChoice> callbacks;
  TrainingArgs training;
  DistributedArgs distributed;
  ZeroArgs zero;
  PrecisionArgs precision;
  GenerationArgs generation;
  std::optional<PeftArgs> peft;  // the peft section: train LoRA / DoRA adapters on a frozen base
  std::optional<SearchArgs> search;  // the search section (hftrain search); not part of a trial's resolved spec
  GenerationSourceFacts generation_sources;
  DeepSpeedConfig deepspeed;  // training.deepspeed, once its settings are in the sections above
  AccelerateLaunch accelerate;  // distributed.accelerate_config's launch settings (its others are in the sections)
  // One line each for settings accepted with no effect in this build (logged at the start of training).
  std::vector<std::string> notes;
  // Where each value written anywhere came from, by dotted path ("model.n_layer"): "file:line:col",
  // "--set ...", an HF name in training ("training.optim: adamw_torch (file:line:col)") or a model
  // directory's config.json. Paths absent here hold defaults.
  std::map<std::string, std::string> origins;
};

// A check that needs more than the spec's text (e.g. the file system), run by load_run_spec after the
// sections are parsed so that its problems are reported together with the others: it calls
// report(dotted key, message) for each, located at that key's position in the file (or its --set).
using SpecProblemReport = std::function<void(const std::string& key, const std::string& message)>;
using SpecCheck = std::function<void(const RunSpec& spec, const SpecProblemReport& report)>;

// Loads `path`, applies `overrides` ("dotted.key=value", value parsed as YAML) and validates everything
// (duplicate keys at any level included), runs `checks`, and throws ConfigError that lists every problem
// with file:line:col.
RunSpec load_run_spec(const std::string& path, const std::vector<std::string>& overrides,
                      const ComponentCatalog& catalog, const std::vector<SpecCheck>& checks = {});

// The dotted spec key a bare option name stands for, or "": an HF TrainingArguments flag name
// ("learning_rate" -> "training.learning_rate"), else an option of distributed / zero / precision /
// generation, else an option of some registered model / data / optimizer / scheduler type ("n_layer" ->
// "model.n_layer"). Used for `--set learning_rate=...` hints and the bare names of the search section.
std::string dotted_key_of_option(const std::string& key, const ComponentCatalog& catalog);

// `text` as a YAML double-quoted scalar, for a --set value or spec text that must stay a string (a path).
std::string yaml_quoted(const std::string& text);

// The same for a spec given as text (a spec the program composes, e.g. hftrain merge-adapter's); `source`
// names it in messages.
RunSpec load_run_spec_text(const std::string& text, const std::string& source, const ComponentCatalog& catalog);

// The fully resolved spec, defaults included, as YAML text (for --dump-config and the rendezvous's agreement).
// With `with_origins`, each value that was written somewhere carries a comment saying where (origins).
std::string dump_run_spec(const RunSpec& spec, const ComponentCatalog& catalog, bool with_origins = false);

// The copy a run saves (run_spec.yaml of output_dir and of each checkpoint, a search's best_run_spec.yaml):
// dump_run_spec with each relative input path that exists made absolute (SavedSpecPaths, config/schema.h),
// so that the copy names the same files wherever it is read from.
std::string saved_run_spec(const RunSpec& spec, const ComponentCatalog& catalog);

}  // namespace hftrain
