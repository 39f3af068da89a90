// The Model interface every model family implements: forward(Batch) -> {loss, logits}, HF parameter
// names (via torch::nn::Module registration), and an HF-style config.json describing the shape.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "models/adapter_description.h"
#include "models/family.h"
#include "models/lm_loss.h"
#include "runspec/model_families.h"
#include "util/torch_compat.h"

namespace hftrain {

class SequenceParallel;
class ExpertParallel;

// Sequence parallelism (data/sequence_slices.h): a batch whose rows are slice `index` of `parts` equal, consecutive
// slices of the whole rows. Its labels are shifted already (labels[t] is position t's target: the causal shift
// happened on the whole rows), its position_ids are the whole rows' positions of its tokens, its packed_lengths
// (padding-free) the whole row's examples, and attention_mask the slice's own.
struct SequenceSlice {
  int64_t parts = 1;             // 1 = whole rows
  int64_t index = 0;
  int64_t length = 0;            // the positions the whole rows reach (sequence_extent), before padding to a multiple of parts
  torch::Tensor attention_mask;  // [B, parts * T]: the whole rows' mask (the keys attention sees after the exchange)
};

// One collated batch. Tensors that a task does not use stay undefined.
struct Batch {
  torch::Tensor input_ids;       // [B, T] int64
  torch::Tensor attention_mask;  // [B, T] int64 (1 = token, 0 = padding)
  torch::Tensor token_type_ids;  // [B, T] int64 segment ids (BERT); undefined = all 0
  torch::Tensor labels;          // [B, T] int64 for LMs (-100 = ignored), [B] for classifiers
  torch::Tensor features;        // [B, D] float32 for feature classifiers
  // Padding-free (data/packing.h): one row holding several examples; position_ids [1, T] restart at 0 for
  // each, packed_lengths are their lengths in order, and attention stays inside each. Empty = one example
  // per row.
  // An encoder-decoder row (models/packed_seq2seq.h) packs the sources into input_ids (packed_lengths) and
  // their targets into labels (packed_label_lengths, in the same order).
  torch::Tensor position_ids;
  std::vector<int64_t> packed_lengths;
  std::vector<int64_t> packed_label_lengths;
  // HF num_items_in_batch: when > 0, a label-token loss is its sum over the batch's label tokens divided
  // by this (the label tokens of the whole optimizer step, see train/loss_normaliser.h); 0 = the batch's
  // own token mean. Per-example losses ignore it.
  double loss_denominator = 0;
  // HF label_smoothing_factor, for a language model that computes its training loss without logits
  // (models/lm_loss.h); train/training_loss sets it. A loss computed from logits is smoothed there instead.
  double label_smoothing = 0;
  SequenceSlice slice;  // parts 1: whole rows
  // Whether the mask attention reads (attention_mask; slice.attention_mask for a sliced batch) holds padding,
  // found on the host when the batch moved to its device (batch_on), so that attention does not read the mask
  // back from the device each forward; unset: padding_bias asks the mask.
  std::optional<bool> has_padding;
  // What the host found of the labels that the loss scores (LossNormaliser::prepare, before the batch moved), so that
  // the chunked loss reads nothing back from the device: how many there are (-1 = unknown), and the smallest and
  // largest of them (valid when scored_tokens > 0).
  int64_t scored_tokens = -1;
  int64_t smallest_label = 0, largest_label = 0;
  int64_t size() const { return labels.defined() ? labels.size(0) : input_ids.size(0); }
  bool sliced() const { return slice.parts > 1; }
};

enum class LossUnit { kLabelToken, kExample };

struct ModelOutput {
  torch::Tensor loss;    // scalar mean loss (undefined when the batch has no labels)
  torch::Tensor logits;  // [B, T, V] or [B, C]
};

// Shape facts a model takes from its data source when the spec leaves them at 0 ("auto").
struct ModelContext {
  int64_t vocab_size = 0;
  int64_t max_length = 0;
  int64_t num_labels = 0;
  int64_t num_features = 0;
  std::vector<std::string> label_names;  // class names by label id (config.json id2label); may be empty
};

// Keys and values of every attention layer for the tokens run so far, so that generation feeds each new
// token alone (HF use_cache / past_key_values). A model appends to it on each forward_cached call.
struct KvCache {
  std::vector<torch::Tensor> keys, values;  // per layer: [B, kv heads, tokens, head dim]
  int64_t length = 0;                       // tokens cached (the position of the next token)
  // Encoder-decoder models: the encoder output [B, S, hidden] and its mask [B, S] (undefined = no padding)
  // for the cached rows, and each decoder layer's cross-attention keys / values [B, heads, S, head dim],
  // computed on the layer's first use.
  torch::Tensor encoder_hidden, encoder_mask;
  std::vector<torch::Tensor> cross_keys, cross_values;
  // Batched generation of decoder-only models (generate/batch_generate.h): the prompts are left-padded, so
  // `key_mask` [B, length + T] marks which cached and new positions hold tokens (1) or padding (0), and
  // `positions` [B, T] are the new tokens' position ids (counted from each row's first token). Undefined =
  // one unpadded row, positions length, length + 1, ... The caller sets both before each forward.
  torch::Tensor key_mask, positions;
  // Appends this forward's k, v [B, H, T, D] to `layer`'s entries; returns the layer's keys and values
  // for every token so far. The model advances `length` once all layers have run.
  std::pair<torch::Tensor, torch::Tensor> append(std::size_t layer, const torch::Tensor& k, const torch::Tensor& v);
  // Row i of everything cached (keys, values, the encoder output, its mask, cross-attention keys / values,
  // key_mask, positions) becomes the old row rows[i] (int64 indices, repeats allowed): a finished sequence
  // leaves the batch and costs nothing more; beams that continue the same parent share its rows.
  void keep_rows(const torch::Tensor& rows);
};

// ZeRO stage 3 (engine/param_coordinator.h) gathers a model's parameters one unit at a time: the forward
// pass runs as a sequence of gather units (embeddings, each block, the head), each naming the parameters
// it uses by name prefix ("transformer.h.0." or a full parameter name). A tied parameter belongs to every
// unit that uses it.
// A parameter's name and shape: the module tree built under MetaConstruction (models/construction.h)
// gives them for any model size without storage (hftrain estimate).
struct ParameterShape {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// A language model's sizes taken from the data when the options leave them 0, then checked: the
// vocabulary, the context length (`positions_key` names its option; null `positions` = a model without
// one, t5) and, when `width_key` is given, that `width` divides into `heads` attention heads. With
// `data_must_fit`, the data's sequences must fit the context. Every family resolves its sizes here.
struct LmSizes {
  int64_t& vocab_size;
  int64_t* positions;
  const char* positions_key;
  int64_t width = 0, heads = 1;
  const char* width_key = nullptr;  // e.g. "n_embd"; null = no divisibility check
  const char* heads_key = nullptr;
  bool data_must_fit = true;  // false: positions may be scaled past (llama's rotary keeps no such limit here)
};
void resolve_lm_sizes(const LmSizes& sizes, const ModelContext& context);

struct GatherUnit {
  std::string name;
  std::vector<std::string> prefixes;
};

// Called around each gather unit while hooks are installed (Model::set_gather_hooks).
class GatherHooks {
 public:
  virtual ~GatherHooks() = default;
  virtual void before_unit(std::size_t unit) = 0;
  // Returns the unit's output (possibly wrapped so that backward can gather the unit again).
  virtual torch::Tensor after_unit(std::size_t unit, torch::Tensor output) = 0;
};

// Runs `body` as gather unit `unit` (just `body()` when `hooks` is null).
torch::Tensor run_unit(GatherHooks* hooks, std::size_t unit, const std::function<torch::Tensor()>& body);

// A gather unit as the model declared it (GatherUnits::declare): the forward runs the unit through it, so
// units are named once, in the order they are declared, and never numbered by hand.
class UnitHandle {
 public:
  UnitHandle() = default;
  std::size_t index() const { return index_; }

