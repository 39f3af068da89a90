// The llama-like decoder, written once and composed by each family of HF's `XForCausalLM` layout
// (model.embed_tokens, model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
// mlp.{gate,up,down}_proj}, model.norm, lm_head): RMSNorm, rotary embeddings of every HF rope_type
// (models/rotary), grouped-query attention through the one self-attention dispatch (hf_layers
// self_attention: KV cache, padding-free rows, fused kernel / SDPA / manual), a gated MLP. What a family
// changes is data in its DecoderSpec: biases per projection, per-head q / k norms, a sliding window, gemma's
// (1 + weight) norms and scaled embeddings, phi3's fused qkv_proj / gate_up_proj and partial rotary, gemma2's
// sandwich norms, attention scale and soft-caps, gemma3's local rotary on sliding layers. So a new llama-like
// family is its options, its declaration and the spec it resolves to.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/schema.h"
#include "models/adaptable_linear.h"
#include "models/model.h"
#include "models/rotary.h"

namespace hftrain {

class CheckpointFunctions;
struct DecoderSpec;

// A decoder layer's feed-forward block, registered in the layer under its HF name (llama's `mlp`, Mixtral's
// `block_sparse_moe`): the gated MLP, or a family's routed experts, chosen per layer by DecoderSpec::feed_forward.
class FeedForward : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
};

// What DecoderSpec::feed_forward builds for one layer: the block and the name it is registered under.
struct FeedForwardChoice {
  std::string name;
  std::shared_ptr<FeedForward> block;
};
using FeedForwardFactory = std::function<FeedForwardChoice(const DecoderSpec& spec, int64_t layer)>;

// The gated MLP down(act(gate(x)) * up(x)) with `hidden_act` (silu through the fused kernel); phi3's fused
// gate_up_proj holds the gate rows, then the up rows.
class GatedMlp : public FeedForward {
 public:
  GatedMlp(int64_t hidden, int64_t intermediate, const std::string& hidden_act, bool bias, bool fused_gate_up);
  torch::Tensor forward(const torch::Tensor& x) override;

 private:
  int64_t intermediate_;
  std::string act_;
  AdaptableLinear gate_proj_{nullptr}, up_proj_{nullptr}, gate_up_proj_{nullptr}, down_proj_{nullptr};
};

// The options every llama-like family has, under HF's names (defaults: LlamaConfig's; vocab_size and
// max_position_embeddings 0 = from the data). Families derive their Options from it.
struct DecoderOptions {
  int64_t vocab_size = 0;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  std::optional<int64_t> num_key_value_heads;  // null = num_attention_heads
  std::optional<int64_t> head_dim;             // null = hidden_size / num_attention_heads
  std::string hidden_act = "silu";
  int64_t max_position_embeddings = 0;
  double initializer_range = 0.02;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;  // null = unscaled
  bool tie_word_embeddings = false;
  double attention_dropout = 0.0;
};

// Declares DecoderOptions' fields for a family's Options (members of the DecoderOptions base).
template <class O>
void declare_decoder_options(Schema<O>& s);

// A llama-like family's resolved shape: what the shared decoder builds.
struct DecoderSpec {
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, layers = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0, max_positions = 0;
  std::string hidden_act;
  double rms_norm_eps = 1e-6, initializer_range = 0.02, attention_dropout = 0.0;
  bool q_bias = false, k_bias = false, v_bias = false, o_bias = false, mlp_bias = false;
  bool qk_norm = false;              // RMSNorm over head_dim of each q / k head before rotary (qwen3)
  std::vector<int64_t> windows;      // per layer: sliding window (keys a query sees, itself included); 0 = none
  bool norm_plus_one = false;        // every RMSNorm scales by (1 + weight), its weight initialised to 0 (gemma)
  bool scale_embeddings = false;     // embeddings times sqrt(hidden_size) rounded to the compute dtype (gemma)
  bool fused_qkv = false;            // one qkv_proj: q rows, then k, then v (phi3; q_bias for its bias)
  bool fused_gate_up = false;        // one gate_up_proj: gate rows, then up (phi3)
  bool tie_word_embeddings = false;
  FeedForwardFactory feed_forward;   // per layer; null = GatedMlp named `mlp` everywhere
  RopeSpec rope;                     // its dim below head_dim: rotary over each head's first dims only (phi3)
  // gemma2 / gemma3: the attention output normed (post_attention_layernorm) before its residual add, and the
  // feed-forward between pre_feedforward_layernorm and post_feedforward_layernorm
  bool sandwich_norms = false;
  double attention_scale = 0.0;      // scores times this; 0 = head_dim^-0.5 (gemma2: query_pre_attn_scalar^-0.5)
  double attn_logit_softcap = 0.0;   // scores = cap tanh(scores / cap) before the mask; 0 = none (gemma2)
  double final_logit_softcap = 0.0;  // logits = cap tanh(logits / cap); 0 = none (gemma2)
  std::optional<RopeSpec> sliding_rope;  // the sliding layers' (windows > 0) rotary (gemma3); null = `rope` everywhere
};

