// Built-in data sources (see builtin_sources.h). Synthetic examples are a pure function of
// (seed, split, index), so any example can be produced on demand and runs are reproducible.
#include "data/builtin_sources.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "tokenizers/load_tokenizer.h"
#include "tokenizers/text_chars_tokenizer.h"
#include "util/error.h"
#include "util/splitmix64.h"

namespace hftrain {
namespace {

uint64_t split_salt(const std::string& split) {
  if (split == "train") return 1;
  if (split == "eval") return 2;
  return 3;
}

SplitMix64 example_rng(int64_t seed, const std::string& split, int64_t index) {
  SplitMix64 g{static_cast<uint64_t>(seed) * 0x100000001B3ull ^ (split_salt(split) << 56)};
  g.state ^= static_cast<uint64_t>(index) * 0xD1B54A32D192ED03ull;
  g.next();
  return g;
}

template <class Fn>
class FunctionDataset : public Dataset {
 public:
  FunctionDataset(int64_t size, Fn fn) : size_(size), fn_(std::move(fn)) {}
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override {
    if (index < 0 || index >= size_) throw RuntimeFailure("dataset index " + std::to_string(index) + " out of range");
    return fn_(index);
  }

 private:
  int64_t size_;
  Fn fn_;
};

template <class Fn>
std::shared_ptr<const Dataset> make_dataset(int64_t size, Fn fn) {
  return std::make_shared<FunctionDataset<Fn>>(size, std::move(fn));
}

int64_t split_size(const std::string& split, int64_t train, int64_t eval, int64_t test) {
  if (split == "train") return train;
  if (split == "eval") return eval;
  if (split == "test") return test;
  throw RuntimeFailure("unknown data split '" + split + "' (valid: train, eval, test)");
}

}  // namespace

// ---- digit_reversal ------------------------------------------------------------------------------
void DigitReversalSource::Options::declare(Schema<Options>& s) {
  s.add("num_digits", &Options::num_digits, "Digits per string.").min(1).max(64);
  s.add("train_size", &Options::train_size, "Training examples.").min(1);
  s.add("eval_size", &Options::eval_size, "Evaluation examples.").min(0);
  s.add("test_size", &Options::test_size, "Prediction examples.").min(0);
  s.add("seed", &Options::seed, "Seed the examples are generated from.").min(0);
}

DigitReversalSource::DigitReversalSource(const Options& options, const DataUse&) : options_(options), tokenizer_("0123456789=") {}

DataShape DigitReversalSource::shape() const {
  DataShape s;
  s.vocab_size = tokenizer_.vocab_size();
  s.max_length = 2 * options_.num_digits + 1;
  return s;
}

// The digits of example `index` of a digit_reversal split (both the causal and the seq2seq form).
std::vector<int64_t> reversal_digits(int64_t seed, const std::string& split, int64_t index, int64_t n) {
  SplitMix64 g = example_rng(seed, split, index);
  std::vector<int64_t> digits;
  for (int64_t i = 0; i < n; ++i) digits.push_back(static_cast<int64_t>(g.next() % 10));
  return digits;
}

std::shared_ptr<const Dataset> DigitReversalSource::split(const std::string& name) const {
  int64_t size = split_size(name, options_.train_size, options_.eval_size, options_.test_size);
  const int64_t n = options_.num_digits, seed = options_.seed;
  return make_dataset(size, [n, seed, name](int64_t index) {
    Example ex;
    const std::vector<int64_t> digits = reversal_digits(seed, name, index, n);
    ex.input_ids = digits;
    ex.input_ids.push_back(10);  // '='
    ex.input_ids.insert(ex.input_ids.end(), digits.rbegin(), digits.rend());
    ex.labels.assign(ex.input_ids.size(), -100);
    for (std::size_t i = static_cast<std::size_t>(n) + 1; i < ex.input_ids.size(); ++i) ex.labels[i] = ex.input_ids[i];
    ex.prompt_length = n + 1;
    return ex;
  });
}

// ---- digit_reversal_seq2seq ----------------------------------------------------------------------
// Alphabet: '_' pad (0), '$' eos (1), then the digits (2-11).
DigitReversalSeq2SeqSource::DigitReversalSeq2SeqSource(const Options& options, const DataUse&)
    : options_(options), tokenizer_("_$0123456789", [] {
        SpecialTokenIds s;
        s.pad = 0;
        s.eos = 1;
        return s;
      }()) {}

DataShape DigitReversalSeq2SeqSource::shape() const {
  DataShape s;
  s.vocab_size = tokenizer_.vocab_size();
  s.max_length = options_.num_digits + 1;
  return s;
}

std::shared_ptr<const Dataset> DigitReversalSeq2SeqSource::split(const std::string& name) const {
  int64_t size = split_size(name, options_.train_size, options_.eval_size, options_.test_size);
  const int64_t n = options_.num_digits, seed = options_.seed;
  return make_dataset(size, [n, seed, name](int64_t index) {
    constexpr int64_t kEos = 1, kFirstDigit = 2;
    Example ex;
    for (int64_t d : reversal_digits(seed, name, index, n)) ex.input_ids.push_back(kFirstDigit + d);
    ex.labels.assign(ex.input_ids.rbegin(), ex.input_ids.rend());
    ex.input_ids.push_back(kEos);
    ex.labels.push_back(kEos);
    ex.prompt_length = static_cast<int64_t>(ex.input_ids.size());  // the whole source is the encoder's input
    return ex;
  });
}

// ---- gaussian_blobs ------------------------------------------------------------------------------
void GaussianBlobsSource::Options::declare(Schema<Options>& s) {
  s.add("num_features", &Options::num_features, "Feature dimensions.").min(1);
  s.add("num_classes", &Options::num_classes, "Number of classes (blob centres).").min(2);
  s.add("noise", &Options::noise, "Standard deviation of points around their centre.").min(0);
  s.add("train_size", &Options::train_size, "Training examples.").min(1);
  s.add("eval_size", &Options::eval_size, "Evaluation examples.").min(0);
  s.add("test_size", &Options::test_size, "Prediction examples.").min(0);
  s.add("seed", &Options::seed, "Seed the examples are generated from.").min(0);
}

GaussianBlobsSource::GaussianBlobsSource(const Options& options, const DataUse&) : options_(options) {
  SplitMix64 g{static_cast<uint64_t>(options_.seed) ^ 0xC0FFEEull};
  for (int64_t c = 0; c < options_.num_classes; ++c) {
    std::vector<float> centre;
    for (int64_t d = 0; d < options_.num_features; ++d) centre.push_back(static_cast<float>(2.0 * g.normal()));
    centres_.push_back(centre);
  }
}

DataShape GaussianBlobsSource::shape() const {
  DataShape s;
  s.num_labels = options_.num_classes;
  s.num_features = options_.num_features;
  return s;
}

std::shared_ptr<const Dataset> GaussianBlobsSource::split(const std::string& name) const {
  int64_t size = split_size(name, options_.train_size, options_.eval_size, options_.test_size);
  auto centres = centres_;
  const int64_t seed = options_.seed;
  const double noise = options_.noise;
  return make_dataset(size, [centres, seed, noise, name](int64_t index) {
    SplitMix64 g = example_rng(seed, name, index);
    Example ex;
    ex.label = static_cast<int64_t>(g.next() % centres.size());
    for (float c : centres[static_cast<std::size_t>(ex.label)]) ex.features.push_back(c + static_cast<float>(noise * g.normal()));
    return ex;
  });
}

// ---- text_file -----------------------------------------------------------------------------------
void TextFileSource::Options::declare(Schema<Options>& s) {
  s.add("path", &Options::path, "Text file to train on.").required().path();
  s.add("tokenizer", &Options::tokenizer,
        "'bytes' (vocab 256), 'chars' (the sorted distinct characters of the file, as nanoGPT's "
        "shakespeare_char), or a tokenizer.json / sentencepiece .model file or a directory holding one.").path();
  s.add("block_size", &Options::block_size, "Tokens per training example.").min(2);
  s.add("validation_split", &Options::validation_split, "Fraction at the end of the file used for eval/test.")
      .min(0)
      .max(0.9);
}

TextFileSource::TextFileSource(const Options& options, const DataUse&) : options_(options) {
  std::ifstream in(options_.path, std::ios::binary);
  if (!in) throw ConfigError("data.path: cannot read text file '" + options_.path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (options_.tokenizer == "chars")
    tokenizer_ = std::make_shared<TextCharsTokenizer>(text, "data.path '" + options_.path + "'");
  else
    tokenizer_ = load_tokenizer(options_.tokenizer, "data.tokenizer");
  std::vector<int64_t> tokens = tokenizer_->encode(text);
  const auto n = static_cast<int64_t>(tokens.size());
  const auto n_eval = static_cast<int64_t>(static_cast<double>(n) * options_.validation_split);
  if (n - n_eval < options_.block_size)
    throw ConfigError("data.path: '" + options_.path + "' has " + std::to_string(n) +
                      " tokens, too few for one training block of " + std::to_string(options_.block_size));
  train_tokens_ = std::make_shared<std::vector<int64_t>>(tokens.begin(), tokens.end() - n_eval);
  eval_tokens_ = std::make_shared<std::vector<int64_t>>(tokens.end() - n_eval, tokens.end());
}

DataShape TextFileSource::shape() const {
  DataShape s;
  s.vocab_size = tokenizer_->vocab_size();
  s.max_length = options_.block_size;
  return s;
}

std::shared_ptr<const Dataset> TextFileSource::split(const std::string& name) const {
  auto tokens = name == "train" ? train_tokens_ : eval_tokens_;
  if (name != "train" && name != "eval" && name != "test") split_size(name, 0, 0, 0);
  const int64_t block = options_.block_size;
  const auto count = static_cast<int64_t>(tokens->size()) / block;
  return make_dataset(count, [tokens, block](int64_t index) {
    Example ex;
    auto begin = tokens->begin() + index * block;
    ex.input_ids.assign(begin, begin + block);
    ex.labels = ex.input_ids;
    ex.prompt_length = block / 2;
    return ex;
  });
}

}  // namespace hftrain
