// Quantising a loaded model's linear layers to 4 or 8 bits (see quantize_model.h).
#include "models/quantize_model.h"

#include <cstdio>

#include "models/adaptable_linear.h"
#include "models/quantized_state.h"
#include "util/error.h"

namespace hftrain {
namespace {

bool skipped(const std::string& name, const std::vector<std::string>& skip) {
  for (const auto& key : skip) {
    if (name == key || (name.size() > key.size() && name.compare(name.size() - key.size() - 1, std::string::npos, "." + key) == 0))
      return true;
    if (("." + name + ".").find("." + key + ".") != std::string::npos) return true;  // inside the skipped module
  }
  return false;
}

}  // namespace

std::string QuantizationSummary::line() const {
  char mib[32];
  std::snprintf(mib, sizeof mib, "%.2f", static_cast<double>(storage_bytes) / (1 << 20));
  return std::to_string(quantized.size()) + " linear layers quantised to " + std::to_string(bits) + " bits (" + std::to_string(weight_elements) +
         " weights in " + mib + " MiB)";
}

QuantSettings quant_settings(const QuantizationArgs& args) {
  QuantSettings s;
  s.bits = args.load_in_8bit ? 8 : 4;
  s.threshold = args.llm_int8_threshold;
  s.type = args.bnb_4bit_quant_type == "nf4" ? kernels::Quant4Type::kNf4 : kernels::Quant4Type::kFp4;
  s.double_quant = args.bnb_4bit_use_double_quant;
  s.compute_dtype = args.bnb_4bit_compute_dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat;
  return s;
}

void check_quantization_plan(const RunSpec& spec, bool for_training) {
  if (!spec.model.quantization) return;
  if (for_training && !spec.peft && spec.model.peft_adapter.empty())
    throw ConfigError("model.quantization_config: a quantised model cannot be fine-tuned whole (its weights are frozen "
                      "codes); add a peft section: LoRA / DoRA adapters train over the quantised base, as PEFT requires");
}

std::vector<std::pair<std::string, AdaptableLinearImpl*>> quantizable_layers(Model& model, const QuantizationArgs& args) {
  std::vector<std::string> skip = {"lm_head", "score", "classifier"};
  if (args.llm_int8_skip_modules) skip.insert(skip.end(), args.llm_int8_skip_modules->begin(), args.llm_int8_skip_modules->end());
  std::vector<std::pair<std::string, AdaptableLinearImpl*>> layers;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto* linear = dynamic_cast<AdaptableLinearImpl*>(item.value().get());
    if (linear && !skipped(item.key(), skip)) layers.emplace_back(item.key(), linear);
  }
  return layers;
}

QuantizationSummary quantize_linear_layers(Model& model, const QuantizationArgs& args) {
  const QuantSettings settings = quant_settings(args);
  QuantizationSummary summary;
  summary.bits = settings.bits;
  for (const auto& [name, linear] : quantizable_layers(model, args)) {
    linear->quantize_base(settings);  // a layer loaded quantised already stays as it is
    summary.quantized.push_back(name);
    summary.weight_elements += linear->quantized()->numel();
    const QuantizedWeight& q = *linear->quantized();
    summary.storage_bytes += q.storage_bytes();
    for (const torch::Tensor* t : {&q.packed, &q.absmax, &q.nested_absmax})
      if (t->defined()) summary.storage_tensors.emplace_back(t->numel(), t->numel() * static_cast<int64_t>(t->element_size()));
  }
  return summary;
}

void load_quantized_weights(Model& model, const QuantizationArgs& args,
                            const std::function<QuantStateParts(const std::string& weight_name)>& read, const std::string& where) {
  const QuantSettings expected = quant_settings(args);
  for (const auto& [name, linear] : quantizable_layers(model, args)) {
    const std::string weight = name + ".weight";
    linear->quantize_base(quantized_weight_from_state(weight, read(weight), expected, linear->out_features(),
                                                      linear->in_features(), where));
  }
}

void dequantize_linear_layers(Model& model) {
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (auto* linear = dynamic_cast<AdaptableLinearImpl*>(item.value().get())) linear->dequantize_base();
}

std::map<std::string, const QuantizedWeight*> quantized_weights(const Model& model) {
  std::map<std::string, const QuantizedWeight*> out;
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (const auto* linear = dynamic_cast<const AdaptableLinearImpl*>(item.value().get()); linear && linear->quantized())
      out.emplace(item.key() + ".weight", linear->quantized());
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> quantized_storage(const Model& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& [weight, q] : quantized_weights(model)) {
    const std::string module = weight.substr(0, weight.size() - std::string(".weight").size());
    if (q->eight_bit()) {
      out.emplace_back(module + ".SCB", q->absmax);
      continue;
    }
    out.emplace_back(weight + ".absmax", q->absmax);
    if (q->nested()) out.emplace_back(weight + ".nested_absmax", q->nested_absmax);
  }
  return out;
}

void describe_quantization(nlohmann::json& config, const Model& model) {
  const std::map<std::string, const QuantizedWeight*> four_bit = quantized_weights(model);
  if (four_bit.empty()) {
    config.erase("quantization_config");
    return;
  }
  if (config.contains("quantization_config") && config["quantization_config"].is_object()) return;
  const QuantSettings& s = four_bit.begin()->second->settings;
  nlohmann::json skip = nlohmann::json::array();
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (dynamic_cast<const AdaptableLinearImpl*>(item.value().get()) && !four_bit.count(item.key() + ".weight")) skip.push_back(item.key());
  const bool eight = s.bits == 8;  // BitsAndBytesConfig's defaults for the keys of the other width
  config["quantization_config"] = {
      {"_load_in_4bit", !eight}, {"_load_in_8bit", eight},
      {"bnb_4bit_compute_dtype", !eight && s.compute_dtype == torch::kBFloat16 ? "bfloat16" : "float32"},
      {"bnb_4bit_quant_storage", "uint8"}, {"bnb_4bit_quant_type", !eight && s.type == kernels::Quant4Type::kNf4 ? "nf4" : "fp4"},
      {"bnb_4bit_use_double_quant", !eight && s.double_quant}, {"llm_int8_enable_fp32_cpu_offload", false},
      {"llm_int8_has_fp16_weight", false}, {"llm_int8_skip_modules", skip}, {"llm_int8_threshold", eight ? s.threshold : 6.0},
      {"load_in_4bit", !eight}, {"load_in_8bit", eight}, {"quant_method", "bitsandbytes"}};
}

}  // namespace hftrain
