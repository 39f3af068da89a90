// Datasets and data sources, free of LibTorch. A DataSource (a registered `data` component) yields
// random-access Datasets for the splits train / eval / test, a tokenizer to turn ids back into text,
// the shape facts a model needs (ModelShape) and the metrics that suit its task.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizers/tokenizer.h"

namespace hftrain {

class ChatTemplate;

// One example. Language-model examples fill input_ids/labels (labels -100 = not scored, e.g. the
// prompt); classification examples fill features or input_ids plus `label`.
struct Example {
  std::vector<int64_t> input_ids;
  std::vector<int64_t> labels;
  std::vector<float> features;
  int64_t label = -100;
  int64_t prompt_length = 0;  // LM: tokens given as the prompt by `hftrain predict`
  std::vector<int64_t> token_type_ids;       // segment ids (text 0, text_pair 1); empty = none
  std::vector<int64_t> special_tokens_mask;  // 1 = special token (never MLM-masked); empty = none
  // A packed row of several examples (data.packing: bfd): their lengths in order, each attending only to
  // itself (collated padding-free, position ids restarting); empty = one example.
  std::vector<int64_t> segment_lengths;
};

// How examples of a dataset are padded and (for masked LMs) masked when batched.
struct CollateOptions {
  int64_t pad_id = 0;               // input_ids padding (tokenizer pad, else eos, else 0)
  double mlm_probability = 0.15;    // masked_lm: share of non-special tokens selected
  int64_t mask_id = -1;             // masked_lm: the tokenizer's mask token
  int64_t vocab_size = 0;           // masked_lm: random replacements are drawn from [0, vocab_size)
  int64_t pad_to_length = 0;        // > 0: input_ids padded to at least this length (pad_to_max_length)
  int64_t label_pad_to_length = 0;  // > 0: seq2seq labels padded (with -100) to at least this length
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
  virtual CollateOptions collate_options() const { return {}; }
  // Lengths for group_by_length: the integer column `column` when the dataset has one, otherwise the
  // token count of each example (HF's fallback). Tokenized file datasets expose "length" = token count.
  virtual std::vector<int64_t> lengths(const std::string& column) const;
};

// kMaskedLm: labels per token like kCausalLm, but made by masking in the collator and not shifted.
// kSeq2Seq: input_ids is the source (the encoder's input, the whole prompt), labels the target, of its
// own length (HF DataCollatorForSeq2Seq: padded with -100; the model shifts them into decoder inputs).
enum class TaskKind { kCausalLm, kClassification, kMaskedLm, kSeq2Seq };

struct DataShape {
  int64_t vocab_size = 0;
  int64_t max_length = 0;
  int64_t num_labels = 0;
  int64_t num_features = 0;
  std::vector<std::string> label_names;  // id2label for classification (index = label id); may be empty
};

// The splits a command reads: training reads all three, `hftrain eval` the eval split, `hftrain predict`
// the test split, `predict --prompts` none (only the tokenizer). A source built for fewer splits does not
// require the files of the others: it reads such a file when it exists (so that a model whose sizes come
// from the data is built as it was trained) and skips it, with a log line, when it does not.
struct DataUse {
  bool train = true;
  bool eval = true;
  bool test = true;
};

// Whether a source reads the data file `path` (the option `key`): a file a split in use needs is read
// (and must exist: a ConfigError names the key), another is read when it exists and skipped with a log line
// when it does not.
bool read_data_file(const std::string& path, bool needed, const std::string& key);

// What a run changes in its tokenizer before it saves it beside the model (TRL's SFTTrainer): the chat
// template the spec gave (its text; "" = the tokenizer's files as they are) and SFTConfig.eos_token (its
// text and id; "" = unchanged). Applied by data/saved_tokenizer.h and, for the model's config.json and
// generation_config.json, by the trainer.
struct TokenizerChanges {
  std::string chat_template;
  std::string eos_token;
  std::optional<int64_t> eos_token_id;
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
  // The chat template conversations are rendered with (data/chat_template.h); nullptr when there is none.
  virtual const ChatTemplate* chat_template() const { return nullptr; }
  virtual TokenizerChanges tokenizer_changes() const { return {}; }
};

}  // namespace hftrain
