// `token_files`: memory-mapped pre-tokenized binary files (see token_file_source.h).
#include "data/token_file_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokenizers/load_tokenizer.h"
#include "util/error.h"
#include "util/splitmix64.h"

namespace hftrain {

namespace {

// A read-only memory mapping of a token file.
class MappedTokens {
 public:
  MappedTokens(const std::string& path, int width, const std::string& key) : path_(path), width_(width) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw ConfigError(key + ": cannot read token file '" + path + "'");
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size == 0) {
      ::close(fd);
      throw ConfigError(key + ": token file '" + path + "' is empty");
    }
    bytes_ = static_cast<std::size_t>(st.st_size);
    if (bytes_ % static_cast<std::size_t>(width) != 0) {
      ::close(fd);
      throw ConfigError(key + ": token file '" + path + "' has " + std::to_string(bytes_) + " bytes, not a multiple of " +
                        std::to_string(width) + " (dtype uint" + std::to_string(8 * width) + ")");
    }
    addr_ = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (addr_ == MAP_FAILED) throw RuntimeFailure("cannot memory-map token file '" + path + "'");
  }
  ~MappedTokens() { ::munmap(addr_, bytes_); }
  MappedTokens(const MappedTokens&) = delete;
  MappedTokens& operator=(const MappedTokens&) = delete;
  int64_t count() const { return static_cast<int64_t>(bytes_ / static_cast<std::size_t>(width_)); }
  int64_t at(int64_t i) const {  // little-endian, whatever the host order
    const auto* p = static_cast<const unsigned char*>(addr_) + i * width_;
    uint64_t v = 0;
    for (int k = width_ - 1; k >= 0; --k) v = (v << 8) | p[k];
    return static_cast<int64_t>(v);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int width_;
  void* addr_ = nullptr;
  std::size_t bytes_ = 0;
};

class TokenWindowDataset : public Dataset {
 public:
  TokenWindowDataset(std::shared_ptr<const MappedTokens> tokens, int64_t block, int64_t vocab, bool random,
                     int64_t num_random, uint64_t seed)
      : tokens_(std::move(tokens)), block_(block), vocab_(vocab), random_(random), seed_(seed) {
    size_ = random_ ? (num_random > 0 ? num_random : tokens_->count() / block_) : tokens_->count() / block_;
  }
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override {
    if (index < 0 || index >= size_) throw RuntimeFailure("dataset index " + std::to_string(index) + " out of range");
    int64_t start = index * block_;
    if (random_) {
      const auto positions = static_cast<uint64_t>(tokens_->count() - block_ + 1);
      start = static_cast<int64_t>(splitmix64_finalize(seed_ + static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull) % positions);
    }
    Example ex;
    ex.input_ids.resize(static_cast<std::size_t>(block_));
    for (int64_t t = 0; t < block_; ++t) {
      const int64_t id = tokens_->at(start + t);
      if (id >= vocab_)
        throw RuntimeFailure("token file '" + tokens_->path() + "': token " + std::to_string(start + t) + " is " +
                             std::to_string(id) + ", not below vocab_size " + std::to_string(vocab_));
      ex.input_ids[static_cast<std::size_t>(t)] = id;
    }
    ex.labels = ex.input_ids;
    ex.prompt_length = block_ / 2;
    return ex;
  }

 private:
  std::shared_ptr<const MappedTokens> tokens_;
  int64_t block_, vocab_, size_ = 0;
  bool random_;
  uint64_t seed_;
};

}  // namespace

void TokenFileSource::Options::declare(Schema<Options>& s) {
  s.add("train_file", &Options::train_file, "Training tokens (e.g. nanoGPT train.bin): raw little-endian ids, no header.")
      .required().path();
  s.add("validation_file", &Options::validation_file, "Evaluation tokens (e.g. val.bin); \"\" = none.").path();
  s.add("test_file", &Options::test_file, "Prediction tokens; \"\" = the evaluation file.").path();
  s.add("dtype", &Options::dtype, "Width of each token id.").choices({"uint16", "uint32"});
  s.add("vocab_size", &Options::vocab_size, "Vocabulary size (ids must be below it).").required().min(1);
  s.add("block_size", &Options::block_size, "Tokens per example.").min(2);
  s.add("sampling", &Options::sampling,
        "Training examples: sequential (consecutive blocks, remainder dropped) or random (windows at seeded random offsets). Evaluation is always sequential.")
      .choices({"sequential", "random"});
  s.add("num_random_blocks", &Options::num_random_blocks, "sampling random: examples per epoch (0 = tokens / block_size).").min(0);
  s.add("seed", &Options::seed, "sampling random: seed of the window offsets.").min(0);
  s.add("tokenizer", &Options::tokenizer, "Tokenizer to decode predictions (bytes or a path); \"\" = none.").path();
}

TokenFileSource::TokenFileSource(const Options& options, const DataUse& use) : options_(options) {
  const int width = options_.dtype == "uint32" ? 4 : 2;
  if (!options_.tokenizer.empty()) tokenizer_ = load_tokenizer(options_.tokenizer, "data.tokenizer");
  auto open = [&](const std::string& path, const std::string& key, bool random, uint64_t salt) -> std::shared_ptr<const Dataset> {
    auto tokens = std::make_shared<const MappedTokens>(path, width, key);
    if (tokens->count() < options_.block_size)
      throw ConfigError(key + ": token file '" + path + "' has " + std::to_string(tokens->count()) +
                        " tokens, fewer than block_size " + std::to_string(options_.block_size));
    return std::make_shared<TokenWindowDataset>(tokens, options_.block_size, options_.vocab_size, random,
                                                options_.num_random_blocks, splitmix64_finalize(static_cast<uint64_t>(options_.seed) ^ salt));
  };
  const bool eval_needed = use.eval || (use.test && options_.test_file.empty());
  if (read_data_file(options_.train_file, use.train, "data.train_file"))
    train_ = open(options_.train_file, "data.train_file", options_.sampling == "random", 1);
  if (!options_.validation_file.empty() && read_data_file(options_.validation_file, eval_needed, "data.validation_file"))
    eval_ = open(options_.validation_file, "data.validation_file", false, 2);
  if (options_.test_file.empty()) test_ = eval_;
  else if (read_data_file(options_.test_file, use.test, "data.test_file")) test_ = open(options_.test_file, "data.test_file", false, 3);
}

DataShape TokenFileSource::shape() const {
  DataShape s;
  s.vocab_size = options_.vocab_size;
  s.max_length = options_.block_size;
  return s;
}

std::shared_ptr<const Dataset> TokenFileSource::split(const std::string& name) const {
  if (name == "train") return train_;
  if (name == "eval") return eval_;
  if (name == "test") return test_;
  throw RuntimeFailure("unknown data split '" + name + "' (valid: train, eval, test)");
}

}  // namespace hftrain
