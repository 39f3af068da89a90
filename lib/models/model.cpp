// Losses shared by model families (see model.h).
#include "models/model.h"

#include "models/construction.h"
#include "models/fused_linear.h"

#include <mutex>
#include <set>

#include "util/error.h"
#include "util/tensor_storage.h"

namespace hftrain {

torch::Tensor token_cross_entropy(const torch::Tensor& logits, const torch::Tensor& labels, double denominator) {
  namespace F = torch::nn::functional;
  const auto l = logits.to(torch::kFloat);  // the loss is always computed in fp32
  if (denominator <= 0) return F::cross_entropy(l, labels, F::CrossEntropyFuncOptions().ignore_index(-100));
  return F::cross_entropy(l, labels, F::CrossEntropyFuncOptions().ignore_index(-100).reduction(torch::kSum)) / denominator;
}

torch::Tensor causal_lm_loss(const torch::Tensor& logits, const torch::Tensor& labels, double denominator) {
  auto shift_logits = logits.slice(1, 0, logits.size(1) - 1);
  auto shift_labels = labels.slice(1, 1, labels.size(1));
  return token_cross_entropy(shift_logits.reshape({-1, shift_logits.size(-1)}), shift_labels.reshape({-1}), denominator);
}

torch::Tensor Model::head_logits(UnitHandle unit, const std::function<LmHead()>& head) {
  return in_unit(unit, [&] {
    const LmHead h = head();
    const torch::Tensor logits = linear_product(h.features, h.weight, h.bias);
    return h.softcap > 0 ? torch::tanh(logits / h.softcap) * h.softcap : logits;
  });
}

ModelOutput Model::language_model_output(UnitHandle unit, const Batch& batch, bool shift,
                                         const std::function<LmHead()>& head) {
  ModelOutput out;
  shift = shift && !batch.sliced();  // a slice's labels were shifted on the whole rows (data/sequence_slices.h)
  const bool has_labels = batch.labels.defined();
  if (lm_loss_.chunked && has_labels && is_training() && torch::GradMode::is_enabled()) {
    out.loss = in_unit(unit, [&] {
      const LmHead h = head();
      torch::Tensor features = h.features, labels = batch.labels;
      if (shift) {
        features = features.slice(1, 0, features.size(1) - 1);
        labels = labels.slice(1, 1, labels.size(1));
      }
      // The host's count of the scored labels is this loss's when it shifted them the same way (scored_labels).
      ScoredLabels known;
      if (batch.scored_tokens >= 0 && shift == (is_causal_lm() && !batch.sliced()) && loss_unit() == LossUnit::kLabelToken) {
        known.count = batch.scored_tokens;
        known.smallest = batch.smallest_label;
        known.largest = batch.largest_label;
      }
      return linear_cross_entropy(features, h.weight, h.bias, labels, batch.label_smoothing, batch.loss_denominator,
                                  lm_loss_.chunk_tokens, h.softcap, known);
    });
    return out;
  }
  out.logits = head_logits(unit, head);
  if (has_labels)
    out.loss = shift ? causal_lm_loss(out.logits, batch.labels, batch.loss_denominator)
                     : token_cross_entropy(out.logits.reshape({-1, out.logits.size(-1)}), batch.labels.reshape({-1}),
                                           batch.loss_denominator);
  return out;
}

namespace {

// The labels a label-token loss scores: a causal LM's shifted ones (undefined for other losses).
torch::Tensor scored_labels(const Model& model, const Batch& batch) {
  if (model.loss_unit() != LossUnit::kLabelToken || !batch.labels.defined()) return {};
  const bool shift = model.is_causal_lm() && !batch.sliced();
  return shift ? batch.labels.slice(1, 1, batch.labels.size(1)) : batch.labels;
}

}  // namespace

int64_t scored_label_tokens(const Model& model, const Batch& batch) {
  const torch::Tensor scored = scored_labels(model, batch);
  return scored.defined() ? scored.ne(-100).sum().item<int64_t>() : 0;
}

int64_t note_scored_labels(const Model& model, Batch& batch) {
  const torch::Tensor labels = scored_labels(model, batch);
  if (!labels.defined() || !labels.is_cpu()) return scored_label_tokens(model, batch);
  const torch::Tensor kept = labels.masked_select(labels.ne(-100));
  batch.scored_tokens = kept.numel();
  if (kept.numel() > 0) {
    batch.smallest_label = kept.min().item<int64_t>();
    batch.largest_label = kept.max().item<int64_t>();
  }
  return batch.scored_tokens;
}

std::pair<torch::Tensor, torch::Tensor> KvCache::append(std::size_t layer, const torch::Tensor& k, const torch::Tensor& v) {
  if (keys.size() <= layer) {
    keys.resize(layer + 1);
    values.resize(layer + 1);
  }
  keys[layer] = keys[layer].defined() ? torch::cat({keys[layer], k}, 2) : k;
  values[layer] = values[layer].defined() ? torch::cat({values[layer], v}, 2) : v;
  return {keys[layer], values[layer]};
}

void KvCache::keep_rows(const torch::Tensor& rows) {
  auto keep = [&](torch::Tensor& t) {
    if (t.defined()) t = t.index_select(0, rows.to(t.device()));
  };
  for (auto* list : {&keys, &values, &cross_keys, &cross_values})
    for (auto& t : *list) keep(t);
  for (auto* t : {&encoder_hidden, &encoder_mask, &key_mask, &positions}) keep(*t);
}

torch::Tensor Model::forward_cached(const torch::Tensor&, KvCache&) {
  throw RuntimeFailure("model type '" + config_json().value("model_type", std::string("?")) + "' keeps no KV cache");
}

int64_t Model::decoder_start_token_id() const {
  throw RuntimeFailure("model type '" + config_json().value("model_type", std::string("?")) + "' is not an encoder-decoder model");
}

torch::Tensor Model::forward_encoder_decoder_cached(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, KvCache&) {
  throw RuntimeFailure("model type '" + config_json().value("model_type", std::string("?")) + "' is not an encoder-decoder model");
}

void Model::enable_gradient_checkpointing() {
  throw ConfigError("training.gradient_checkpointing: model type '" + config_json().value("model_type", std::string("?")) +
                    "' has no blocks to checkpoint");
}

void Model::enable_tiled_mlp(int64_t) {
  throw ConfigError("training.tiled_mlp: model type '" + config_json().value("model_type", std::string("?")) +
                    "' has no tiled MLP (the llama-like decoders have)");
}

void Model::set_sequence_parallel(std::shared_ptr<SequenceParallel>) {
  throw ConfigError("distributed.sequence_parallel_size: model type '" + config_json().value("model_type", std::string("?")) +
                    "' is not a llama-like decoder; sequence parallelism runs llama, qwen2, qwen3, mistral, phi3, gemma, "
                    "gemma2 and gemma3_text");
}

void Model::set_expert_parallel(std::shared_ptr<ExpertParallel>) {
  throw ConfigError("distributed.expert_parallel_size: model type '" + config_json().value("model_type", std::string("?")) +
                    "' has no routed experts; expert parallelism runs mixtral, qwen2_moe and qwen3_moe");
}

std::vector<GatherUnit> Model::gather_units() const {
  if (units_->list().empty())
    throw ConfigError("zero.stage 3: model type '" + config_json().value("model_type", std::string("?")) +
                      "' cannot be gathered module by module; use zero.stage 0, 1 or 2");
  return units_->list();
}

UnitHandle GatherUnits::declare(std::string name, std::vector<std::string> prefixes) {
  units_.push_back({std::move(name), std::move(prefixes)});
  return UnitHandle(units_.size() - 1);
}

nlohmann::json Model::config_json() const {
  if (!config_writer_) throw RuntimeFailure("a model without a family declaration has no config.json");
  return config_writer_();
}

torch::Tensor run_unit(GatherHooks* hooks, std::size_t unit, const std::function<torch::Tensor()>& body) {
  if (!hooks) return body();
  hooks->before_unit(unit);
  return hooks->after_unit(unit, body());
}

std::vector<std::vector<std::string>> resolve_gather_units(const Model& model, const std::vector<std::string>& trainable) {
  const std::vector<GatherUnit> units = model.gather_units();
  const std::string type = model.config_json().value("model_type", std::string("?"));
  std::vector<std::vector<std::string>> out(units.size());
  for (const std::string& name : trainable) {
    bool used = false;
    for (std::size_t u = 0; u < units.size(); ++u)
      for (const std::string& prefix : units[u].prefixes)
        if (name.rfind(prefix, 0) == 0 && (prefix.back() == '.' || name == prefix)) {
          out[u].push_back(name);
          used = true;
          break;
        }
    if (!used)
      throw ConfigError("zero.stage 3: parameter '" + name + "' of model type '" + type +
                        "' belongs to none of its gather units, so it could not be gathered for the forward pass");
  }
  return out;
}

namespace {
thread_local bool deferred_init_active = false;
}  // namespace

DeferredInit::DeferredInit(bool enabled) : previous_(deferred_init_active) { deferred_init_active = enabled; }
DeferredInit::~DeferredInit() { deferred_init_active = previous_; }
bool DeferredInit::active() { return deferred_init_active; }

void release_built_parameters(torch::nn::Module& module) {
  if (!DeferredInit::active() || MetaConstruction::active()) return;
  for (const auto& p : module.parameters()) release_storage(p);
}

Model::Model() {
  if (DeferredInit::active() && !MetaConstruction::active()) construction_rng_state_ = at::detail::getDefaultCPUGenerator().get_state();
}

void Model::defer_init(std::vector<InitPass> passes) {
  init_passes_ = std::move(passes);
  std::set<const void*> storages;
  for (const auto& np : named_parameters()) {
    bool selected = false;
    for (const auto& pass : init_passes_) selected = selected || pass.selects(np.key());
    if (!selected)
      throw RuntimeFailure("sharded construction: model type '" + config_json().value("model_type", std::string("?")) +
                           "' does not initialise parameter '" + np.key() + "' itself");
    const torch::Tensor& p = np.value();
    if (p.storage_offset() != 0 || !p.is_contiguous() || !storages.insert(p.storage().unsafeGetStorageImpl()).second)
      throw RuntimeFailure("sharded construction: parameter '" + np.key() +
                           "' is not a tensor of its own (a view, or storage shared with another parameter)");
    release_storage(p);
  }
  deferred_ = true;
}

void Model::initialise_parameters(std::vector<InitPass> passes) {
  if (MetaConstruction::active()) return;  // shapes only: nothing to initialise
  torch::NoGradGuard no_grad;
  if (!DeferredInit::active()) {
    init_passes_ = std::move(passes);
    run_init_passes(nullptr);
    init_passes_.clear();
    return;
  }
  defer_init(std::move(passes));
  init_rng_state_ = at::detail::getDefaultCPUGenerator().get_state();
  const ParameterVisitor discard = [](const std::string&, const torch::Tensor&) { return false; };
  run_init_passes(&discard);  // advances the generator as the undeferred construction does
}

void Model::restate_constructor_initialisation(std::vector<InitPass> passes) {
  if (!DeferredInit::active() || MetaConstruction::active()) return;  // the constructors have set the values
  defer_init(std::move(passes));
  init_rng_state_ = construction_rng_state_;  // the constructors' draws advanced the generator already
}

namespace {

// A pass draws from the host's generator wherever the parameter lives: on a device it runs on a host copy,
// which then moves. So a model built on a GPU starts from the values of the same seed on the CPU, as HF's
// models do (built on the host, then moved); the device's own generator draws a different sequence.
void init_on_host(const InitPass& pass, const std::string& name, torch::Tensor& p) {
  if (p.device().is_cpu() || p.is_meta()) {
    pass.init(name, p);
    return;
  }
  torch::NoGradGuard no_grad;
  torch::Tensor host = p.detach().to(torch::kCPU);
  pass.init(name, host);
  p.detach().copy_(host);
}

}  // namespace

void Model::run_init_passes(const ParameterVisitor* visit) {
  auto params = named_parameters();
  std::vector<int> last(params.size(), -1);
  for (std::size_t k = 0; k < init_passes_.size(); ++k)
    for (std::size_t i = 0; i < params.size(); ++i)
      if (init_passes_[k].selects(params[i].key())) last[i] = static_cast<int>(k);
  for (std::size_t k = 0; k < init_passes_.size(); ++k)
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (!init_passes_[k].selects(params[i].key())) continue;
      torch::Tensor& p = params[i].value();
      if (visit) allocate_storage(p);
      init_on_host(init_passes_[k], params[i].key(), p);
      if (visit && !(last[i] == static_cast<int>(k) && (*visit)(params[i].key(), p))) release_storage(p);
    }
}