 private:
  friend class GatherUnits;
  explicit UnitHandle(std::size_t index) : index_(index) {}
  std::size_t index_ = 0;
};

// A model's gather units, declared in forward order while it is built, and the hooks that run around them.
// Shared with the submodules that run units of their own (bert's encoder).
class GatherUnits {
 public:
  UnitHandle declare(std::string name, std::vector<std::string> prefixes);
  torch::Tensor run(UnitHandle unit, const std::function<torch::Tensor()>& body) const {
    return run_unit(hooks_, unit.index(), body);
  }
  const std::vector<GatherUnit>& list() const { return units_; }
  void set_hooks(GatherHooks* hooks) { hooks_ = hooks; }

 private:
  std::vector<GatherUnit> units_;
  GatherHooks* hooks_ = nullptr;
};

// zero.Init (DeepSpeed's sharded construction): while a DeferredInit scope with enabled = true lives on
// this thread, families that support it build their modules with each unit's parameters released as soon
// as the unit is built (release_built_parameters), so construction never holds the whole model; their
// initial values are produced later, one parameter at a time, by Model::materialise_parameters.
class DeferredInit {
 public:
  explicit DeferredInit(bool enabled);
  ~DeferredInit();
  DeferredInit(const DeferredInit&) = delete;
  DeferredInit& operator=(const DeferredInit&) = delete;
  static bool active();