// The options with the data's sizes filled in and checked (kv heads divide the heads, an even head size,
// the activation, the rotary over `partial_rotary_factor` of each head's dims), as a spec with no biases, norms
// or windows yet.
DecoderSpec resolve_decoder(DecoderOptions& o, const ModelContext& context, double partial_rotary_factor = 1.0);

// Each layer's sliding window as Qwen2 / Qwen3 configs give it: layer_types[i] == "sliding_attention" (v5 writes
// them; otherwise layers >= max_window_layers) slide over `window` keys when use_sliding_window; 0 = full
// attention. ConfigError naming the key for a layer type that is neither, a list of the wrong length, or a
// sliding layer without a window.
std::vector<int64_t> qwen_layer_windows(int64_t layers, bool use_sliding_window, std::optional<int64_t> window,
                                        int64_t max_window_layers, const std::optional<std::vector<std::string>>& layer_types);

// The declaration a llama-like family starts from: model_type `type`, architectures `<stem>ForCausalLM` and
// `<stem>Model`, PEFT's default LoRA targets q_proj / v_proj, rotary, strict config keys, HF's `model.` prefix
// with rotary_emb.inv_freq skipped and lm_head.weight tied when the head is.
ModelFamily decoder_family(const std::string& type, const std::string& stem);

// HF's XForCausalLM over a DecoderSpec. A family derives from it and ends its constructor with
// build(declaration(), options_, spec).
class RotaryDecoder : public Model {
 public:
  ModelOutput forward(const Batch& batch) override;
  bool is_causal_lm() const override { return true; }
  void enable_gradient_checkpointing() override { gradient_checkpointing_ = true; }
  void enable_tiled_mlp(int64_t tiles) override;
  void set_neftune_noise_alpha(double alpha) override { neftune_noise_alpha_ = alpha; }
  // Ulysses: the heads and the key / value heads must divide over the group; routed experts refuse.
  void set_sequence_parallel(std::shared_ptr<SequenceParallel> group) override;
  bool supports_kv_cache() const override { return true; }
  bool supports_padding_free() const override { return true; }
  torch::Tensor forward_cached(const torch::Tensor& input_ids, KvCache& cache) override;
  static ModelDimensions facts(const DecoderOptions& o) {  // HF config.hidden_size, layers, heads
    return {o.hidden_size, o.num_hidden_layers, o.num_attention_heads};
  }

 protected:
  // Declares the family (config.json from `options`, a member living as long as the model, plus the derived
  // keys of decoder_config) and builds the decoder of `spec`.
  template <class O>
  void build(const ModelFamily& family, const O& options, const DecoderSpec& spec) {
    declare_family(family, options, [this, &options](nlohmann::json& j) { decoder_config(j, spec_, options); });
    build(spec);
  }
  void build(const DecoderSpec& spec);
  // The keys every llama-like config.json derives: the resolved num_key_value_heads and head_dim, rope_scaling
  // as transformers 4.x writes it and v5's rope_parameters.
  static void decoder_config(nlohmann::json& j, const DecoderSpec& spec, const DecoderOptions& o);
  const DecoderSpec& spec() const { return spec_; }

