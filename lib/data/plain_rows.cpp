// FileDataSource's plain rows (see file_sources.h): the split files read (a validation split held out of the
// training rows when asked), the label set, and each row tokenized as HF's example scripts do (run_clm /
// run_mlm line by line or grouped into block_size rows, run_glue, run_translation), with bad rows left to
// build's policy. TRL's formats are sft_source.cpp's.
#include <algorithm>
#include <set>

#include "data/data_files.h"
#include "data/file_sources.h"
#include "util/error.h"
#include "util/splitmix64.h"

namespace hftrain {
namespace {

bool parse_integer(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  std::size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return false;
  for (std::size_t k = i; k < s.size(); ++k)
    if (s[k] < '0' || s[k] > '9') return false;
  try {
    out = std::stoll(s);
  } catch (...) {
    return false;
  }
  return true;
}

// HF run_glue: the sorted unique labels of the training split (numeric order when all are integers).
std::vector<std::string> sorted_labels(const std::set<std::string>& values) {
  std::vector<std::string> labels(values.begin(), values.end());
  bool all_int = !labels.empty();
  for (const auto& l : labels) {
    int64_t v = 0;
    all_int = all_int && parse_integer(l, v);
  }
  if (all_int) std::stable_sort(labels.begin(), labels.end(), [](const std::string& a, const std::string& b) {
    return std::stoll(a) < std::stoll(b);
  });
  return labels;
}

// The rows held out of `train_rows` for evaluation: a seeded Fisher-Yates permutation, whose first
// ceil(percentage% * n) positions are held out; the training rows keep their order.
std::vector<Row> hold_out(std::vector<Row>& train_rows, int64_t percentage, int64_t seed) {
  const auto n = static_cast<int64_t>(train_rows.size());
  std::vector<int64_t> perm(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[static_cast<std::size_t>(i)] = i;
  uint64_t state = static_cast<uint64_t>(seed) ^ 0x5EEDull;
  for (int64_t i = n - 1; i > 0; --i) {
    state += 0x9E3779B97F4A7C15ull;
    const auto j = static_cast<int64_t>(splitmix64_finalize(state) % static_cast<uint64_t>(i + 1));
    std::swap(perm[static_cast<std::size_t>(i)], perm[static_cast<std::size_t>(j)]);
  }
  const int64_t n_eval = (n * percentage + 99) / 100;
  if (n_eval >= n)
    throw ConfigError("data.validation_split_percentage: " + std::to_string(percentage) + "% of " + std::to_string(n) +
                      " rows leaves no training rows");
  std::vector<bool> held(static_cast<std::size_t>(n), false);
  for (int64_t k = 0; k < n_eval; ++k) held[static_cast<std::size_t>(perm[static_cast<std::size_t>(k)])] = true;
  std::vector<Row> kept, eval_rows;
  for (int64_t i = 0; i < n; ++i)
    (held[static_cast<std::size_t>(i)] ? eval_rows : kept).push_back(std::move(train_rows[static_cast<std::size_t>(i)]));
  train_rows = std::move(kept);
  return eval_rows;
}

}  // namespace

FileDataSource::RowSplits FileDataSource::read_row_splits(TokenizedSplits& out) const {
  RowSplits rows;
  if (train_read_) rows.train = read_split_rows(train_files_, format_);
  if (!options_.validation_file.empty()) {
    rows.eval = read_split_rows(eval_files_, format_);
    out.has_eval = true;
  } else if (options_.validation_split_percentage > 0) {
    rows.eval = hold_out(rows.train, options_.validation_split_percentage, options_.split_seed);
    out.has_eval = true;
  }
  if (!options_.test_file.empty()) {
    rows.test = read_split_rows(test_files_, format_);
    out.has_test = true;
  }
  return rows;
}

// Label set: given, or the sorted unique labels of the (well-formed) training rows.
std::map<std::string, int64_t> FileDataSource::label_set(TokenizedSplits& out, const std::vector<Row>& train_rows) const {
  std::map<std::string, int64_t> label_id;
  if (task_ != TaskKind::kClassification) return label_id;
  out.label_names = options_.label_names;
  if (out.label_names.empty()) {
    std::set<std::string> seen;
    for (const auto& r : train_rows) {
      auto it = r.fields.find(options_.label_column);
      if (r.problem.empty() && it != r.fields.end() && it->second) seen.insert(*it->second);
    }
    out.label_names = sorted_labels(seen);
  }
  for (std::size_t i = 0; i < out.label_names.size(); ++i) label_id[out.label_names[i]] = static_cast<int64_t>(i);
  if (out.label_names.empty() && !train_read_)
    throw ConfigError("data.label_names: the label set comes from the training rows, and data.train_file '" +
                      options_.train_file + "' does not exist; give label_names");
  if (out.label_names.empty())
    throw ConfigError(options_.train_file + ": no row has the label column '" + options_.label_column + "'");
  return label_id;
}

std::vector<Example> FileDataSource::convert_plain(const std::string& file, const std::vector<Row>& rows,
                                                   bool labels_optional, PlainConversion& c) {
  // A seq2seq test file may leave out the targets (nothing to score), but not some of them.
  bool targets_optional = labels_optional && task_ == TaskKind::kSeq2Seq;
  for (const Row& row : rows) {
    auto t = row.fields.find(options_.target_column);
    if (targets_optional && t != row.fields.end() && t->second) targets_optional = false;
  }
  RowNeeds needs;
  if (task_ == TaskKind::kSeq2Seq) {
    needs.text_columns.emplace_back(options_.source_column, "data.source_column");
    if (!targets_optional) needs.text_columns.emplace_back(options_.target_column, "data.target_column");
  } else {
    needs.text_columns.emplace_back(options_.text_column, "data.text_column");
    if (!options_.text_pair_column.empty()) needs.text_columns.emplace_back(options_.text_pair_column, "data.text_pair_column");
  }
  if (task_ == TaskKind::kClassification) {
    needs.label_column = options_.label_column;
    needs.label_required = !labels_optional;
    needs.label_ids = &c.label_id;
    needs.label_names = &c.label_names;
  }
  const bool pack = options_.block_size > 0;
  std::vector<Example> examples;
  Encoding packed;
  std::optional<bool> any_usable;  // some row of the file can be used (decided at its first bad row)
  for (const Row& row : rows) {
    if (auto issue = row_issue(row, needs)) {
      if (!any_usable) any_usable = std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return !row_issue(r, needs); });
      c.bad(file, rows, needs, row, *issue, *any_usable);
      continue;
    }
    std::optional<Example> ex = task_ == TaskKind::kSeq2Seq ? seq2seq_example(row, targets_optional)
                                                            : text_example(row, c, pack ? &packed : nullptr);
    if (!ex) continue;
    examples.push_back(std::move(*ex));
    c.kept_rows.push_back(&row);
  }
  if (pack) group_texts(packed, examples);
  return examples;
}

