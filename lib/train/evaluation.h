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

// Writes one JSON line per example of `split` to `path`: for classifiers the predicted label and
// class probabilities; for LMs the prompt and its greedy continuation of up to max_new_tokens.
// Returns test metrics (via evaluate) when the split has labels, else an empty object.
nlohmann::json predict(Pipeline& pipeline, const Components& components, const std::string& split,
                       int64_t batch_size, int64_t max_new_tokens, const std::string& path);

// Greedy decoding of `prompt` (context cropped to the last `max_context` tokens).
std::vector<int64_t> greedy_generate(Model& model, std::vector<int64_t> prompt, int64_t max_new_tokens,
                                     int64_t max_context);

}  // namespace hftrain
