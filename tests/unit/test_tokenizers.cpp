// Tokenizers from HF tokenizer.json files: byte-level BPE (GPT-2 and Llama-3 pre-tokenization), WordPiece (BERT),
// added tokens, post-processors, truncation, decoders, special-token discovery and load_tokenizer's errors.
// Every expected encoding below is worked out by hand from the tiny vocabularies written here (the steps are
// in the comments), following HF tokenizers' documented algorithms.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizers/hf_tokenizer.h"
#include "tokenizers/load_tokenizer.h"
#include "util/error.h"

using namespace hftrain;
namespace fs = std::filesystem;
using Ids = std::vector<int64_t>;

namespace {

// A per-process scratch directory, removed when the test ends.
struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name)
      : dir(fs::temp_directory_path() / ("hftrain_tok_" + std::to_string(getpid()) + "_" + name)) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path operator/(const std::string& name) const { return dir / name; }
};

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Byte-level BPE vocabulary (GPT-2 style). "\u0120" is 'Ġ' (the byte-level character of a space), "\u010a" is
// 'Ċ' (newline). A no-break space (UTF-8 C2 A0) is "\u00c2" (printable byte C2) + "\u0142": byte A0 is the
// 67th non-printable byte (after 0x00-0x20 and 0x7F-0x9F), so it maps to 256 + 66 = U+0142.
const char* kBpeVocab = R"({"h": 0, "e": 1, "l": 2, "o": 3, "w": 4, "r": 5, "d": 6, "\u0120": 7, "!": 8, "\u010a": 9,
  "ll": 10, "\u0120w": 11, "ell": 12, "hell": 13, "hello": 14, "or": 15, "\u0120wor": 16, "\u0120worl": 17,
  "\u0120world": 18, "lo": 19, "low": 20, "wor": 22,
  "1": 25, "2": 26, "3": 27, "4": 28, "5": 29, "12": 30, "34": 31, "45": 32, "123": 33, "\u00c2": 34, "\u0142": 35})";

// Ranks by order: "l l" is rank 0, so "hello" merges ll before lo (rank 9).
const char* kBpeMergesStrings = R"(["l l", "\u0120 w", "e ll", "h ell", "hell o", "o r", "\u0120w or", "\u0120wor l",
  "\u0120worl d", "l o", "lo w", "1 2", "3 4", "4 5", "12 3"])";
const char* kBpeMergesPairs = R"([["l", "l"], ["\u0120", "w"], ["e", "ll"], ["h", "ell"], ["hell", "o"], ["o", "r"],
  ["\u0120w", "or"], ["\u0120wor", "l"], ["\u0120worl", "d"], ["l", "o"], ["lo", "w"], ["1", "2"], ["3", "4"],
  ["4", "5"], ["12", "3"]])";

const char* kBpeAdded = R"([
  {"id": 21, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
  {"id": 23, "content": "<mask>", "single_word": false, "lstrip": true, "rstrip": false, "normalized": false, "special": true},
  {"id": 24, "content": "ell", "single_word": true, "lstrip": false, "rstrip": false, "normalized": true, "special": false}])";

const char* kGpt2PreTokenizer = R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})";
const char* kLlama3PreTokenizer = R"JSON({"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
   "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})JSON";

std::string bpe_json(const std::string& merges, const std::string& pre_tokenizer, bool ignore_merges = false) {
  return std::string(R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": )") + kBpeAdded +
         R"(, "normalizer": null, "pre_tokenizer": )" + pre_tokenizer +
         R"(, "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": )" +
         (ignore_merges ? "true" : "false") + R"(, "vocab": )" + kBpeVocab + R"(, "merges": )" + merges + "}}";
}

std::shared_ptr<const HfTokenizer> load_json(const std::string& name, const std::string& json) {
  Scratch dir(name);
  write(dir / "tokenizer.json", json);
  return HfTokenizer::from_file((dir / "tokenizer.json").string(), "data.tokenizer");
}