 private:
  bool previous_;
};

// Under an active DeferredInit: frees the memory of `module`'s parameters (shapes kept). Otherwise nothing.
void release_built_parameters(torch::nn::Module& module);

// A family's initialisation as passes over named_parameters(), each drawing from torch's global
// generator in that order; a parameter ends with the value of the last pass that selects it.
struct InitPass {
  std::function<bool(const std::string& name)> selects;
  std::function<void(const std::string& name, torch::Tensor& p)> init;
};

// Receives a parameter's initial value; returns true to keep it in the model (parameters that stay
// whole), false to release it again.
using ParameterVisitor = std::function<bool(const std::string& name, const torch::Tensor& value)>;

class Model : public torch::nn::Module {
 public:
  // Each family also declares `static ModelDimensions facts(const Options&)`: its sizes as HF's config
  // accessors give them, from its own options; the registry keeps it (Registry::facts).
  using Facts = ModelDimensions;
  Model();
  // True after construction under DeferredInit: the parameters hold no memory until materialised.
  bool initialisation_deferred() const { return deferred_; }
  // Produces each parameter's initial value in turn -- exactly the values (and random draws) of an
  // undeferred construction -- hands it to `visit` and releases it unless visit keeps it. Torch's global
  // generator is left as it was. Once only; RuntimeFailure when the model was not deferred.
  void materialise_parameters(const ParameterVisitor& visit);

