// A 4-bit weight as bitsandbytes serialises it (the state dict of a Linear4bit, which transformers'
// save_pretrained writes into the safetensors files; bitsandbytes functional.py QuantState.as_dict(packed=True)
// and nn/modules.py Params4bit / Linear4bit). Under the weight's name W:
//   W                                   uint8 [(n + 1) / 2, 1]: the packed codes (quantized_weight.h)
//   W.absmax                            float32 [blocks]; uint8 [blocks] with double quantisation
//   W.quant_map                         float32 [16]: the code values
//   W.nested_absmax, W.nested_quant_map float32 [nested blocks], float32 [256] (double quantisation only)
//   W.quant_state.bitsandbytes__<type>  uint8: the UTF-8 bytes of a JSON object {quant_type, blocksize, dtype
//                                       (the weight's before quantisation), shape [out, in]; with double
//                                       quantisation nested_blocksize, nested_dtype, nested_offset}
// An 8-bit weight (Linear8bitLt's state dict, bitsandbytes nn/modules.py) lies under its module M (W = M.weight):
//   W                                   int8 [out, in]: the codes (bitsandbytes' CB)
//   M.SCB                               float32 [out]: each row's absmax
//   M.weight_format                     uint8 [] 0: row-major (absent in old files; 1-3, the tiled GPU layouts of
//                                       bitsandbytes before 0.44, are refused)
// Reading checks every tensor against the layer and the checkpoint's quantization_config, naming it.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/quantized_weight.h"

namespace hftrain {

// The names that follow "W." for W's quant state (the JSON tensor under both of its names).
const std::vector<std::string>& quant_state_suffixes();

// The names that follow "M." for an 8-bit weight's state (SCB, weight_format).
const std::vector<std::string>& int8_module_suffixes();

// The weight `weight_name` of a layer [out, in] from its file tensors: parts[""] the codes, parts[suffix] the
// quant state (an 8-bit weight's: parts["SCB"], parts["weight_format"]). `expected` is the checkpoint's quantization_config (type, double quantisation, compute dtype); the
// block sizes come from the quant state. A tensor missing, of another dtype or shape, a quant state that
// disagrees with `expected` or the layer, or one hftrain does not build is a ConfigError naming `where` and the
// tensor.
QuantizedWeight quantized_weight_from_state(const std::string& weight_name, const std::map<std::string, torch::Tensor>& parts,
                                            const QuantSettings& expected, int64_t out, int64_t in, const std::string& where);

// The file tensors of `w` under `weight_name`, as bitsandbytes writes them (the codes first).
std::vector<std::pair<std::string, torch::Tensor>> quant_state_tensors(const std::string& weight_name, const QuantizedWeight& w);

}  // namespace hftrain
