// The Tokenizer interface (free of LibTorch) and the built-in character and byte tokenizers.
// HF tokenizer.json and sentencepiece tokenizers implement the same interface (see load_tokenizer in
// tokenizers/load_tokenizer.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hftrain {

// Ids of the special tokens a tokenizer defines (HF's bos/eos/pad/unk/cls/sep/mask tokens).
struct SpecialTokenIds {
  std::optional<int64_t> bos, eos, pad, unk, cls, sep, mask;
};

// What HF's tokenizer(text, text_pair, truncation=True, max_length=N) returns for one example.
struct Encoding {
  std::vector<int64_t> input_ids;
  std::vector<int64_t> token_type_ids;       // segment of each token: 0 for text, 1 for text_pair
  std::vector<int64_t> special_tokens_mask;  // 1 where the post-processor inserted a special token
};

// HF tokenizers' longest_first truncation of a pair to `limit` tokens in total: the shorter sequence keeps
// max(its length, limit - the other's share), the longer takes the rest (halves when both are long).
// A single sequence (b empty and !is_pair) is cut to `limit`.
void truncate_longest_first(std::vector<int64_t>& a, std::vector<int64_t>& b, bool is_pair, std::size_t limit);

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual int64_t vocab_size() const = 0;
  // Plain encoding, no special tokens added (HF: add_special_tokens=False).
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  // HF decode(skip_special_tokens=True): without the special tokens. The default leaves out the ids of
  // special_tokens(); tokenizers that know more special tokens (HF added tokens) leave those out too.
  virtual std::string decode_without_special(const std::vector<int64_t>& ids) const;
  // HF __call__: special tokens added by the tokenizer's post-processor (e.g. [CLS] A [SEP] B [SEP]),
  // truncated to max_length (0 = no limit) with HF's longest_first rule for pairs. The default adds
  // no special tokens.
  virtual Encoding encode_for_model(const std::string& text, const std::string* text_pair, int64_t max_length) const;
  virtual SpecialTokenIds special_tokens() const { return {}; }
  // The files it was read from, with the HF tokenizer files beside them (tokenizer_config.json,
  // special_tokens_map.json, ...): what a run directory holds so that it is a complete model directory, as
  // HF Trainer saves its processing_class. Empty for the built-in byte and character tokenizers.
  struct File {
    std::string path;  // where it was read
    std::string name;  // its name in a model directory (tokenizer.json for a tokenizer file named otherwise)
  };
  const std::vector<File>& files() const { return files_; }
  void set_files(std::vector<File> files) { files_ = std::move(files); }

 private:
  std::vector<File> files_;
};

// Characters <-> ids by position in a fixed alphabet; `specials` names the ids that are special tokens.
class CharTokenizer : public Tokenizer {
 public:
  explicit CharTokenizer(std::string alphabet, SpecialTokenIds specials = {})
      : alphabet_(std::move(alphabet)), specials_(specials) {}
  SpecialTokenIds special_tokens() const override { return specials_; }
  int64_t vocab_size() const override { return static_cast<int64_t>(alphabet_.size()); }
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  const std::string& alphabet() const { return alphabet_; }

 private:
  std::string alphabet_;
  SpecialTokenIds specials_;
};

// Raw bytes: id = byte value, vocab 256.
class ByteTokenizer : public Tokenizer {
 public:
  int64_t vocab_size() const override { return 256; }
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
};

}  // namespace hftrain