// WordPiece vocabulary (BERT style), 25 tokens.
const char* kWordPieceVocab = R"({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "the": 5, "cafe": 6,
  "un": 7, "##aff": 8, "##able": 9, "is": 10, "good": 11, ",": 12, "!": 13, ".": 14, "a": 15, "##b": 16, "##c": 17,
  "play": 18, "##ing": 19, "##s": 20, "\u4e2d": 21, "##d": 22, "b": 23, "'": 24})";

std::string bert_json(const std::string& strip_accents = "null") {
  std::string added;
  const char* names[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int i = 0; i < 5; ++i)
    added += std::string(i ? ", " : "") + R"({"id": )" + std::to_string(i) + R"(, "content": ")" + names[i] +
             R"(", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true})";
  return std::string(R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [)") + added + R"(],
  "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": )" +
         strip_accents + R"(, "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
               {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
             {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
             {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
    "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                       "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
  "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 10, "vocab": )" +
         kWordPieceVocab + "}}";
}

}  // namespace

TEST_CASE("byte-level BPE applies merges by rank after GPT-2 pre-tokenization", "[unit][tokenizers]") {
  auto tok = load_json("bpe_gpt2", bpe_json(kBpeMergesStrings, kGpt2PreTokenizer));
  CHECK(tok->vocab_size() == 36);
  // Pieces "hello", " world", "!" -> "hello", "Ġworld", "!".
  // hello: ll (rank 0) -> e+ll (2) -> h+ell (3) -> hell+o (4) = [14].
  // Ġworld: Ġ+w (1) -> o+r (5) -> Ġw+or (6) -> +l (7) -> +d (8) = [18].
  CHECK(tok->encode("hello world!") == Ids{14, 18, 8});
  CHECK(tok->tokenize("hello world!") == std::vector<std::string>{"hello", "\xC4\xA0world", "!"});
  // "lol": l+o (9) leaves [lo, l]; "\n" is its own piece 'Ċ'.
  CHECK(tok->encode("lol\n") == Ids{19, 2, 9});
  // Two spaces: \s+(?!\S) takes the first space alone, the second goes with "hello" -> [Ġ, Ġ+hello]; there is
  // no Ġhello merge, so [7, 14].
  CHECK(tok->encode("  hello") == Ids{7, 7, 14});
  // "wor": o+r -> [w, or]; no w+or merge.
  CHECK(tok->encode("wor") == Ids{4, 15});
  // GPT-2's regex keeps "12345" in one piece: 1+2 (rank 11) -> 3+4 (12) -> [12, 34, 5].
  CHECK(tok->encode("12345") == Ids{30, 31, 29});
  // A character missing from the vocabulary and no unk_token: dropped, as HF does ('z').
  CHECK(tok->encode("hezlo") == Ids{0, 1, 19});
  CHECK(tok->decode(Ids{14, 18, 8}) == "hello world!");
  CHECK(tok->decode(Ids{7, 7, 14, 9}) == "  hello\n");
}

TEST_CASE("byte-level BPE reads merges given as pairs and honours ignore_merges", "[unit][tokenizers]") {
  auto pairs = load_json("bpe_pairs", bpe_json(kBpeMergesPairs, kGpt2PreTokenizer));
  CHECK(pairs->encode("hello world!") == Ids{14, 18, 8});
  CHECK(pairs->encode("lol") == Ids{19, 2});
  // ignore_merges: a word that is itself in the vocabulary is one token ("wor" = 22), others merge as usual.
  auto ignore = load_json("bpe_ignore", bpe_json(kBpeMergesPairs, kGpt2PreTokenizer, true));
  CHECK(ignore->encode("wor") == Ids{22});
  CHECK(ignore->encode("lol") == Ids{19, 2});
}

TEST_CASE("byte-level BPE with the Llama-3 Split regex groups digits by three", "[unit][tokenizers]") {
  auto tok = load_json("bpe_llama3", bpe_json(kBpeMergesStrings, kLlama3PreTokenizer));
  // \p{N}{1,3}: "123" | "45". 123: 1+2 (11) -> 12+3 (14) = [33]; 45: 4+5 (13) = [32].
  CHECK(tok->encode("12345") == Ids{33, 32});
  // [^\r\n\p{L}\p{N}]?\p{L}+ takes " world" with its space; "!" is its own piece.
  CHECK(tok->encode("hello world!") == Ids{14, 18, 8});
  CHECK(tok->decode(tok->encode("hello world!")) == "hello world!");
}

TEST_CASE("byte-level BPE added tokens: special, lstrip and single_word", "[unit][tokenizers]") {
  auto tok = load_json("bpe_added", bpe_json(kBpeMergesStrings, kGpt2PreTokenizer));
  CHECK(tok->encode("hello world!<|endoftext|>") == Ids{14, 18, 8, 21});
  // <mask> has lstrip: the space before it is swallowed, so "hello" is not followed by a 'Ġ' piece.
  CHECK(tok->encode("hello <mask>!") == Ids{14, 23, 8});
  // A no-break space is whitespace too: swallowed by lstrip; without <mask> it is the piece [Â, ł].
  CHECK(tok->encode("hello\xC2\xA0<mask>!") == Ids{14, 23, 8});
  CHECK(tok->encode("hello\xC2\xA0") == Ids{14, 34, 35});
  CHECK(tok->decode(Ids{34, 35}) == "\xC2\xA0");
  // "ell" is single_word: not inside "hello", but alone after a space ("hello " -> "hello", "Ġ").
  CHECK(tok->encode("hello ell") == Ids{14, 7, 24});
  // Decoding passes added tokens through as their text.
  CHECK(tok->decode(Ids{14, 18, 21}) == "hello world<|endoftext|>");
  CHECK(tok->decode(Ids{14, 18, 21}, true) == "hello world");
  // No template: a pair is A then B with type ids 0 / 1 and nothing inserted; truncation is longest_first.
  std::string b = "lol";
  Encoding e = tok->encode_for_model("hello world!", &b, 4);
  CHECK(e.input_ids == Ids{14, 18, 19, 2});
  CHECK(e.token_type_ids == Ids{0, 0, 1, 1});
  CHECK(e.special_tokens_mask == Ids{0, 0, 0, 0});
  auto sp = tok->special_tokens();
  CHECK(sp.eos == 21);
  CHECK(sp.bos == 21);
  CHECK(sp.mask == 23);
  CHECK(!sp.pad);
  CHECK(!sp.cls);
}

TEST_CASE("special token ids from tokenizer_config.json and special_tokens_map.json", "[unit][tokenizers]") {
  Scratch dir("bpe_config");
  write(dir / "tokenizer.json", bpe_json(kBpeMergesStrings, kGpt2PreTokenizer));
  write(dir / "tokenizer_config.json",
        R"({"bos_token": null, "eos_token": {"content": "<mask>", "lstrip": true}, "pad_token": "<|endoftext|>",
            "unk_token": "hello", "model_max_length": 1024})");
  write(dir / "special_tokens_map.json", R"({"unk_token": "lo"})");
  auto tok = load_tokenizer(dir.dir.string(), "data.tokenizer");
  auto sp = tok->special_tokens();
  CHECK(!sp.bos);
  CHECK(sp.eos == 23);
  CHECK(sp.pad == 21);
  CHECK(sp.unk == 19);  // special_tokens_map.json wins over tokenizer_config.json
  write(dir / "special_tokens_map.json", R"({"pad_token": "<nope>"})");
  try {
    load_tokenizer(dir.dir.string(), "data.tokenizer");
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("special_tokens_map.json") && Catch::Contains("pad_token") &&
                             Catch::Contains("<nope>"));
  }
}

