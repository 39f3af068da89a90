// ModelAndData construction (see model_and_data.h).
#include "train/model_and_data.h"

#include <algorithm>
#include <filesystem>

#include "checkpoint/model_io.h"
#include "checkpoint/quantizing_load.h"
#include "data/sample_limits.h"
#include "engine/construction_plan.h"
#include "engine/precision.h"
#include "log/logger.h"
#include "models/construction.h"
#include "models/lora.h"
#include "models/quantize_model.h"
#include "runspec/spec_rules.h"
#include "util/fs.h"

namespace hftrain {

void load_pretrained(const std::string& dir, Model& model) {
  if (!std::filesystem::is_directory(dir))
    throw ConfigError("model.from_pretrained: '" + dir + "' is not a directory");
  if (std::filesystem::exists(dir + "/config.json")) {
    load_pretrained_dir(dir, model);  // an HF model directory: HF's loading rules
  } else {
    load_model_weights(dir + "/model.safetensors", model);  // bare weights written for this exact model
  }
}

namespace {

// A JSON file's contents; null when `path` does not exist.
nlohmann::json read_json_if_exists(const std::string& path) {
  if (!std::filesystem::exists(path)) return nullptr;
  try {
    return nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path + ": not valid JSON: " + e.what());
  }
}

// Text metrics need generated text, decoded by a tokenizer; generation needs a model that generates.
void check_generation_metrics(const ModelAndData& p, const RunSpec& spec, const Components& components) {
  if (spec.training.predict_with_generate && !p.model->is_causal_lm() && !p.model->is_encoder_decoder())
    throw ConfigError("training.predict_with_generate: model '" + spec.model.type +
                      "' does not generate text (it needs a causal LM or an encoder-decoder model)");
  for (const auto& m : p.metrics) {
    if (components.metrics.build(m.type, m.options)->input() != MetricInput::kText) continue;
    if (!spec.training.predict_with_generate)
      throw ConfigError("metrics: '" + m.key + "' scores generated text; set training.predict_with_generate: true so "
                        "that evaluation generates (HF Seq2SeqTrainingArguments)");
    if (!p.data->tokenizer())
      throw ConfigError("metrics: '" + m.key + "' scores decoded text, and data '" + spec.data.type +
                        "' has no tokenizer to decode with (give the data source a tokenizer)");
  }
}

// The data's token ids must index the model's embeddings (otherwise the first batch fails deep inside
// LibTorch with an index error), and so must a generation eos_token_id where this command generates (eval /
// predict, or training with predict_with_generate); a training run that never generates only warns, as
// HF trains a model whose generation settings are unusable (GPT2Config(vocab_size=256) keeps eos 50256).
void check_vocabulary(const ModelAndData& p, const RunSpec& spec, const DataShape& shape, bool generates) {
  const nlohmann::json config = p.model->config_json();
  if (!config.contains("vocab_size") || !config["vocab_size"].is_number_integer()) return;
  const int64_t vocab = config["vocab_size"].get<int64_t>();
  const std::string where = spec.model.from_pretrained.empty() ? "model.vocab_size" : spec.model.from_pretrained + "/config.json";
  if (shape.vocab_size > vocab)
    throw ConfigError("model.vocab_size: data '" + spec.data.type + "' gives token ids up to " +
                      std::to_string(shape.vocab_size - 1) + " (its tokenizer has " + std::to_string(shape.vocab_size) +
                      "), but the model has " + std::to_string(vocab) + " embeddings (" + where +
                      "); use the model's own tokenizer or a model with a larger vocabulary");
  if (!p.generation.eos_token_id || (*p.generation.eos_token_id >= 0 && *p.generation.eos_token_id < vocab)) return;
  auto origin = spec.origins.find("generation.eos_token_id");
  const std::string problem =
      "generation.eos_token_id: " + std::to_string(*p.generation.eos_token_id) + " is outside the model's vocabulary (0.." +
      std::to_string(vocab - 1) + ", " + where + ")" +
      (origin == spec.origins.end() ? "" : "; it comes from " + origin->second) +
      "; set generation.eos_token_id to a token of the model (or null for the tokenizer's eos)";
  if (generates) throw ConfigError(problem);
  log_warning(problem + ". Training goes on: nothing generates in this run, but eval / predict would refuse it");
}

// model.quantization_config: the loaded base's linear layers to 4 or 8 bits (QLoRA).
void quantize_base(ModelAndData& p, const RunSpec& spec) {
  if (!spec.model.quantization) return;
  if (p.model->initialisation_deferred())
    throw ConfigError("model.quantization_config: zero.zero3_init_flag built the model sharded, and a quantised base is "
                      "built by quantising each weight as it is read instead; set zero.zero3_init_flag: false (ZeRO-3 still "
                      "partitions the quantised storage when the engine is built)");
  log_info("quantization: " + quantize_linear_layers(*p.model, *spec.model.quantization).line());
}

// PEFT: the peft section's adapters, or those of model.peft_adapter, attached to the loaded base.
void attach_adapters(ModelAndData& p, const RunSpec& spec, bool for_training, const ConstructionPlan& construction) {
  if (!spec.peft && spec.model.peft_adapter.empty()) return;
  AdapterSummary summary;
  if (!spec.model.peft_adapter.empty()) {
    if (spec.peft)
      throw ConfigError("peft: model.peft_adapter '" + spec.model.peft_adapter + "' brings its own adapter_config.json; "
                        "remove the peft section (or model.peft_adapter to start a new adapter)");
    summary = attach_adapter_dir(*p.model, spec.model.type, spec.model.peft_adapter, spec.model.from_pretrained);
  } else {
    PeftArgs args = *spec.peft;
    if (args.base_model_name_or_path.empty()) args.base_model_name_or_path = spec.model.from_pretrained;
    summary = attach_lora(*p.model, spec.model.type, args, "peft");
  }
  for (const auto& note : summary.notes) log_info("peft: " + note);
  log_info("peft: " + std::string(p.model->adapter()->config.value("use_dora", false) ? "DoRA" : "LoRA") + " on " +
           std::to_string(summary.adapted_layers) + " layers" + (for_training ? ", base frozen" : ""));
  if (for_training) log_info(summary.line());  // PEFT's print_trainable_parameters
  note_adapters(construction);
}

// TRL's SFTConfig.eos_token (data.eos_token), as transformers' Trainer aligns the model with its tokenizer
// before training (trainer_utils.py align_special_tokens): the saved config.json's eos_token_id becomes the
// token, and so does generation_config.json's, where HF would keep the earlier ids after it in a list
// ([new, old]); hftrain's generation stops at one token, so the new one alone is written. Generation here
// stops at it too, unless the spec itself names generation.eos_token_id.
void carry_eos_token(ModelAndData& p, const RunSpec& spec, int64_t eos) {
  nlohmann::json config = p.model->saved_config_json();
  nlohmann::json generation = p.model->saved_generation_config_json();
  config["eos_token_id"] = eos;
  if (generation.is_object()) generation["eos_token_id"] = eos;
  p.model->set_loaded_config(std::move(config), std::move(generation));
  const std::vector<std::string>& own = spec.generation_sources.given_keys;
  if (std::find(own.begin(), own.end(), "eos_token_id") != own.end()) return;
  p.generation.eos_token_id = eos;
  // A generation_config.json's list of several eos ids no longer stands in generation's way: its eos is this one.
  std::vector<std::string>& unsupported = p.generation_sources.unsupported;
  unsupported.erase(std::remove_if(unsupported.begin(), unsupported.end(),
                                   [](const std::string& u) { return u.find(": eos_token_id: ") != std::string::npos; }),
                    unsupported.end());
}

}  // namespace

