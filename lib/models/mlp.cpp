// `mlp` classifier implementation (see mlp.h). Parameters: layers.N.weight / layers.N.bias.
#include "models/mlp.h"

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

MlpClassifier::MlpClassifier(const Options& options, const ModelContext& context) : options_(options) {
  if (options_.num_labels == 0) options_.num_labels = context.num_labels;
  if (options_.num_features == 0) options_.num_features = context.num_features;
  if (options_.num_labels <= 0 || options_.num_features <= 0)
    throw ConfigError("model: mlp needs num_labels and num_features (the data gives none; use a classification task)");
  auto layers = register_module("layers", std::make_shared<torch::nn::Module>());
  int64_t in = options_.num_features;
  std::vector<int64_t> widths = options_.hidden_sizes;
  widths.push_back(options_.num_labels);
  for (std::size_t i = 0; i < widths.size(); ++i) {
    layers_.push_back(layers->register_module(std::to_string(i), torch::nn::Linear(in, widths[i])));
    in = widths[i];
  }
  dropout_ = register_module("dropout", torch::nn::Dropout(options_.dropout));
}

ModelOutput MlpClassifier::forward(const Batch& batch) {
  auto x = batch.features;
  if (!x.defined()) throw RuntimeFailure("mlp: the batch has no 'features' tensor (the data is not a feature task)");
  for (std::size_t i = 0; i + 1 < layers_.size(); ++i) x = in_unit(i, [&] { return dropout_(torch::gelu(layers_[i](x))); });
  ModelOutput out;
  out.logits = in_unit(layers_.size() - 1, [&] { return layers_.back()(x); });
  if (batch.labels.defined()) out.loss = torch::nn::functional::cross_entropy(out.logits.to(torch::kFloat), batch.labels);
  return out;
}

std::vector<GatherUnit> MlpClassifier::gather_units() const {
  std::vector<GatherUnit> units;
  for (std::size_t i = 0; i < layers_.size(); ++i) units.push_back({"layers." + std::to_string(i), {"layers." + std::to_string(i) + "."}});
  return units;
}

nlohmann::json MlpClassifier::config_json() const {
  return {{"model_type", "mlp"},
          {"architectures", {"MlpForClassification"}},
          {"hidden_sizes", options_.hidden_sizes},
          {"num_labels", options_.num_labels},
          {"num_features", options_.num_features},
          {"dropout", options_.dropout}};
}

}  // namespace hftrain