TEST_CASE("WordPiece with BertNormalizer and BertPreTokenizer", "[unit][tokenizers]") {
  auto tok = load_json("wordpiece", bert_json());
  CHECK(tok->vocab_size() == 25);
  // Lower-cased, accents stripped (é -> e), "!" split off; unaffable = un ##aff ##able (greedy longest first).
  CHECK(tok->encode("The Caf\xC3\xA9 is UNAFFABLE!") == Ids{5, 6, 10, 7, 8, 9, 13});
  // No piece starts "xyz": the whole word is [UNK].
  CHECK(tok->encode("xyz good") == Ids{1, 11});
  // a ##b ##d; "abx": a ##b then no "##x" -> the whole word is [UNK].
  CHECK(tok->encode("abd abx") == Ids{15, 16, 22, 1});
  // max_input_chars_per_word = 10: a 14-character word is [UNK] even though it splits.
  CHECK(tok->encode("playings playingplaying") == Ids{18, 19, 20, 1});
  // CJK characters are padded with spaces; punctuation is isolated.
  CHECK(tok->encode("a\xE4\xB8\xAD" "b") == Ids{15, 21, 23});
  CHECK(tok->encode("a,b.") == Ids{15, 12, 23, 14});
  // clean_text drops a control character (BEL) and turns a tab into a space.
  CHECK(tok->encode("good\x07!\tthe") == Ids{11, 13, 5});
  // Special tokens (normalized: false) match the raw text only: "[mask]" is three unknown pieces.
  CHECK(tok->encode("the [MASK] is good") == Ids{5, 4, 10, 11});
  CHECK(tok->encode("[mask]") == Ids{1, 1, 1});
  auto sp = tok->special_tokens();
  CHECK(sp.pad == 0);
  CHECK(sp.unk == 1);
  CHECK(sp.cls == 2);
  CHECK(sp.sep == 3);
  CHECK(sp.mask == 4);
  CHECK(!sp.bos);
  CHECK(!sp.eos);
}

