// Data components over user files: `jsonl`, `csv`, `tsv`, `text`, `parquet` and `arrow` (tabular rows, tokenized, with an
// HF-style column mapping, label set and optional run_clm-style packing, cached by content hash). The
// pre-tokenized `token_files` source is in token_file_source.h. See docs/design.md "Datasets".
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "config/schema.h"
#include "data/chat_template.h"
#include "data/dataset.h"
#include "data/row_checks.h"
#include "data/sft_rows.h"
#include "data/text_rows.h"

namespace hftrain {

// Tokenized examples held in memory (what the cache stores).
struct TokenizedSplits {
  std::vector<Example> train, eval, test;
  bool has_eval = false, has_test = false;
  std::vector<std::string> label_names;
  int64_t skipped_rows = 0;
  // Unpacked training rows: raw columns whose value is an integer in every kept row (e.g. a precomputed
  // "length" for group_by_length's length_column_name), one value per training example.
  std::map<std::string, std::vector<int64_t>> train_int_columns;
  std::string data_format;  // causal_lm: the dataset format told from the columns (sft_rows.h), as printed at start
};

class FileDataSource : public DataSource {
 public:
  struct Options {
    std::string train_file;
    std::string validation_file;
    std::string test_file;
    int64_t validation_split_percentage = 0;
    int64_t split_seed = 42;
    std::string task = "causal_lm";
    std::string text_column = "text";
    std::string text_pair_column;
    std::string label_column = "label";
    std::vector<std::string> label_names;
    std::string tokenizer = "bytes";
    int64_t max_length = 0;
    int64_t block_size = 0;
    double mlm_probability = 0.15;
    // task seq2seq (HF run_translation / run_summarization)
    std::string source_column = "source";
    std::string target_column = "target";
    std::string source_prefix;
    int64_t max_source_length = 1024;
    int64_t max_target_length = 128;
    bool pad_to_max_length = false;
    std::string on_bad_row = "error";
    std::string cache_dir;
    bool overwrite_cache = false;
    int64_t cache_wait_seconds = 1800;
    // Supervised fine-tuning as TRL's SFTTrainer (sft_source.cpp, docs/data.md "Chat and SFT data").
    std::string dataset_text_field;
    std::string chat_template;
    std::string chat_template_name;
    std::optional<bool> completion_only_loss;
    bool assistant_only_loss = false;
    bool packing = false;
    std::string packing_strategy = "bfd";
    std::string eos_token;
    std::string pad_token;
    static void declare(Schema<Options>& s);
    static void declare_sft(Schema<Options>& s);
  };
  // `tokenizer` replaces options.tokenizer (tests); `tokenizer_identity` then names it in the cache key.
  // `use`: the splits the command reads (DataUse); the files of the others are read only when they exist.
  FileDataSource(const Options& options, RowFormat format, std::shared_ptr<const Tokenizer> tokenizer = nullptr,
                 const std::string& tokenizer_identity = "", const DataUse& use = {});

  std::shared_ptr<const Dataset> split(const std::string& name) const override;
  TaskKind task() const override { return task_; }
  DataShape shape() const override { return shape_; }
  std::vector<std::string> default_metrics() const override;
  const Tokenizer* tokenizer() const override { return tokenizer_.get(); }

  // Diagnostics: rows tokenized by this instance (0 when the cache was used), the cache file, rows skipped.
  int64_t tokenized_rows() const { return tokenized_rows_; }
  const std::string& cache_file() const { return cache_file_; }
  bool loaded_from_cache() const { return loaded_from_cache_; }
  int64_t skipped_rows() const { return splits_.skipped_rows; }
  // The chat template in use (data.chat_template or the tokenizer's), nullptr when there is none.
  const ChatTemplate* chat_template() const override { return chat_ ? &*chat_ : nullptr; }
  // data.chat_template's text and data.eos_token (a token of the vocabulary), as the saved tokenizer holds them.
  TokenizerChanges tokenizer_changes() const override;
  // The dataset format told from the columns (causal_lm), as printed at start.
  const std::string& data_format() const { return splits_.data_format; }

