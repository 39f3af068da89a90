// Pipeline: the data source, model and metric names built from a validated RunSpec. Shared by the
// train, eval and predict commands so they all build components the same way.
#pragma once

#include <memory>

#include "builtins/components.h"

namespace hftrain {

struct Pipeline {
  std::unique_ptr<DataSource> data;
  std::shared_ptr<Model> model;
  std::vector<MetricChoice> metrics;
  double label_smoothing_factor = 0.0;  // applied by compute_loss in training and evaluation
  bool prediction_loss_only = false;    // evaluation reports the loss only
  int64_t seed = 42;                    // training.seed (generation's default sampling seed)
};

// Loads model.from_pretrained: an HF model directory (config.json + model.safetensors or the sharded
// index, HF loading rules) or, without config.json, a bare model.safetensors of exactly this model.
void load_pretrained(const std::string& dir, Model& model);

// Builds the data source first (so a bad data file fails before anything else), then the model
// initialised from `seed` (torch's global RNG is seeded here), or loaded from model.from_pretrained.
Pipeline build_pipeline(const RunSpec& spec, const Components& components);

}  // namespace hftrain
