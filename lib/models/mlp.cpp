// `mlp` classifier implementation (see mlp.h). Parameters: layers.N.weight / layers.N.bias.
#include "models/mlp.h"
#include "models/construction.h"
#include "models/fused_activations.h"

#include <cmath>
#include <map>

#include "util/error.h"

namespace hftrain {

void MlpClassifier::Options::declare(Schema<Options>& s) {
  s.add("hidden_sizes", &Options::hidden_sizes, "Widths of the hidden layers.").check([](const std::vector<int64_t>& v) {
    for (auto h : v)
      if (h < 1) return std::string("every hidden size must be >= 1");
    return std::string();
  });
  s.add("dropout", &Options::dropout, "Dropout after each hidden layer.").min(0).max(1);
  s.add("num_labels", &Options::num_labels, "Number of classes; 0 = from the data.").min(0);
  s.add("num_features", &Options::num_features, "Input width; 0 = from the data.").min(0);
}

namespace {

// The options with the data's sizes filled in, checked.
MlpClassifier::Options resolved(MlpClassifier::Options o, const ModelContext& context) {
  if (o.num_labels == 0) o.num_labels = context.num_labels;
  if (o.num_features == 0) o.num_features = context.num_features;
  if (o.num_labels <= 0 || o.num_features <= 0)
    throw ConfigError("model: mlp needs num_labels and num_features (the data gives none; use a classification task)");
  return o;
}

// (in, out) of each Linear layer, input to output.
std::vector<std::pair<int64_t, int64_t>> layer_sizes(const MlpClassifier::Options& o) {
  std::vector<std::pair<int64_t, int64_t>> sizes;
  int64_t in = o.num_features;
  std::vector<int64_t> widths = o.hidden_sizes;
  widths.push_back(o.num_labels);
  for (int64_t w : widths) {
    sizes.emplace_back(in, w);
    in = w;
  }
  return sizes;
}

}  // namespace

ModelDimensions MlpClassifier::facts(const Options& o) {  // no attention blocks; HF's max(config.hidden_sizes)
  int64_t widest = 0;
  for (int64_t h : o.hidden_sizes) widest = std::max(widest, h);
  return {widest, 0, 0};
}

const ModelFamily& MlpClassifier::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f;
    f.type = f.model_type = "mlp";
    f.architectures = {"MlpForClassification"};
    return f;
  }();
  return family;
}

MlpClassifier::MlpClassifier(const Options& options, const ModelContext& context) : options_(resolved(options, context)) {
  declare_family(declaration(), options_);
  auto layers = register_module("layers", std::make_shared<torch::nn::Module>());
  std::map<std::string, int64_t> fan_in;
  for (const auto& [in, out] : layer_sizes(options_)) {
    const std::string name = "layers." + std::to_string(layers_.size());
    layer_units_.push_back(declare_unit(name, {name + "."}));
    fan_in[name + ".bias"] = in;
    layers_.push_back(layers->register_module(std::to_string(layers_.size()), new_linear(in, out)));
    release_built_parameters(*layers_.back());  // sharded construction: one layer's memory at a time
  }
  dropout_ = register_module("dropout", torch::nn::Dropout(options_.dropout));
  // torch's Linear initialisation, which each layer drew in its constructor: weight kaiming_uniform_ with
  // a = sqrt(5), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  InitPass linear;
  linear.selects = [](const std::string&) { return true; };
  linear.init = [fan_in](const std::string& name, torch::Tensor& p) {
    auto bias = fan_in.find(name);
    if (bias == fan_in.end()) {
      torch::nn::init::kaiming_uniform_(p, std::sqrt(5.0));
    } else {
      const double bound = 1.0 / std::sqrt(static_cast<double>(bias->second));
      torch::nn::init::uniform_(p, -bound, bound);
    }
  };
  restate_constructor_initialisation({linear});
}

ModelOutput MlpClassifier::forward(const Batch& batch) {
  auto x = batch.features;
  if (!x.defined()) throw RuntimeFailure("mlp: the batch has no 'features' tensor (the data is not a feature task)");
  for (std::size_t i = 0; i + 1 < layers_.size(); ++i)
    x = in_unit(layer_units_[i], [&] { return dropout_(gelu_activation(layers_[i](x))); });
  ModelOutput out;
  out.logits = in_unit(layer_units_.back(), [&] { return layers_.back()(x); });
  if (batch.labels.defined()) out.loss = torch::nn::functional::cross_entropy(out.logits.to(torch::kFloat), batch.labels);
  return out;
}

}  // namespace hftrain