void Model::materialise_parameters(const ParameterVisitor& visit) {
  if (!deferred_)
    throw RuntimeFailure("model type '" + config_json().value("model_type", std::string("?")) +
                         "': its parameters are not waiting to be materialised (built whole, or done already)");
  torch::NoGradGuard no_grad;
  // The replay draws from the state construction saved; the generator is given back as it was, also
  // when the visitor throws.
  struct GeneratorRestore {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    torch::Tensor saved;
    GeneratorRestore(const torch::Tensor& replay_from) : saved(generator.get_state()) {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(replay_from);
    }
    ~GeneratorRestore() {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(saved);
    }
  } restore(init_rng_state_);
  run_init_passes(&visit);
  deferred_ = false;
  init_passes_.clear();
}

void Model::set_loaded_config(nlohmann::json config, nlohmann::json generation_config) {
  loaded_config_ = config.is_object() ? std::move(config) : nlohmann::json::object();
  loaded_generation_config_ = std::move(generation_config);
}

nlohmann::json Model::saved_config_json() const {
  nlohmann::json out = loaded_config_;
  const nlohmann::json own = config_json();  // kept alive: items() only refers to it
  for (const auto& [key, value] : own.items()) out[key] = value;
  return out;
}

nlohmann::json Model::saved_generation_config_json() const {
  if (loaded_generation_config_.is_object()) return loaded_generation_config_;
  if (!is_causal_lm() && !is_encoder_decoder()) return nullptr;
  const nlohmann::json config = saved_config_json();
  nlohmann::json out = {{"_from_model_config", true}};
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "forced_bos_token_id",
                          "forced_eos_token_id"})
    if (config.contains(key) && !config[key].is_null()) out[key] = config[key];
  return out;
}

