// sentencepiece models through libsentencepiece (see sentencepiece_tokenizer.h).
#include "tokenizers/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "util/error.h"

namespace hftrain {

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

std::shared_ptr<const SentencePieceTokenizer> SentencePieceTokenizer::from_file(const std::string& path,
                                                                                const std::string& where) {
  namespace fs = std::filesystem;
  if (!fs::is_regular_file(path)) throw ConfigError(where + ": " + path + ": no such sentencepiece model file");
  auto impl = std::make_shared<Impl>();
  auto status = impl->sp.Load(path);
  if (!status.ok()) throw ConfigError(where + ": " + path + ": not a sentencepiece model: " + status.ToString());
  bool add_bos = impl->sp.bos_id() >= 0, add_eos = false;
  fs::path config = fs::path(path).parent_path() / "tokenizer_config.json";
  if (fs::exists(config)) {
    nlohmann::json cj;
    try {
      std::ifstream in(config);
      cj = nlohmann::json::parse(in);
    } catch (const nlohmann::json::parse_error& e) {
      throw ConfigError(where + ": " + config.string() + ": malformed JSON: " + e.what());
    }
    if (cj.is_object()) {
      if (cj.contains("add_bos_token") && cj.at("add_bos_token").is_boolean()) add_bos = cj.at("add_bos_token").get<bool>();
      if (cj.contains("add_eos_token") && cj.at("add_eos_token").is_boolean()) add_eos = cj.at("add_eos_token").get<bool>();
    }
  }
  if (add_bos && impl->sp.bos_id() < 0) add_bos = false;
  if (add_eos && impl->sp.eos_id() < 0) add_eos = false;
  return std::make_shared<SentencePieceTokenizer>(impl, add_bos, add_eos);
}

int64_t SentencePieceTokenizer::vocab_size() const { return impl_->sp.GetPieceSize(); }

std::vector<int64_t> SentencePieceTokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  auto status = impl_->sp.Encode(text, &ids);
  if (!status.ok()) throw RuntimeFailure("sentencepiece encode failed: " + status.ToString());
  return {ids.begin(), ids.end()};
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> v;
  for (auto id : ids)
    if (id >= 0 && id < vocab_size()) v.push_back(static_cast<int>(id));
  std::string out;
  auto status = impl_->sp.Decode(v, &out);
  if (!status.ok()) throw RuntimeFailure("sentencepiece decode failed: " + status.ToString());
  return out;
}

std::vector<std::string> SentencePieceTokenizer::tokenize(const std::string& text) const {
  std::vector<std::string> pieces;
  auto status = impl_->sp.Encode(text, &pieces);
  if (!status.ok()) throw RuntimeFailure("sentencepiece encode failed: " + status.ToString());
  return pieces;
}

std::string SentencePieceTokenizer::id_to_piece(int64_t id) const {
  return (id >= 0 && id < vocab_size()) ? impl_->sp.IdToPiece(static_cast<int>(id)) : std::string();
}

int64_t SentencePieceTokenizer::piece_to_id(const std::string& piece) const { return impl_->sp.PieceToId(piece); }

Encoding SentencePieceTokenizer::encode_for_model(const std::string& text, const std::string* text_pair,
                                                  int64_t max_length) const {
  std::vector<int64_t> a = encode(text), b;
  bool is_pair = text_pair != nullptr;
  if (is_pair) b = encode(*text_pair);
  int64_t per_seq = (add_bos_ ? 1 : 0) + (add_eos_ ? 1 : 0);
  if (max_length > 0) {
    int64_t budget = std::max<int64_t>(0, max_length - per_seq * (is_pair ? 2 : 1));
    std::size_t limit = static_cast<std::size_t>(budget);
    if (!is_pair) {
      if (a.size() > limit) a.resize(limit);
    } else if (a.size() + b.size() > limit) {
      // longest_first, as for tokenizer.json (HF tokenizers' rule).
      std::size_t n1 = a.size(), n2 = b.size();
      bool swap = n1 > n2;
      if (swap) std::swap(n1, n2);
      n2 = n1 > limit ? n1 : std::max(n1, limit - n1);
      if (n1 + n2 > limit) {
        n1 = limit / 2;
        n2 = n1 + limit % 2;
      }
      if (swap) std::swap(n1, n2);
      a.resize(std::min(a.size(), n1));
      b.resize(std::min(b.size(), n2));
    }
  }
  Encoding e;
  auto push_seq = [&](const std::vector<int64_t>& ids, int64_t type_id) {
    auto add = [&](int64_t id, int64_t special) {
      e.input_ids.push_back(id);
      e.token_type_ids.push_back(type_id);
      e.special_tokens_mask.push_back(special);
    };
    if (add_bos_) add(impl_->sp.bos_id(), 1);
    for (auto id : ids) add(id, 0);
    if (add_eos_) add(impl_->sp.eos_id(), 1);
  };
  push_seq(a, 0);
  if (is_pair) push_seq(b, 1);
  return e;
}

SpecialTokenIds SentencePieceTokenizer::special_tokens() const {
  SpecialTokenIds s;
  auto opt = [](int id) -> std::optional<int64_t> { return id >= 0 ? std::optional<int64_t>(id) : std::nullopt; };
  s.bos = opt(impl_->sp.bos_id());
  s.eos = opt(impl_->sp.eos_id());
  s.unk = opt(impl_->sp.unk_id());
  s.pad = opt(impl_->sp.pad_id());
  return s;
}

}  // namespace hftrain
