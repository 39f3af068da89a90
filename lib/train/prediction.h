// The prediction loop of `hftrain predict`: over a split of the data source, or over the user's prompts
// (--prompts), writing predictions.jsonl and HF's test metrics.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/prompts.h"
#include "log/loop_progress.h"
#include "train/model_and_data.h"

namespace hftrain {

// A prompt as the model continues it: its text verbatim, and the token ids: the prompt's tokens, of which
// only the last ones that fit the model's context with room for the generated tokens are kept
// (`dropped_tokens` says how many were left out).
struct PromptInput {
  std::string text;
  std::vector<int64_t> ids;
  int64_t dropped_tokens = 0;
};

// Tokenizes prompts with the data source's tokenizer (as training tokenized its rows, no packing, no
// max_length) and keeps the last context - max_new_tokens tokens of each (the context is the model's,
// else the data's sequence length); when max_new_tokens does not fit the context at all, the window
// slides while generating and a prompt keeps its last context - 1 tokens. ConfigError when the model does
// not continue text (a causal LM), there is no tokenizer, or a prompt has no token (naming its line).
std::vector<PromptInput> prepare_prompts(const ModelAndData& pipeline, const std::vector<Prompt>& prompts);

struct PredictRequest {
  std::string split = "test";        // the data split to predict for, when `prompts` is empty
  std::vector<PromptInput> prompts;  // predict --prompts: these, one prediction each, instead of the split
  int64_t batch_size = 1;            // examples per step (HF per_device_eval_batch_size; steps are counted by it)
  std::string path;                  // predictions.jsonl
  LoopProgress::Mode progress = LoopProgress::Mode::kOff;
};

// Writes one JSON line per example (or prompt) to request.path: for classifiers {"label", "probabilities"
// (softmax), "true_label"} or {"prediction"} for regression (num_labels 1); for causal LMs {"prompt",
// "generated", "generated_ids", "reference"}, the continuation produced by lib/generate with
// pipeline.generation (greedy, beam search or seeded sampling, eos stop), "prompt" being the prompt
// verbatim with --prompts; for seq2seq data {"source", "prediction", "prediction_ids", "reference"}; for
// other token models (masked LM) {"predicted_ids", "predicted"}.
// The lines go to `<path>.partial`, renamed to `path` once every prediction is written, so predictions.jsonl
// is never an incomplete file: on SIGINT / SIGTERM the loop stops after the example at hand, keeps the
// partial file, logs what it holds and throws StoppedBySignal (exit 130 / 143).
// Returns HF's test metrics: test_runtime, test_samples_per_second, test_steps_per_second over the whole
// loop (generation, writing and scoring included, as HF's speed_metrics time predict); with generation
// also test_gen_tokens_per_second (generated tokens / seconds spent generating); with labels also the
// metrics evaluate() computes (test_loss, ...), scoring the generations written.
nlohmann::json predict(ModelAndData& pipeline, const Components& components, const PredictRequest& request);

}  // namespace hftrain
