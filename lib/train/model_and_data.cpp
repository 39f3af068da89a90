// ModelAndData construction (see model_and_data.h).
#include "train/model_and_data.h"

#include <filesystem>

#include "checkpoint/model_io.h"
#include "data/sample_limits.h"
#include "engine/precision.h"
#include "log/logger.h"
#include "models/construction.h"
#include "models/lora.h"
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

// PEFT: the peft section's adapters, or those of model.peft_adapter, attached to the loaded base.
void attach_adapters(ModelAndData& p, const RunSpec& spec, bool for_training) {
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
  if (for_training && spec.zero.stage == 3)
    log_info("zero.stage 3: the adapters and the frozen base are partitioned and gathered per module; the base gets "
             "no gradients, master weights or optimizer state");
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
  // zero.Init: an HF model directory is read rank by rank later (bare weights are loaded whole).
  // (An adapter run builds its base whole: the adapters are attached to the built model.)
  const bool peft = spec.peft || !spec.model.peft_adapter.empty();
  const bool sharded_init = for_training && spec.zero.stage == 3 && spec.zero.zero3_init_flag && !peft;
  if (for_training && spec.zero.stage == 3 && spec.zero.zero3_init_flag && peft)
    log_info("zero.zero3_init_flag: the base model is built whole on each rank (adapters attach to the built model)");
  const bool hf_dir = !spec.model.from_pretrained.empty() &&
                      std::filesystem::exists(spec.model.from_pretrained + "/config.json");
  {
    const bool deferred_build = sharded_init && (spec.model.from_pretrained.empty() || hf_dir);
    DeferredInit deferred(deferred_build);
    // Straight to the worker's device, a tensor at a time (the host never holds the whole model); under zero.Init
    // the engine places each rank's partition instead.
    std::unique_ptr<DeviceConstruction> on_device;
    if (!device.is_cpu() && !deferred_build) on_device = std::make_unique<DeviceConstruction>(device);
    p.model = components.models.build(spec.model.type, spec.model.options, context);
  }
  if (hf_dir) keep_loaded_config(*p.model, spec.model.from_pretrained);
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
  if (spec.training.neftune_noise_alpha > 0) p.model->set_neftune_noise_alpha(spec.training.neftune_noise_alpha);
  if (p.model->initialisation_deferred()) {
    log_info("zero.zero3_init_flag: sharded construction (each unit's parameters released as built; each rank "
             "keeps only its partition of the " + std::string(hf_dir ? "pretrained weights, read from " +
             spec.model.from_pretrained : "initial values") + ")");
    if (hf_dir) {
      auto plan = std::make_shared<PretrainedPlan>(plan_pretrained_dir(spec.model.from_pretrained, *p.model));
      torch::NoGradGuard no_grad;
      for (auto& nb : p.model->named_buffers())  // buffers are built whole; only parameters are deferred
        if (plan->sources.count(nb.key())) nb.value().copy_(plan->read(nb.key()).view(nb.value().sizes()));
      p.deferred_weights = plan;
    }
  } else {
    if (sharded_init)
      log_info("zero.zero3_init_flag: the model is built whole on each rank, then partitioned (" +
               std::string(spec.model.from_pretrained.empty()
                               ? "model type '" + spec.model.type + "' does not build itself unit by unit"
                               : "model.from_pretrained holds bare weights without config.json") + ")");
    if (!spec.model.from_pretrained.empty()) load_pretrained(spec.model.from_pretrained, *p.model);
  }
  attach_adapters(p, spec, for_training);
  p.label_smoothing_factor = spec.training.label_smoothing_factor;
  p.prediction_loss_only = spec.training.prediction_loss_only;
  p.seed = spec.training.seed;
  p.predict_with_generate = spec.training.predict_with_generate;
  p.parameters_sharded = spec.zero.stage == 3;
  p.generation = spec.generation;
  p.generation_sources = spec.generation_sources;
  // The model's own generation defaults (HF GenerationConfig.from_model_config), where the spec and its
  // sources left them unset: BART's forced_eos_token_id.
  const nlohmann::json model_config = p.model->config_json();
  for (auto [key, field] : {std::pair{"forced_bos_token_id", &GenerationArgs::forced_bos_token_id},
                            std::pair{"forced_eos_token_id", &GenerationArgs::forced_eos_token_id}})
    if (!(p.generation.*field) && model_config.contains(key) && model_config[key].is_number_integer())
      p.generation.*field = model_config[key].get<int64_t>();
  if (spec.precision.bf16) p.compute_dtype = torch::kBFloat16;
  if (spec.precision.fp16) p.compute_dtype = torch::kHalf;
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
  // Beside parameters on a GPU the optimizer state can go to host memory (the engine's host offload); NVMe swap
  // files and parameter offload are built for parameters that are themselves on the host.
  const bool beyond_host_offload = spec.zero.offload_optimizer.device == "nvme" || spec.zero.offload_param != "none";
  if (!device.is_cpu() && beyond_host_offload)
    throw ConfigError("zero.offload_optimizer nvme / zero.offload_param: offload from a GPU to NVMe or of the parameters "
                      "is not built yet, and this worker computes on " + device.str() +
                      "; use zero.offload_optimizer cpu with zero.offload_param none (or training.use_cpu: true to "
                      "train on the CPU with these)");
  if (device.is_cpu() && (spec.precision.fp16 || spec.training.fp16_full_eval))  // a CUDA build's CPU worker
    throw ConfigError(std::string(spec.precision.fp16 ? "precision.fp16: " : "training.fp16_full_eval: ") + kFp16NeedsCuda);
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

void apply_inference_precision(ModelAndData& pipeline, const RunSpec& spec) {
  const bool full = spec.training.bf16_full_eval || spec.training.fp16_full_eval;
  if (full) {
    pipeline.compute_dtype = spec.training.bf16_full_eval ? torch::kBFloat16 : torch::kHalf;
    pipeline.model->to(pipeline.compute_dtype);
  }
  if (pipeline.compute_dtype != torch::kFloat)
    log_info(std::string("precision: ") + (full ? "model in " : "fp32 weights, autocast to ") +
             precision_name(pipeline.compute_dtype) + (full ? " (training." + precision_name(pipeline.compute_dtype) + "_full_eval)" : ""));
}

}  // namespace hftrain
