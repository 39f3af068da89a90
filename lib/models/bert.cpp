// BERT models (see bert.h). Numerics follow HF's eager BertSelfAttention: scores / sqrt(head_dim) +
// extended attention mask ((1 - mask) * float min), softmax, dropout; post-LayerNorm residual blocks.
#include "models/bert.h"
#include "models/construction.h"
#include "models/fused_embedding.h"
#include "models/fused_norms.h"

#include <cmath>

#include "models/checkpointing.h"
#include "models/hf_layers.h"
#include "util/error.h"

namespace hftrain {

namespace {

// The encoder options, declared for either head's options struct (members of the BertConfig base).
template <class O>
void declare_encoder(Schema<O>& s) {
  s.template add<int64_t>("vocab_size", &O::vocab_size, "Vocabulary size; 0 = from the data's tokenizer.").min(0);
  s.template add<int64_t>("hidden_size", &O::hidden_size, "Hidden size (divisible by num_attention_heads).").min(1);
  s.template add<int64_t>("num_hidden_layers", &O::num_hidden_layers, "Number of encoder layers.").min(1);
  s.template add<int64_t>("num_attention_heads", &O::num_attention_heads, "Attention heads per layer.").min(1);
  s.template add<int64_t>("intermediate_size", &O::intermediate_size, "Feed-forward inner size.").min(1);
  s.template add<std::string>("hidden_act", &O::hidden_act, "Feed-forward activation (HF name, e.g. gelu).");
  s.template add<double>("hidden_dropout_prob", &O::hidden_dropout_prob, "Dropout on embeddings and residual branches.").min(0).max(1);
  s.template add<double>("attention_probs_dropout_prob", &O::attention_probs_dropout_prob, "Dropout on attention probabilities.").min(0).max(1);
  s.template add<int64_t>("max_position_embeddings", &O::max_position_embeddings, "Maximum sequence length; 0 = from the data.").min(0);
  s.template add<int64_t>("type_vocab_size", &O::type_vocab_size, "Number of token types (segments).").min(1);
  s.template add<double>("initializer_range", &O::initializer_range, "Std of the normal initialisation.").greater_than(0);
  s.template add<double>("layer_norm_eps", &O::layer_norm_eps, "LayerNorm epsilon.").greater_than(0);
  s.template add<int64_t>("pad_token_id", &O::pad_token_id, "Padding token id (its embedding row starts at zero).").min(0);
  s.template add<std::string>("position_embedding_type", &O::position_embedding_type, "Only 'absolute' is supported.");
}

}  // namespace

void BertOptions::declare(Schema<BertOptions>& s) {
  declare_encoder(s);
  s.template add<int64_t>("num_labels", &BertOptions::num_labels,
                          "Number of classes (1 = regression); 0 = from the data or config.json id2label.").min(0);
  s.template add<std::string>("problem_type", &BertOptions::problem_type,
                              "HF problem_type: regression or single_label_classification; empty = from num_labels.");
  s.template add<std::optional<double>>("classifier_dropout", &BertOptions::classifier_dropout,
                                        "Dropout before the classifier; null = hidden_dropout_prob.");
}

void BertMlmOptions::declare(Schema<BertMlmOptions>& s) { declare_encoder(s); }

namespace {

torch::nn::LayerNorm layer_norm(const BertConfig& o) {
  return new_layer_norm(o.hidden_size, o.layer_norm_eps);
}

void validate(BertConfig& o, const ModelContext& context) {
  resolve_lm_sizes({o.vocab_size, &o.max_position_embeddings, "max_position_embeddings", o.hidden_size,
                    o.num_attention_heads, "hidden_size", "num_attention_heads"},
                   context);
  if (o.position_embedding_type != "absolute")
    throw ConfigError("model.position_embedding_type: '" + o.position_embedding_type + "' is not supported (absolute)");
  if (o.pad_token_id >= o.vocab_size)
    throw ConfigError("model.pad_token_id (" + std::to_string(o.pad_token_id) + ") is outside the vocabulary");
  check_activation(o.hidden_act, "model.hidden_act");
}

}  // namespace

// bert.embeddings + bert.encoder (+ bert.pooler when `pooler`), registered under the caller's "bert".
class BertEncoder : public torch::nn::Module {
 public:
  BertEncoder(const BertConfig& o, bool pooler, std::shared_ptr<GatherUnits> units) : o_(o), units_(std::move(units)) {
    embeddings_unit_ = units_->declare("embeddings", {"bert.embeddings."});
    for (int64_t i = 0; i < o.num_hidden_layers; ++i)
      layer_units_.push_back(
          units_->declare("bert.encoder.layer." + std::to_string(i), {"bert.encoder.layer." + std::to_string(i) + "."}));
    auto emb = register_module("embeddings", std::make_shared<torch::nn::Module>());
    word_ = emb->register_module("word_embeddings", new_embedding(o.vocab_size, o.hidden_size));
    position_ = emb->register_module("position_embeddings", new_embedding(o.max_position_embeddings, o.hidden_size));
    token_type_ = emb->register_module("token_type_embeddings", new_embedding(o.type_vocab_size, o.hidden_size));
    emb_norm_ = emb->register_module("LayerNorm", layer_norm(o));
    release_built_parameters(*emb);  // sharded construction: one unit's memory at a time
    auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
    auto layers = encoder->register_module("layer", std::make_shared<torch::nn::Module>());
    for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
      layers_.push_back(layers->register_module(std::to_string(i), std::make_shared<Layer>(o)));
      release_built_parameters(*layers_.back());
    }
    if (pooler) {
      auto p = register_module("pooler", std::make_shared<torch::nn::Module>());
      pooler_ = p->register_module("dense", new_linear(o.hidden_size, o.hidden_size));
    }
  }