TEST_CASE("WordPiece strip_accents false keeps accents while lower-casing", "[unit][tokenizers]") {
  auto tok = load_json("wordpiece_accents", bert_json("false"));
  // "café" stays accented: no vocabulary piece covers it -> [UNK].
  CHECK(tok->encode("Caf\xC3\xA9 cafe") == Ids{1, 6});
}

TEST_CASE("TemplateProcessing single and pair templates with longest_first truncation", "[unit][tokenizers]") {
  auto tok = load_json("template", bert_json());
  Encoding e = tok->encode_for_model("the cafe", nullptr, 0);
  CHECK(e.input_ids == Ids{2, 5, 6, 3});
  CHECK(e.token_type_ids == Ids{0, 0, 0, 0});
  CHECK(e.special_tokens_mask == Ids{1, 0, 0, 1});
  std::string b = "is good";
  e = tok->encode_for_model("the cafe", &b, 0);
  CHECK(e.input_ids == Ids{2, 5, 6, 3, 10, 11, 3});
  CHECK(e.token_type_ids == Ids{0, 0, 0, 0, 1, 1, 1});
  CHECK(e.special_tokens_mask == Ids{1, 0, 0, 1, 0, 0, 1});
  // Single: max_length 4 leaves 2 tokens for the text after [CLS] and [SEP].
  CHECK(tok->encode_for_model("the cafe is good", nullptr, 4).input_ids == Ids{2, 5, 6, 3});
  // Pair (5 tokens, 2 tokens), max_length 8 -> 5 for the texts: the shorter keeps 2, the longer gets 3.
  std::string b2 = "good is";
  CHECK(tok->encode_for_model("a b a b a", &b2, 8).input_ids == Ids{2, 15, 23, 15, 3, 11, 10, 3});
  // Pair (5, 4), budget 5: both exceed half -> 2 and 3, the longer (first) getting the extra token.
  std::string b3 = "good is good is";
  e = tok->encode_for_model("a b a b a", &b3, 8);
  CHECK(e.input_ids == Ids{2, 15, 23, 15, 3, 11, 10, 3});
  CHECK(e.token_type_ids == Ids{0, 0, 0, 0, 0, 1, 1, 1});
  // Pair (2, 4), budget 5: the shorter keeps 2, the longer 3.
  std::string b4 = "good is good is";
  CHECK(tok->encode_for_model("the cafe", &b4, 8).input_ids == Ids{2, 5, 6, 3, 11, 10, 11, 3});
}

