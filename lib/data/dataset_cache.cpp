// Tokenized-dataset cache files (see dataset_cache.h). Layout: "HFTDSC03", then little-endian int64
// records (label names, skipped rows, three splits of examples, integer training columns, the data format), then the xxh64 of everything before it.
#include "data/dataset_cache.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace {

constexpr char kMagic[8] = {'H', 'F', 'T', 'D', 'S', 'C', '0', '3'};

class Writer {
 public:
  void i64(int64_t v) { bytes_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void vec(const std::vector<int64_t>& v) {
    i64(static_cast<int64_t>(v.size()));
    bytes_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
  }
  void str(const std::string& s) {
    i64(static_cast<int64_t>(s.size()));
    bytes_ += s;
  }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

class Reader {
 public:
  Reader(const char* data, std::size_t size) : p_(data), end_(data + size) {}
  bool i64(int64_t& v) {
    if (static_cast<std::size_t>(end_ - p_) < sizeof v) return false;
    std::memcpy(&v, p_, sizeof v);
    p_ += sizeof v;
    return true;
  }
  bool vec(std::vector<int64_t>& v) {
    int64_t n = 0;
    if (!i64(n) || n < 0 || static_cast<std::size_t>(end_ - p_) / sizeof(int64_t) < static_cast<std::size_t>(n)) return false;
    v.resize(static_cast<std::size_t>(n));
    std::memcpy(v.data(), p_, static_cast<std::size_t>(n) * sizeof(int64_t));
    p_ += n * static_cast<int64_t>(sizeof(int64_t));
    return true;
  }
  bool str(std::string& s) {
    int64_t n = 0;
    if (!i64(n) || n < 0 || end_ - p_ < n) return false;
    s.assign(p_, static_cast<std::size_t>(n));
    p_ += n;
    return true;
  }
  bool done() const { return p_ == end_; }

 private:
  const char* p_;
  const char* end_;
};

void write_examples(Writer& w, const std::vector<Example>& examples) {
  w.i64(static_cast<int64_t>(examples.size()));
  for (const auto& e : examples) {
    w.vec(e.input_ids);
    w.vec(e.labels);
    w.vec(e.token_type_ids);
    w.vec(e.special_tokens_mask);
    w.i64(e.label);
    w.i64(e.prompt_length);
    w.vec(e.segment_lengths);
  }
}

bool read_examples(Reader& r, std::vector<Example>& examples) {
  int64_t n = 0;
  if (!r.i64(n) || n < 0) return false;
  examples.clear();
  for (int64_t i = 0; i < n; ++i) {
    Example e;
    if (!r.vec(e.input_ids) || !r.vec(e.labels) || !r.vec(e.token_type_ids) || !r.vec(e.special_tokens_mask) ||
        !r.i64(e.label) || !r.i64(e.prompt_length) || !r.vec(e.segment_lengths))
      return false;
    examples.push_back(std::move(e));
  }
  return true;
}

}  // namespace

std::string default_cache_dir() {
  if (const char* c = std::getenv("HFTRAIN_CACHE"); c && *c) return c;
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/hftrain";
  return ".hftrain_cache";
}

uint64_t hash_file_contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot read the file");
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) XXH64_update(state, buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  const uint64_t h = XXH64_digest(state);
  XXH64_freeState(state);
  return h;
}

CacheKey& CacheKey::add(const std::string& part) {
  material_ += std::to_string(part.size());
  material_ += ':';
  material_ += part;
  return *this;
}

std::string CacheKey::hex() const {
  const uint64_t h = XXH64(material_.data(), material_.size(), 0x68667472ull);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

const std::vector<std::string>& options_outside_cache_key() {
  static const std::vector<std::string> names = {"train_file", "validation_file", "test_file", "tokenizer",
                                                 "mlm_probability", "pad_to_max_length", "cache_dir",
                                                 "overwrite_cache", "cache_wait_seconds"};
  return names;
}

void add_options_to_key(CacheKey& key, const FileDataSource::Options& options) {
  const auto& outside = options_outside_cache_key();
  for (const auto& option : schema_of<FileDataSource::Options>().dump(options)) {
    const std::string name = option.first.Scalar();
    if (std::find(outside.begin(), outside.end(), name) != outside.end()) continue;
    YAML::Emitter value;
    value << YAML::Flow << option.second;
    key.add(name).add(std::string(value.c_str()));
  }
}

void save_tokenized(const std::string& path, const TokenizedSplits& s) {
  Writer w;
  w.bytes().append(kMagic, sizeof kMagic);
  w.i64(static_cast<int64_t>(s.label_names.size()));
  for (const auto& n : s.label_names) w.str(n);
  w.i64(s.skipped_rows);
  w.i64(s.has_eval ? 1 : 0);
  w.i64(s.has_test ? 1 : 0);
  write_examples(w, s.train);
  write_examples(w, s.eval);
  write_examples(w, s.test);
  w.i64(static_cast<int64_t>(s.train_int_columns.size()));
  for (const auto& [name, values] : s.train_int_columns) {
    w.str(name);
    w.vec(values);
  }
  w.str(s.data_format);
  const uint64_t h = XXH64(w.bytes().data(), w.bytes().size(), 0);
  w.i64(static_cast<int64_t>(h));
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  write_file_atomic(path, w.bytes());
}

bool load_tokenized(const std::string& path, TokenizedSplits& s) {
  if (!std::filesystem::exists(path)) return false;
  std::vector<char> bytes;
  try {
    bytes = read_binary_file(path);
  } catch (const Error&) {
    return false;
  }
  if (bytes.size() < sizeof kMagic + sizeof(int64_t) || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return false;
  const std::size_t body = bytes.size() - sizeof(int64_t);
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + body, sizeof stored);
  if (XXH64(bytes.data(), body, 0) != stored) return false;
  Reader r(bytes.data() + sizeof kMagic, body - sizeof kMagic);
  TokenizedSplits out;
  int64_t n = 0, has_eval = 0, has_test = 0;
  if (!r.i64(n) || n < 0) return false;
  for (int64_t i = 0; i < n; ++i) {
    std::string name;
    if (!r.str(name)) return false;
    out.label_names.push_back(name);
  }
  if (!r.i64(out.skipped_rows) || !r.i64(has_eval) || !r.i64(has_test)) return false;
  out.has_eval = has_eval != 0;
  out.has_test = has_test != 0;
  if (!read_examples(r, out.train) || !read_examples(r, out.eval) || !read_examples(r, out.test)) return false;
  int64_t columns = 0;
  if (!r.i64(columns) || columns < 0) return false;
  for (int64_t c = 0; c < columns; ++c) {
    std::string name;
    std::vector<int64_t> values;
    if (!r.str(name) || !r.vec(values) || values.size() != out.train.size()) return false;
    out.train_int_columns[name] = std::move(values);
  }
  if (!r.str(out.data_format) || !r.done()) return false;
  s = std::move(out);
  return true;
}

bool wait_for_file(const std::string& path, int64_t timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

}  // namespace hftrain
