// The `search` section of a run spec: the hyperparameter space of `hftrain search` (Optuna's suggest_float /
// suggest_int / suggest_categorical over dotted spec keys) and the Optuna sampler and pruner that search it.
// `hftrain train` reads the section only to validate it; a trial's resolved spec does not hold it.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/issues.h"
#include "config/schema.h"

namespace hftrain {

// One dimension of the space, written `name: {type: float|int|categorical, ...}` under `search:`.
struct SearchParam {
  std::string name;   // as written under search: ("learning_rate", "model.n_layer")
  std::string key;    // the dotted spec key it sets ("training.learning_rate")
  std::string where;  // file:line:col of the name, for problems found later
  std::string type;   // float | int | categorical
  double low = 0, high = 0;
  bool log = false;
  std::optional<double> step;  // float: a discretisation step; int: the step (default 1)
  nlohmann::json choices = nlohmann::json::array();  // categorical: null / bool / number / string values

  // The value as a `--set key=value` text (YAML): floats with 17 significant digits, integers as integers,
  // strings double-quoted.
  static std::string override_text(const nlohmann::json& value);
  // This dimension as the Optuna driver takes it ({"name", "type", "low", "high", "log", "step", "choices"}).
  nlohmann::json to_json() const;
};

// sampler: {type: tpe | random | cmaes, seed, n_startup_trials} (Optuna's TPESampler, RandomSampler,
// CmaEsSampler; unset options keep Optuna's defaults).
struct SamplerArgs {
  std::string type = "tpe";
  std::optional<int64_t> seed;
  std::optional<int64_t> n_startup_trials;  // tpe, cmaes
  static void declare(Schema<SamplerArgs>& s);
};

// pruner: {type: median | hyperband | successive_halving | none, ...} with the options of Optuna's
// MedianPruner, HyperbandPruner, SuccessiveHalvingPruner (NopPruner for none); unset = Optuna's defaults.
struct PrunerArgs {
  std::string type = "median";
  std::optional<int64_t> n_startup_trials, n_warmup_steps, interval_steps;  // median
  std::optional<int64_t> min_resource;                                      // hyperband, successive_halving
  std::optional<int64_t> max_resource;                                      // hyperband (default "auto")
  std::optional<int64_t> reduction_factor;                                  // hyperband, successive_halving
  std::optional<int64_t> min_early_stopping_rate;                           // successive_halving
  static void declare(Schema<PrunerArgs>& s);
};

struct SearchArgs {
  std::vector<SearchParam> space;
  SamplerArgs sampler;
  PrunerArgs pruner;
  nlohmann::json sampler_json() const;  // {"type", and each option given}
  nlohmann::json pruner_json() const;
};

// Parses `node` (the `search` mapping). Its keys `sampler` and `pruner` configure Optuna; every other key is a
// dimension. A dotted name is the spec key itself; a bare name is looked up by `key_of` (run_spec.h
// dotted_key_of_option) and is a problem when it names no option. Every problem goes to `issues` at its
// file:line:col.
void parse_search_section(const YAML::Node& node, Issues& issues,
                          const std::function<std::string(const std::string&)>& key_of, SearchArgs& out);

}  // namespace hftrain
