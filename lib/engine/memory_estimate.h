// Per-rank memory of the training state before launch (`hftrain estimate`): what the data-parallel
// engine will hold for a ZeRO stage, world size, precision and offload device, from the parameter shapes
// alone; DeepSpeed's own estimator formulas for comparison; and an activation estimate. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hftrain {

// The model as the estimate sees it: every trainable tensor's element count and the module it belongs to.
struct ModelSize {
  std::vector<std::pair<std::string, int64_t>> tensors;  // parameter name -> elements (tied weights once)
  // Frozen parameters (a PEFT adapter's base), name -> elements: whole on every rank at stages 0-2, partitioned
  // like the trainable ones at stage 3; no gradient, master copy or optimizer state.
  std::vector<std::pair<std::string, int64_t>> frozen_tensors;
  // A 4-bit or 8-bit base (model.quantization_config): its quantised weights' elements and the bytes of their
  // packed codes and scales, whatever the precision (not in frozen_tensors); each storage tensor's elements and
  // bytes: whole on every rank at stages 0-2, at stage 3 partitioned as the frozen tensors are.
  int64_t quantized_elements = 0;
  int64_t quantized_bytes = 0;
  std::vector<std::pair<int64_t, int64_t>> quantized_storage;
  int64_t parameters() const;
  int64_t frozen_elements() const;  // quantized_elements included
  // DeepSpeed's largest_layer_params: the most elements one module holds directly (its own parameters,
  // not its children's), i.e. parameters grouped by the name up to the last '.'.
  int64_t largest_layer() const;
  // What one token runs through (trained and frozen): routed experts are the tensors named
  // <block>.experts.<n>.<...>; of each block's experts, `experts_per_token` count (MoE's active parameters).
  int64_t active_elements(int64_t experts_per_token) const;
  int64_t routed_expert_elements() const;  // the trained tensors of routed experts (as active_elements names them)
};

// How the run lays out its state.
struct StateLayout {
  int stage = 0;
  int64_t world_size = 1;
  bool mixed_precision = false;          // bf16/fp16 parameters and gradients, fp32 master weights
  std::string offload = "none";          // none | cpu | nvme: where master weights and optimizer state live
  bool offload_param = false;            // stage 3: the parameter shards live there too
  int64_t persistence_threshold = 0;     // stage 3: tensors below this many elements stay whole
  int64_t optimizer_state_elements = 0;  // the optimizer's state for the whole model (elements, fp32)
  // distributed.expert_parallel_size where the engine holds the experts on their members' ranks (stages 1-2 of a
  // run that trains them: engine/construction_plan.h holds_experts_apart), else 1.
  int64_t expert_parallel_size = 1;
};

// Bytes one rank holds, by kind and by place.
struct StateBytes {
  int64_t params = 0, grads = 0, master = 0, optimizer = 0;
  int64_t worker = 0;   // in the worker's own memory (the accelerator, or RAM on a CPU build)
  int64_t host = 0;     // offloaded to host RAM (cpu offload)
  int64_t nvme = 0;     // offloaded to NVMe files
  int64_t total() const { return params + grads + master + optimizer; }
};

StateBytes estimate_state_bytes(const ModelSize& model, const StateLayout& layout);

// The optimizer's state in elements for the model's tensors, as hftrain's optimizers allocate it:
// adamw/adam 2 per parameter, lion 1, adagrad 1, sgd 1 with momentum (else 0), adafactor factored
// rows + columns per matrix (plus one per parameter with beta1). `shapes` are the tensors' dimensions.
int64_t optimizer_state_elements(const std::string& optimizer, const std::vector<std::vector<int64_t>>& shapes,
                                 bool sgd_momentum, bool adafactor_beta1);

// DeepSpeed's estimators, as published in deepspeed/runtime/zero/stage_1_and_2.py
// (estimate_zero2_model_states_mem_needs) and stage3.py (estimate_zero3_model_states_mem_needs, with
// zero_init), additional_buffer_factor 1.5: bytes per GPU and per node's CPU.
struct DeepSpeedEstimate {
  int64_t gpu = 0;
  int64_t cpu = 0;
};
DeepSpeedEstimate deepspeed_zero2_estimate(int64_t params, int64_t gpus_per_node, int64_t nodes, bool cpu_offload);
DeepSpeedEstimate deepspeed_zero3_estimate(int64_t params, int64_t largest_layer, int64_t gpus_per_node, int64_t nodes,
                                           bool cpu_offload, bool cpu_offload_params);

// Activations kept for backward by one rank's micro-batch of a transformer, per Korthikanti et al. 2022
// ("Reducing Activation Recomputation in Large Transformer Models", arXiv:2205.05198, eq. 1):
// s*b*h*(34 + 5*a*s/h) bytes per layer in 16-bit, twice that in fp32; with gradient checkpointing each
// layer keeps only its input (s*b*h elements) and one layer's activations are live during its recompute.
struct ActivationShape {
  int64_t layers = 0, hidden = 0, heads = 0, sequence = 0, batch = 0;
  bool mixed_precision = false;
};
int64_t activation_bytes(const ActivationShape& shape, bool gradient_checkpointing);

}  // namespace hftrain
