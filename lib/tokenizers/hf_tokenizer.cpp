// tokenizer.json reader and the HF tokenizers pipeline: added tokens -> normalizer -> pre-tokenizer -> model ->
// post-processor, and the decoders (see hf_tokenizer.h). Each stage lives in its own hf_*.cpp file; this one
// reads the file, wires the stages, discovers the special tokens and runs encode / decode.
#include "tokenizers/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "tokenizers/hf_added_tokens.h"
#include "tokenizers/hf_decoders.h"
#include "tokenizers/hf_json.h"
#include "tokenizers/hf_models.h"
#include "tokenizers/hf_normalizers.h"
#include "tokenizers/hf_post_processor.h"
#include "tokenizers/hf_pre_tokenizers.h"
#include "tokenizers/unicode_text.h"
#include "util/error.h"

namespace hftrain {

using namespace hf;
namespace {

namespace fs = std::filesystem;

std::optional<std::string> token_content(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j.at("content").is_string()) return j.at("content").get<std::string>();
  return std::nullopt;
}

Json read_tokenizer_json(const std::string& path, const std::string& prefix) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(prefix + "cannot open the tokenizer file");
  std::stringstream buf;
  buf << in.rdbuf();
  try {
    return Json::parse(buf.str());
  } catch (const Json::parse_error& e) {
    throw ConfigError(prefix + "malformed JSON: " + e.what());
  }
}

AddedToken parse_added_token(const Json& aj, const Normalizer* normalizer) {
  AddedToken t;
  t.id = aj.at("id").get<int64_t>();
  t.content = aj.at("content").get<std::string>();
  t.single_word = get_bool(aj, "single_word", false);
  t.lstrip = get_bool(aj, "lstrip", false);
  t.rstrip = get_bool(aj, "rstrip", false);
  t.special = get_bool(aj, "special", false);
  t.normalized = get_bool(aj, "normalized", !t.special);
  t.match = (t.normalized && normalizer) ? normalizer->apply(t.content) : t.content;
  return t;
}

}  // namespace

