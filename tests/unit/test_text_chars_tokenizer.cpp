// The character-level vocabulary of a text (nanoGPT shakespeare_char style), checked against
// hand-worked ids; UTF-8 characters are single tokens; bad input is named.
#include <catch2/catch.hpp>

#include "tokenizers/text_chars_tokenizer.h"
#include "util/error.h"

using namespace hftrain;

TEST_CASE("chars: the sorted distinct characters of the text get ids 0..V-1", "[unit][chars]") {
  TextCharsTokenizer tok("hello world\n", "t.txt");
  // Sorted: '\n' ' ' d e h l o r w
  CHECK(tok.vocab_size() == 9);
  CHECK(tok.encode("hello") == std::vector<int64_t>{4, 3, 5, 5, 6});
  CHECK(tok.encode("\nw d") == std::vector<int64_t>{0, 8, 1, 2});
  CHECK(tok.decode({7, 6, 2}) == "rod");
  CHECK(tok.decode(tok.encode("world hello\n")) == "world hello\n");
}

TEST_CASE("chars: a multi-byte UTF-8 character is one token, ordered by code point", "[unit][chars]") {
  TextCharsTokenizer tok("caf\xC3\xA9 \xE2\x82\xAC", "t.txt");  // "café €": U+00E9 and U+20AC
  // Sorted by code point: ' ' a c f é €
  CHECK(tok.vocab_size() == 6);
  CHECK(tok.encode("\xC3\xA9\xE2\x82\xAC" "a") == std::vector<int64_t>{4, 5, 1});
  CHECK(tok.decode({2, 1, 3, 4}) == "caf\xC3\xA9");
}

TEST_CASE("chars: invalid UTF-8 and unknown characters are errors naming the source", "[unit][chars]") {
  CHECK_THROWS_WITH(TextCharsTokenizer("ab\xC3(", "data.path 'x.txt'"),
                    Catch::Contains("data.path 'x.txt': invalid UTF-8 at byte offset 2"));
  TextCharsTokenizer tok("abc", "x.txt");
  CHECK_THROWS_AS(tok.encode("abz"), ConfigError);
  CHECK_THROWS_WITH(tok.encode("abz"), Catch::Contains("'z' is not in the character vocabulary of x.txt"));
}
