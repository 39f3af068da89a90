// transformers' bitsandbytes integration for 4-bit and 8-bit loading (replace_with_bnb_linear): after the weights
// are loaded, every linear layer of the model but the output head and llm_int8_skip_modules is quantised to 4 bits
// (Linear4bit) or 8 bits (Linear8bitLt, LLM.int8()) (AdaptableLinearImpl::quantize_base); norms, embeddings and the
// head stay as they are.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"
#include "models/quantized_weight.h"
#include "runspec/quantization_args.h"
#include "runspec/run_spec.h"

namespace hftrain {

struct QuantizationSummary {
  std::vector<std::string> quantized;  // module names, in module order
  int64_t weight_elements = 0;         // elements of the quantised weights
  int64_t storage_bytes = 0;           // their packed codes and quant state
  std::vector<std::pair<int64_t, int64_t>> storage_tensors;  // (elements, bytes) of each of those tensors
  int bits = 4;                        // 4 or 8
  std::string line() const;            // for the log
};

// The settings bitsandbytes' Linear4bit (blocks of 64) or, with load_in_8bit, Linear8bitLt gets from
// BitsAndBytesConfig.
QuantSettings quant_settings(const QuantizationArgs& args);

// What a run with model.quantization_config needs, as transformers and PEFT require it: adapters to train (a
// quantised model is not fine-tuned whole). ConfigError naming the key otherwise; nothing without the key.
void check_quantization_plan(const RunSpec& spec, bool for_training);

// Quantises the model's linear layers. The head is skipped: modules named lm_head, score or classifier (a
// sequence classifier's), as transformers keeps the output layer in the compute dtype. A skip entry names a
// module equal to it, ending with '.' + it, or a module inside it. Works on a meta-built model (estimate).
QuantizationSummary quantize_linear_layers(Model& model, const QuantizationArgs& args);

class AdaptableLinearImpl;
// The layers quantize_linear_layers quantises, by module name, in module order (those a quantised checkpoint
// holds quantised, as transformers selects them for both).
std::vector<std::pair<std::string, AdaptableLinearImpl*>> quantizable_layers(Model& model, const QuantizationArgs& args);

// The file tensors of one 4-bit or 8-bit weight (models/quantized_state.h: [""] the codes, [suffix] the quant state).
using QuantStateParts = std::map<std::string, torch::Tensor>;
// A quantised checkpoint's weights installed in their layers: read("<module>.weight") gives each quantizable
// layer's file tensors, which are checked (a ConfigError naming `where` and the tensor) one layer at a time.
void load_quantized_weights(Model& model, const QuantizationArgs& args,
                            const std::function<QuantStateParts(const std::string& weight_name)>& read, const std::string& where);

// Every quantised layer back to a plain float32 weight holding its dequantised values (a merge's target).
void dequantize_linear_layers(Model& model);

// The model's quantised (4-bit and 8-bit) weights by parameter name ("<module>.weight").
std::map<std::string, const QuantizedWeight*> quantized_weights(const Model& model);

// The storage of the quantised weights that is not a parameter, by bitsandbytes' names: each 4-bit weight's block
// scales "<module>.weight.absmax" (float32, or uint8 codes with double quantisation) and "<module>.weight.nested_absmax"
// (float32), each 8-bit weight's row scales "<module>.SCB" (float32). Handles on the tensors the products read (the
// codes are the parameter "<module>.weight" itself), so that ZeRO-3 partitions them with the frozen parameters of
// their gather unit (engine/frozen_partition.h). The code tables (quant_map, nested_quant_map: 16 and 256 values
// shared by every weight) are not listed: they stay whole.
std::vector<std::pair<std::string, torch::Tensor>> quantized_storage(const Model& model);

// config.json's quantization_config for a save of `model`: where it has quantised layers, the loaded one kept, else
// BitsAndBytesConfig.to_dict() of their settings with the linear layers left unquantised as
// llm_int8_skip_modules (so that loading selects the same layers); where it has none (a merged or dequantised
// model), removed.
void describe_quantization(nlohmann::json& config, const Model& model);

}  // namespace hftrain