  virtual ModelOutput forward(const Batch& batch) = 0;
  // True for causal LMs: logits at position t predict labels at t+1 (HF's internal shift).
  virtual bool is_causal_lm() const = 0;
  // What the loss averages over: label tokens (causal, seq2seq and masked LMs: HF's models that take
  // num_items_in_batch) or examples (classifiers, regression).
  virtual LossUnit loss_unit() const { return is_causal_lm() ? LossUnit::kLabelToken : LossUnit::kExample; }
  // HF-style config.json contents (model_type, sizes): by default what the family declared
  // (declare_family: every option under its HF name plus the family's derived keys).
  virtual nlohmann::json config_json() const;
  // The declaration of the family this model was built as (runspec/model_families.h); null for a model
  // that declares none.
  const ModelFamily* family() const { return family_; }
  // The config.json (and generation_config.json, or null) of the HF directory this model was loaded from.
  // Saving keeps every key of it, unknown ones verbatim, under the model's own keys (save_pretrained's
  // round trip); set by whoever loads the directory.
  void set_loaded_config(nlohmann::json config, nlohmann::json generation_config);
  // What a saved config.json holds: the loaded keys overlaid with config_json().
  nlohmann::json saved_config_json() const;
  // What a saved generation_config.json holds: the loaded one as it was, else, for models that generate,
  // HF's GenerationConfig.from_model_config (the special token ids the config sets); null = none written.
  nlohmann::json saved_generation_config_json() const;
  // The PEFT adapter this model carries (models/lora.h); null for a plain model. Saving an adapter model
  // writes the adapter's files only, never the frozen base (checkpoint/model_io.h).
  void set_adapter(std::shared_ptr<const AdapterDescription> adapter) { adapter_ = std::move(adapter); }
  const AdapterDescription* adapter() const { return adapter_.get(); }
  // How a language model computes its training loss (models/lm_loss.h); families without a language-model
  // head have nothing to change.
  void set_lm_loss(const LmLossSettings& settings) { lm_loss_ = settings; }
  // Scalars the last forward computed beside its loss, which the trainer logs apart under their names (averaged
  // like the loss: an MoE model's `aux_loss`); none by default.
  virtual std::vector<std::pair<std::string, double>> reported_scalars() const { return {}; }
  // Whether the model trains on padding-free batches (Batch::packed_lengths): positions from position_ids and
  // attention inside each example. Families that cannot do it exactly return false and are refused.
  virtual bool supports_padding_free() const { return false; }
  // HF gradient_checkpointing: recompute each block in backward. Models without blocks refuse.
  virtual void enable_gradient_checkpointing();
  // ALST's tiled MLP (training.tiled_mlp): each layer's MLP over `tiles` slices of the sequence (0 = DeepSpeed's
  // automatic count), each recomputed in backward (models/checkpointing tiled_over_tokens). Models without a
  // per-token MLP of their own refuse.
  virtual void enable_tiled_mlp(int64_t tiles);
  // Ulysses sequence parallelism (models/sequence_parallel.h): `group` holds the ranks that share each sequence, and
  // the attention of a sliced batch (Batch::slice) trades its slice of every head for the whole sequence of a share
  // of the heads and back. Models that cannot (the default) refuse with a ConfigError naming their family.
  virtual void set_sequence_parallel(std::shared_ptr<SequenceParallel> group);
  // Expert parallelism (models/expert_parallel.h): `group` holds the ranks that share the routed experts, each running
  // its share of them for the whole group's tokens in training. Models without routed experts (the default) refuse
  // with a ConfigError naming their family.
  virtual void set_expert_parallel(std::shared_ptr<ExpertParallel> group);
  // The group set_expert_parallel gave the model (null when none).
  virtual ExpertParallel* expert_parallel() const { return nullptr; }
  // HF neftune_noise_alpha: uniform noise on the input embeddings while training (NEFTune,
  // arXiv:2310.05914: scale alpha / sqrt(seq_len * hidden)). Models without token embeddings refuse.
  virtual void set_neftune_noise_alpha(double alpha);
  // Causal LMs that keep a KvCache: logits [B, T, V] for `input_ids` [B, T] that continue the cached
  // tokens (positions cache.length ...), and the cache extended by them. Models without one return
  // false and generation reruns the context each step.
  virtual bool supports_kv_cache() const { return false; }
  virtual torch::Tensor forward_cached(const torch::Tensor& input_ids, KvCache& cache);
  // Encoder-decoder models (T5): generation runs the encoder once over the source and then the decoder,
  // which starts from decoder_start_token_id(), one token at a time. forward_encoder_decoder_cached gives
  // logits [B, T, V] for decoder_input_ids [B, T] continuing the cached decoder tokens; when the cache holds
  // no encoder output yet it first encodes input_ids [B, S] (attention_mask may be undefined) into it.
  // Other models: false, and the other two throw RuntimeFailure.
  virtual bool is_encoder_decoder() const { return false; }
  virtual int64_t decoder_start_token_id() const;
  virtual torch::Tensor forward_encoder_decoder_cached(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                                       const torch::Tensor& decoder_input_ids, KvCache& cache);
  // The units of forward, in order (see GatherUnit): those the model declared (declare_unit). A model that
  // declared none cannot be gathered per module and throws a ConfigError naming itself.
  virtual std::vector<GatherUnit> gather_units() const;
  // Installs (or, with nullptr, removes) the hooks run around every gather unit.
  virtual void set_gather_hooks(GatherHooks* hooks) { units_->set_hooks(hooks); }

 protected:
  // Families call this once in their constructor: the model is then `family`'s, and config.json holds
  // every option of `options` (a member that lives as long as the model) under its HF name, plus what
  // `derived` adds or changes (keys that follow from several options, or from none).
  template <class Options>
  void declare_family(const ModelFamily& family, const Options& options,
                      std::function<void(nlohmann::json&)> derived = nullptr) {
    family_ = &family;
    config_writer_ = [&family, &options, derived = std::move(derived)] {
      nlohmann::json j = config_from_options(family, options);
      if (derived) derived(j);
      return j;
    };
  }
  // Declares the next gather unit (forward order): the parameters under `prefixes` (see GatherUnit).
  UnitHandle declare_unit(std::string name, std::vector<std::string> prefixes) {
    return units_->declare(std::move(name), std::move(prefixes));
  }
  torch::Tensor in_unit(UnitHandle unit, const std::function<torch::Tensor()>& body) { return units_->run(unit, body); }
  const std::shared_ptr<GatherUnits>& units() const { return units_; }