 private:
  struct Layer;
  torch::Tensor hidden_states(const Batch& batch, KvCache* cache);  // after the last layer
  LmHead head(const torch::Tensor& hidden);                         // the final norm and the (tied) lm_head
  DecoderSpec spec_;
  UnitHandle embeddings_unit_, head_unit_;
  std::vector<UnitHandle> layer_units_;
  torch::nn::Embedding embed_tokens_{nullptr};
  std::vector<std::shared_ptr<Layer>> layers_;
  torch::Tensor norm_weight_, lm_head_;  // lm_head_ undefined when tied
  bool gradient_checkpointing_ = false;
  double neftune_noise_alpha_ = 0.0;
  std::shared_ptr<CheckpointFunctions> checkpoint_fns_;
  std::shared_ptr<SequenceParallel> sequence_parallel_;  // null = every batch attends on this rank alone
};

// Declares the sliding-window options Qwen2 and Qwen3 share (use_sliding_window, sliding_window,
// max_window_layers, layer_types; see qwen_layer_windows) for a family's Options that has them.
template <class O>
void declare_qwen_window_options(Schema<O>& s);

// ---- template definitions ------------------------------------------------------------------------
std::string check_rope_scaling_option(const RopeScaling& r);

template <class O>
void declare_decoder_options(Schema<O>& s) {
  s.template add<int64_t>("vocab_size", &O::vocab_size, "Vocabulary size; 0 = from the data's tokenizer.").min(0);
  s.template add<int64_t>("hidden_size", &O::hidden_size, "Hidden size.").min(1);
  s.template add<int64_t>("intermediate_size", &O::intermediate_size, "Gated MLP inner size.").min(1);
  s.template add<int64_t>("num_hidden_layers", &O::num_hidden_layers, "Number of decoder layers.").min(1);
  s.template add<int64_t>("num_attention_heads", &O::num_attention_heads, "Query heads per layer.").min(1);
  s.template add<std::optional<int64_t>>("num_key_value_heads", &O::num_key_value_heads,
        "Key/value heads (grouped-query attention; divides num_attention_heads); null = num_attention_heads.");
  s.template add<std::optional<int64_t>>("head_dim", &O::head_dim, "Per-head size; null = hidden_size / num_attention_heads.");
  s.template add<std::string>("hidden_act", &O::hidden_act, "Gate activation of the gated MLP (HF name, e.g. silu).");
  s.template add<int64_t>("max_position_embeddings", &O::max_position_embeddings, "Maximum sequence length; 0 = from the data.").min(0);
  s.template add<double>("initializer_range", &O::initializer_range, "Std of the normal initialisation.").greater_than(0);
  s.template add<double>("rms_norm_eps", &O::rms_norm_eps, "RMSNorm epsilon.").greater_than(0);
  s.template add<double>("rope_theta", &O::rope_theta, "Rotary embedding base.").greater_than(0);
  s.template add<RopeScaling>("rope_scaling", &O::rope_scaling,
        "HF rotary scaling: {rope_type: linear | dynamic | llama3 | yarn | longrope, factor: ..., ...} as config.json "
        "writes it; null = none.")
      .check(check_rope_scaling_option);
  s.template add<bool>("tie_word_embeddings", &O::tie_word_embeddings, "LM head shares the token embedding matrix.");
  s.template add<double>("attention_dropout", &O::attention_dropout, "Dropout on attention probabilities.").min(0).max(1);
}

template <class O>
void declare_qwen_window_options(Schema<O>& s) {
  s.template add<bool>("use_sliding_window", &O::use_sliding_window,
                       "Sliding-window attention in the layers layer_types (or max_window_layers) names.");
  s.template add<std::optional<int64_t>>("sliding_window", &O::sliding_window,
                                         "Keys a query of a sliding layer sees, itself included.");
  s.template add<int64_t>("max_window_layers", &O::max_window_layers,
                          "Layers from this index on slide when layer_types is not given.").min(0);
  s.template add<std::optional<std::vector<std::string>>>("layer_types", &O::layer_types,
                                                          "Per layer full_attention or sliding_attention (v5); null = "
                                                          "from max_window_layers.");
}

}  // namespace hftrain