  // Returns the last hidden states [B, T, H].
  torch::Tensor forward(const Batch& batch) {
    const auto& ids = batch.input_ids;
    const auto T = ids.size(1);
    if (T > o_.max_position_embeddings)
      throw RuntimeFailure("bert: sequence length " + std::to_string(T) + " exceeds max_position_embeddings " +
                           std::to_string(o_.max_position_embeddings));
    auto pos = torch::arange(T, ids.options().dtype(torch::kLong));
    auto types = batch.token_type_ids.defined() ? batch.token_type_ids : torch::zeros_like(ids);
    auto x = units_->run(embeddings_unit_, [&] {
      auto words = apply_embedding(word_, ids);
      if (neftune_noise_alpha > 0 && is_training()) {
        const double magnitude = neftune_noise_alpha / std::sqrt(static_cast<double>(T * o_.hidden_size));
        words = words + torch::empty_like(words).uniform_(-magnitude, magnitude);
      }
      return torch::dropout(apply_layer_norm(emb_norm_, words + apply_embedding(token_type_, types) + apply_embedding(position_, pos)), o_.hidden_dropout_prob, is_training());
    });
    auto bias = padding_bias(batch.attention_mask, x.scalar_type(), batch.has_padding);
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      Layer* l = layers_[i].get();
      if (gradient_checkpointing && is_training()) {
        x = checkpointed(checkpoint_fns_.hold(
                             [this, l, bias, i](const torch::Tensor& in) {
                               return units_->run(layer_units_[i], [&] { return l->forward(in, bias); });
                             },
                             4 * layers_.size()),
                         x);
      } else {
        x = units_->run(layer_units_[i], [&] { return l->forward(x, bias); });
      }
    }
    return x;
  }

  // tanh(dense(h[:, 0])): the pooler of the sequence classifier.
  torch::Tensor pool(const torch::Tensor& x) { return torch::tanh(pooler_(x.select(1, 0))); }

  torch::nn::Embedding word_{nullptr};
  bool gradient_checkpointing = false;
  double neftune_noise_alpha = 0.0;

 private:
  struct Layer : torch::nn::Module {
    explicit Layer(const BertConfig& o) : o(o) {
      auto attention = register_module("attention", std::make_shared<torch::nn::Module>());
      auto self = attention->register_module("self", std::make_shared<torch::nn::Module>());
      query = self->register_module("query", new_linear(o.hidden_size, o.hidden_size));
      key = self->register_module("key", new_linear(o.hidden_size, o.hidden_size));
      value = self->register_module("value", new_linear(o.hidden_size, o.hidden_size));
      auto attn_out = attention->register_module("output", std::make_shared<torch::nn::Module>());
      attn_dense = attn_out->register_module("dense", new_linear(o.hidden_size, o.hidden_size));
      attn_norm = attn_out->register_module("LayerNorm", layer_norm(o));
      auto inter = register_module("intermediate", std::make_shared<torch::nn::Module>());
      inter_dense = inter->register_module("dense", new_linear(o.hidden_size, o.intermediate_size));
      auto out = register_module("output", std::make_shared<torch::nn::Module>());
      out_dense = out->register_module("dense", new_linear(o.intermediate_size, o.hidden_size));
      out_norm = out->register_module("LayerNorm", layer_norm(o));
    }

    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& bias) {
      const auto B = x.size(0), T = x.size(1), H = o.hidden_size, nh = o.num_attention_heads;
      auto heads = [&](const torch::Tensor& t) { return t.view({B, T, nh, H / nh}).transpose(1, 2); };
      auto ctx = attend(heads(query(x)), heads(key(x)), heads(value(x)), bias, /*causal=*/false,
                        is_training() ? o.attention_probs_dropout_prob : 0.0);
      ctx = ctx.transpose(1, 2).contiguous().view({B, T, H});
      const bool train = is_training();
      auto a = add_layer_norm(attn_norm, x, torch::dropout(attn_dense(ctx), o.hidden_dropout_prob, train)).second;
      auto i = apply_activation(o.hidden_act, inter_dense(a));
      return add_layer_norm(out_norm, a, torch::dropout(out_dense(i), o.hidden_dropout_prob, train)).second;
    }

    BertConfig o;
    AdaptableLinear query{nullptr}, key{nullptr}, value{nullptr}, attn_dense{nullptr}, inter_dense{nullptr},
        out_dense{nullptr};
    torch::nn::LayerNorm attn_norm{nullptr}, out_norm{nullptr};
  };

  BertConfig o_;
  std::shared_ptr<GatherUnits> units_;  // the owning model's
  UnitHandle embeddings_unit_;
  std::vector<UnitHandle> layer_units_;
  torch::nn::Embedding position_{nullptr}, token_type_{nullptr};
  torch::nn::LayerNorm emb_norm_{nullptr};
  std::vector<std::shared_ptr<Layer>> layers_;
  AdaptableLinear pooler_{nullptr};
  CheckpointFunctions checkpoint_fns_;
};

