// model.quantization_config (see quantization_args.h).
#include "runspec/quantization_args.h"

#include "runspec/quantized_checkpoint.h"
#include "util/error.h"

namespace hftrain {
namespace {

std::function<std::string(const bool&)> only_false(const std::string& why) {
  return [why](const bool& v) { return v ? why : std::string(); };
}

}  // namespace

void QuantizationArgs::declare(Schema<QuantizationArgs>& s) {
  s.add("quant_method", &QuantizationArgs::quant_method, "The quantiser: bitsandbytes (as a quantised model's config.json names it).")
      .choices({"bitsandbytes"});
  s.add("load_in_4bit", &QuantizationArgs::load_in_4bit,
        "Quantise the base's linear layers to 4 bits at load (bitsandbytes' Linear4bit; QLoRA). Adapters (a peft "
        "section) are required to train.");
  s.add("load_in_8bit", &QuantizationArgs::load_in_8bit, "LLM.int8() 8-bit loading: not built (use load_in_4bit).")
      .check(only_false("LLM.int8() 8-bit loading is not built in hftrain; load_in_4bit (NF4 / FP4) is"));
  s.add("bnb_4bit_quant_type", &QuantizationArgs::bnb_4bit_quant_type,
        "The 4-bit data type: nf4 (QLoRA's NormalFloat) or fp4 (bitsandbytes' default).").choices({"nf4", "fp4"});
  s.add("bnb_4bit_use_double_quant", &QuantizationArgs::bnb_4bit_use_double_quant,
        "Double quantisation: the block absmaxes quantised to 8 bits in blocks of 256 (about 0.37 bits a weight saved).");
  s.add("bnb_4bit_compute_dtype", &QuantizationArgs::bnb_4bit_compute_dtype,
        "The dtype the weights are dequantised into and multiplied in (bf16 autocast overrides it, as in HF).")
      .check([](const std::string& v) -> std::string {
        if (v == "float32" || v == "bfloat16") return "";
        if (v == "float16") return "float16 products are not built on the CPU; use bfloat16 or float32";
        return "'" + v + "' is not one of: float32, bfloat16";
      });
  s.add("bnb_4bit_quant_storage", &QuantizationArgs::bnb_4bit_quant_storage,
        "The packed storage's dtype: uint8 only (other storages serve FSDP sharding, not built).")
      .check([](const std::string& v) -> std::string {
        return v == "uint8" ? "" : "'" + v + "': only uint8 storage is built (other storage dtypes serve FSDP)";
      });
  s.add("llm_int8_skip_modules", &QuantizationArgs::llm_int8_skip_modules,
        "Modules left unquantised (a module named so, ending with '.' + the name, or inside it); null = none but the head.");
  s.add("llm_int8_threshold", &QuantizationArgs::llm_int8_threshold, "LLM.int8()'s outlier threshold: 6.0 only (8-bit is not built).")
      .check([](const double& v) { return v == 6.0 ? std::string() : std::string("an 8-bit setting; only its default 6.0 is accepted"); });
  s.add("llm_int8_has_fp16_weight", &QuantizationArgs::llm_int8_has_fp16_weight, "LLM.int8() setting: false only.")
      .check(only_false("an 8-bit setting; only its default false is accepted"));
  s.add("llm_int8_enable_fp32_cpu_offload", &QuantizationArgs::llm_int8_enable_fp32_cpu_offload,
        "Offloading unquantised modules to the CPU under a device map: false only.")
      .check(only_false("device maps are not built; only false is accepted"));
}

void take_quantization_config(YAML::Node& root, Issues& issues, std::optional<QuantizationArgs>& out) {
  YAML::Node model = lookup(root, "model");
  if (!model.IsMap()) return;
  const YAML::Node v = lookup(model, "quantization_config");
  if (!v.IsDefined()) return;
  if (!v.IsNull()) {
    QuantizationArgs args;
    schema_of<QuantizationArgs>().parse(v, "model.quantization_config", args, issues);
    if (!args.load_in_4bit && !args.load_in_8bit)
      issues.add("model.quantization_config.load_in_4bit", v, "neither load_in_4bit nor load_in_8bit is true: nothing to quantise");
    out = args;
  }
  while (lookup(model, "quantization_config").IsDefined()) model.remove("quantization_config");
}

void refuse_quantized_checkpoint(const nlohmann::json& config, const std::string& config_path) {
  if (!config.contains("quantization_config") || config["quantization_config"].is_null()) return;
  const nlohmann::json& q = config["quantization_config"];
  const std::string method = q.is_object() && q.contains("quant_method") && q["quant_method"].is_string()
                                 ? q["quant_method"].get<std::string>() : std::string("unknown");
  throw ConfigError(config_path + ": quantization_config (quant_method " + method + "): loading a checkpoint that is "
                    "already quantised is not built; point model.from_pretrained at the unquantised model and set "
                    "model.quantization_config to quantise it at load");
}

}  // namespace hftrain
