// Evaluation and prediction loops over a split of the data source.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "generate/generate.h"
#include "train/model_and_data.h"

namespace hftrain {

// Runs the model over `split` (no grad, eval mode) and returns HF-style metrics:
// {prefix_loss, prefix_<metric>..., prefix_runtime, prefix_samples_per_second, prefix_steps_per_second}.
// With pipeline.predict_with_generate (HF Seq2SeqTrainer) every example is also generated from (the
// `generation` settings); text metrics (rouge, bleu, exact_match) score the decoded generations against
// the decoded references, and prefix_gen_len is the mean length of what HF generate() returns (the decoder
// start token or the prompt, then the generated tokens) counting tokens other than padding.
nlohmann::json evaluate(ModelAndData& pipeline, const Components& components, const std::string& split,
                        int64_t batch_size, const std::string& prefix);

// Writes one JSON line per example of `split` to `path` (predictions.jsonl): for classifiers
// {"label", "probabilities" (softmax), "true_label"} or {"prediction"} for regression (num_labels 1);
// for causal LMs {"prompt", "generated", "generated_ids", "reference"}, the continuation produced by
// lib/generate with pipeline.generation (greedy, beam search or seeded sampling, eos stop); for seq2seq
// data {"source", "prediction", "prediction_ids", "reference"}; for other token models (masked LM)
// {"predicted_ids", "predicted"}. Returns test metrics (via evaluate) when the split has labels, else an
// empty object.
nlohmann::json predict(ModelAndData& pipeline, const Components& components, const std::string& split,
                       int64_t batch_size, const std::string& path);

// The generation settings of pipeline.generation for this pipeline's model and tokenizer (eos from the
// tokenizer when not given, the context limit from the model's config); throws ConfigError naming the
// generation.* option that is wrong.
GenerationConfig generation_config(const ModelAndData& pipeline);

// Greedy decoding of `prompt` (context cropped to the last `max_context` tokens).
std::vector<int64_t> greedy_generate(Model& model, std::vector<int64_t> prompt, int64_t max_new_tokens,
                                     int64_t max_context);

}  // namespace hftrain
