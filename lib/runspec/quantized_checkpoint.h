// A model directory whose config.json says it is already quantised: transformers writes
// BitsAndBytesConfig.to_dict() as config.json's quantization_config when it saves a 4-bit or 8-bit bitsandbytes model,
// whose weights files then hold the packed codes and quant state (models/quantized_state.h). Such a checkpoint
// loads as it is; its quantization_config becomes the run's model.quantization_config.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "runspec/quantization_args.h"

namespace hftrain {

// The quantization_config of a model directory's config.json: nullopt when absent or null. A bitsandbytes 4-bit or
// 8-bit one is read under model.quantization_config's names (its private _load_in_4bit / _load_in_8bit must agree with
// load_in_4bit / load_in_8bit). `compute_dtype`, when given, replaces bnb_4bit_compute_dtype (a spec's choice).
// Another quant_method or a key hftrain does not build are a ConfigError naming the file and key.
std::optional<QuantizationArgs> checkpoint_quantization(const nlohmann::json& config, const std::string& config_path,
                                                        const std::string& compute_dtype = "");

// The settings a run over a quantised checkpoint uses (nullopt: config.json has no quantization_config): the
// checkpoint's, where the keys a spec's model.quantization_config gives must agree, but bnb_4bit_compute_dtype,
// which the spec chooses; a key that differs is a ConfigError naming it and both values (transformers keeps the
// checkpoint's settings).
std::optional<QuantizationArgs> quantization_of_checkpoint(const nlohmann::json& config, const std::string& config_path,
                                            const std::optional<QuantizationArgs>& spec);

}  // namespace hftrain
