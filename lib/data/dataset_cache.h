// The tokenized-dataset cache: TokenizedSplits stored in one file named by a key (xxh64 over the input
// files' contents, the tokenizer's identity and every setting that changes the examples), written
// atomically, with an xxh64 of the payload so a damaged file reads as a miss. Free of LibTorch.
#pragma once

#include <cstdint>
#include <string>

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

void save_tokenized(const std::string& path, const TokenizedSplits& splits);
// False when the file is absent, truncated or fails its checksum.
bool load_tokenized(const std::string& path, TokenizedSplits& splits);

// Polls until `path` exists (another rank is building it); false after `timeout_seconds`.
bool wait_for_file(const std::string& path, int64_t timeout_seconds);

}  // namespace hftrain
