// sentencepiece models through libsentencepiece (see sentencepiece_tokenizer.h).
#include "tokenizers/sentencepiece_tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "util/error.h"

#ifndef HFTRAIN_SENTENCEPIECE_MODULE
#define HFTRAIN_SENTENCEPIECE_MODULE "libhftrain_sentencepiece.so"
#endif

namespace hftrain {
namespace {

// The C interface of the hftrain_sentencepiece module (sentencepiece_shim.cpp).
struct SpmModule {
  void* (*load)(const char*, char*, int64_t) = nullptr;
  void (*free)(void*) = nullptr;
  int64_t (*info)(void*, int) = nullptr;
  int (*encode)(void*, const char*, int64_t, void (*)(void*, int64_t, const char*, int64_t), void*, char*, int64_t) = nullptr;
  int (*decode)(void*, const int64_t*, int64_t, void (*)(void*, const char*, int64_t), void*, char*, int64_t) = nullptr;
  int64_t (*piece_to_id)(void*, const char*, int64_t) = nullptr;
  void (*id_to_piece)(void*, int64_t, void (*)(void*, const char*, int64_t), void*) = nullptr;
  int (*train)(const char*, char*, int64_t) = nullptr;
};

// Loads the module once, into its own link-map namespace (see sentencepiece_shim.cpp):
// $HFTRAIN_SENTENCEPIECE_MODULE, the build's module, or the one next to the executable.
const SpmModule& spm_module() {
  static std::once_flag once;
  static SpmModule module;
  static std::string failure;
  std::call_once(once, [] {
    namespace fs = std::filesystem;
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("HFTRAIN_SENTENCEPIECE_MODULE")) candidates.push_back(env);
    candidates.push_back(HFTRAIN_SENTENCEPIECE_MODULE);
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      candidates.push_back((exe.parent_path() / "libhftrain_sentencepiece.so").string());
      candidates.push_back((exe.parent_path() / ".." / "lib" / "libhftrain_sentencepiece.so").string());
    }
    void* handle = nullptr;
    std::string errors;
    for (const auto& c : candidates) {
      if (!fs::exists(c, ec)) continue;
      handle = dlmopen(LM_ID_NEWLM, c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) break;
      errors += std::string(" ") + dlerror();
    }
    if (!handle) {
      failure = "the sentencepiece module (libhftrain_sentencepiece.so, built with hftrain) could not be loaded; looked for " +
                candidates.front() + (candidates.size() > 1 ? " and " + candidates[1] : std::string()) + errors +
                " (set HFTRAIN_SENTENCEPIECE_MODULE to its path)";
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      if (!fn) failure = std::string("the sentencepiece module lacks ") + name;
    };
    sym(module.load, "hftrain_spm_load");
    sym(module.free, "hftrain_spm_free");
    sym(module.info, "hftrain_spm_info");
    sym(module.encode, "hftrain_spm_encode");
    sym(module.decode, "hftrain_spm_decode");
    sym(module.piece_to_id, "hftrain_spm_piece_to_id");
    sym(module.id_to_piece, "hftrain_spm_id_to_piece");
    sym(module.train, "hftrain_spm_train");
  });
  if (!failure.empty()) throw RuntimeFailure(failure);
  return module;
}

struct EncodeSink {
  std::vector<int64_t>* ids = nullptr;
  std::vector<std::string>* pieces = nullptr;
  static void put(void* ctx, int64_t id, const char* piece, int64_t len) {
    auto* self = static_cast<EncodeSink*>(ctx);
    if (self->ids) self->ids->push_back(id);
    if (self->pieces) self->pieces->emplace_back(piece, static_cast<std::size_t>(len));
  }
};

void text_sink(void* ctx, const char* text, int64_t len) { static_cast<std::string*>(ctx)->assign(text, static_cast<std::size_t>(len)); }

}  // namespace

struct SentencePieceTokenizer::Impl {
  void* handle = nullptr;
  int64_t size = 0, bos = -1, eos = -1, unk = -1, pad = -1;
  ~Impl() {
    if (handle) spm_module().free(handle);
  }
  void run_encode(const std::string& text, std::vector<int64_t>* ids, std::vector<std::string>* out_pieces) const {
    EncodeSink sink{ids, out_pieces};
    char error[512] = {0};
    if (spm_module().encode(handle, text.data(), static_cast<int64_t>(text.size()), &EncodeSink::put, &sink, error,
                            sizeof(error)) != 0)
      throw RuntimeFailure(std::string("sentencepiece encode failed: ") + error);
  }
};

