// `bert` (HF BertForSequenceClassification) and `bert_mlm` (HF BertForMaskedLM): the BERT encoder
// (bert.embeddings.*, bert.encoder.layer.N.*), with a pooler + classifier (regression when
// num_labels == 1, HF problem_type) or the MLM head (cls.predictions.transform.*, decoder tied to the
// word embeddings, cls.predictions.bias). attention_mask and token_type_ids are honoured.
#pragma once

#include "config/schema.h"
#include "models/adaptable_linear.h"
#include "models/model.h"

namespace hftrain {

// The fields of HF BertConfig that hftrain uses (HF names). Both heads share them.
struct BertConfig {
  int64_t vocab_size = 0;  // 0 = from data
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  int64_t max_position_embeddings = 0;  // 0 = from data
  int64_t type_vocab_size = 2;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;
  std::string position_embedding_type = "absolute";
  int64_t num_labels = 0;  // 0 = from data (or config.json id2label)
  std::string problem_type;  // "" = regression when num_labels == 1, else single_label_classification
  std::optional<double> classifier_dropout;  // null = hidden_dropout_prob
};

struct BertOptions : BertConfig {  // options of `bert` (sequence classification)
  static void declare(Schema<BertOptions>& s);
};

struct BertMlmOptions : BertConfig {  // options of `bert_mlm`: the encoder's only
  static void declare(Schema<BertMlmOptions>& s);
};

class BertEncoder;

class BertForSequenceClassification : public Model {
 public:
  using Options = BertOptions;
  BertForSequenceClassification(const Options& options, const ModelContext& context);
  static ModelDimensions facts(const Options& options);  // HF config.hidden_size, layers, heads
  static const ModelFamily& declaration();
  ModelOutput forward(const Batch& batch) override;
  bool is_causal_lm() const override { return false; }
  void enable_gradient_checkpointing() override;
  void set_neftune_noise_alpha(double alpha) override;

 private:
  void derived_config(nlohmann::json& j) const;  // id2label / label2id
  Options options_;
  std::vector<std::string> label_names_;  // id2label from the data; empty = LABEL_i
  UnitHandle head_unit_;
  std::shared_ptr<BertEncoder> bert_;
  AdaptableLinear classifier_{nullptr};
};

class BertForMaskedLM : public Model {
 public:
  using Options = BertMlmOptions;
  BertForMaskedLM(const Options& options, const ModelContext& context);
  static ModelDimensions facts(const Options& options);  // HF config.hidden_size, layers, heads
  static const ModelFamily& declaration();
  ModelOutput forward(const Batch& batch) override;
  bool is_causal_lm() const override { return false; }
  LossUnit loss_unit() const override { return LossUnit::kLabelToken; }
  void enable_gradient_checkpointing() override;
  void set_neftune_noise_alpha(double alpha) override;

 private:
  Options options_;
  UnitHandle head_unit_;
  std::shared_ptr<BertEncoder> bert_;
  AdaptableLinear transform_dense_{nullptr};
  torch::nn::LayerNorm transform_norm_{nullptr};
  torch::Tensor decoder_bias_;
};

}  // namespace hftrain