namespace {

// HF BertPreTrainedModel._init_weights as one pass; the pad token's word embedding row is zeroed.
InitPass bert_init_pass(const BertConfig& o) {
  InitPass pass = hf_init_pass(o.initializer_range, {"LayerNorm"});
  pass.init = [hf = pass.init, pad = o.pad_token_id](const std::string& name, torch::Tensor& p) {
    hf(name, p);
    if (name == "bert.embeddings.word_embeddings.weight") p[pad].zero_();
  };
  return pass;
}

// The sequence classifier's options with the data's sizes filled in, checked.
BertOptions classifier_config(BertOptions o, const ModelContext& context) {
  validate(o, context);
  if (o.num_labels == 0) o.num_labels = context.num_labels;
  if (o.num_labels <= 0) throw ConfigError("model.num_labels: the data gives no number of labels; set it");
  if (o.problem_type.empty()) o.problem_type = o.num_labels == 1 ? "regression" : "single_label_classification";
  if (o.problem_type != "regression" && o.problem_type != "single_label_classification")
    throw ConfigError("model.problem_type: '" + o.problem_type +
                      "' is not supported (regression, single_label_classification)");
  return o;
}

}  // namespace

ModelDimensions BertForSequenceClassification::facts(const Options& o) {
  return {o.hidden_size, o.num_hidden_layers, o.num_attention_heads};
}

namespace {

// Both heads: model_type bert, PEFT's query / value targets; base-model files lack `bert.`.
ModelFamily bert_family(const std::string& type, std::vector<std::string> architectures,
                        std::vector<std::string> ignored_unexpected, std::vector<std::string> initialised_if_missing) {
  ModelFamily f;
  f.type = type;
  f.model_type = "bert";
  f.architectures = std::move(architectures);
  f.default_for_model_type = type == "bert_mlm";  // BertModel / BertForPreTraining files load as the MLM
  f.lora_target_modules = {"query", "value"};
  f.load.base_prefix = "bert.";
  f.load.ignored_unexpected = std::move(ignored_unexpected);
  f.load.initialised_if_missing = std::move(initialised_if_missing);
  return f;
}

}  // namespace

const ModelFamily& BertForSequenceClassification::declaration() {
  static const ModelFamily family = bert_family("bert", {"BertForSequenceClassification"},
                                                /*ignored_unexpected=*/{".position_ids", "cls."},
                                                /*initialised_if_missing=*/{"classifier.", "bert.pooler."});
  return family;
}

const ModelFamily& BertForMaskedLM::declaration() {
  static const ModelFamily family =
      bert_family("bert_mlm", {"BertForMaskedLM", "BertForPreTraining", "BertModel"},
                  /*ignored_unexpected=*/
                  {".position_ids", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias",
                   "cls.seq_relationship.", "bert.pooler."},
                  /*initialised_if_missing=*/{});
  return family;
}