struct HfTokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<Decoder> decoder;
  PostProcessor post;
  bool has_post = false;
  std::vector<AddedToken> added;
  std::unordered_map<int64_t, const AddedToken*> added_by_id;
  std::unordered_map<std::string, int64_t> added_by_content;
  AddedMatcher raw_matcher, normalized_matcher;
  SpecialTokenIds specials;
  int64_t size = 0;

  void encode_into(const std::string& input, std::vector<int64_t>& ids) const {
    std::string text = uni::sanitize_utf8(input);
    std::vector<Segment> raw;
    split_added(text, raw_matcher, raw);
    bool at_start = true;  // the segment begins the input
    for (const auto& seg : raw) {
      if (seg.id >= 0) {
        ids.push_back(seg.id);
        at_start = false;
        continue;
      }
      std::string normalized = normalizer ? normalizer->apply(seg.text) : seg.text;
      std::vector<Segment> parts;
      split_added(normalized, normalized_matcher, parts);
      for (const auto& part : parts) {
        if (part.id >= 0) {
          ids.push_back(part.id);
          at_start = false;
          continue;
        }
        std::vector<std::string> words{part.text};
        if (pre_tokenizer) pre_tokenizer->apply(words, at_start);
        at_start = false;
        for (const auto& w : words)
          if (!w.empty()) model->tokenize(w, ids);
      }
    }
  }

  std::optional<int64_t> find(const std::string& token) const {
    auto it = added_by_content.find(token);
    if (it != added_by_content.end()) return it->second;
    return model->find(token);
  }

  // The pipeline's stages, the added tokens and the vocabulary size from tokenizer.json (throws the stages'
  // FormatError / UnsupportedError and Json's exceptions).
  void parse(const Json& j) {
    if (!j.is_object()) throw FormatError("the top level is not a JSON object");
    model = parse_model(j.contains("model") ? j.at("model") : Json());
    normalizer = parse_normalizer(j.value("normalizer", Json()));
    pre_tokenizer = parse_pre_tokenizer(j.value("pre_tokenizer", Json()));
    decoder = parse_decoder(j.value("decoder", Json()));
    has_post = parse_post_processor(j.value("post_processor", Json()), post);
    // "truncation" is chosen per call (max_length), as transformers does; the stored setting is not applied.
    add_tokens(j.contains("added_tokens") && !j.at("added_tokens").is_null() ? j.at("added_tokens") : Json::array());
    if (has_post)
      for (const auto& [name, ids] : post.special_ids)
        for (auto id : ids)
          if (id < 0) throw FormatError("post_processor: special token \"" + name + "\" has a negative id");
  }

  void add_tokens(const Json& tokens) {
    int64_t max_id = static_cast<int64_t>(model->tokens.size()) - 1;
    for (const auto& aj : tokens) {
      added.push_back(parse_added_token(aj, normalizer.get()));
      max_id = std::max(max_id, added.back().id);
    }
    for (const auto& t : added) {
      added_by_id[t.id] = &t;
      added_by_content[t.content] = t.id;
      (t.normalized ? normalized_matcher : raw_matcher).add(&t);
    }
    size = max_id + 1;
  }

  std::optional<int64_t> first_of(std::initializer_list<const char*> names) const {
    for (const char* n : names)
      if (auto id = find(n)) return id;
    return std::nullopt;
  }

  // The usual names among the added tokens (and the model's unk), then the post-processor's cls / sep.
  void find_special_tokens() {
    SpecialTokenIds& sp = specials;
    sp.bos = first_of({"<|begin_of_text|>", "<s>", "[BOS]", "<bos>", "<|startoftext|>", "<|endoftext|>"});
    sp.eos = first_of({"<|end_of_text|>", "</s>", "[EOS]", "<eos>", "<|endoftext|>"});
    sp.pad = first_of({"[PAD]", "<pad>", "<|pad|>", "<|padding|>"});
    sp.unk = first_of({"[UNK]", "<unk>", "<|unk|>"});
    if (auto* wp = dynamic_cast<WordPieceModel*>(model.get()); wp && !sp.unk) sp.unk = find(wp->unk_token);
    if (auto* bpe = dynamic_cast<BpeModel*>(model.get()); bpe && bpe->unk) sp.unk = bpe->unk;
    if (auto* ug = dynamic_cast<UnigramModel*>(model.get()); ug && ug->unk) sp.unk = ug->unk;
    sp.cls = first_of({"[CLS]"});
    sp.sep = first_of({"[SEP]"});
    sp.mask = first_of({"[MASK]", "<mask>"});
    if (post.cls) sp.cls = post.cls->second;
    if (post.sep) sp.sep = post.sep->second;
  }

  // The *_token entries of tokenizer_config.json or special_tokens_map.json (`f`, next to the tokenizer
  // file `path`): null clears a special token, a token of the vocabulary sets it.
  void read_special_tokens(const fs::path& f, const std::string& where, const std::string& path) {
    Json cj;
    try {
      std::ifstream cfg_in(f);
      cj = Json::parse(cfg_in);
    } catch (const Json::parse_error& e) {
      throw ConfigError(where + ": " + f.string() + ": malformed JSON: " + e.what());
    }
    if (!cj.is_object()) return;
    SpecialTokenIds& sp = specials;
    std::pair<const char*, std::optional<int64_t>*> keys[] = {{"bos_token", &sp.bos}, {"eos_token", &sp.eos},
                                                              {"pad_token", &sp.pad}, {"unk_token", &sp.unk},
                                                              {"cls_token", &sp.cls}, {"sep_token", &sp.sep},
                                                              {"mask_token", &sp.mask}};
    for (auto& [key, slot] : keys) {
      if (!cj.contains(key)) continue;
      if (cj.at(key).is_null()) {
        *slot = std::nullopt;
        continue;
      }
      auto content = token_content(cj.at(key));
      if (!content) continue;
      auto id = find(*content);
      if (!id) throw ConfigError(where + ": " + f.string() + ": " + key + " \"" + *content + "\" is not a token of " + path);
      *slot = id;
    }
  }
};


