// Evaluation and prediction loops (see evaluation.h).
#include "train/evaluation.h"

#include <chrono>
#include <cmath>
#include <fstream>

#include "data/loader.h"
#include "train/training_loss.h"
#include "util/error.h"

namespace hftrain {
namespace {

double round_to(double v, int digits) {
  double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

}  // namespace

nlohmann::json evaluate(Pipeline& p, const Components& components, const std::string& split, int64_t batch_size,
                        const std::string& prefix) {
  auto dataset = p.data->split(split);
  if (!dataset || dataset->size() == 0)
    throw RuntimeFailure("cannot evaluate: the data source has no '" + split + "' examples");
  std::vector<std::unique_ptr<Metric>> metrics;
  if (!p.prediction_loss_only)
    for (const auto& m : p.metrics) metrics.push_back(components.metrics.build(m.type, m.options));

  const auto start = std::chrono::steady_clock::now();
  const bool was_training = p.model->is_training();
  p.model->eval();
  torch::NoGradGuard no_grad;
  DataLoader loader(dataset, p.data->task(), batch_size, /*shuffle=*/false, 0, /*drop_last=*/false);
  loader.start_epoch(0);
  double loss_sum = 0;
  int64_t samples = 0, steps = 0;
  Batch batch;
  while (loader.next(batch)) {
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
    for (auto& m : metrics) m->update(preds, labels);
  }
  p.model->train(was_training);
  const double runtime = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double mean_loss = loss_sum / static_cast<double>(samples);
  nlohmann::json result;
  result[prefix + "_loss"] = mean_loss;
  for (std::size_t i = 0; i < metrics.size(); ++i) result[prefix + "_" + p.metrics[i].key] = metrics[i]->compute(mean_loss);
  result[prefix + "_runtime"] = round_to(runtime, 4);
  result[prefix + "_samples_per_second"] = round_to(static_cast<double>(samples) / runtime, 3);
  result[prefix + "_steps_per_second"] = round_to(static_cast<double>(steps) / runtime, 3);
  return result;
}

std::vector<int64_t> greedy_generate(Model& model, std::vector<int64_t> tokens, int64_t max_new_tokens,
                                     int64_t max_context) {
  torch::NoGradGuard no_grad;
  const std::size_t prompt_length = tokens.size();
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    const auto n = static_cast<int64_t>(tokens.size());
    const int64_t begin = max_context > 0 && n > max_context ? n - max_context : 0;
    Batch b;
    b.input_ids = torch::tensor(std::vector<int64_t>(tokens.begin() + begin, tokens.end()), torch::kLong).unsqueeze(0);
    auto logits = model.forward(b).logits;
    tokens.push_back(logits.select(1, logits.size(1) - 1).argmax(-1).item<int64_t>());
  }
  return std::vector<int64_t>(tokens.begin() + static_cast<std::ptrdiff_t>(prompt_length), tokens.end());
}

nlohmann::json predict(Pipeline& p, const Components& components, const std::string& split, int64_t batch_size,
                       int64_t max_new_tokens, const std::string& path) {
  auto dataset = p.data->split(split);
  if (!dataset || dataset->size() == 0)
    throw RuntimeFailure("cannot predict: the data source has no '" + split + "' examples");
  std::ofstream out(path);
  if (!out) throw RuntimeFailure("cannot write predictions to '" + path + "'");
  p.model->eval();
  torch::NoGradGuard no_grad;
  DataLoader loader(dataset, p.data->task(), batch_size, false, 0, false);
  loader.start_epoch(0);
  const Tokenizer* tok = p.data->tokenizer();
  const int64_t context = p.data->shape().max_length;
  bool has_labels = false;
  for (auto examples = loader.next_examples(); !examples.empty(); examples = loader.next_examples()) {
    if (p.data->task() == TaskKind::kClassification) {
      Batch b = collate(examples, TaskKind::kClassification);
      auto probs = torch::softmax(p.model->forward(b).logits, -1);
      for (std::size_t i = 0; i < examples.size(); ++i) {
        auto row = probs[static_cast<int64_t>(i)];
        nlohmann::json line;
        line["label"] = row.argmax().item<int64_t>();
        line["probabilities"] = std::vector<float>(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
        if (examples[i].label != -100) {
          line["true_label"] = examples[i].label;
          has_labels = true;
        }
        out << line.dump() << "\n";
      }
    } else {
      for (const auto& ex : examples) {
        std::vector<int64_t> prompt(ex.input_ids.begin(), ex.input_ids.begin() + ex.prompt_length);
        std::vector<int64_t> generated = greedy_generate(*p.model, prompt, max_new_tokens, context);
        nlohmann::json line;
        line["prompt"] = tok ? tok->decode(prompt) : "";
        line["generated"] = tok ? tok->decode(generated) : "";
        line["generated_ids"] = generated;
        std::vector<int64_t> reference;
        for (std::size_t t = static_cast<std::size_t>(ex.prompt_length); t < ex.labels.size(); ++t)
          if (ex.labels[t] != -100) reference.push_back(ex.labels[t]);
        if (!reference.empty()) {
          line["reference"] = tok ? tok->decode(reference) : "";
          has_labels = true;
        }
        out << line.dump() << "\n";
      }
    }
  }
  out.close();
  if (!out) throw RuntimeFailure("cannot write predictions to '" + path + "'");
  return has_labels ? evaluate(p, components, split, batch_size, "test") : nlohmann::json::object();
}

}  // namespace hftrain
