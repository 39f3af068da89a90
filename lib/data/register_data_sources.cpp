// Registers the built-in data components (called from register_builtins()).
#include "data/builtin_sources.h"
#include "data/file_sources.h"
#include "data/token_file_source.h"
#include "registry/registry.h"

namespace hftrain {

void register_data_sources(Registry<DataSource, const DataUse&>& data) {
  data.add<DigitReversalSource>("digit_reversal", "Synthetic: reverse a digit string after '='; exact-match scored.");
  data.add<DigitReversalSeq2SeqSource>("digit_reversal_seq2seq",
                                       "Synthetic seq2seq: the digits as source, their reversal as target (T5 ids: pad 0, "
                                       "eos 1); exact-match scored.");
  data.add<GaussianBlobsSource>("gaussian_blobs", "Synthetic: classify points by the Gaussian blob they came from.");
  data.add<TextFileSource>("text_file", "A text file as bytes, cut into blocks for language modelling.");
  data.add<JsonlSource>("jsonl", "JSON Lines files (one object per line) or JSON array files, tokenized with a column mapping; cached.");
  data.add<CsvSource>("csv", "CSV files with a header row, tokenized with a column mapping; cached.");
  data.add<TsvSource>("tsv", "Tab-separated files with a header row, tokenized with a column mapping; cached.");
  data.add<TextLinesSource>("text", "Plain text files, one row per line (column 'text'), tokenized; cached.");
  data.add<ParquetSource>("parquet",
                           "Parquet files (HF datasets' Hub shards), globs or shard folders, tokenized with a column mapping; cached.");
  data.add<ArrowSource>("arrow",
                        "Arrow IPC stream files, datasets save_to_disk / DatasetDict folders, tokenized with a column mapping; cached.");
  data.add<TokenFileSource>("token_files", "Pre-tokenized binary files (nanoGPT train.bin / val.bin), memory-mapped.");
}

}  // namespace hftrain