  // A language model's output layer: `features` [B, T, H] (after the final norm) through `weight` [V, H]
  // (+ `bias` [V], may be undefined); with `softcap` > 0 the logits are softcap * tanh(logits / softcap)
  // (gemma2's final_logit_softcapping), in the logits and in the chunked loss alike.
  struct LmHead {
    torch::Tensor features, weight, bias;
    double softcap = 0.0;
  };
  // Logits [B, T, V] of the head built by `head` inside gather unit `unit`.
  torch::Tensor head_logits(UnitHandle unit, const std::function<LmHead()>& head);
  // A language model's output for `batch` through the head of gather unit `unit`: while training with labels
  // and gradients (and LmLossSettings::chunked), the fused chunked loss and no logits; otherwise the logits
  // and, with labels, token_cross_entropy. `shift`: HF's causal shift (features[:, :-1] score labels[:, 1:]).
  ModelOutput language_model_output(UnitHandle unit, const Batch& batch, bool shift, const std::function<LmHead()>& head);

  // Families end construction with this: the passes run now, or, under DeferredInit, once now with each
  // parameter materialised in turn and released (so the global generator advances exactly as it would)
  // and again in materialise_parameters. Under DeferredInit every parameter must be selected by a pass.
  void initialise_parameters(std::vector<InitPass> passes);
  // For families whose layers draw their initial values in their own constructors (torch's defaults),
  // `passes` restate those draws in the same order. Normally nothing more happens; under DeferredInit
  // the parameters are released and materialise_parameters replays the passes from the generator
  // state this model's construction started with.
  void restate_constructor_initialisation(std::vector<InitPass> passes);

 private:
  void defer_init(std::vector<InitPass> passes);
  torch::Tensor construction_rng_state_;  // under DeferredInit: the generator when construction began
  void run_init_passes(const ParameterVisitor* visit);
  std::vector<InitPass> init_passes_;
  torch::Tensor init_rng_state_;
  bool deferred_ = false;
  nlohmann::json loaded_config_ = nlohmann::json::object();
  nlohmann::json loaded_generation_config_;
  std::shared_ptr<const AdapterDescription> adapter_;
  LmLossSettings lm_loss_;
  const ModelFamily* family_ = nullptr;
  std::function<nlohmann::json()> config_writer_;
  std::shared_ptr<GatherUnits> units_ = std::make_shared<GatherUnits>();
};

// Parameter names of each gather unit of `model` among `trainable` (the names the engine partitions);
// a ConfigError names the model when it has no units or a trainable parameter belongs to none.
std::vector<std::vector<std::string>> resolve_gather_units(const Model& model, const std::vector<std::string>& trainable);

// The label tokens `model`'s loss scores in `batch`: labels != -100 (of labels[:, 1:] for causal LMs, unless the
// batch is a slice whose labels are shifted already); 0 for models whose loss averages examples.
int64_t scored_label_tokens(const Model& model, const Batch& batch);
// scored_label_tokens, and for labels on the host also `batch`'s scored_tokens, smallest_label and largest_label.
int64_t note_scored_labels(const Model& model, Batch& batch);

// Cross-entropy of logits [N, V] against labels [N] (ignore_index -100), in fp32: the mean over scored
// labels, or, when `denominator` > 0, their sum divided by it (Batch::loss_denominator).
torch::Tensor token_cross_entropy(const torch::Tensor& logits, const torch::Tensor& labels, double denominator);

// HF LabelSmoother: (1 - eps) * NLL + eps * mean over classes of -log p, ignoring labels -100; for causal
// LMs logits[:, :-1] are scored against labels[:, 1:]. Averaged over the scored tokens, or summed and
// divided by `denominator` when it is > 0.
torch::Tensor label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& labels, double epsilon,
                                  bool shift_labels, double denominator = 0);

// token_cross_entropy with logits[:, :-1] scored against labels[:, 1:] (HF's causal-LM shift).
torch::Tensor causal_lm_loss(const torch::Tensor& logits, const torch::Tensor& labels, double denominator = 0);

}  // namespace hftrain
