// PEFT tensor names (see adapter_description.h).
#include "models/adapter_description.h"

#include <algorithm>

namespace hftrain {

bool AdapterDescription::holds(const std::string& tensor) const {
  return std::find(saved.begin(), saved.end(), tensor) != saved.end();
}

std::string peft_tensor_name(const AdapterDescription& adapter, const std::string& model_name) {
  const auto dot = model_name.rfind('.');
  if (dot != std::string::npos) {
    const std::string module = model_name.substr(0, dot), leaf = model_name.substr(dot + 1);
    if ((leaf == "weight" || leaf == "bias") && adapter.adapted_modules.count(module))
      return kPeftPrefix + module + ".base_layer." + leaf;
  }
  return kPeftPrefix + model_name;
}

std::string model_tensor_name(const std::string& peft_name) {
  std::string name = peft_name.rfind(kPeftPrefix, 0) == 0 ? peft_name.substr(std::string(kPeftPrefix).size()) : peft_name;
  const std::string base = ".base_layer.";
  if (const auto at = name.rfind(base); at != std::string::npos) name = name.substr(0, at) + "." + name.substr(at + base.size());
  return name;
}

}  // namespace hftrain
