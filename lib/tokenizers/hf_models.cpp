// The shared part of tokenizer.json models: vocabulary, word cache and the choice of model type (see hf_models.h).
#include "tokenizers/hf_models.h"

#include <mutex>

namespace hftrain::hf {

void Model::tokenize(const std::string& word, std::vector<int64_t>& ids) const {
  const bool cacheable = word.size() < kMaxCachedBytes;
  if (cacheable) {
    std::shared_lock<std::shared_mutex> lock(cache_mutex);
    auto it = cache.find(word);
    if (it != cache.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> out = tokenize_word(word);
  ids.insert(ids.end(), out.begin(), out.end());
  if (!cacheable) return;
  std::unique_lock<std::shared_mutex> lock(cache_mutex);
  if (cache.size() >= kCacheCapacity) cache.clear();
  cache.emplace(word, std::move(out));
}

std::optional<int64_t> Model::find(const std::string& token) const {
  auto it = vocab.find(token);
  if (it == vocab.end()) return std::nullopt;
  return it->second;
}

void Model::set_vocab(const Json& j) {
  if (!j.is_object()) throw FormatError("model.vocab must be an object {token: id}");
  for (auto it = j.begin(); it != j.end(); ++it) {
    int64_t id = it.value().get<int64_t>();
    if (id < 0) throw FormatError("model.vocab: token \"" + it.key() + "\" has negative id");
    vocab[it.key()] = id;
    if (static_cast<std::size_t>(id) >= tokens.size()) tokens.resize(static_cast<std::size_t>(id) + 1);
    tokens[static_cast<std::size_t>(id)] = it.key();
  }
}

std::unique_ptr<Model> parse_model(const Json& j) {
  if (!j.is_object()) throw FormatError("\"model\" is missing");
  // Files written by older tokenizers versions may omit model.type; the keys then tell the type.
  std::string type = j.contains("type") ? j.at("type").get<std::string>()
                     : j.contains("merges")              ? "BPE"
                     : j.contains("max_input_chars_per_word") ? "WordPiece"
                                                          : "";
  if (type == "BPE") return BpeModel::parse(j);
  if (type == "WordPiece") return WordPieceModel::parse(j);
  if (type == "WordLevel") return WordLevelModel::parse(j);
  if (type == "Unigram") return UnigramModel::parse(j);
  throw UnsupportedError("unsupported model type \"" + type + "\" (supported: BPE, WordPiece, WordLevel, Unigram)");
}

}  // namespace hftrain::hf
