// The prediction loop (see prediction.h).
#include "train/prediction.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "data/batch_placement.h"
#include "data/loader.h"
#include "engine/precision.h"
#include "generate/generate.h"
#include "log/logger.h"
#include "log/speed_metrics.h"
#include "train/evaluation.h"
#include "train/example_generation.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/signals.h"

namespace hftrain {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// predictions.jsonl as it is written: lines go to `<path>.partial`, which is fsynced and renamed over
// `path` by commit(); until then `path` is untouched.
class PredictionFile {
 public:
  explicit PredictionFile(std::string path) : path_(std::move(path)), partial_(path_ + ".partial") {
    file_ = std::fopen(partial_.c_str(), "w");
    if (!file_) throw RuntimeFailure("cannot write predictions to '" + partial_ + "': " + std::strerror(errno));
  }
  ~PredictionFile() {
    if (file_) std::fclose(file_);
  }
  PredictionFile(const PredictionFile&) = delete;
  PredictionFile& operator=(const PredictionFile&) = delete;

  void write(const nlohmann::json& line) {
    const std::string text = line.dump() + "\n";
    if (std::fwrite(text.data(), 1, text.size(), file_) != text.size())
      throw RuntimeFailure("cannot write predictions to '" + partial_ + "': " + std::strerror(errno));
    ++lines_;
  }
  // The partial file, closed as it is (an interrupted run).
  void close_partial() {
    if (!file_) return;
    std::fflush(file_);
    std::fclose(file_);
    file_ = nullptr;
  }
  void commit() {
    const bool ok = std::fflush(file_) == 0 && ::fsync(fileno(file_)) == 0;
    const int error = errno;
    std::fclose(file_);
    file_ = nullptr;
    if (!ok) throw RuntimeFailure("cannot write predictions to '" + partial_ + "': " + std::strerror(error));
    rename_durably(partial_, path_);
  }
  int64_t lines() const { return lines_; }
  const std::string& partial_path() const { return partial_; }

 private:
  std::string path_, partial_;
  std::FILE* file_ = nullptr;
  int64_t lines_ = 0;
};

// Stops the loop when SIGINT / SIGTERM arrived: the partial file stays, named and described.
void stop_if_signalled(PredictionFile& file, int64_t total) {
  const int signal = pending_stop_signal();
  if (!signal) return;
  file.close_partial();
  const std::string message = "predict stopped by " + std::string(signal_name(signal)) + " after " +
                              std::to_string(file.lines()) + " of " + std::to_string(total) +
                              " predictions; they are in " + file.partial_path() +
                              " (predictions.jsonl is written only once every prediction is done)";
  log_warning(message);
  throw StoppedBySignal(message, signal, "");
}

// A generation's line: causal LMs {"prompt", "generated", "generated_ids"}, seq2seq {"source",
// "prediction", "prediction_ids"}; with beams the sequence score, with several sequences all of them.
nlohmann::json generation_line(const ModelAndData& p, const ExampleGeneration& g, const GenerationConfig& config,
                               const std::string* prompt_text) {
  const bool seq2seq = p.data->task() == TaskKind::kSeq2Seq;
  const std::string prompt_key = seq2seq ? "source" : "prompt", text_key = seq2seq ? "prediction" : "generated",
                    ids_key = seq2seq ? "prediction_ids" : "generated_ids";
  nlohmann::json line;
  line[prompt_key] = prompt_text ? *prompt_text : generated_text(p, g.prompt, config);
  line[text_key] = generated_text(p, g.sequences.front().tokens, config);  // the best sequence
  line[ids_key] = g.sequences.front().tokens;
  if (config.num_beams > 1) line["sequence_score"] = g.sequences.front().score;
  if (g.sequences.size() > 1) {  // num_return_sequences > 1: all of them, best first
    nlohmann::json all = nlohmann::json::array();
    for (const auto& s : g.sequences)
      all.push_back({{text_key, generated_text(p, s.tokens, config)}, {ids_key, s.tokens}, {"sequence_score", s.score}});
    line["sequences"] = all;
  }
  return line;
}

// Classifier lines of one batch; returns whether any example had a label.
bool classify_batch(ModelAndData& p, const std::vector<Example>& examples, PredictionFile& out) {
  const std::vector<std::string> label_names = p.data->shape().label_names;  // by label id; may be empty
  Batch b = collate(examples, TaskKind::kClassification);
  auto logits = p.model->forward(batch_on(b, p.device)).logits.to(torch::kCPU, torch::kFloat).contiguous();
  const bool regression = logits.size(-1) == 1;  // HF problem_type regression: the value is the prediction
  auto probs = torch::softmax(logits, -1);
  bool has_labels = false;
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
    out.write(line);
  }
  return has_labels;
}

