// Datasets and data sources, free of LibTorch. A DataSource (a registered `data` component) yields
// random-access Datasets for the splits train / eval / test, a tokenizer to turn ids back into text,
// the shape facts a model needs (ModelShape) and the metrics that suit its task.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
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

// Characters <-> ids by position in a fixed alphabet.
class CharTokenizer : public Tokenizer {
 public:
  explicit CharTokenizer(std::string alphabet) : alphabet_(std::move(alphabet)) {}
  int64_t vocab_size() const override { return static_cast<int64_t>(alphabet_.size()); }
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;

 private:
  std::string alphabet_;
};

// Raw bytes: id = byte value, vocab 256.
class ByteTokenizer : public Tokenizer {
 public:
  int64_t vocab_size() const override { return 256; }
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
};

}  // namespace hftrain
