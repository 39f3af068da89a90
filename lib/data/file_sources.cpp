// File data sources: tokenized jsonl / csv / tsv / text with column mapping, labels, packing and the
// dataset cache (see file_sources.h and docs/design.md).
#include "data/file_sources.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "data/data_files.h"
#include "data/dataset_cache.h"
#include "data/row_checks.h"
#include "distributed/env.h"
#include "log/logger.h"
#include "tokenizers/load_tokenizer.h"
#include "util/error.h"

namespace hftrain {
namespace {

const char* format_name(RowFormat f) {
  switch (f) {
    case RowFormat::kJsonl: return "jsonl";
    case RowFormat::kCsv: return "csv";
    case RowFormat::kTsv: return "tsv";
    case RowFormat::kText: return "text";
    case RowFormat::kParquet: return "parquet";
    case RowFormat::kArrow: return "arrow";
  }
  return "?";
}

class ExamplesDataset : public Dataset {
 public:
  ExamplesDataset(std::shared_ptr<const std::vector<Example>> examples, CollateOptions collate,
                  std::map<std::string, std::vector<int64_t>> int_columns = {})
      : examples_(std::move(examples)), collate_(collate), int_columns_(std::move(int_columns)) {}
  int64_t size() const override { return static_cast<int64_t>(examples_->size()); }
  Example get(int64_t index) const override {
    if (index < 0 || index >= size()) throw RuntimeFailure("dataset index " + std::to_string(index) + " out of range");
    return (*examples_)[static_cast<std::size_t>(index)];
  }
  CollateOptions collate_options() const override { return collate_; }
  std::vector<int64_t> lengths(const std::string& column) const override {
    auto it = int_columns_.find(column);
    if (it != int_columns_.end()) return it->second;
    std::vector<int64_t> out;
    out.reserve(examples_->size());
    for (const auto& e : *examples_) out.push_back(static_cast<int64_t>(e.input_ids.size()));
    return out;
  }