void keep_loaded_config(Model& model, const std::string& dir) {
  model.set_loaded_config(read_json_if_exists(dir + "/config.json"), read_json_if_exists(dir + "/generation_config.json"));
}

AdapterSummary attach_adapter_dir(Model& model, const std::string& model_type, const std::string& dir,
                                  const std::string& base_model) {
  const std::string config = dir + "/" + kAdapterConfigFile;
  PeftArgs args = read_adapter_config(config);
  args.inference_mode = false;
  if (args.base_model_name_or_path.empty()) args.base_model_name_or_path = base_model;
  AdapterSummary summary = attach_lora(model, model_type, args, config);
  load_model_weights(dir + "/" + kAdapterWeightsFile, model);
  log_info("peft: adapter loaded from " + dir);
  return summary;
}

ModelAndData build_model_and_data(const RunSpec& spec, const Components& components, bool for_training,
                                  const DataUse& use, torch::Device device) {
  if (!device.is_cpu()) check_device_settings(spec, device);  // before a model is built on the device
  ModelAndData p;
  p.data = components.data.build(spec.data.type, spec.data.options, use);
  const DataSampleLimits& l = spec.data_limits;
  const SplitSampleLimits limits{l.max_train_samples, l.max_eval_samples, l.max_predict_samples};
  if (limits.any()) p.data = std::make_unique<SampleLimitedSource>(std::move(p.data), limits);
  DataShape shape = p.data->shape();
  ModelContext context{shape.vocab_size, shape.max_length, shape.num_labels, shape.num_features, shape.label_names};
  torch::manual_seed(static_cast<uint64_t>(spec.training.seed));
  if (spec.model.quantization) check_quantization_plan(spec, for_training);  // before the model is built or read
  const ConstructionPlan construction = plan_construction(spec, for_training);  // the engine's (zero.Init)
  const bool hf_dir = !spec.model.from_pretrained.empty() &&
                      std::filesystem::exists(spec.model.from_pretrained + "/config.json");
  // QLoRA from an HF directory (or from the model's own initialisation): built with the parameters released, then
  // read (or drawn) a parameter at a time and quantised as it arrives (checkpoint/quantizing_load), so the float base
  // is never whole in memory.
  const bool quantize_while_loading =
      spec.model.quantization && (hf_dir || spec.model.from_pretrained.empty()) && !construction.deferred;
  {
    DeferredInit deferred(construction.deferred || quantize_while_loading);
    // Straight to the worker's device, a tensor at a time (the host never holds the whole model); under zero.Init
    // the engine places each rank's partition instead.
    std::unique_ptr<DeviceConstruction> on_device;
    if (!device.is_cpu() && !construction.deferred) on_device = std::make_unique<DeviceConstruction>(device);
    p.model = components.models.build(spec.model.type, spec.model.options, context);
  }
  if (hf_dir) keep_loaded_config(*p.model, spec.model.from_pretrained);
  bool loaded = false;
  if (quantize_while_loading && p.model->initialisation_deferred()) {
    const int64_t layers = load_pretrained_quantizing(spec.model.from_pretrained, *p.model, *spec.model.quantization);
    log_info("quantization: " + std::to_string(layers) + " linear layers quantised as their weights were " +
             (hf_dir ? "read from " + spec.model.from_pretrained : std::string("initialised")) +
             " (the float base is never whole in memory)");
    loaded = true;
  }
  if (p.data->task() == TaskKind::kSeq2Seq && !p.model->is_encoder_decoder())
    throw ConfigError("model.type: data '" + spec.data.type + "' is a sequence-to-sequence task (source and target of "
                      "their own lengths) and needs an encoder-decoder model such as t5, not '" + spec.model.type + "'");
  p.model->set_lm_loss({spec.training.chunked_lm_loss, spec.training.lm_loss_chunk_tokens});
  const bool packable_task = p.data->task() == TaskKind::kCausalLm || p.data->task() == TaskKind::kSeq2Seq;
  if (for_training && spec.training.padding_free && (!packable_task || !p.model->supports_padding_free()))
    throw ConfigError("training.padding_free: packs causal-LM examples (model types gpt, gpt2, llama) and "
                      "sequence-to-sequence pairs (t5, bart); model '" + spec.model.type + "' on data '" + spec.data.type +
                      "' " + (!packable_task ? "is neither task" : "cannot attend within packed examples") +
                      " (set padding_free: false)");
  if (spec.training.gradient_checkpointing) p.model->enable_gradient_checkpointing();
  p.offload_checkpoints = for_training && spec.training.gradient_checkpointing_offload;
  if (p.offload_checkpoints && device.is_cpu())
    log_info("training.gradient_checkpointing_offload: this worker computes on the CPU, so the checkpointed block "
             "inputs already live in host memory; they are still copied there and back (the same path as on a GPU), "
             "which saves no memory");
  if (spec.training.tiled_mlp) p.model->enable_tiled_mlp(spec.training.tiled_mlp_tiles);
  if (!spec.training.tiled_mlp && spec.training.tiled_mlp_tiles > 0)
    throw ConfigError("training.tiled_mlp_tiles: " + std::to_string(spec.training.tiled_mlp_tiles) + " slices, but tiled_mlp is false");
  if (spec.training.neftune_noise_alpha > 0) p.model->set_neftune_noise_alpha(spec.training.neftune_noise_alpha);
  p.deferred_weights = deferred_weights(construction, spec, *p.model);  // zero.Init: each rank's partition, later
  if (!loaded && !p.model->initialisation_deferred() && !spec.model.from_pretrained.empty())
    load_pretrained(spec.model.from_pretrained, *p.model);
  quantize_base(p, spec);
  attach_adapters(p, spec, for_training, construction);
  p.label_smoothing_factor = spec.training.label_smoothing_factor;
  p.prediction_loss_only = spec.training.prediction_loss_only;
  p.seed = spec.training.seed;
  p.predict_with_generate = spec.training.predict_with_generate;
  p.parameters_sharded = construction.parameters_sharded;
  p.generation = spec.generation;
  p.generation_sources = spec.generation_sources;
  if (const std::optional<int64_t> eos = p.data->tokenizer_changes().eos_token_id) carry_eos_token(p, spec, *eos);
  // The model's own generation defaults (HF GenerationConfig.from_model_config), where the spec and its
  // sources left them unset: BART's forced_eos_token_id.
  const nlohmann::json model_config = p.model->config_json();
  for (auto [key, field] : {std::pair{"forced_bos_token_id", &GenerationArgs::forced_bos_token_id},
                            std::pair{"forced_eos_token_id", &GenerationArgs::forced_eos_token_id}})
    if (!(p.generation.*field) && model_config.contains(key) && model_config[key].is_number_integer())
      p.generation.*field = model_config[key].get<int64_t>();
  p.precision = precision_policy(spec);
  p.compute_dtype = p.precision.compute_dtype();
  p.metrics = spec.metrics;
  if (p.metrics.empty()) {
    for (const auto& name : p.data->default_metrics()) {
      MetricChoice m;
      m.type = m.key = name;
      p.metrics.push_back(m);
    }
  }
  check_generation_metrics(p, spec, components);
  // Generation runs in training and eval with predict_with_generate, and in predict (no train or eval split).
  const bool generates = spec.training.predict_with_generate || (!for_training && !use.train && !use.eval);
  check_vocabulary(p, spec, shape, generates);
  if (spec.training.predict_with_generate) check_generation_sources(p);  // before training, not at its first evaluation
  return p;
}