// Token-model lines (e.g. a masked LM): the most likely token at each position.
void token_batch(ModelAndData& p, const std::vector<Example>& examples, PredictionFile& out) {
  const Tokenizer* tok = p.data->tokenizer();
  Batch b = collate(examples, p.data->task());
  auto ids = p.model->forward(batch_on(b, p.device)).logits.argmax(-1).to(torch::kCPU).contiguous();
  for (std::size_t i = 0; i < examples.size(); ++i) {
    auto row = ids[static_cast<int64_t>(i)];
    std::vector<int64_t> predicted(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
    nlohmann::json line;
    line["predicted_ids"] = predicted;
    if (tok) line["predicted"] = tok->decode(predicted);
    out.write(line);
  }
}

}  // namespace

std::vector<PromptInput> prepare_prompts(const ModelAndData& p, const std::vector<Prompt>& prompts) {
  if (!p.model->is_causal_lm())
    throw ConfigError("--prompts: the model does not continue a prompt (a causal LM does); predict the data's test "
                      "split instead (without --prompts)");
  const Tokenizer* tok = p.data->tokenizer();
  if (!tok) throw ConfigError("--prompts: the data source has no tokenizer to encode the prompts with");
  const GenerationConfig config = generation_config(p);
  // Room for the generated tokens: max_new_tokens, or at least one when max_length bounds the whole.
  const int64_t room = p.generation.max_length && !p.generation.max_new_tokens ? 1 : config.max_new_tokens;
  // When the generated tokens fit beside the prompt, the model sees the whole prompt at every step. When
  // they do not fit the context anyway, the window slides as it generates (as nanoGPT's sample.py crops
  // to block_size): the prompt keeps its last context - 1 tokens.
  const int64_t context = config.max_context;
  const int64_t keep = context <= 0 ? 0 : room < context ? context - room : std::max<int64_t>(1, context - 1);
  if (context > 0 && room >= context)
    log_info("--prompts: " + std::to_string(room) + " new tokens do not fit the model's context of " +
             std::to_string(context) + " tokens: the window slides while generating, and prompts keep their last " +
             std::to_string(keep) + " tokens");
  std::vector<PromptInput> out;
  int64_t shortened = 0;
  for (const Prompt& prompt : prompts) {
    PromptInput in;
    in.text = prompt.text;
    try {
      in.ids = tok->encode_for_model(prompt.text, nullptr, 0).input_ids;
    } catch (const Error& e) {  // e.g. a character the chars tokenizer's vocabulary lacks
      throw ConfigError("--prompts: line " + std::to_string(prompt.line) + ": " + e.what());
    }
    if (in.ids.empty())
      throw ConfigError("--prompts: line " + std::to_string(prompt.line) + ": the prompt encodes to no token");
    if (keep > 0 && static_cast<int64_t>(in.ids.size()) > keep) {
      in.dropped_tokens = static_cast<int64_t>(in.ids.size()) - keep;
      in.ids.erase(in.ids.begin(), in.ids.begin() + in.dropped_tokens);
      ++shortened;
    }
    out.push_back(std::move(in));
  }
  if (shortened > 0)
    log_warning("--prompts: " + std::to_string(shortened) + " of " + std::to_string(out.size()) + " prompts are longer than " +
                std::to_string(keep) + " tokens (the context of " + std::to_string(context) + " with room for " +
                std::to_string(room) + " to generate); the model sees their last " + std::to_string(keep) +
                " tokens (their lines say prompt_tokens_dropped)");
  return out;
}

