// model.quantization_config: transformers' BitsAndBytesConfig under its own names (load_in_4bit,
// bnb_4bit_quant_type, bnb_4bit_use_double_quant, bnb_4bit_compute_dtype, llm_int8_skip_modules, ...), declared
// once. Given, the base's linear layers are quantised to 4 or 8 bits at load (QLoRA; models/quantize_model.h). It is
// taken out of the model section before that section is parsed (it is no option of a model type).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/issues.h"
#include "runspec/sections.h"

namespace hftrain {

struct QuantizationArgs {
  std::string quant_method = "bitsandbytes";
  bool load_in_4bit = false;
  bool load_in_8bit = false;                 // LLM.int8() (Linear8bitLt)
  std::string bnb_4bit_quant_type = "fp4";   // BitsAndBytesConfig's default; nf4 is QLoRA's
  bool bnb_4bit_use_double_quant = false;
  std::string bnb_4bit_compute_dtype = "float32";
  std::string bnb_4bit_quant_storage = "uint8";
  std::optional<std::vector<std::string>> llm_int8_skip_modules;  // null: only the output head stays unquantised
  // LLM.int8()'s settings (they shape 8-bit loading alone).
  double llm_int8_threshold = 6.0;
  bool llm_int8_has_fp16_weight = false;     // true refused: the quantised base is frozen
  bool llm_int8_enable_fp32_cpu_offload = false;
  std::set<std::string> given_keys;  // the keys the spec wrote (not an option)
  static void declare(Schema<QuantizationArgs>& s);
};

// Takes model.quantization_config out of root's model section and parses it into `out` (nullopt when absent or
// null); problems go to `issues` under model.quantization_config.<key>.
void take_quantization_config(YAML::Node& root, Issues& issues, std::optional<QuantizationArgs>& out);

}  // namespace hftrain
