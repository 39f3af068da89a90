// What a model carrying a PEFT adapter knows of it (set by models/lora.h when adapters are attached): the
// adapter_config.json to save, the modules that hold lora_A / lora_B, and the tensors saved with the
// adapter. Also PEFT's tensor naming: "base_model.model." + the module path, with ".base_layer" before the
// weight / bias of an adapted layer (PEFT's LoraLayer wraps the original as base_layer).
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hftrain {

struct AdapterDescription {
  nlohmann::json config;                  // adapter_config.json
  std::set<std::string> adapted_modules;  // module paths with lora_A / lora_B
  std::vector<std::string> saved;         // model tensor names the adapter files hold, in named_parameters order
  bool holds(const std::string& tensor) const;
};

inline constexpr const char* kPeftPrefix = "base_model.model.";

// The name PEFT's adapter_model.safetensors gives a model tensor, and back.
std::string peft_tensor_name(const AdapterDescription& adapter, const std::string& model_name);
std::string model_tensor_name(const std::string& peft_name);

}  // namespace hftrain