std::shared_ptr<const HfTokenizer> HfTokenizer::from_file(const std::string& path, const std::string& where) {
  const std::string prefix = where + ": " + path + ": ";
  const Json j = read_tokenizer_json(path, prefix);
  auto impl = std::make_shared<Impl>();
  try {
    impl->parse(j);
  } catch (const UnsupportedError& e) {
    throw UnsupportedTokenizerError(prefix + e.what());
  } catch (const FormatError& e) {
    throw ConfigError(prefix + e.what());
  } catch (const Json::exception& e) {
    throw ConfigError(prefix + "unexpected structure: " + e.what());
  }
  // Special tokens: the usual names, then tokenizer_config.json and special_tokens_map.json next to the file
  // (the latter wins, as in transformers).
  impl->find_special_tokens();
  const fs::path dir = fs::path(path).parent_path();
  for (const char* name : {"tokenizer_config.json", "special_tokens_map.json"})
    if (fs::exists(dir / name)) impl->read_special_tokens(dir / name, where, path);
  return std::make_shared<HfTokenizer>(impl);
}

int64_t HfTokenizer::vocab_size() const { return impl_->size; }

std::vector<int64_t> HfTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  try {
    impl_->encode_into(text, ids);
  } catch (const Error&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw RuntimeFailure(std::string("tokenizer: ") + e.what());
  }
  return ids;
}

std::vector<std::string> HfTokenizer::tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (auto id : encode(text)) out.push_back(id_to_token(id));
  return out;
}

std::optional<int64_t> HfTokenizer::token_to_id(const std::string& token) const { return impl_->find(token); }

std::string HfTokenizer::id_to_token(int64_t id) const {
  auto it = impl_->added_by_id.find(id);
  if (it != impl_->added_by_id.end()) return it->second->content;
  const auto& tokens = impl_->model->tokens;
  return (id >= 0 && static_cast<std::size_t>(id) < tokens.size()) ? tokens[static_cast<std::size_t>(id)] : std::string();
}

std::string HfTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  for (auto id : ids) {
    auto it = impl_->added_by_id.find(id);
    if (it != impl_->added_by_id.end()) {
      if (!(skip_special_tokens && it->second->special)) tokens.push_back(it->second->content);
      continue;
    }
    std::string t = id_to_token(id);
    if (!t.empty()) tokens.push_back(t);
  }
  if (impl_->decoder) tokens = impl_->decoder->apply(std::move(tokens));
  else {
    std::string joined;
    for (std::size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

Encoding HfTokenizer::encode_for_model(const std::string& text, const std::string* text_pair, int64_t max_length) const {
  std::vector<int64_t> a = encode(text), b;
  bool is_pair = text_pair != nullptr;
  if (is_pair) b = encode(*text_pair);
  if (max_length > 0) {
    int64_t budget = max_length - static_cast<int64_t>(impl_->has_post ? impl_->post.added(is_pair) : 0);
    std::size_t limit = static_cast<std::size_t>(std::max<int64_t>(budget, 0));
    truncate_longest_first(a, b, is_pair, limit);
  }
  Encoding e;
  auto push = [&](const std::vector<int64_t>& ids, int64_t type_id, int64_t special) {
    e.input_ids.insert(e.input_ids.end(), ids.begin(), ids.end());
    e.token_type_ids.insert(e.token_type_ids.end(), ids.size(), type_id);
    e.special_tokens_mask.insert(e.special_tokens_mask.end(), ids.size(), special);
  };
  if (!impl_->has_post) {
    push(a, 0, 0);
    if (is_pair) push(b, 1, 0);
    return e;
  }
  for (const auto& p : is_pair ? impl_->post.pair : impl_->post.single) {
    if (p.special) push(impl_->post.special_ids.at(p.name), p.type_id, 1);
    else push(p.name == "A" ? a : b, p.type_id, 0);
  }
  return e;
}

SpecialTokenIds HfTokenizer::special_tokens() const { return impl_->specials; }

}  // namespace hftrain
