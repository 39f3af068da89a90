// A model directory whose config.json says it is already quantised (transformers writes quantization_config
// into a quantised model's config.json): hftrain quantises at load (runspec/quantization_args.h) and does not
// read such checkpoints yet.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace hftrain {

// A model.from_pretrained config.json that carries quantization_config (a checkpoint already quantised, by
// bitsandbytes or another method) is not loaded: ConfigError naming the file and key, and what to do instead.
void refuse_quantized_checkpoint(const nlohmann::json& config, const std::string& config_path);

}  // namespace hftrain