TEST_CASE("BertProcessing and RobertaProcessing post-processors", "[unit][tokenizers]") {
  std::string bert = bert_json();
  auto pos = bert.find(R"("post_processor": {"type": "TemplateProcessing")");
  auto end = bert.find(R"("decoder")");
  REQUIRE(pos != std::string::npos);
  std::string with_bert = bert.substr(0, pos) + R"("post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]}, )" + bert.substr(end);
  auto tok = load_json("bertproc", with_bert);
  std::string b = "good";
  Encoding e = tok->encode_for_model("the", &b, 0);
  CHECK(e.input_ids == Ids{2, 5, 3, 11, 3});
  CHECK(e.token_type_ids == Ids{0, 0, 0, 1, 1});
  std::string with_roberta = bert.substr(0, pos) + R"("post_processor": {"type": "RobertaProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2], "trim_offsets": true, "add_prefix_space": false}, )" + bert.substr(end);
  auto rob = load_json("robertaproc", with_roberta);
  e = rob->encode_for_model("the", &b, 0);
  CHECK(e.input_ids == Ids{2, 5, 3, 3, 11, 3});
  CHECK(e.token_type_ids == Ids{0, 0, 0, 0, 0, 0});
  CHECK(e.special_tokens_mask == Ids{1, 0, 1, 1, 0, 1});
}

TEST_CASE("WordPiece decoder joins ## pieces and cleans up spaces before punctuation", "[unit][tokenizers]") {
  auto tok = load_json("wp_decode", bert_json());
  CHECK(tok->decode(Ids{2, 5, 6, 10, 7, 8, 9, 13, 3}) == "[CLS] the cafe is unaffable! [SEP]");
  CHECK(tok->decode(Ids{2, 5, 6, 10, 7, 8, 9, 13, 3}, true) == "the cafe is unaffable!");
  CHECK(tok->decode(tok->encode("a, b.")) == "a, b.");
}

TEST_CASE("load_tokenizer selects by value and reports bad files as ConfigError", "[unit][tokenizers]") {
  CHECK(load_tokenizer("bytes", "data.tokenizer")->vocab_size() == 256);
  Scratch dir("load");
  auto error_of = [](const std::string& value) -> std::string {
    try {
      load_tokenizer(value, "data.tokenizer");
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  std::string missing = (dir / "nope" / "tokenizer.json").string();
  CHECK_THAT(error_of(missing), Catch::Contains("data.tokenizer") && Catch::Contains(missing));
  CHECK_THAT(error_of((dir / "nope").string()), Catch::Contains("data.tokenizer") && Catch::Contains("nope"));
  write(dir / "bad.json", "{\"model\": {\"type\": \"BPE\",\n  \"vocab\": {\"a\": 0,, }}}");
  CHECK_THAT(error_of((dir / "bad.json").string()),
             Catch::Contains("bad.json") && Catch::Contains("malformed JSON") && Catch::Contains("line 2"));
  write(dir / "unknown_model.json", R"({"model": {"type": "Frobnicate", "vocab": [["a", 0.0]]}})");
  CHECK_THAT(error_of((dir / "unknown_model.json").string()),
             Catch::Contains("unsupported model type") && Catch::Contains("Frobnicate") && Catch::Contains("Unigram"));
  write(dir / "unigram_unk.json", R"({"model": {"type": "Unigram", "unk_id": 3, "vocab": [["a", 0.0]]}})");
  CHECK_THAT(error_of((dir / "unigram_unk.json").string()), Catch::Contains("unk_id 3") && Catch::Contains("unigram_unk.json"));
  write(dir / "charsmap.json", R"({"normalizer": {"type": "Precompiled", "precompiled_charsmap": "AQ=="},
    "model": {"type": "Unigram", "unk_id": 0, "vocab": [["a", 0.0]]}})");
  CHECK_THAT(error_of((dir / "charsmap.json").string()), Catch::Contains("Precompiled") && Catch::Contains("precompiled_charsmap"));
  write(dir / "badmerge.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})");
  CHECK_THAT(error_of((dir / "badmerge.json").string()), Catch::Contains("merges[0]") && Catch::Contains("\"ab\""));
  write(dir / "badpre.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Frobnicate"}})");
  CHECK_THAT(error_of((dir / "badpre.json").string()), Catch::Contains("Frobnicate"));
  fs::create_directories(dir / "empty");
  CHECK_THAT(error_of((dir / "empty").string()), Catch::Contains("neither tokenizer.json nor tokenizer.model"));
  // A directory with tokenizer.json is loaded from it.
  fs::create_directories(dir / "bert");
  write(dir / "bert" / "tokenizer.json", bert_json());
  auto tok = load_tokenizer((dir / "bert").string(), "data.tokenizer");
  CHECK(tok->encode("the cafe") == Ids{5, 6});
}