// HF run_translation's preprocess_function, one row at a time.
Example FileDataSource::seq2seq_example(const Row& row, bool targets_optional) {
  Example ex;
  ex.input_ids = tokenizer_->encode_for_model(options_.source_prefix + *row.fields.at(options_.source_column), nullptr,
                                              options_.max_source_length).input_ids;
  if (!targets_optional)
    ex.labels = tokenizer_->encode_for_model(*row.fields.at(options_.target_column), nullptr, options_.max_target_length).input_ids;
  ++tokenized_rows_;
  ex.prompt_length = static_cast<int64_t>(ex.input_ids.size());
  return ex;
}

// One text (and pair) row: an example, or (`packed` given) its tokens appended to the stream block_size cuts.
std::optional<Example> FileDataSource::text_example(const Row& row, const PlainConversion& c, Encoding* packed) {
  const bool classify = task_ == TaskKind::kClassification;
  const std::string& text = *row.fields.at(options_.text_column);
  std::optional<std::string> pair;
  if (!options_.text_pair_column.empty()) pair = *row.fields.at(options_.text_pair_column);
  int64_t label = -100;
  if (classify) {  // checked: absent only where labels are optional, else in the set
    auto it = row.fields.find(options_.label_column);
    if (it != row.fields.end() && it->second) label = c.label_id.at(*it->second);
  }
  const bool whole = packed || (options_.packing && options_.packing_strategy == "wrapped");  // cut later
  Encoding enc = tokenizer_->encode_for_model(text, pair ? &*pair : nullptr, whole ? 0 : options_.max_length);
  ++tokenized_rows_;
  if (packed) {
    packed->input_ids.insert(packed->input_ids.end(), enc.input_ids.begin(), enc.input_ids.end());
    packed->token_type_ids.insert(packed->token_type_ids.end(), enc.token_type_ids.begin(), enc.token_type_ids.end());
    packed->special_tokens_mask.insert(packed->special_tokens_mask.end(), enc.special_tokens_mask.begin(),
                                       enc.special_tokens_mask.end());
    return std::nullopt;
  }
  if (enc.input_ids.empty() && !classify) return std::nullopt;  // as run_mlm line_by_line: empty lines give no example
  Example ex;
  ex.input_ids = enc.input_ids;
  ex.token_type_ids = enc.token_type_ids;
  if (task_ == TaskKind::kMaskedLm) ex.special_tokens_mask = enc.special_tokens_mask;
  if (task_ == TaskKind::kCausalLm) {
    ex.labels = ex.input_ids;
    ex.prompt_length = static_cast<int64_t>(ex.input_ids.size()) / 2;
  }
  ex.label = label;
  return ex;
}

