// The evaluation loop (see evaluation.h).
#include "train/evaluation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "data/batch_placement.h"
#include "data/loader.h"
#include "engine/precision.h"
#include "generate/generate.h"
#include "log/logger.h"
#include "train/example_generation.h"
#include "train/training_loss.h"
#include "util/device_clock.h"
#include "util/error.h"

namespace hftrain {
namespace {

double round_to(double v, int digits) {
  double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

}  // namespace

namespace {

nlohmann::json evaluate_split(ModelAndData& p, const Components& components, const std::string& split, int64_t batch_size,
                              const std::string& prefix, const SplitGenerations* known, LoopProgress::Mode progress);

}  // namespace

GenerationConfig generation_config(const ModelAndData& p) {
  check_generation_sources(p);
  GenerationConfig config{p.generation};
  if (!config.eos_token_id && p.data->tokenizer()) config.eos_token_id = p.data->tokenizer()->special_tokens().eos;
  config.max_context = model_max_context(*p.model);
  if (config.max_context == 0) config.max_context = p.data->shape().max_length;
  validate_generation_config(config);
  return config;
}

nlohmann::json evaluate(ModelAndData& p, const Components& components, const std::string& split, int64_t batch_size,
                        const std::string& prefix, LoopProgress::Mode progress) {
  return evaluate_split(p, components, split, batch_size, prefix, nullptr, progress);
}

nlohmann::json evaluate_generations(ModelAndData& p, const Components& components, const std::string& split,
                                    int64_t batch_size, const std::string& prefix, const SplitGenerations& known) {
  return evaluate_split(p, components, split, batch_size, prefix, &known, LoopProgress::Mode::kOff);
}

namespace {

// One evaluation pass over a split: its metrics, generation settings and running totals.
struct EvalPass {
  ModelAndData& p;
  const std::string& prefix;
  const SplitGenerations* known;  // predict's generations to score, or null to generate
  std::shared_ptr<const Dataset> dataset;
  std::vector<std::unique_ptr<Metric>> metrics;
  bool generating = false;
  GenerationConfig config;
  at::Generator generator;
  Comm* comm = nullptr;
  // Several workers with whole parameters: each rank generates every world-th batch, and the generations
  // are gathered and scored in order after the loop (HF splits evaluation over the processes likewise).
  bool split_generation = false;
  std::map<int64_t, GeneratedIds> mine;
  std::vector<std::vector<std::string>> split_references;  // per batch, scored after the gather
  // Σ batch loss x batch size in double, on the loss's device: read once, at the end (HF keeps its eval losses on
  // the device too), not a wait for the device per batch.
  torch::Tensor loss_sum;
  int64_t samples = 0, steps = 0, generated_tokens = 0;