void train_sentencepiece(const std::string& flags) {
  char error[512] = {0};
  if (spm_module().train(flags.c_str(), error, sizeof(error)) != 0)
    throw RuntimeFailure(std::string("sentencepiece training failed: ") + error);
}

std::shared_ptr<const SentencePieceTokenizer> SentencePieceTokenizer::from_file(const std::string& path,
                                                                                const std::string& where) {
  namespace fs = std::filesystem;
  if (!fs::is_regular_file(path)) throw ConfigError(where + ": " + path + ": no such sentencepiece model file");
  const SpmModule& m = spm_module();
  auto impl = std::make_shared<Impl>();
  char error[512] = {0};
  impl->handle = m.load(path.c_str(), error, sizeof(error));
  if (!impl->handle) throw ConfigError(where + ": " + path + ": not a sentencepiece model: " + error);
  impl->size = m.info(impl->handle, 0);
  impl->bos = m.info(impl->handle, 1);
  impl->eos = m.info(impl->handle, 2);
  impl->unk = m.info(impl->handle, 3);
  impl->pad = m.info(impl->handle, 4);
  bool add_bos = impl->bos >= 0, add_eos = false;
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
  if (add_bos && impl->bos < 0) add_bos = false;
  if (add_eos && impl->eos < 0) add_eos = false;
  return std::make_shared<SentencePieceTokenizer>(impl, add_bos, add_eos);
}

int64_t SentencePieceTokenizer::vocab_size() const { return impl_->size; }

std::vector<int64_t> SentencePieceTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  impl_->run_encode(text, &ids, nullptr);
  return ids;
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int64_t> v;
  for (auto id : ids)
    if (id >= 0 && id < vocab_size()) v.push_back(id);
  std::string out;
  char error[512] = {0};
  if (spm_module().decode(impl_->handle, v.data(), static_cast<int64_t>(v.size()), &text_sink, &out, error, sizeof(error)) != 0)
    throw RuntimeFailure(std::string("sentencepiece decode failed: ") + error);
  return out;
}

std::vector<std::string> SentencePieceTokenizer::tokenize(const std::string& text) const {
  std::vector<std::string> pieces;
  impl_->run_encode(text, nullptr, &pieces);
  return pieces;
}

std::string SentencePieceTokenizer::id_to_piece(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  std::string piece;
  spm_module().id_to_piece(impl_->handle, id, &text_sink, &piece);
  return piece;
}

int64_t SentencePieceTokenizer::piece_to_id(const std::string& piece) const {
  return spm_module().piece_to_id(impl_->handle, piece.data(), static_cast<int64_t>(piece.size()));
}

Encoding SentencePieceTokenizer::encode_for_model(const std::string& text, const std::string* text_pair,
                                                  int64_t max_length) const {
  std::vector<int64_t> a = encode(text), b;
  bool is_pair = text_pair != nullptr;
  if (is_pair) b = encode(*text_pair);
  int64_t per_seq = (add_bos_ ? 1 : 0) + (add_eos_ ? 1 : 0);
  if (max_length > 0) {
    int64_t budget = std::max<int64_t>(0, max_length - per_seq * (is_pair ? 2 : 1));
    std::size_t limit = static_cast<std::size_t>(budget);
    truncate_longest_first(a, b, is_pair, limit);
  }
  Encoding e;
  auto push_seq = [&](const std::vector<int64_t>& ids, int64_t type_id) {
    auto add = [&](int64_t id, int64_t special) {
      e.input_ids.push_back(id);
      e.token_type_ids.push_back(type_id);
      e.special_tokens_mask.push_back(special);
    };
    if (add_bos_) add(impl_->bos, 1);
    for (auto id : ids) add(id, 0);
    if (add_eos_) add(impl_->eos, 1);
  };
  push_seq(a, 0);
  if (is_pair) push_seq(b, 1);
  return e;
}

SpecialTokenIds SentencePieceTokenizer::special_tokens() const {
  SpecialTokenIds s;
  auto opt = [](int64_t id) -> std::optional<int64_t> { return id >= 0 ? std::optional<int64_t>(id) : std::nullopt; };
  s.bos = opt(impl_->bos);
  s.eos = opt(impl_->eos);
  s.unk = opt(impl_->unk);
  s.pad = opt(impl_->pad);
  return s;
}

}  // namespace hftrain
