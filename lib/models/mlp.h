// `mlp`: a feed-forward classifier over dense feature vectors (Linear -> GELU -> ... -> Linear).
#pragma once

#include "config/schema.h"
#include "models/adaptable_linear.h"
#include "models/model.h"

namespace hftrain {

class MlpClassifier : public Model {
 public:
  struct Options {
    std::vector<int64_t> hidden_sizes = {64, 64};
    double dropout = 0.0;
    int64_t num_labels = 0;    // 0 = from data
    int64_t num_features = 0;  // 0 = from data
    static void declare(Schema<Options>& s);
  };

  MlpClassifier(const Options& options, const ModelContext& context);
  static ModelDimensions facts(const Options& options);  // HF config.hidden_size, layers, heads
  ModelOutput forward(const Batch& batch) override;
  static const ModelFamily& declaration();
  bool is_causal_lm() const override { return false; }

 private:
  Options options_;
  std::vector<AdaptableLinear> layers_;
  std::vector<UnitHandle> layer_units_;  // one gather unit per layer
  torch::nn::Dropout dropout_{nullptr};
};

}  // namespace hftrain