namespace {

// Llama-2 style BPE on sentencepiece pieces: U+2581 ("\u2581") marks spaces, byte_fallback <0xXX> tokens.
std::string llama2_json(const std::string& normalizer, const std::string& pre_tokenizer) {
  return std::string(R"({"added_tokens": [
    {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
  "normalizer": )") + normalizer + R"(, "pre_tokenizer": )" + pre_tokenizer + R"(,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
             {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0xC3>": 4, "<0xA9>": 5, "\u2581": 6, "h": 7, "i": 8,
              "\u2581h": 9, "\u2581hi": 10, "t": 11, "\u2581t": 12, "e": 13},
    "merges": ["\u2581 h", "\u2581h i", "\u2581 t"]}})";
}

const char* kLegacyNormalizer = R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
  {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})";
const char* kMetaspaceFirst = R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false})";

}  // namespace

TEST_CASE("BPE with byte_fallback, fuse_unk and the sentencepiece-style decoders", "[unit][tokenizers]") {
  auto tok = load_json("llama2", llama2_json(kLegacyNormalizer, "null"));
  // "▁hi▁hi": ▁+h (rank 0) at both places (leftmost first), then ▁h+i (1) twice.
  CHECK(tok->encode("hi hi") == Ids{10, 10});
  // é has no piece: its UTF-8 bytes C3 A9 as <0xC3> <0xA9>; "\n" -> <0x0A>.
  CHECK(tok->encode("h\xC3\xA9\n") == Ids{9, 4, 5, 3});
  // 'z' has neither a piece nor a byte token: <unk>, and fuse_unk makes "zz" one <unk>.
  CHECK(tok->encode("hzz") == Ids{9, 0});
  // Replace ▁ -> ' ', bytes -> text, fuse, strip the one leading space.
  CHECK(tok->decode(Ids{9, 4, 5, 3}) == "h\xC3\xA9\n");
  CHECK(tok->decode(Ids{10, 10}) == "hi hi");
  // Bytes C3 0A are not UTF-8: one U+FFFD per byte token.
  CHECK(tok->decode(Ids{9, 4, 3}) == "h\xEF\xBF\xBD\xEF\xBF\xBD");
  // The legacy Prepend normalizer runs on every segment, also after an added token.
  CHECK(tok->encode("hi</s>hi") == Ids{10, 2, 10});
  std::string b = "hi";
  Encoding e = tok->encode_for_model("hi", &b, 0);
  CHECK(e.input_ids == Ids{1, 10, 1, 10});
  CHECK(e.token_type_ids == Ids{0, 0, 1, 1});
  auto sp = tok->special_tokens();
  CHECK(sp.bos == 1);
  CHECK(sp.eos == 2);
  CHECK(sp.unk == 0);
}

TEST_CASE("Metaspace prepend_scheme first prefixes only the start of the input", "[unit][tokenizers]") {
  auto tok = load_json("metaspace", llama2_json("null", kMetaspaceFirst));
  // "hi" -> "▁hi" = [10]; after </s> the second "hi" gets no ▁: [h, i].
  CHECK(tok->encode("hi</s>hi") == Ids{10, 2, 7, 8});
  CHECK(tok->encode("hi hi") == Ids{10, 10});
}
