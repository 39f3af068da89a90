// Evaluation and prediction loops over a split of the data source.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "train/pipeline.h"

namespace hftrain {

// Runs the model over `split` (no grad, eval mode) and returns HF-style metrics:
// {prefix_loss, prefix_<metric>..., prefix_runtime, prefix_samples_per_second, prefix_steps_per_second}.
nlohmann::json evaluate(Pipeline& pipeline, const Components& components, const std::string& split,
                        int64_t batch_size, const std::string& prefix);

// Writes one JSON line per example of `split` to `path` (predictions.jsonl): for classifiers
// {"label", "probabilities" (softmax), "true_label"} or {"prediction"} for regression (num_labels 1);
// for causal LMs {"prompt", "generated", "generated_ids", "reference"}, the continuation produced by
// lib/generate with `generation` (greedy or seeded sampling, eos stop); for other token models
// (masked LM) {"predicted_ids", "predicted"}. Returns test metrics (via evaluate) when the split has
// labels, else an empty object.
nlohmann::json predict(Pipeline& pipeline, const Components& components, const std::string& split,
                       int64_t batch_size, const GenerationArgs& generation, const std::string& path);

// Greedy decoding of `prompt` (context cropped to the last `max_context` tokens).
std::vector<int64_t> greedy_generate(Model& model, std::vector<int64_t> prompt, int64_t max_new_tokens,
                                     int64_t max_context);

}  // namespace hftrain