void check_device_settings(const RunSpec& spec, torch::Device device) {
  check_engine_device(spec, device);  // offload and fp16 (engine/construction_plan.h)
  if (device.is_cpu() && spec.training.tf32.value_or(false)) throw ConfigError(std::string("training.tf32: ") + kTf32NeedsGpu);
}

void place_on_device(ModelAndData& p, const RunSpec& spec, torch::Device device) {
  check_device_settings(spec, device);
  p.device = device;
  p.pin_memory = spec.training.dataloader_pin_memory;
  if (!device.is_cpu() && spec.training.tf32) {  // HF's tf32: LibTorch's switches for cuBLAS and cuDNN
    at::globalContext().setAllowTF32CuBLAS(*spec.training.tf32);
    at::globalContext().setAllowTF32CuDNN(*spec.training.tf32);
  }
  if (device.is_cpu()) return;
  if (p.model->initialisation_deferred()) {  // the parameters wait on the host; the engine puts its partitions here
    torch::NoGradGuard no_grad;
    for (auto& buffer : p.model->buffers()) buffer.set_data(buffer.to(device));
    return;
  }
  p.model->to(device);
}

void check_generation_sources(const ModelAndData& p) {
  const GenerationSourceFacts& sources = p.generation_sources;
  if (!sources.unsupported.empty()) {
    std::string list;
    for (const auto& u : sources.unsupported) list += "\n  " + u;
    throw ConfigError("cannot generate with these generation_config.json settings:" + list);
  }
  if (sources.decoder_start_token_id && p.model->is_encoder_decoder() &&
      *sources.decoder_start_token_id != p.model->decoder_start_token_id())
    throw ConfigError(sources.decoder_start_source + ": decoder_start_token_id " + std::to_string(*sources.decoder_start_token_id) +
                      " differs from the model's " + std::to_string(p.model->decoder_start_token_id()) +
                      " (HF's generate() would start from the file's; hftrain starts from the model's): make them agree");
}

void apply_inference_precision(ModelAndData& pipeline) {
  const bool full = pipeline.precision.full_eval_dtype != torch::kFloat;
  if (full) {
    pipeline.compute_dtype = pipeline.precision.full_eval_dtype;
    pipeline.model->to(pipeline.compute_dtype);
  }
  if (pipeline.compute_dtype != torch::kFloat)
    log_info(std::string("precision: ") + (full ? "model in " : "fp32 weights, autocast to ") +
             precision_name(pipeline.compute_dtype) + (full ? " (training." + precision_name(pipeline.compute_dtype) + "_full_eval)" : ""));
}

}  // namespace hftrain
