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

nlohmann::json evaluate_split(ModelAndData& p, const Components& components, const std::string& split, int64_t batch_size,
                              const std::string& prefix, const SplitGenerations* known, LoopProgress::Mode progress) {
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
  LoopProgress shown(prefix, dataset->size(), progress);
  // Several workers with whole parameters: each rank generates every world-th batch, and the generations
  // are gathered and scored in order after the loop (HF splits evaluation over the processes likewise).
  Comm& comm = world();
  const bool split_generation = generating && !known && comm.world_size() > 1 && !p.parameters_sharded;
  std::map<int64_t, GeneratedIds> mine;
  std::vector<std::vector<std::string>> split_references;  // per batch, scored after the gather
  double loss_sum = 0;
  int64_t samples = 0, steps = 0, generated_tokens = 0;
  Batch batch;
  std::vector<Example> examples;
  while (loader.next(batch, &examples)) {
    ModelOutput out = compute_loss(*p.model, batch_on(batch, p.device, p.pin_memory), p.label_smoothing_factor);
    const int64_t n = batch.size();
    loss_sum += out.loss.item<double>() * static_cast<double>(n);  // HF: batch loss repeated per sample
    samples += n;
    ++steps;
    torch::Tensor preds = out.logits.argmax(-1).to(torch::kCPU), labels = batch.labels;  // metrics read the host
    if (p.model->is_causal_lm()) {
      preds = preds.slice(1, 0, preds.size(1) - 1);
      labels = labels.slice(1, 1, labels.size(1));
    }
    for (auto& m : metrics)
      if (!scores_text(*m)) m->update(preds, labels);
    if (!generating) {
      shown.advance(n);
      continue;
    }
    std::vector<std::string> predictions, references;
    if (split_generation) {
      const int64_t first = samples - n;
      if ((steps - 1) % comm.world_size() == comm.rank()) {
        const auto generations = generate_for(p, examples, config, generator);
        for (std::size_t i = 0; i < generations.size(); ++i)
          mine[first + static_cast<int64_t>(i)] = {generations[i].sequences.front().tokens,
                                                   generated_length(p, generations[i], dataset->collate_options().pad_id)};
      }
      for (const Example& ex : examples) references.push_back(generated_text(p, prepare_generation(p, ex).reference, config));
      split_references.push_back(std::move(references));
      shown.advance(n);
      continue;
    }
    if (known) {
      for (std::size_t i = 0; i < examples.size(); ++i) {
        const auto k = static_cast<std::size_t>(samples) - examples.size() + i;
        if (k >= known->predictions.size()) throw RuntimeFailure("evaluation: fewer generations than examples");
        predictions.push_back(known->predictions[k]);
        references.push_back(known->references[k]);
        generated_tokens += known->lengths[k];
      }
    } else {
      for (const ExampleGeneration& g : generate_for(p, examples, config, generator)) {  // the batch at once
        predictions.push_back(generated_text(p, g.sequences.front().tokens, config));
        references.push_back(generated_text(p, g.reference, config));
        generated_tokens += generated_length(p, g, dataset->collate_options().pad_id);
      }
    }
    for (auto& m : metrics)
      if (scores_text(*m)) m->update_text(predictions, references);
    shown.advance(n);
  }
  shown.finish();
  if (split_generation) {
    const auto all = gather_generated(comm, samples, mine);
    std::size_t k = 0;
    for (const auto& references : split_references) {
      std::vector<std::string> predictions;
      for (std::size_t i = 0; i < references.size(); ++i, ++k) {
        predictions.push_back(generated_text(p, all[k].ids, config));
        generated_tokens += all[k].length;
      }
      for (auto& m : metrics)
        if (scores_text(*m)) m->update_text(predictions, references);
    }
    if (is_main_rank())
      log_info(prefix + ": generation split over " + std::to_string(comm.world_size()) + " workers (this rank generated " +
               std::to_string(mine.size()) + " of " + std::to_string(samples) + " examples)");
  }
  p.model->train(was_training);
  const double runtime = seconds_since(start, p.device);
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

}  // namespace hftrain
