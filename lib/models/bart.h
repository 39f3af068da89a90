// `bart`: HF BartForConditionalGeneration, the post-LayerNorm encoder-decoder transformer of BART
// (arXiv:1910.13461). One token embedding model.shared (the encoder's and decoder's embed_tokens are tied
// copies, lm_head too unless tie_word_embeddings is false), learned positions per stack with BART's
// offset of 2 (row = position + 2), layernorm_embedding after the token + position sum, optional
// sqrt(d_model) embedding scale, post-LN residual sublayers with biased projections, and the
// final_logits_bias buffer added to the logits. Options carry BartConfig's names. The encoder reads
// input_ids / attention_mask; the decoder reads the labels shifted right (decoder_start_token_id first,
// -100 as pad_token_id) and the loss scores every label (no shift).
#pragma once

#include "config/schema.h"
#include "models/model.h"

namespace hftrain {

class CheckpointFunctions;

class Bart : public Model {
 public:
  struct Options {
    int64_t vocab_size = 0;  // 0 = from data
    int64_t d_model = 1024;
    int64_t encoder_layers = 12;
    int64_t decoder_layers = 12;
    int64_t encoder_attention_heads = 16;
    int64_t decoder_attention_heads = 16;
    int64_t encoder_ffn_dim = 4096;
    int64_t decoder_ffn_dim = 4096;
    std::string activation_function = "gelu";
    double dropout = 0.1;
    double attention_dropout = 0.0;
    double activation_dropout = 0.0;
    double encoder_layerdrop = 0.0;  // only 0 is built
    double decoder_layerdrop = 0.0;  // only 0 is built
    int64_t max_position_embeddings = 1024;
    double init_std = 0.02;
    bool scale_embedding = false;
    bool tie_word_embeddings = true;
    int64_t pad_token_id = 1;
    int64_t bos_token_id = 0;
    int64_t eos_token_id = 2;
    int64_t decoder_start_token_id = 2;
    int64_t forced_eos_token_id = 2;
    // Keys of older (fairseq-converted) BART configs; only BART's own values are built.
    bool normalize_before = false;
    bool add_final_layer_norm = false;
    bool normalize_embedding = true;
    bool static_position_embeddings = false;
    bool add_bias_logits = false;
    static void declare(Schema<Options>& s);
  };

  Bart(const Options& options, const ModelContext& context);
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
  // Self-attention keys / values appended to cache.keys / values (positions continue at cache.length);
  // cross-attention keys / values computed on first use and kept in cache.cross_keys / cross_values.
  torch::Tensor forward_encoder_decoder_cached(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                               const torch::Tensor& decoder_input_ids, KvCache& cache) override;

  const Options& options() const { return options_; }
  // HF shift_tokens_right: decoder_start_token_id, then labels[:, :-1] with -100 replaced by pad_token_id.
  torch::Tensor shift_right(const torch::Tensor& labels) const;
  // The encoder's output [B, S, d_model]. `packed`: a padding-free row (models/packed_seq2seq.h) whose
  // attention stays inside each example and whose positions restart at each.
  torch::Tensor encode(const torch::Tensor& input_ids, const torch::Tensor& attention_mask, const Batch* packed = nullptr);

 private:
  struct Attention;
  struct Layer;
  // A stack's embedding unit: shared (scaled) + embed_positions (offset 2) -> layernorm_embedding -> dropout.
  // Positions continue at `past`, or restart at each of `segments` (a padding-free row) when given.
  torch::Tensor embed(bool decoder, const torch::Tensor& ids, int64_t past, const std::vector<int64_t>* segments = nullptr);
  torch::Tensor decode(const torch::Tensor& decoder_input_ids, const torch::Tensor& encoder_hidden,
                       const torch::Tensor& encoder_mask, KvCache* cache, const Batch* packed = nullptr);
  LmHead head(const torch::Tensor& decoder_hidden);  // lm_head + final_logits_bias
  torch::Tensor lm_logits(const torch::Tensor& decoder_hidden);
  Options options_;
  UnitHandle embed_units_[2], head_unit_;             // [0] encoder, [1] decoder
  std::vector<UnitHandle> layer_units_[2];
  torch::nn::Embedding shared_{nullptr};
  torch::nn::Embedding positions_[2] = {nullptr, nullptr};  // [0] encoder, [1] decoder
  torch::nn::LayerNorm embedding_norms_[2] = {nullptr, nullptr};
  std::vector<std::shared_ptr<Layer>> encoder_layers_, decoder_layers_;
  torch::Tensor lm_head_;            // undefined when tied
  torch::Tensor final_logits_bias_;  // buffer [1, V]
  bool gradient_checkpointing_ = false;
  double neftune_noise_alpha_ = 0.0;
  std::shared_ptr<CheckpointFunctions> checkpoint_fns_;
};

}  // namespace hftrain
