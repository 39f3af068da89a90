// Quantising a loaded model's linear layers to 4 bits (see quantize_model.h).
#include "models/quantize_model.h"

#include <cstdio>

#include "models/adaptable_linear.h"
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
  return std::to_string(quantized.size()) + " linear layers quantised to 4 bits (" + std::to_string(weight_elements) +
         " weights in " + mib + " MiB)";
}

Quant4Settings quant4_settings(const QuantizationArgs& args) {
  Quant4Settings s;
  s.type = args.bnb_4bit_quant_type == "nf4" ? kernels::Quant4Type::kNf4 : kernels::Quant4Type::kFp4;
  s.double_quant = args.bnb_4bit_use_double_quant;
  s.compute_dtype = args.bnb_4bit_compute_dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat;
  return s;
}

void check_quantization_plan(const RunSpec& spec, bool for_training) {
  if (!spec.model.quantization) return;
  if (for_training && !spec.peft && spec.model.peft_adapter.empty())
    throw ConfigError("model.quantization_config: a 4-bit model cannot be fine-tuned whole (its weights are frozen "
                      "codes); add a peft section: LoRA / DoRA adapters train over the quantised base, as PEFT requires");
  if (spec.zero.stage == 3)
    throw ConfigError("model.quantization_config: ZeRO stage 3 does not partition the 4-bit storage (not built); use "
                      "zero.stage 0, 1 or 2");
}

QuantizationSummary quantize_linear_layers(Model& model, const QuantizationArgs& args) {
  std::vector<std::string> skip = {"lm_head", "score", "classifier"};
  if (args.llm_int8_skip_modules) skip.insert(skip.end(), args.llm_int8_skip_modules->begin(), args.llm_int8_skip_modules->end());
  const Quant4Settings settings = quant4_settings(args);
  QuantizationSummary summary;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto* linear = dynamic_cast<AdaptableLinearImpl*>(item.value().get());
    if (!linear || skipped(item.key(), skip)) continue;
    linear->quantize_base(settings);
    summary.quantized.push_back(item.key());
    summary.weight_elements += linear->quantized()->numel();
    summary.storage_bytes += linear->quantized()->storage_bytes();
  }
  return summary;
}

}  // namespace hftrain
