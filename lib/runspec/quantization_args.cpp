// model.quantization_config (see quantization_args.h).
#include "runspec/quantization_args.h"

#include <cmath>

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
  s.add("load_in_8bit", &QuantizationArgs::load_in_8bit,
        "Quantise the base's linear layers to 8 bits at load (bitsandbytes' Linear8bitLt; LLM.int8(): int8 rows with "
        "one absmax each, outlier features multiplied in the compute dtype). Adapters (a peft section) are required to train.");
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
  s.add("llm_int8_threshold", &QuantizationArgs::llm_int8_threshold,
        "LLM.int8()'s outlier threshold: input features with any |x| at or above it are multiplied in the compute dtype, "
        "the rest in int8; 0 = every feature in int8 (8-bit only).")
      .check([](const double& v) {
        return std::isfinite(v) && v >= 0 ? std::string() : std::string("expected a finite number >= 0 (0: no outlier decomposition)");
      });
  s.add("llm_int8_has_fp16_weight", &QuantizationArgs::llm_int8_has_fp16_weight,
        "Keep a trainable 16-bit copy of the 8-bit weights: false only.")
      .check(only_false("a trainable 8-bit base (Linear8bitLt with has_fp16_weights) is not built: the quantised base is "
                        "frozen and adapters train over it (QLoRA); leave it false"));
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
    if (v.IsMap())
      for (const auto& kv : v) args.given_keys.insert(kv.first.Scalar());
    if (!args.load_in_4bit && !args.load_in_8bit)
      issues.add("model.quantization_config.load_in_4bit", v, "neither load_in_4bit nor load_in_8bit is true: nothing to quantise");
    if (args.load_in_4bit && args.load_in_8bit)
      issues.add("model.quantization_config.load_in_8bit", v, "load_in_4bit and load_in_8bit are both true; choose one");
    out = args;
  }
  while (lookup(model, "quantization_config").IsDefined()) model.remove("quantization_config");
}

std::optional<QuantizationArgs> checkpoint_quantization(const nlohmann::json& config, const std::string& config_path,
                                                        const std::string& compute_dtype) {
  if (!config.contains("quantization_config") || config["quantization_config"].is_null()) return std::nullopt;
  const std::string where = config_path + ": quantization_config";
  nlohmann::json q = config["quantization_config"];
  if (!q.is_object()) throw ConfigError(where + ": expected an object (BitsAndBytesConfig.to_dict())");
  const nlohmann::json method = q.value("quant_method", nlohmann::json());
  if (method != "bitsandbytes")
    throw ConfigError(where + ".quant_method: " + method.dump() + ": only bitsandbytes 4-bit and 8-bit checkpoints load (the "
                      "weights of other methods are not built); point model.from_pretrained at the unquantised model "
                      "and set model.quantization_config to quantise it at load");
  for (const std::string key : {"load_in_4bit", "load_in_8bit"}) {  // to_dict() writes both spellings
    const std::string hidden = "_" + key;
    if (!q.contains(hidden)) continue;
    if (q.contains(key) && q[key] != q[hidden])
      throw ConfigError(where + "." + hidden + ": " + q[hidden].dump() + " disagrees with " + key + " " + q[key].dump());
    q[key] = q[hidden];
    q.erase(hidden);
  }
  if (!compute_dtype.empty()) q["bnb_4bit_compute_dtype"] = compute_dtype;
  if (q.value("bnb_4bit_compute_dtype", nlohmann::json()) == "float16")
    throw ConfigError(where + ".bnb_4bit_compute_dtype: float16 products are not built on the CPU; choose bfloat16 or "
                      "float32 with model.quantization_config: {bnb_4bit_compute_dtype: ...} (the weights load as they are)");
  Issues issues(config_path);
  issues.mark_origin("quantization_config", config_path);
  QuantizationArgs args;
  schema_of<QuantizationArgs>().parse(YAML::Load(q.dump()), "quantization_config", args, issues);
  if (args.load_in_4bit == args.load_in_8bit)
    issues.add("quantization_config.load_in_4bit", std::string(args.load_in_4bit ? "and load_in_8bit both true" : "and load_in_8bit both false") +
                                                       ": a bitsandbytes checkpoint is quantised to 4 bits or to 8 bits");
  issues.throw_if_any();
  return args;
}

std::optional<QuantizationArgs> quantization_of_checkpoint(const nlohmann::json& config, const std::string& config_path,
                                                           const std::optional<QuantizationArgs>& spec) {
  const std::string chosen_dtype = spec && spec->given_keys.count("bnb_4bit_compute_dtype") ? spec->bnb_4bit_compute_dtype : "";
  std::optional<QuantizationArgs> args = checkpoint_quantization(config, config_path, chosen_dtype);
  if (!args || !spec) return args;
  const YAML::Node mine = schema_of<QuantizationArgs>().dump(*spec), theirs = schema_of<QuantizationArgs>().dump(*args);
  for (const auto& key : spec->given_keys) {
    if (key == "bnb_4bit_compute_dtype") continue;
    const std::string a = YAML::Dump(mine[key]), b = YAML::Dump(theirs[key]);
    if (a != b)
      throw ConfigError("model.quantization_config." + key + ": " + a + " disagrees with " + config_path +
                        "'s quantization_config (" + b + "): the checkpoint is already quantised with its settings; leave "
                        "the key out (bnb_4bit_compute_dtype alone may be chosen)");
  }
  args->given_keys = spec->given_keys;
  return args;
}

}  // namespace hftrain
