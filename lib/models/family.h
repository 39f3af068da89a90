// A family's config.json written from its declaration: every option of the family's Options, under its
// config.json name (ModelFamily::option_config_keys), typed as the option schema declares it, plus
// model_type, the first of the declared architectures and torch_dtype. Families add only the keys that do
// not follow from one option (derived keys, e.g. llama's rope_parameters) in one function of their own.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/schema.h"
#include "runspec/model_families.h"

namespace hftrain {

// config.json of a family from its options' schema dump and description (types).
nlohmann::json config_from_options(const ModelFamily& family, const YAML::Node& dumped,
                                   const std::vector<OptionInfo>& described);

template <class Options>
nlohmann::json config_from_options(const ModelFamily& family, const Options& options) {
  const Schema<Options>& schema = schema_of<Options>();
  return config_from_options(family, schema.dump(options), schema.describe());
}

}  // namespace hftrain
