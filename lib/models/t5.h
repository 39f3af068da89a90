// `t5`: HF T5ForConditionalGeneration, the encoder-decoder transformer (shared token embedding;
// encoder.block.N.layer.{0: SelfAttention, 1: DenseReluDense}, decoder.block.N.layer.{0: SelfAttention,
// 1: EncDecAttention, 2: DenseReluDense}, RMS layer norms without bias, relative position buckets in the
// first block of each stack, lm_head tied to `shared` unless tie_word_embeddings is false). Options carry
// T5Config's names. The encoder reads input_ids / attention_mask; the decoder reads the labels shifted
// right (decoder_start_token_id first, -100 as pad_token_id) and the loss scores every label (no shift).
#pragma once

#include <optional>

#include "config/schema.h"
#include "models/model.h"

namespace hftrain {

class CheckpointFunctions;

class T5 : public Model {
 public:
  struct Options {
    int64_t vocab_size = 0;  // 0 = from data
    int64_t d_model = 512;
    int64_t d_kv = 64;
    int64_t d_ff = 2048;
    int64_t num_layers = 6;
    std::optional<int64_t> num_decoder_layers;  // null = num_layers
    int64_t num_heads = 8;
    int64_t relative_attention_num_buckets = 32;
    int64_t relative_attention_max_distance = 128;
    double dropout_rate = 0.1;
    double layer_norm_epsilon = 1e-6;
    double initializer_factor = 1.0;
    std::string feed_forward_proj = "relu";  // "relu", "gated-gelu" (gelu_new), "gated-<act>", "<act>"
    bool tie_word_embeddings = true;
    int64_t pad_token_id = 0;
    int64_t eos_token_id = 1;
    int64_t decoder_start_token_id = 0;
    static void declare(Schema<Options>& s);
  };

  T5(const Options& options, const ModelContext& context);
  static ModelDimensions facts(const Options& options);  // HF config.hidden_size, layers, heads
  static const ModelFamily& declaration();
  // input_ids / attention_mask feed the encoder; labels [B, T] (-100 = ignored) are required.
  ModelOutput forward(const Batch& batch) override;
  bool is_causal_lm() const override { return false; }
  LossUnit loss_unit() const override { return LossUnit::kLabelToken; }
  void enable_gradient_checkpointing() override { gradient_checkpointing_ = true; }
  void set_neftune_noise_alpha(double alpha) override { neftune_noise_alpha_ = alpha; }

  bool is_encoder_decoder() const override { return true; }
  bool supports_padding_free() const override { return true; }  // models/packed_seq2seq.h
  int64_t decoder_start_token_id() const override { return options_.decoder_start_token_id; }
  // Self-attention keys / values appended to cache.keys / values; cross-attention keys / values computed
  // on first use and kept in cache.cross_keys / cross_values.
  torch::Tensor forward_encoder_decoder_cached(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                               const torch::Tensor& decoder_input_ids, KvCache& cache) override;

  const Options& options() const { return options_; }
  // HF _shift_right: decoder_start_token_id, then labels[:, :-1] with -100 replaced by pad_token_id.
  torch::Tensor shift_right(const torch::Tensor& labels) const;
  // The encoder's output [B, S, d_model] (after final_layer_norm and dropout).
  // `packed`: a padding-free row (models/packed_seq2seq.h) whose attention stays inside each example.
  torch::Tensor encode(const torch::Tensor& input_ids, const torch::Tensor& attention_mask, const Batch* packed = nullptr);

 private:
  struct Attention;
  struct FeedForward;
  struct Block;
  // decoder_attention_mask may be undefined (all tokens); `cache` non-null = cached generation.
  torch::Tensor decode(const torch::Tensor& decoder_input_ids, const torch::Tensor& decoder_attention_mask,
                       const torch::Tensor& encoder_hidden, const torch::Tensor& encoder_mask, KvCache* cache,
                       const Batch* packed = nullptr);
  torch::Tensor embed(UnitHandle unit, const torch::Tensor& ids);
  LmHead head(const torch::Tensor& decoder_hidden);  // final norm, dropout, the tied head's scaling
  void declare_units();  // ZeRO-3's gather units, in forward order
  torch::Tensor lm_logits(const torch::Tensor& decoder_hidden);
  Options options_;
  UnitHandle encoder_embed_unit_, encoder_norm_unit_, decoder_embed_unit_, head_unit_;
  std::vector<UnitHandle> encoder_block_units_, decoder_block_units_;
  int64_t decoder_layers_ = 0;
  std::string dense_act_fn_;
  bool gated_ = false;
  torch::nn::Embedding shared_{nullptr};
  std::vector<std::shared_ptr<Block>> encoder_blocks_, decoder_blocks_;
  torch::Tensor encoder_norm_, decoder_norm_, lm_head_;  // lm_head_ undefined when tied
  bool gradient_checkpointing_ = false;
  double neftune_noise_alpha_ = 0.0;
  std::shared_ptr<CheckpointFunctions> checkpoint_fns_;
};

}  // namespace hftrain