nlohmann::json predict(ModelAndData& p, const Components& components, const PredictRequest& r) {
  const bool from_prompts = !r.prompts.empty();
  auto dataset = from_prompts ? nullptr : p.data->split(r.split);
  if (!from_prompts && (!dataset || dataset->size() == 0))
    throw ConfigError("cannot predict: the data source has no '" + r.split +
                      "' examples (data: give it a test or evaluation split, or give --prompts FILE)");
  const bool generating = from_prompts || p.model->is_causal_lm() || p.model->is_encoder_decoder();
  const GenerationConfig config = generating ? generation_config(p) : GenerationConfig{};  // its problems first
  const int64_t total = from_prompts ? static_cast<int64_t>(r.prompts.size()) : dataset->size();
  const auto start = Clock::now();
  StopSignalGuard stop_on_signal("finishing the prediction at hand, then stopping; predictions.jsonl is not written");
  PredictionFile out(r.path);
  p.model->eval();
  torch::NoGradGuard no_grad;
  AutocastScope autocast(p.compute_dtype);
  // One generator for the whole loop, seeded once (HF: set_seed, then generate over the batches).
  at::Generator generator = make_generator(static_cast<uint64_t>(p.generation.seed.value_or(p.seed)));
  LoopProgress progress("predict", total, r.progress);
  bool has_labels = false;
  SplitGenerations generations;  // the best sequences, for the test metrics
  int64_t generated_tokens = 0;
  double generation_seconds = 0;
  auto generate_timed = [&](ExampleGeneration& g) {
    const auto t0 = Clock::now();
    g.sequences = generate_sequences(*p.model, g.prompt, config, generator);
    generation_seconds += seconds_since(t0);
    generated_tokens += static_cast<int64_t>(g.sequences.front().tokens.size());
  };
  if (from_prompts) {
    for (const PromptInput& prompt : r.prompts) {
      ExampleGeneration g;
      g.prompt = prompt.ids;
      generate_timed(g);
      nlohmann::json line = generation_line(p, g, config, &prompt.text);
      if (prompt.dropped_tokens > 0) line["prompt_tokens_dropped"] = prompt.dropped_tokens;
      out.write(line);
      progress.advance(1);
      stop_if_signalled(out, total);
    }
  } else {
    DataLoader loader(dataset, p.data->task(), r.batch_size, false, 0, false);
    loader.start_epoch(0);
    for (auto examples = loader.next_examples(); !examples.empty(); examples = loader.next_examples()) {
      if (p.data->task() == TaskKind::kClassification) {
        has_labels = classify_batch(p, examples, out) || has_labels;
      } else if (!generating) {
        token_batch(p, examples, out);
        has_labels = has_labels || examples.front().labels.size() > 0;
      } else {  // causal LMs continue the prompt; encoder-decoder models encode it and generate from the decoder start
        for (const auto& ex : examples) {
          const bool seq2seq = p.data->task() == TaskKind::kSeq2Seq;
          ExampleGeneration g = prepare_generation(p, ex);
          generate_timed(g);
          nlohmann::json line = generation_line(p, g, config, nullptr);
          if (!g.reference.empty()) {
            line["reference"] = generated_text(p, g.reference, config);
            has_labels = true;
          }
          generations.predictions.push_back(line[seq2seq ? "prediction" : "generated"]);
          generations.references.push_back(generated_text(p, g.reference, config));
          generations.lengths.push_back(generated_length(p, g, dataset->collate_options().pad_id));
          out.write(line);
          progress.advance(1);
          stop_if_signalled(out, total);
        }
        continue;
      }
      progress.advance(static_cast<int64_t>(examples.size()));
      stop_if_signalled(out, total);
    }
  }
  progress.finish();
  nlohmann::json metrics = nlohmann::json::object();
  // The test metrics score the generations written above (HF predict: one generation per example).
  if (has_labels)
    metrics = generations.predictions.empty() ? evaluate(p, components, r.split, r.batch_size, "test")
                                              : evaluate_generations(p, components, r.split, r.batch_size, "test", generations);
  stop_if_signalled(out, total);
  out.commit();
  // HF speed_metrics over the whole loop (generation, writing and scoring included).
  const int64_t steps = (total + r.batch_size - 1) / r.batch_size;
  metrics.update(speed_metrics("test", seconds_since(start), total, steps));
  if (generating && generation_seconds > 0)
    metrics["test_gen_tokens_per_second"] =
        std::round(static_cast<double>(generated_tokens) / generation_seconds * 1000.0) / 1000.0;
  return metrics;
}

}  // namespace hftrain