 private:
  // Construction (file_sources.cpp): the files, the task and its options, the cache or a build, the shapes.
  void resolve_files(const DataUse& use);
  void choose_task();
  void refuse_other_task_options() const;
  void load_or_build(const std::string& tokenizer_id);
  void set_shape_and_collate(const SpecialTokenIds& special);
  TokenizedSplits build();
  // Plain rows (plain_rows.cpp): HF's run_clm / run_mlm / run_glue / run_translation examples.
  struct RowSplits {
    std::vector<Row> train, eval, test;
  };
  // A bad row of `file`: an error or a skip (build's policy); `usable`: some row of the file can be used.
  using BadPlainRow = std::function<void(const std::string& file, const std::vector<Row>& rows, const RowNeeds& needs,
                                         const Row& row, const RowIssue& issue, bool usable)>;
  struct PlainConversion {
    const BadPlainRow& bad;
    const std::map<std::string, int64_t>& label_id;
    const std::vector<std::string>& label_names;
    std::vector<const Row*> kept_rows;  // the row of each example of the latest conversion (unpacked)
  };
  RowSplits read_row_splits(TokenizedSplits& out) const;
  std::map<std::string, int64_t> label_set(TokenizedSplits& out, const std::vector<Row>& train_rows) const;
  std::vector<Example> convert_plain(const std::string& file, const std::vector<Row>& rows, bool labels_optional,
                                     PlainConversion& c);
  Example seq2seq_example(const Row& row, bool targets_optional);
  std::optional<Example> text_example(const Row& row, const PlainConversion& c, Encoding* packed);
  void group_texts(const Encoding& packed, std::vector<Example>& examples) const;
  std::map<std::string, std::vector<int64_t>> integer_columns(const std::vector<const Row*>& rows) const;
  // sft_source.cpp: the SFT options checked against the task, the chat template loaded, EOS and pad tokens.
  void setup_sft(const SpecialTokenIds& special);
  // The format of the rows (and the checks that depend on it); the examples of one split's rows in that
  // format (`bad` decides between an error and a skip); packing: true applied to a split's examples.
  SftFormat choose_format(const std::vector<Row>& train_rows, const std::vector<Row>& eval_rows);
  using BadRow = std::function<void(const Row&, const RowIssue&)>;
  std::vector<Example> convert_sft(const std::string& file, const std::vector<Row>& rows, SftFormat format, const BadRow& bad);
  std::vector<Example> pack_split(std::vector<Example> examples) const;
  Options options_;
  std::optional<ChatTemplate> chat_;
  std::string eos_text_;  // appended to non-conversational text and completions (TRL)
  std::optional<int64_t> pad_override_;  // data.pad_token's id
  std::optional<int64_t> eos_override_;  // data.eos_token's id (one token of the vocabulary)
  RowFormat format_;
  TaskKind task_ = TaskKind::kCausalLm;
  std::shared_ptr<const Tokenizer> tokenizer_;
  TokenizedSplits splits_;
  DataShape shape_;
  CollateOptions collate_;
  std::string cache_file_;
  bool loaded_from_cache_ = false;
  int64_t tokenized_rows_ = 0;
  bool train_read_ = true;  // false: the command needs no training rows and train_file does not exist
  std::vector<std::string> train_files_, eval_files_, test_files_;  // the files each option names (data_files.h)
};

template <RowFormat F>
class FormatSource : public FileDataSource {
 public:
  using Options = FileDataSource::Options;
  explicit FormatSource(const Options& options, const DataUse& use = {}) : FileDataSource(options, F, nullptr, "", use) {}
};
using JsonlSource = FormatSource<RowFormat::kJsonl>;
using CsvSource = FormatSource<RowFormat::kCsv>;
using TsvSource = FormatSource<RowFormat::kTsv>;
using TextLinesSource = FormatSource<RowFormat::kText>;
using ParquetSource = FormatSource<RowFormat::kParquet>;
using ArrowSource = FormatSource<RowFormat::kArrow>;

}  // namespace hftrain
