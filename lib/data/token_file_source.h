// `token_files`: nanoGPT-style pre-tokenized binary files (train.bin / val.bin), memory-mapped.
#pragma once

#include <memory>
#include <string>

#include "config/schema.h"
#include "data/dataset.h"

namespace hftrain {

// `token_files`: raw little-endian uint16/uint32 token ids, no header (nanoGPT train.bin / val.bin),
// memory-mapped. `sequential`: example k = tokens [k*block_size, (k+1)*block_size), the remainder dropped;
// `random`: example k = the window of block_size tokens starting at a position drawn from (seed, split, k).
class TokenFileSource : public DataSource {
 public:
  struct Options {
    std::string train_file;
    std::string validation_file;
    std::string test_file;
    std::string dtype = "uint16";
    int64_t vocab_size = 0;
    int64_t block_size = 256;
    std::string sampling = "sequential";
    int64_t num_random_blocks = 0;
    int64_t seed = 1234;
    std::string tokenizer;
    static void declare(Schema<Options>& s);
  };
  // `use`: the splits the command reads (DataUse); the files of the others are read only when they exist.
  explicit TokenFileSource(const Options& options, const DataUse& use = {});
  std::shared_ptr<const Dataset> split(const std::string& name) const override;
  TaskKind task() const override { return TaskKind::kCausalLm; }
  DataShape shape() const override;
  std::vector<std::string> default_metrics() const override { return {"perplexity"}; }
  const Tokenizer* tokenizer() const override { return tokenizer_.get(); }

 private:
  Options options_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const Dataset> train_, eval_, test_;
};

}  // namespace hftrain
