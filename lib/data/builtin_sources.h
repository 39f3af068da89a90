// Built-in data sources: two synthetic tasks generated deterministically from a seed (no files
// needed) and a plain-text file read as bytes for character/byte language modelling.
#pragma once

#include "config/schema.h"
#include "data/dataset.h"

namespace hftrain {

// `digit_reversal`: "<digits>=<digits reversed>" sequences; the model sees the prompt "<digits>=" and
// must produce the reversal. Scored by exact match of the whole answer.
class DigitReversalSource : public DataSource {
 public:
  struct Options {
    int64_t num_digits = 6;
    int64_t train_size = 20000;
    int64_t eval_size = 512;
    int64_t test_size = 64;
    int64_t seed = 1234;
    static void declare(Schema<Options>& s);
  };
  explicit DigitReversalSource(const Options& options, const DataUse& use = {});  // generates every split
  std::shared_ptr<const Dataset> split(const std::string& name) const override;
  TaskKind task() const override { return TaskKind::kCausalLm; }
  DataShape shape() const override;
  std::vector<std::string> default_metrics() const override { return {"exact_match"}; }
  const Tokenizer* tokenizer() const override { return &tokenizer_; }

 private:
  Options options_;
  CharTokenizer tokenizer_;
};

// `digit_reversal_seq2seq`: the same digit strings as a sequence-to-sequence task: the source is the
// digits, the target their reversal, each ended by eos. Tokens follow T5's conventions (pad 0, eos 1,
// then the digits), so a t5 model with its default ids learns it as is. Scored by exact match.
class DigitReversalSeq2SeqSource : public DataSource {
 public:
  using Options = DigitReversalSource::Options;
  explicit DigitReversalSeq2SeqSource(const Options& options, const DataUse& use = {});  // generates every split
  std::shared_ptr<const Dataset> split(const std::string& name) const override;
  TaskKind task() const override { return TaskKind::kSeq2Seq; }
  DataShape shape() const override;
  std::vector<std::string> default_metrics() const override { return {"exact_match"}; }
  const Tokenizer* tokenizer() const override { return &tokenizer_; }

 private:
  Options options_;
  CharTokenizer tokenizer_;
};

// `gaussian_blobs`: points around num_classes random centres in num_features dimensions; the label
// is the centre a point was drawn from. Scored by accuracy.
class GaussianBlobsSource : public DataSource {
 public:
  struct Options {
    int64_t num_features = 16;
    int64_t num_classes = 4;
    double noise = 1.0;
    int64_t train_size = 4000;
    int64_t eval_size = 512;
    int64_t test_size = 64;
    int64_t seed = 1234;
    static void declare(Schema<Options>& s);
  };
  explicit GaussianBlobsSource(const Options& options, const DataUse& use = {});  // generates every split
  std::shared_ptr<const Dataset> split(const std::string& name) const override;
  TaskKind task() const override { return TaskKind::kClassification; }
  DataShape shape() const override;
  std::vector<std::string> default_metrics() const override { return {"accuracy"}; }

 private:
  Options options_;
  std::vector<std::vector<float>> centres_;
};

// `text_file`: a UTF-8/ASCII text file tokenized whole (bytes, characters as nanoGPT's shakespeare_char
// does, or an HF / sentencepiece tokenizer), cut into consecutive blocks of block_size tokens (HF
// group_texts style). The last validation_split of the tokens is eval and test.
class TextFileSource : public DataSource {
 public:
  struct Options {
    std::string path;
    std::string tokenizer = "bytes";
    int64_t block_size = 64;
    double validation_split = 0.1;
    static void declare(Schema<Options>& s);
  };
  // Its one file holds every split (and, for tokenizer chars, the vocabulary): read whatever the use.
  explicit TextFileSource(const Options& options, const DataUse& use = {});
  std::shared_ptr<const Dataset> split(const std::string& name) const override;
  TaskKind task() const override { return TaskKind::kCausalLm; }
  DataShape shape() const override;
  std::vector<std::string> default_metrics() const override { return {"perplexity"}; }
  const Tokenizer* tokenizer() const override { return tokenizer_.get(); }

 private:
  Options options_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const std::vector<int64_t>> train_tokens_, eval_tokens_;
};

}  // namespace hftrain
