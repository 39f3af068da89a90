// ModelAndData: the data source, model and metric names built from a validated RunSpec. Shared by the
// train, eval and predict commands so they all build components the same way.
#pragma once

#include <memory>

#include "train/components.h"
#include "checkpoint/model_io.h"
#include "engine/precision.h"
#include "models/lora.h"

namespace hftrain {

struct ModelAndData {
  std::unique_ptr<DataSource> data;
  std::shared_ptr<Model> model;
  std::vector<MetricChoice> metrics;
  double label_smoothing_factor = 0.0;  // applied by compute_loss in training and evaluation
  bool prediction_loss_only = false;    // evaluation reports the loss only
  int64_t seed = 42;                    // training.seed (generation's default sampling seed)
  bool predict_with_generate = false;   // evaluation also generates; text metrics score the output
  GenerationArgs generation;            // the run spec's generation section (eval and predict)
  GenerationSourceFacts generation_sources;  // what generating must refuse (spec/generation_sources)
  // What the run's precision settings mean (engine/precision.h), decided once from the spec.
  PrecisionPolicy precision;
  // Forward passes run under autocast with this dtype (the policy's, or eval's full-precision cast); kFloat = fp32.
  torch::ScalarType compute_dtype = torch::kFloat;
  // Sharded construction with model.from_pretrained: the model's parameters are not loaded yet; the
  // training engine reads each rank's partition of them from these files (checked when planned).
  std::shared_ptr<const PretrainedPlan> deferred_weights;
  // Where this worker computes (place_on_device): the model's parameters and buffers, every batch, the
  // engine's buffers. The host until placed.
  torch::Device device = torch::kCPU;
  // training.gradient_checkpointing_offload: the training forward keeps each checkpointed block input in host
  // memory (models/checkpointing.h ActivationOffloadScope).
  bool offload_checkpoints = false;
  bool pin_memory = true;  // training.dataloader_pin_memory: how batches reach a GPU (data/batch_placement)
  // ZeRO stage 3: every forward gathers parameters collectively, so the ranks must run the same forwards
  // (evaluation then generates every example on every rank rather than a share each).
  bool parameters_sharded = false;
};

// Loads model.from_pretrained: an HF model directory (config.json + model.safetensors or the sharded
// index, HF loading rules) or, without config.json, a bare model.safetensors of exactly this model.
void load_pretrained(const std::string& dir, Model& model);

// Model::set_loaded_config from an HF directory's config.json and generation_config.json (when present).
void keep_loaded_config(Model& model, const std::string& dir);

// PEFT's PeftModel.from_pretrained(model, dir, is_trainable=True): attaches the adapter that dir's
// adapter_config.json describes to `model` (of hftrain type `model_type`, base loaded) and loads its
// adapter_model.safetensors. `base_model` fills an empty base_model_name_or_path.
AdapterSummary attach_adapter_dir(Model& model, const std::string& model_type, const std::string& dir,
                                  const std::string& base_model);

// Builds the data source first (so a bad data file fails before anything else), then the model
// initialised from `seed` (torch's global RNG is seeded here), or loaded from model.from_pretrained.
// `for_training`: where the engine plans sharded construction (zero.Init, engine/construction_plan.h) the
// model is built without holding it whole (DeferredInit; the engine materialises each rank's partition),
// where the model family supports it.
// `use`: the splits the command reads (data/dataset.h DataUse). The data section's max_*_samples limit
// the splits (data/sample_limits.h). `device`: the worker's; the model is built there and its pretrained
// weights are copied there one tensor at a time (models/construction.h DeviceConstruction: the same values as a
// host build), except under zero.Init, whose engine places the partitions.
ModelAndData build_model_and_data(const RunSpec& spec, const Components& components, bool for_training = false,
                                  const DataUse& use = {}, torch::Device device = torch::kCPU);

// The "place on device" step: the model (built on `device` already, or on the host, with the same random
// draws either way) moves to `device` and the pipeline remembers it, so batches, the engine and generation
// follow. A model under sharded construction (zero.Init) stays where it is: the engine places each rank's
// partition. ConfigError for what the device cannot run yet (NVMe offload off the CPU).
void place_on_device(ModelAndData& pipeline, const RunSpec& spec, torch::Device device);
// Its refusals alone (build_model_and_data checks them before building on a device).
void check_device_settings(const RunSpec& spec, torch::Device device);

// Throws ConfigError when the generation settings' sources hold what generation cannot honour
// (GenerationSourceFacts: unsupported generation_config.json settings, a decoder start token other than
// the model's). Called before anything generates; build_model_and_data calls it when evaluation generates.
void check_generation_sources(const ModelAndData& pipeline);

// `hftrain eval` / `predict`: the precision policy's full_eval_dtype (training.bf16_full_eval) turns the model
// itself into that dtype (HF casts the model for evaluation outside training); otherwise precision.bf16 keeps
// the weights and autocasts. Logs what it chose.
void apply_inference_precision(ModelAndData& pipeline);

}  // namespace hftrain