// HF group_texts: total_length = (total_length // block_size) * block_size, cut into rows of block_size.
void FileDataSource::group_texts(const Encoding& packed, std::vector<Example>& examples) const {
  const int64_t block = options_.block_size;
  const auto total = static_cast<int64_t>(packed.input_ids.size()) / block * block;
  auto slice = [&](const std::vector<int64_t>& v, int64_t at) {
    if (static_cast<int64_t>(v.size()) < at + block) return std::vector<int64_t>{};
    return std::vector<int64_t>(v.begin() + at, v.begin() + at + block);
  };
  for (int64_t at = 0; at < total; at += block) {
    Example ex;
    ex.input_ids = slice(packed.input_ids, at);
    ex.token_type_ids = slice(packed.token_type_ids, at);
    if (task_ == TaskKind::kMaskedLm) ex.special_tokens_mask = slice(packed.special_tokens_mask, at);
    if (task_ == TaskKind::kCausalLm) {
      ex.labels = ex.input_ids;
      ex.prompt_length = block / 2;
    }
    examples.push_back(std::move(ex));
  }
}

// The columns other than the text / source / target ones whose every kept row holds an integer (a length
// column for group_by_length, as HF's length_column_name).
std::map<std::string, std::vector<int64_t>> FileDataSource::integer_columns(const std::vector<const Row*>& rows) const {
  std::map<std::string, std::vector<int64_t>> out;
  if (rows.empty()) return out;
  for (const auto& [name, first] : rows[0]->fields) {
    if (name == options_.text_column || name == options_.text_pair_column || name == options_.source_column ||
        name == options_.target_column)
      continue;
    std::vector<int64_t> values;
    for (const Row* r : rows) {
      auto it = r->fields.find(name);
      int64_t v = 0;
      if (it == r->fields.end() || !it->second || !parse_integer(*it->second, v)) break;
      values.push_back(v);
    }
    if (values.size() == rows.size()) out[name] = std::move(values);
  }
  return out;
}

}  // namespace hftrain
