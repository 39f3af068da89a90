// Evaluation and prediction loops (see evaluation.h).
#include "train/evaluation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>

#include "data/loader.h"
#include "engine/precision.h"
#include "generate/generate.h"
#include "train/training_loss.h"
#include "util/error.h"

namespace hftrain {
namespace {

double round_to(double v, int digits) {
  double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

}  // namespace

namespace {

// One example's generation: what predict writes and what text metrics score.
struct ExampleGeneration {
  std::vector<int64_t> prompt;                // the encoder's input (seq2seq) or the prompt
  std::vector<GeneratedSequence> sequences;   // best first
  std::vector<int64_t> reference;             // the scored labels: the target, or the prompt's continuation
};

ExampleGeneration generate_for(ModelAndData& p, const Example& ex, const GenerationConfig& config, at::Generator& generator) {
  ExampleGeneration g;
  const bool seq2seq = p.data->task() == TaskKind::kSeq2Seq;
  g.prompt.assign(ex.input_ids.begin(), ex.input_ids.begin() + (seq2seq ? static_cast<int64_t>(ex.input_ids.size()) : ex.prompt_length));
  g.sequences = generate_sequences(*p.model, g.prompt, config, generator);
  // A causal LM's labels continue the prompt; a seq2seq target stands alone.
  for (std::size_t t = seq2seq ? 0 : static_cast<std::size_t>(ex.prompt_length); t < ex.labels.size(); ++t)
    if (ex.labels[t] != -100) g.reference.push_back(ex.labels[t]);
  return g;
}

// Decoded text without special tokens (HF's batch_decode with skip_special_tokens=True), the eos that
// generation stops at included.
std::string generated_text(const ModelAndData& p, const std::vector<int64_t>& ids, const GenerationConfig& config) {
  const Tokenizer* tok = p.data->tokenizer();
  if (!tok) return std::string();
  std::vector<int64_t> kept;
  for (int64_t id : ids)
    if (id != config.eos_token_id) kept.push_back(id);
  return tok->decode_without_special(kept);
}

// The length run_summarization / run_translation report as gen_len: tokens other than padding in what HF
// generate() returns (the decoder start token or the prompt, then the generated tokens).
int64_t generated_length(const ModelAndData& p, const ExampleGeneration& g, int64_t pad_id) {
  std::vector<int64_t> returned = p.model->is_encoder_decoder() ? std::vector<int64_t>{p.model->decoder_start_token_id()} : g.prompt;
  returned.insert(returned.end(), g.sequences.front().tokens.begin(), g.sequences.front().tokens.end());
  return static_cast<int64_t>(std::count_if(returned.begin(), returned.end(), [&](int64_t t) { return t != pad_id; }));
}

// A split's generations in loader order, as evaluation scores them (predict hands its own to the test
// metrics instead of generating twice).
struct SplitGenerations {
  std::vector<std::string> predictions, references;
  std::vector<int64_t> lengths;  // generated_length of each example
};

nlohmann::json evaluate_split(ModelAndData& p, const Components& components, const std::string& split, int64_t batch_size,
                              const std::string& prefix, const SplitGenerations* known);

}  // namespace

GenerationConfig generation_config(const ModelAndData& p) {
  check_generation_sources(p);
  const GenerationArgs& args = p.generation;
  GenerationConfig config;
  config.max_new_tokens = args.max_new_tokens.value_or(16);
  if (!args.max_new_tokens) config.max_length = args.max_length;  // HF: max_new_tokens wins when both are set
  config.min_length = args.min_length;
  config.do_sample = args.do_sample;
  config.temperature = args.temperature;
  config.top_k = args.top_k;
  config.top_p = args.top_p;
  config.eos_token_id = args.eos_token_id;
  if (!config.eos_token_id && p.data->tokenizer()) config.eos_token_id = p.data->tokenizer()->special_tokens().eos;
  config.max_context = model_max_context(*p.model);
  if (config.max_context == 0) config.max_context = p.data->shape().max_length;
  config.min_new_tokens = args.min_new_tokens;
  config.no_repeat_ngram_size = args.no_repeat_ngram_size;
  config.num_beams = args.num_beams;
  config.length_penalty = args.length_penalty;
  config.early_stopping = args.early_stopping == "true"    ? GenerationConfig::EarlyStopping::kTrue
                          : args.early_stopping == "never" ? GenerationConfig::EarlyStopping::kNever
                                                           : GenerationConfig::EarlyStopping::kFalse;
  config.num_return_sequences = args.num_return_sequences;
  config.forced_bos_token_id = args.forced_bos_token_id;
  config.forced_eos_token_id = args.forced_eos_token_id;
  validate_generation_config(config);
  return config;
}

nlohmann::json evaluate(ModelAndData& p, const Components& components, const std::string& split, int64_t batch_size,
                        const std::string& prefix) {
  return evaluate_split(p, components, split, batch_size, prefix, nullptr);
}

namespace {

nlohmann::json evaluate_split(ModelAndData& p, const Components& components, const std::string& split, int64_t batch_size,
                              const std::string& prefix, const SplitGenerations* known) {
  auto dataset = p.data->split(split);
  if (!dataset || dataset->size() == 0)
    throw ConfigError("cannot evaluate: the data source has no '" + split + "' examples (data: give it an evaluation split)");
  std::vector<std::unique_ptr<Metric>> metrics;
  if (!p.prediction_loss_only)
    for (const auto& m : p.metrics) metrics.push_back(components.metrics.build(m.type, m.options));
  const bool generating = p.predict_with_generate && !p.prediction_loss_only;
  const GenerationConfig config = generating ? generation_config(p) : GenerationConfig{};
  at::Generator generator = make_generator(static_cast<uint64_t>(p.generation.seed.value_or(p.seed)));
  auto scores_text = [&](const Metric& m) { return generating && m.input() != MetricInput::kTokens; };

  const auto start = std::chrono::steady_clock::now();
  const bool was_training = p.model->is_training();
  p.model->eval();
  torch::NoGradGuard no_grad;
  AutocastScope autocast(p.compute_dtype);
  DataLoader loader(dataset, p.data->task(), batch_size, /*shuffle=*/false, 0, /*drop_last=*/false);
  loader.start_epoch(0);
  double loss_sum = 0;
  int64_t samples = 0, steps = 0, generated_tokens = 0;
  Batch batch;
  std::vector<Example> examples;
  while (loader.next(batch, &examples)) {
    ModelOutput out = compute_loss(*p.model, batch, p.label_smoothing_factor);
    const int64_t n = batch.size();
    loss_sum += out.loss.item<double>() * static_cast<double>(n);  // HF: batch loss repeated per sample
    samples += n;
    ++steps;
    torch::Tensor preds = out.logits.argmax(-1), labels = batch.labels;
    if (p.model->is_causal_lm()) {
      preds = preds.slice(1, 0, preds.size(1) - 1);
      labels = labels.slice(1, 1, labels.size(1));
    }
    for (auto& m : metrics)
      if (!scores_text(*m)) m->update(preds, labels);
    if (!generating) continue;
    std::vector<std::string> predictions, references;
    for (const auto& ex : examples) {
      if (known) {
        const auto k = static_cast<std::size_t>(samples) - examples.size() + predictions.size();
        if (k >= known->predictions.size()) throw RuntimeFailure("evaluation: fewer generations than examples");
        predictions.push_back(known->predictions[k]);
        references.push_back(known->references[k]);
        generated_tokens += known->lengths[k];
        continue;
      }
      const ExampleGeneration g = generate_for(p, ex, config, generator);
      predictions.push_back(generated_text(p, g.sequences.front().tokens, config));
      references.push_back(generated_text(p, g.reference, config));
      generated_tokens += generated_length(p, g, dataset->collate_options().pad_id);
    }
    for (auto& m : metrics)
      if (scores_text(*m)) m->update_text(predictions, references);
  }
  p.model->train(was_training);
  const double runtime = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double mean_loss = loss_sum / static_cast<double>(samples);
  nlohmann::json result;
  result[prefix + "_loss"] = mean_loss;
  for (std::size_t i = 0; i < metrics.size(); ++i)
    for (const auto& [name, value] : metrics[i]->results(p.metrics[i].key, mean_loss)) result[prefix + "_" + name] = value;
  if (generating) result[prefix + "_gen_len"] = static_cast<double>(generated_tokens) / static_cast<double>(samples);
  result[prefix + "_runtime"] = round_to(runtime, 4);
  result[prefix + "_samples_per_second"] = round_to(static_cast<double>(samples) / runtime, 3);
  result[prefix + "_steps_per_second"] = round_to(static_cast<double>(steps) / runtime, 3);
  return result;
}

}  // namespace

std::vector<int64_t> greedy_generate(Model& model, std::vector<int64_t> prompt, int64_t max_new_tokens,
                                     int64_t max_context) {
  GenerationConfig config;
  config.max_new_tokens = max_new_tokens;
  config.max_context = max_context;
  at::Generator unused = make_generator(0);
  return generate(model, prompt, config, unused);
}

nlohmann::json predict(ModelAndData& p, const Components& components, const std::string& split, int64_t batch_size,
                       const std::string& path) {
  auto dataset = p.data->split(split);
  if (!dataset || dataset->size() == 0)
    throw ConfigError("cannot predict: the data source has no '" + split + "' examples (data: give it a test or evaluation split)");
  const GenerationConfig config = generation_config(p);  // its problems before anything is written
  std::ofstream out(path);
  if (!out) throw RuntimeFailure("cannot write predictions to '" + path + "'");
  p.model->eval();
  torch::NoGradGuard no_grad;
  AutocastScope autocast(p.compute_dtype);
  DataLoader loader(dataset, p.data->task(), batch_size, false, 0, false);
  loader.start_epoch(0);
  const Tokenizer* tok = p.data->tokenizer();
  // One generator for the whole split, seeded once (HF: set_seed, then generate over the batches).
  at::Generator generator = make_generator(static_cast<uint64_t>(p.generation.seed.value_or(p.seed)));
  bool has_labels = false;
  SplitGenerations generations;  // the best sequences, for the test metrics
  const std::vector<std::string> label_names = p.data->shape().label_names;  // by label id; may be empty
  for (auto examples = loader.next_examples(); !examples.empty(); examples = loader.next_examples()) {
    if (p.data->task() == TaskKind::kClassification) {
      Batch b = collate(examples, TaskKind::kClassification);
      auto logits = p.model->forward(b).logits.to(torch::kFloat).contiguous();
      const bool regression = logits.size(-1) == 1;  // HF problem_type regression: the value is the prediction
      auto probs = torch::softmax(logits, -1);
      for (std::size_t i = 0; i < examples.size(); ++i) {
        auto row = probs[static_cast<int64_t>(i)].contiguous();
        nlohmann::json line;
        if (regression) {
          line["prediction"] = logits[static_cast<int64_t>(i)][0].item<double>();
        } else {
          const int64_t label = row.argmax().item<int64_t>();
          line["label"] = label;
          if (label < static_cast<int64_t>(label_names.size())) line["label_name"] = label_names[static_cast<std::size_t>(label)];
          line["probabilities"] = std::vector<float>(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
        }
        if (examples[i].label != -100) {
          line["true_label"] = examples[i].label;
          has_labels = true;
        }
        out << line.dump() << "\n";
      }
    } else if (!p.model->is_causal_lm() && !p.model->is_encoder_decoder()) {  // e.g. a masked LM: the most likely token at each position
      Batch b = collate(examples, p.data->task());
      auto ids = p.model->forward(b).logits.argmax(-1).contiguous();
      for (std::size_t i = 0; i < examples.size(); ++i) {
        auto row = ids[static_cast<int64_t>(i)];
        std::vector<int64_t> predicted(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
        nlohmann::json line;
        line["predicted_ids"] = predicted;
        if (tok) line["predicted"] = tok->decode(predicted);
        out << line.dump() << "\n";
      }
      has_labels = has_labels || examples.front().labels.size() > 0;
    } else {  // causal LMs continue the prompt; encoder-decoder models encode it and generate from the decoder start
      // Seq2seq lines read as run_translation's: source, prediction, reference; causal LMs' as a continuation.
      const bool seq2seq = p.data->task() == TaskKind::kSeq2Seq;
      const std::string prompt_key = seq2seq ? "source" : "prompt", text_key = seq2seq ? "prediction" : "generated",
                        ids_key = seq2seq ? "prediction_ids" : "generated_ids";
      for (const auto& ex : examples) {
        const ExampleGeneration g = generate_for(p, ex, config, generator);
        nlohmann::json line;
        line[prompt_key] = generated_text(p, g.prompt, config);
        line[text_key] = generated_text(p, g.sequences.front().tokens, config);  // the best sequence
        line[ids_key] = g.sequences.front().tokens;
        if (config.num_beams > 1) line["sequence_score"] = g.sequences.front().score;
        if (g.sequences.size() > 1) {  // num_return_sequences > 1: all of them, best first
          nlohmann::json all = nlohmann::json::array();
          for (const auto& s : g.sequences)
            all.push_back({{text_key, generated_text(p, s.tokens, config)}, {ids_key, s.tokens}, {"sequence_score", s.score}});
          line["sequences"] = all;
        }
        if (!g.reference.empty()) {
          line["reference"] = generated_text(p, g.reference, config);
          has_labels = true;
        }
        generations.predictions.push_back(line[text_key]);
        generations.references.push_back(generated_text(p, g.reference, config));
        generations.lengths.push_back(generated_length(p, g, dataset->collate_options().pad_id));
        out << line.dump() << "\n";
      }
    }
  }
  out.close();
  if (!out) throw RuntimeFailure("cannot write predictions to '" + path + "'");
  if (!has_labels) return nlohmann::json::object();
  // The test metrics score the generations written above (HF predict: one generation per example).
  const bool generated = !generations.predictions.empty();
  return evaluate_split(p, components, split, batch_size, "test", generated ? &generations : nullptr);
}

}  // namespace hftrain