 private:
  std::shared_ptr<const std::vector<Example>> examples_;
  CollateOptions collate_;
  std::map<std::string, std::vector<int64_t>> int_columns_;
};

// Identity of a tokenizer for the cache key: the spec value, the contents of the files it names and
// what it makes of a probe text (so a changed tokenizer behind the same value is a miss).
std::string tokenizer_identity(const std::string& value, const Tokenizer& tok) {
  CacheKey id;
  id.add(value);
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(value, ec)) {
    id.add(static_cast<int64_t>(hash_file_contents(value)));
  } else if (fs::is_directory(value, ec)) {
    for (const char* f : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"})
      if (fs::is_regular_file(fs::path(value) / f, ec)) id.add(f).add(static_cast<int64_t>(hash_file_contents((fs::path(value) / f).string())));
  }
  id.add(tok.vocab_size());
  try {
    const std::string pair = "a second segment";
    Encoding e = tok.encode_for_model("Hello world, 123 tokens.", &pair, 0);
    for (auto v : e.input_ids) id.add(v);
    for (auto v : e.special_tokens_mask) id.add(v);
  } catch (const Error&) {
    id.add("no-probe");
  }
  return id.hex();
}

}  // namespace

// ---- jsonl / csv / tsv / text / parquet / arrow --------------------------------------------------------------------
void FileDataSource::Options::declare(Schema<Options>& s) {
  s.add("train_file", &Options::train_file,
        "Training data (HF train_file): a file, a glob, a datasets save_to_disk folder, a DatasetDict folder (its "
        "train split) or a folder of split-named shards (train-*.parquet, also under data/).")
      .required()
      .path();
  s.add("validation_file", &Options::validation_file,
        "Evaluation data, as train_file (a folder gives its validation split); \"\" = none or a ratio split.")
      .path();
  s.add("test_file", &Options::test_file, "Prediction data, as train_file (a folder gives its test split); \"\" = the evaluation split.")
      .path();
  s.add("validation_split_percentage", &Options::validation_split_percentage,
        "Without validation_file: percent of training rows (ceil, seeded by split_seed) held out for evaluation.")
      .min(0)
      .max(99);
  s.add("split_seed", &Options::split_seed, "Seed of the ratio split.").min(0);
  s.add("task", &Options::task,
        "causal_lm, sequence_classification, masked_lm or seq2seq (source_column -> target_column, for "
        "encoder-decoder models).")
      .choices({"causal_lm", "sequence_classification", "masked_lm", "seq2seq"});
  s.add("text_column", &Options::text_column, "Column holding the text (text files: always 'text').");
  s.add("text_pair_column", &Options::text_pair_column, "Column holding the second text of a pair; \"\" = none.");
  s.add("label_column", &Options::label_column, "sequence_classification: column holding the label.");
  s.add("label_names", &Options::label_names,
        "sequence_classification: the label set in id order; [] = the sorted unique labels of the training split.");
  s.add("tokenizer", &Options::tokenizer, "bytes, or a path to tokenizer.json / tokenizer.model (or their directory).").path();
  s.add("max_length", &Options::max_length, "Truncate each row to this many tokens (0 = no truncation).").min(0);
  s.add("block_size", &Options::block_size,
        "LM packing as HF group_texts: concatenate all rows and cut into blocks of this size, dropping the remainder (0 = one example per row).")
      .min(0);
  s.add("mlm_probability", &Options::mlm_probability, "masked_lm: share of tokens selected for masking.").min(0).max(1);
  s.add("source_column", &Options::source_column, "seq2seq: column holding the source text (the encoder's input).");
  s.add("target_column", &Options::target_column, "seq2seq: column holding the target text (the labels).");
  s.add("source_prefix", &Options::source_prefix,
        "seq2seq: text put before every source, e.g. 'translate English to German: ' or 'summarize: ' for T5.");
  s.add("max_source_length", &Options::max_source_length, "seq2seq: sources are truncated to this many tokens.").min(1);
  s.add("max_target_length", &Options::max_target_length, "seq2seq: targets are truncated to this many tokens.").min(1);
  s.add("pad_to_max_length", &Options::pad_to_max_length,
        "seq2seq: pad every batch to max_source_length / max_target_length (fixed shapes) instead of to its "
        "longest example.");
  s.add("on_bad_row", &Options::on_bad_row, "A malformed row: 'error' (stop, naming file:line and column) or 'skip' (count and warn).")
      .choices({"error", "skip"});
  s.add("cache_dir", &Options::cache_dir, "Tokenized-dataset cache directory; \"\" = $HFTRAIN_CACHE or ~/.cache/hftrain.");
  s.add("overwrite_cache", &Options::overwrite_cache, "Tokenize again even when the cache holds this dataset.");
  s.add("cache_wait_seconds", &Options::cache_wait_seconds,
        "Multi-process runs: how long ranks > 0 wait for rank 0 to write the cache.")
      .min(1);
  declare_sft(s);
}

FileDataSource::FileDataSource(const Options& options, RowFormat format, std::shared_ptr<const Tokenizer> tokenizer,
                               const std::string& identity, const DataUse& use)
    : options_(options), format_(format), tokenizer_(std::move(tokenizer)) {
  resolve_files(use);
  choose_task();
  refuse_other_task_options();
  const bool injected = tokenizer_ != nullptr;
  if (!injected) tokenizer_ = load_tokenizer(options_.tokenizer, "data.tokenizer");
  const SpecialTokenIds special = tokenizer_->special_tokens();
  if (task_ == TaskKind::kMaskedLm && !special.mask)
    throw ConfigError("data.task: masked_lm needs a tokenizer with a mask token; '" + options_.tokenizer + "' has none");
  setup_sft(special);
  load_or_build(injected ? identity : tokenizer_identity(options_.tokenizer, *tokenizer_));
  if (!splits_.data_format.empty()) log_info("data: dataset format: " + splits_.data_format);
  if (splits_.skipped_rows > 0)
    log_warning("data: skipped " + std::to_string(splits_.skipped_rows) + " bad rows (on_bad_row: skip)");
  if (train_read_ && splits_.train.empty()) throw ConfigError("data.train_file: '" + options_.train_file + "' yields no training examples");
  set_shape_and_collate(special);
}

// The files this command reads (DataUse; the eval split may be held out of the training rows), and the files
// behind each option: a file, a glob, a save_to_disk / DatasetDict folder or a folder of shards.
void FileDataSource::resolve_files(const DataUse& use) {
  const bool eval_needed = use.eval || (use.test && options_.test_file.empty());
  train_read_ = read_data_file(options_.train_file, use.train || (eval_needed && options_.validation_file.empty()),
                               "data.train_file");
  if (!options_.validation_file.empty() && !read_data_file(options_.validation_file, eval_needed, "data.validation_file"))
    options_.validation_file.clear();
  if (!options_.test_file.empty() && !read_data_file(options_.test_file, use.test, "data.test_file"))
    options_.test_file.clear();
  if (train_read_) train_files_ = resolve_data_files(options_.train_file, "train", "data.train_file");
  if (!options_.validation_file.empty())
    eval_files_ = resolve_data_files(options_.validation_file, "validation", "data.validation_file");
  if (!options_.test_file.empty()) test_files_ = resolve_data_files(options_.test_file, "test", "data.test_file");
}

void FileDataSource::choose_task() {
  if (options_.task == "sequence_classification") task_ = TaskKind::kClassification;
  else if (options_.task == "masked_lm") task_ = TaskKind::kMaskedLm;
  else if (options_.task == "seq2seq") task_ = TaskKind::kSeq2Seq;
  else task_ = TaskKind::kCausalLm;
  if (format_ == RowFormat::kText) {
    options_.text_column = "text";
    if (task_ == TaskKind::kClassification || task_ == TaskKind::kSeq2Seq)
      throw ConfigError("data.task: " + options_.task + " needs " +
                        (task_ == TaskKind::kSeq2Seq ? "a source and a target column" : "a label column") +
                        "; text files have only 'text' (use jsonl, csv or tsv)");
    if (!options_.text_pair_column.empty()) throw ConfigError("data.text_pair_column: text files have only the column 'text'");
  }
}

// Settings of one task given for another would be ignored: refuse them.
void FileDataSource::refuse_other_task_options() const {
  const Options defaults;
  if (task_ == TaskKind::kSeq2Seq) {
    if (options_.max_length != defaults.max_length)
      throw ConfigError("data.max_length: seq2seq truncates with max_source_length and max_target_length");
    if (!options_.text_pair_column.empty() || options_.text_column != defaults.text_column)
      throw ConfigError(std::string("data.") + (options_.text_pair_column.empty() ? "text_column" : "text_pair_column") +
                        ": seq2seq reads source_column and target_column");
  } else {
    for (const auto& [key, differs] : std::vector<std::pair<std::string, bool>>{
             {"source_column", options_.source_column != defaults.source_column},
             {"target_column", options_.target_column != defaults.target_column},
             {"source_prefix", options_.source_prefix != defaults.source_prefix},
             {"max_source_length", options_.max_source_length != defaults.max_source_length},
             {"max_target_length", options_.max_target_length != defaults.max_target_length},
             {"pad_to_max_length", options_.pad_to_max_length != defaults.pad_to_max_length}})
      if (differs) throw ConfigError("data." + key + ": applies to task seq2seq, not " + options_.task);
  }
  if ((task_ == TaskKind::kClassification || task_ == TaskKind::kSeq2Seq) && options_.block_size > 0)
    throw ConfigError("data.block_size: packing applies to causal_lm and masked_lm, not " + options_.task);
}

// The tokenized splits from the cache (rank 0 writes it; the other ranks wait for it), else built and cached.
// The key: the contents of the input files, the tokenizer's identity, every option that can shape the examples.
void FileDataSource::load_or_build(const std::string& tokenizer_id) {
  CacheKey key;
  key.add("hftrain-dataset-2").add(format_name(format_));
  for (const auto* files : {&train_files_, &eval_files_, &test_files_})
    key.add(files->empty() ? std::string("-") : files_identity(*files));
  key.add(tokenizer_id);
  add_options_to_key(key, options_);
  if (chat_) key.add(chat_->text());
  const std::string dir = options_.cache_dir.empty() ? default_cache_dir() : options_.cache_dir;
  cache_file_ = (std::filesystem::path(dir) / "datasets" / (key.hex() + ".bin")).string();

  const DistEnv env = detect_dist_env();
  if (env.world_size > 1 && env.rank != 0) {
    if (!wait_for_file(cache_file_, options_.cache_wait_seconds))
      throw RuntimeFailure("data: rank " + std::to_string(env.rank) + " waited " + std::to_string(options_.cache_wait_seconds) +
                           " s for rank 0 to write the tokenized dataset '" + cache_file_ + "' (cache_dir must be shared by all ranks)");
    if (!load_tokenized(cache_file_, splits_))
      throw RuntimeFailure("data: the tokenized dataset '" + cache_file_ + "' written by rank 0 cannot be read");
    loaded_from_cache_ = true;
  } else if (!options_.overwrite_cache && load_tokenized(cache_file_, splits_)) {
    loaded_from_cache_ = true;
  } else {
    splits_ = build();
    try {
      save_tokenized(cache_file_, splits_);
    } catch (const std::exception& e) {
      log_warning(std::string("data: could not write the dataset cache: ") + e.what());
    }
  }
}

void FileDataSource::set_shape_and_collate(const SpecialTokenIds& special) {
  shape_.vocab_size = tokenizer_->vocab_size();
  shape_.num_labels = static_cast<int64_t>(splits_.label_names.size());
  shape_.label_names = splits_.label_names;
  if (options_.block_size > 0) {
    shape_.max_length = options_.block_size;
  } else {
    for (const auto* v : {&splits_.train, &splits_.eval, &splits_.test})
      for (const auto& e : *v) shape_.max_length = std::max<int64_t>(shape_.max_length, static_cast<int64_t>(e.input_ids.size()));
  }
  collate_.pad_id = pad_override_ ? *pad_override_ : special.pad ? *special.pad : special.eos ? *special.eos : 0;
  collate_.mlm_probability = options_.mlm_probability;
  collate_.mask_id = special.mask ? *special.mask : -1;
  collate_.vocab_size = tokenizer_->vocab_size();
  if (task_ == TaskKind::kSeq2Seq && options_.pad_to_max_length) {
    collate_.pad_to_length = options_.max_source_length;
    collate_.label_pad_to_length = options_.max_target_length;
  }
}

TokenizedSplits FileDataSource::build() {
  TokenizedSplits out;
  const bool skip = options_.on_bad_row == "skip";
  // A bad row: an error, offering skip only when some row of the file can be used (`usable`), or skipped and
  // counted. When no row of the file can be used, skipping cannot help: the error says what the file holds.
  const BadPlainRow bad = [&](const std::string& file, const std::vector<Row>& rows, const RowNeeds& needs, const Row& row,
                              const RowIssue& issue, bool usable) {
    if (!usable) throw ConfigError(unusable_file_message(file, rows, needs, row, issue));
    if (!skip)
      throw ConfigError(row_location(file, row) + ": " + (issue.column.empty() ? "" : "column '" + issue.column + "': ") +
                        issue.reason + " (on_bad_row: skip skips such rows)");
    ++out.skipped_rows;
  };
  const RowSplits rows = read_row_splits(out);
  const std::string eval_file = options_.validation_file.empty() ? options_.train_file : options_.validation_file;
  const SftFormat format = choose_format(rows.train, rows.eval);
  if (task_ == TaskKind::kCausalLm) out.data_format = describe_sft_format(format, options_.dataset_text_field);
  const std::map<std::string, int64_t> label_id = label_set(out, rows.train);

  PlainConversion plain{bad, label_id, out.label_names, {}};
  auto convert = [&](const std::string& file, const std::vector<Row>& split_rows, bool labels_optional) {
    plain.kept_rows.clear();
    std::vector<Example> examples =
        format != SftFormat::kPlain  // TRL's formats (sft_source.cpp); the test split stays one row per example
            ? convert_sft(file, split_rows, format,
                          [&](const Row& row, const RowIssue& issue) { bad(file, split_rows, RowNeeds{}, row, issue, true); })
            : convert_plain(file, split_rows, labels_optional, plain);
    return labels_optional ? examples : pack_split(std::move(examples));
  };
  out.train = convert(options_.train_file, rows.train, false);
  if (options_.block_size <= 0 && !options_.packing) out.train_int_columns = integer_columns(plain.kept_rows);
  if (out.has_eval) out.eval = convert(eval_file, rows.eval, false);
  if (out.has_test) out.test = convert(options_.test_file, rows.test, true);
  return out;
}

std::shared_ptr<const Dataset> FileDataSource::split(const std::string& name) const {
  const std::vector<Example>* v = nullptr;
  if (name == "train") v = &splits_.train;
  else if (name == "eval") v = splits_.has_eval ? &splits_.eval : nullptr;
  else if (name == "test") v = splits_.has_test ? &splits_.test : splits_.has_eval ? &splits_.eval : nullptr;
  else throw RuntimeFailure("unknown data split '" + name + "' (valid: train, eval, test)");
  if (!v) return nullptr;
  return std::make_shared<ExamplesDataset>(std::make_shared<const std::vector<Example>>(*v), collate_,
                                           name == "train" ? splits_.train_int_columns : std::map<std::string, std::vector<int64_t>>{});
}

std::vector<std::string> FileDataSource::default_metrics() const {
  if (task_ == TaskKind::kClassification) return {"accuracy"};
  if (task_ == TaskKind::kSeq2Seq) return {};  // the loss; text metrics are chosen (metrics: [bleu] or [rouge])
  return {"perplexity"};
}

}  // namespace hftrain
