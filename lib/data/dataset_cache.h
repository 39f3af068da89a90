// The tokenized-dataset cache: TokenizedSplits stored in one file named by a key (xxh64 over the input
// files' contents, the tokenizer's identity and every setting that changes the examples), written
// atomically, with an xxh64 of the payload so a damaged file reads as a miss. Free of LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/file_sources.h"

namespace hftrain {

// $HFTRAIN_CACHE, else ~/.cache/hftrain (else ./.hftrain_cache without HOME).
std::string default_cache_dir();

// xxh64 of a file's contents (streamed). Throws ConfigError naming the file when it cannot be read.
uint64_t hash_file_contents(const std::string& path);

// Accumulates the key: add() each part (length-prefixed, so parts cannot run into each other).
class CacheKey {
 public:
  CacheKey& add(const std::string& part);
  CacheKey& add(int64_t v) { return add(std::to_string(v)); }
  std::string hex() const;

 private:
  std::string material_;
};

// The options of a file data source the key leaves out, none of which changes the tokenized examples: the
// input files and the tokenizer (the key holds their contents and identity instead), the collation-only
// mlm_probability and pad_to_max_length, and the cache's own settings.
const std::vector<std::string>& options_outside_cache_key();

// Adds every other option of `options` to `key` as the options' schema dumps it (name and value), so an
// option declared later is part of the key without being listed anywhere.
void add_options_to_key(CacheKey& key, const FileDataSource::Options& options);

void save_tokenized(const std::string& path, const TokenizedSplits& splits);
// False when the file is absent, truncated or fails its checksum.
bool load_tokenized(const std::string& path, TokenizedSplits& splits);

// Polls until `path` exists (another rank is building it); false after `timeout_seconds`.
bool wait_for_file(const std::string& path, int64_t timeout_seconds);

}  // namespace hftrain