BertForSequenceClassification::BertForSequenceClassification(const Options& options, const ModelContext& context)
    : options_(classifier_config(options, context)) {
  auto& o = options_;
  if (static_cast<int64_t>(context.label_names.size()) == o.num_labels) label_names_ = context.label_names;
  declare_family(declaration(), options_, [this](nlohmann::json& j) { derived_config(j); });
  bert_ = register_module("bert", std::make_shared<BertEncoder>(o, /*pooler=*/true, units()));
  head_unit_ = declare_unit("head", {"bert.pooler.", "classifier."});
  classifier_ = register_module("classifier", new_linear(o.hidden_size, o.num_labels));
  initialise_parameters({bert_init_pass(o)});
}

ModelOutput BertForSequenceClassification::forward(const Batch& batch) {
  auto h = bert_->forward(batch);
  const double p = options_.classifier_dropout.value_or(options_.hidden_dropout_prob);
  ModelOutput out;
  out.logits = in_unit(head_unit_, [&] { return classifier_(torch::dropout(bert_->pool(h), p, is_training())); });
  if (batch.labels.defined()) {
    if (options_.problem_type == "regression")
      out.loss = torch::mse_loss(out.logits.to(torch::kFloat).squeeze(-1), batch.labels.to(torch::kFloat).view({-1}));
    else
      out.loss = torch::nn::functional::cross_entropy(
          out.logits.to(torch::kFloat).view({-1, options_.num_labels}), batch.labels.view({-1}),
          torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
  }
  return out;
}

// HF writes the classes as id2label / label2id, not num_labels.
void BertForSequenceClassification::derived_config(nlohmann::json& j) const {
  j.erase("num_labels");
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (int64_t i = 0; i < options_.num_labels; ++i) {  // the data's class names, else HF's LABEL_i
    const std::string name =
        label_names_.empty() ? "LABEL_" + std::to_string(i) : label_names_[static_cast<std::size_t>(i)];
    id2label[std::to_string(i)] = name;
    label2id[name] = i;
  }
  j["id2label"] = id2label;
  j["label2id"] = label2id;
}

void BertForSequenceClassification::enable_gradient_checkpointing() { bert_->gradient_checkpointing = true; }
void BertForSequenceClassification::set_neftune_noise_alpha(double alpha) { bert_->neftune_noise_alpha = alpha; }
ModelDimensions BertForMaskedLM::facts(const Options& o) {
  return {o.hidden_size, o.num_hidden_layers, o.num_attention_heads};
}

BertForMaskedLM::BertForMaskedLM(const Options& options, const ModelContext& context) : options_(options) {
  validate(options_, context);
  const auto& o = options_;
  declare_family(declaration(), options_, [](nlohmann::json& j) { j["tie_word_embeddings"] = true; });
  bert_ = register_module("bert", std::make_shared<BertEncoder>(o, /*pooler=*/false, units()));
  head_unit_ = declare_unit("head", {"cls.", "bert.embeddings.word_embeddings.weight"});
  auto cls = register_module("cls", std::make_shared<torch::nn::Module>());
  auto predictions = cls->register_module("predictions", std::make_shared<torch::nn::Module>());
  auto transform = predictions->register_module("transform", std::make_shared<torch::nn::Module>());
  transform_dense_ = transform->register_module("dense", new_linear(o.hidden_size, o.hidden_size));
  transform_norm_ = transform->register_module("LayerNorm", layer_norm(o));
  decoder_bias_ = predictions->register_parameter("bias", torch::zeros({o.vocab_size}, parameter_options()));
  initialise_parameters({bert_init_pass(o)});
}

ModelOutput BertForMaskedLM::forward(const Batch& batch) {
  auto h = bert_->forward(batch);
  return language_model_output(head_unit_, batch, /*shift=*/false, [&] {
    auto t = apply_layer_norm(transform_norm_, apply_activation(options_.hidden_act, transform_dense_(h)));
    return LmHead{t, bert_->word_->weight, decoder_bias_};  // decoder tied to embeddings
  });
}

void BertForMaskedLM::enable_gradient_checkpointing() { bert_->gradient_checkpointing = true; }
void BertForMaskedLM::set_neftune_noise_alpha(double alpha) { bert_->neftune_noise_alpha = alpha; }

}  // namespace hftrain