void Model::set_neftune_noise_alpha(double) {
  throw ConfigError("training.neftune_noise_alpha: model type '" + config_json().value("model_type", std::string("?")) +
                    "' has no token embeddings");
}

torch::Tensor label_smoothed_loss(const torch::Tensor& logits_in, const torch::Tensor& labels_in, double epsilon,
                                  bool shift_labels, double denominator) {
  torch::Tensor logits = logits_in.to(torch::kFloat), labels = labels_in;  // the loss is always computed in fp32
  if (shift_labels) {
    logits = logits.slice(1, 0, logits.size(1) - 1);
    labels = labels.slice(1, 1, labels.size(1));
  }
  auto log_probs = -torch::log_softmax(logits, -1);
  labels = labels.unsqueeze(-1);
  auto padding_mask = labels.eq(-100);
  auto safe_labels = torch::clamp_min(labels, 0);
  auto nll = log_probs.gather(-1, safe_labels).masked_fill(padding_mask, 0.0);
  auto smoothed = log_probs.sum(-1, /*keepdim=*/true, torch::kFloat32).masked_fill(padding_mask, 0.0);
  auto active = denominator > 0 ? denominator : static_cast<double>(padding_mask.numel() - padding_mask.sum().item<int64_t>());
  auto nll_loss = nll.sum() / active;
  auto smoothed_loss = smoothed.sum() / (active * static_cast<double>(log_probs.size(-1)));
  return (1 - epsilon) * nll_loss + epsilon * smoothed_loss;
}

void resolve_lm_sizes(const LmSizes& s, const ModelContext& context) {
  if (s.vocab_size == 0) s.vocab_size = context.vocab_size;
  if (s.positions && *s.positions == 0) *s.positions = context.max_length;
  if (s.vocab_size <= 0) throw ConfigError("model.vocab_size: the data gives no vocabulary size; set it");
  if (s.positions && *s.positions <= 0)
    throw ConfigError(std::string("model.") + s.positions_key + ": the data gives no sequence length; set it");
  if (s.width_key && s.width % s.heads != 0)
    throw ConfigError(std::string("model: ") + s.width_key + " (" + std::to_string(s.width) + ") must be divisible by " +
                      s.heads_key + " (" + std::to_string(s.heads) + ")");
  if (s.positions && s.data_must_fit && context.max_length > *s.positions)
    throw ConfigError(std::string("model.") + s.positions_key + " (" + std::to_string(*s.positions) +
                      ") is shorter than the data's sequences (" + std::to_string(context.max_length) + ")");
}

}  // namespace hftrain
