// Datasets and data sources, free of LibTorch. A DataSource (a registered `data` component) yields
// random-access Datasets for the splits train / eval / test, a tokenizer to turn ids back into text,
// the shape facts a model needs (ModelShape) and the metrics that suit its task.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizers/tokenizer.h"

namespace hftrain {

// One example. Language-model examples fill input_ids/labels (labels -100 = not scored, e.g. the
// prompt); classification examples fill features or input_ids plus `label`.
struct Example {
  std::vector<int64_t> input_ids;
  std::vector<int64_t> labels;
  std::vector<float> features;
  int64_t label = -100;
  int64_t prompt_length = 0;  // LM: tokens given as the prompt by `hftrain predict`
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
};

enum class TaskKind { kCausalLm, kClassification };

struct DataShape {
  int64_t vocab_size = 0;
  int64_t max_length = 0;
  int64_t num_labels = 0;
  int64_t num_features = 0;
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  // "train", "eval" or "test"; nullptr when the source has no such split.
  virtual std::shared_ptr<const Dataset> split(const std::string& name) const = 0;
  virtual TaskKind task() const = 0;
  virtual DataShape shape() const = 0;
  virtual std::vector<std::string> default_metrics() const = 0;
  // nullptr for sources without text (feature classification).
  virtual const Tokenizer* tokenizer() const { return nullptr; }
};

}  // namespace hftrain