  EvalPass(ModelAndData& p, const std::string& prefix, const SplitGenerations* known,
           std::shared_ptr<const Dataset> dataset)
      : p(p), prefix(prefix), known(known), dataset(std::move(dataset)) {}
  bool scores_text(const Metric& m) const { return generating && m.input() != MetricInput::kTokens; }
  bool scores_tokens() const {
    return std::any_of(metrics.begin(), metrics.end(), [this](const auto& m) { return !scores_text(*m); });
  }
  void update_text_metrics(const std::vector<std::string>& predictions, const std::vector<std::string>& references) {
    for (auto& m : metrics)
      if (scores_text(*m)) m->update_text(predictions, references);
  }
};

std::shared_ptr<const Dataset> evaluation_split(const ModelAndData& p, const std::string& split) {
  auto dataset = p.data->split(split);
  if (!dataset || dataset->size() == 0)
    throw ConfigError("cannot evaluate: the data source has no '" + split + "' examples (data: give it an evaluation split)");
  return dataset;
}

// The metrics and generation settings (generation_config may refuse them) before the model changes mode.
void prepare_pass(EvalPass& pass, const Components& components) {
  ModelAndData& p = pass.p;
  if (!p.prediction_loss_only)
    for (const auto& m : p.metrics) pass.metrics.push_back(components.metrics.build(m.type, m.options));
  pass.generating = p.predict_with_generate && !p.prediction_loss_only;
  pass.config = pass.generating ? generation_config(p) : GenerationConfig{};
  pass.generator = make_generator(static_cast<uint64_t>(p.generation.seed.value_or(p.seed)));
}

// The batch's loss (HF: the batch loss repeated per sample) and the metrics that read token predictions.
void score_tokens(EvalPass& pass, const Batch& batch) {
  ModelAndData& p = pass.p;
  ModelOutput out = compute_loss(*p.model, batch_on(batch, p.device, p.pin_memory), p.label_smoothing_factor);
  const int64_t n = batch.size();
  const torch::Tensor weighted = out.loss.detach().to(torch::kDouble) * static_cast<double>(n);
  pass.loss_sum = pass.loss_sum.defined() ? pass.loss_sum + weighted : weighted;
  pass.samples += n;
  ++pass.steps;
  if (!pass.scores_tokens()) return;  // no metric reads the predicted tokens: nothing to bring to the host
  torch::Tensor preds = out.logits.argmax(-1).to(torch::kCPU), labels = batch.labels;  // metrics read the host
  if (p.model->is_causal_lm()) {
    preds = preds.slice(1, 0, preds.size(1) - 1);
    labels = labels.slice(1, 1, labels.size(1));
  }
  for (auto& m : pass.metrics)
    if (!pass.scores_text(*m)) m->update(preds, labels);
}

// Split generation: this rank generates its share of batches; every rank keeps the references.
void generate_share(EvalPass& pass, const Batch& batch, const std::vector<Example>& examples) {
  ModelAndData& p = pass.p;
  const int64_t first = pass.samples - batch.size();
  if ((pass.steps - 1) % pass.comm->world_size() == pass.comm->rank()) {
    const auto generations = generate_for(p, examples, pass.config, pass.generator);
    for (std::size_t i = 0; i < generations.size(); ++i)
      pass.mine[first + static_cast<int64_t>(i)] = {generations[i].sequences.front().tokens,
                                                    generated_length(p, generations[i], pass.dataset->collate_options().pad_id)};
  }
  std::vector<std::string> references;
  for (const Example& ex : examples) references.push_back(generated_text(p, prepare_generation(p, ex).reference, pass.config));
  pass.split_references.push_back(std::move(references));
}

// The batch's generations (predict's, or generated now, the batch at once) scored by the text metrics.
void score_generations(EvalPass& pass, const std::vector<Example>& examples) {
  ModelAndData& p = pass.p;
  std::vector<std::string> predictions, references;
  if (pass.known) {
    for (std::size_t i = 0; i < examples.size(); ++i) {
      const auto k = static_cast<std::size_t>(pass.samples) - examples.size() + i;
      if (k >= pass.known->predictions.size()) throw RuntimeFailure("evaluation: fewer generations than examples");
      predictions.push_back(pass.known->predictions[k]);
      references.push_back(pass.known->references[k]);
      pass.generated_tokens += pass.known->lengths[k];
    }
  } else {
    for (const ExampleGeneration& g : generate_for(p, examples, pass.config, pass.generator)) {
      predictions.push_back(generated_text(p, g.sequences.front().tokens, pass.config));
      references.push_back(generated_text(p, g.reference, pass.config));
      pass.generated_tokens += generated_length(p, g, pass.dataset->collate_options().pad_id);
    }
  }
  pass.update_text_metrics(predictions, references);
}

void evaluate_batch(EvalPass& pass, const Batch& batch, const std::vector<Example>& examples) {
  score_tokens(pass, batch);
  if (!pass.generating) return;
  if (pass.split_generation) generate_share(pass, batch, examples);
  else score_generations(pass, examples);
}

// Split generation, after the loop: every rank's generations gathered and scored in loader order.
void score_gathered_generations(EvalPass& pass) {
  const auto all = gather_generated(*pass.comm, pass.samples, pass.mine);
  std::size_t k = 0;
  for (const auto& references : pass.split_references) {
    std::vector<std::string> predictions;
    for (std::size_t i = 0; i < references.size(); ++i, ++k) {
      predictions.push_back(generated_text(pass.p, all[k].ids, pass.config));
      pass.generated_tokens += all[k].length;
    }
    pass.update_text_metrics(predictions, references);
  }
  if (is_main_rank())
    log_info(pass.prefix + ": generation split over " + std::to_string(pass.comm->world_size()) +
             " workers (this rank generated " + std::to_string(pass.mine.size()) + " of " + std::to_string(pass.samples) +
             " examples)");
}

nlohmann::json pass_results(const EvalPass& pass, double runtime) {
  const std::string& prefix = pass.prefix;
  const double samples = static_cast<double>(pass.samples);
  const double mean_loss = (pass.loss_sum.defined() ? pass.loss_sum.item<double>() : 0.0) / samples;
  nlohmann::json result;
  result[prefix + "_loss"] = mean_loss;
  for (std::size_t i = 0; i < pass.metrics.size(); ++i)
    for (const auto& [name, value] : pass.metrics[i]->results(pass.p.metrics[i].key, mean_loss))
      result[prefix + "_" + name] = value;
  if (pass.generating) result[prefix + "_gen_len"] = static_cast<double>(pass.generated_tokens) / samples;
  result[prefix + "_runtime"] = round_to(runtime, 4);
  result[prefix + "_samples_per_second"] = round_to(samples / runtime, 3);
  result[prefix + "_steps_per_second"] = round_to(static_cast<double>(pass.steps) / runtime, 3);
  return result;
}

nlohmann::json evaluate_split(ModelAndData& p, const Components& components, const std::string& split, int64_t batch_size,
                              const std::string& prefix, const SplitGenerations* known, LoopProgress::Mode progress) {
  EvalPass pass(p, prefix, known, evaluation_split(p, split));
  prepare_pass(pass, components);
  const auto start = std::chrono::steady_clock::now();
  const bool was_training = p.model->is_training();
  p.model->eval();
  torch::NoGradGuard no_grad;
  AutocastScope autocast(p.compute_dtype);
  DataLoader loader(pass.dataset, p.data->task(), batch_size, /*shuffle=*/false, 0, /*drop_last=*/false);
  loader.start_epoch(0);
  LoopProgress shown(prefix, pass.dataset->size(), progress);
  pass.comm = &world();
  pass.split_generation = pass.generating && !known && pass.comm->world_size() > 1 && !p.parameters_sharded;
  Batch batch;
  std::vector<Example> examples;
  while (loader.next(batch, &examples)) {
    evaluate_batch(pass, batch, examples);
    shown.advance(batch.size());
  }
  shown.finish();
  if (pass.split_generation) score_gathered_generations(pass);
  p.model->train(was_training);
  return pass_results(pass, seconds_since(start, p.device));
}

}  // namespace

}  // namespace hftrain
