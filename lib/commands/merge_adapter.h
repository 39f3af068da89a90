// `hftrain merge-adapter BASE_DIR ADAPTER_DIR OUT_DIR`: PEFT's merge_and_unload + save_pretrained. Loads the
// HF model directory BASE_DIR, attaches the PEFT adapter of ADAPTER_DIR (adapter_config.json +
// adapter_model.safetensors) and writes OUT_DIR as a plain HF model directory whose weights have the adapter
// merged in, in the base's dtype (bf16 / fp16 weights and config.json's torch_dtype stay so), config.json kept
// from the base and generation_config.json only when the base has one. No run spec is needed; when ADAPTER_DIR
// holds the run_spec.yaml of a run over a 4-bit base (model.quantization_config), the base is quantised as that
// run quantised it, every quantised layer is written dequantised (the adapted ones with the adapter merged in),
// and the weights are saved in the compute dtype (bnb_4bit_compute_dtype).
#pragma once

#include <string>

namespace hftrain {

struct MergeAdapterRequest {
  std::string base_dir, adapter_dir, out_dir;
};

int run_merge_adapter(const MergeAdapterRequest& request);

}  // namespace hftrain
