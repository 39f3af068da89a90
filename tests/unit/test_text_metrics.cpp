// ROUGE (rouge_score's definitions) and corpus BLEU (sacreBLEU's 13a + exp smoothing) against values
// worked out by hand in the comments.
#include <catch2/catch.hpp>

#include <cmath>

#include "metrics/text_metrics.h"
#include "util/error.h"

using namespace hftrain;

namespace {

using Strings = std::vector<std::string>;

double f1(double p, double r) { return p + r > 0 ? 2 * p * r / (p + r) : 0.0; }

}  // namespace

TEST_CASE("rouge tokenizer lowercases and splits on everything but a-z and 0-9", "[unit][text_metrics]") {
  CHECK(rouge_tokenize("Hello, World! It's 3:30pm.") == Strings{"hello", "world", "it", "s", "3", "30pm"});
  CHECK(rouge_tokenize("  state-of-the-art\tNLP\n") == Strings{"state", "of", "the", "art", "nlp"});
  CHECK(rouge_tokenize("caf\xc3\xa9 na\xc3\xafve") == Strings{"caf", "na", "ve"});  // é, ï separate
  CHECK(rouge_tokenize("\xe2\x84\xaa" "elvin \xc4\xb0stanbul") == Strings{"kelvin", "i", "stanbul"});
  CHECK(rouge_tokenize("!!! ...").empty());
  CHECK(rouge_tokenize("").empty());
}

TEST_CASE("rouge1 rouge2 rougeL on hand-checked pairs", "[unit][text_metrics]") {
  // pred: the cat sat on the mat    ref: the cat is on the mat  (6 tokens each)
  // unigrams: the x2, cat, on, mat match -> 5/6 both ways
  // bigrams: pred {the cat, cat sat, sat on, on the, the mat}, ref {the cat, cat is, is on, on the, the mat}:
  //   3 shared of 5 -> 3/5
  // LCS: the cat on the mat = 5 -> 5/6
  const std::string pred = "The cat sat on the mat.", ref = "The cat is on the mat";
  CHECK(rouge_score(pred, ref, "rouge1").fmeasure == Approx(5.0 / 6));
  CHECK(rouge_score(pred, ref, "rouge2").fmeasure == Approx(3.0 / 5));
  CHECK(rouge_score(pred, ref, "rougeL").fmeasure == Approx(5.0 / 6));
  CHECK(rouge_score(pred, ref, "rougeLsum").fmeasure == Approx(5.0 / 6));  // one line: same as rougeL

  // Punctuation: pred -> hello world it s 3 30pm (6), ref -> hello world its 3 30pm (5);
  // shared unigrams hello world 3 30pm = 4: P 4/6, R 4/5, F 8/11
  auto s = rouge_score("Hello, World! It's 3:30pm.", "hello world its 3 30pm", "rouge1");
  CHECK(s.precision == Approx(4.0 / 6));
  CHECK(s.recall == Approx(4.0 / 5));
  CHECK(s.fmeasure == Approx(8.0 / 11));

  // Repeated tokens are clipped: pred "the the the" vs ref "the cat": overlap min(3, 1) = 1: P 1/3, R 1/2
  s = rouge_score("the the the", "the cat", "rouge1");
  CHECK(s.precision == Approx(1.0 / 3));
  CHECK(s.recall == Approx(1.0 / 2));
  CHECK(s.fmeasure == Approx(f1(1.0 / 3, 0.5)));  // = 0.4
  CHECK(s.fmeasure == Approx(0.4));

  // LCS is a subsequence, not a substring: ref a b c d e, pred a x c y e -> a c e = 3: 3/5
  CHECK(rouge_score("a x c y e", "a b c d e", "rougeL").fmeasure == Approx(3.0 / 5));
  // rouge2 of a 1-token text: no bigrams at all -> 0
  CHECK(rouge_score("word", "word", "rouge2").fmeasure == 0.0);
  CHECK(rouge_score("word", "word", "rouge1").fmeasure == 1.0);
}

TEST_CASE("rouge with an empty prediction or reference is 0", "[unit][text_metrics]") {
  for (const char* type : {"rouge1", "rouge2", "rougeL", "rougeLsum"}) {
    INFO(type);
    CHECK(rouge_score("", "the cat", type).fmeasure == 0.0);
    CHECK(rouge_score("the cat", "", type).fmeasure == 0.0);
    CHECK(rouge_score("", "", type).fmeasure == 0.0);
    CHECK(rouge_score("?!", "the cat", type).fmeasure == 0.0);  // punctuation only: no tokens
  }
}

TEST_CASE("rougeLsum splits on newlines and takes the union LCS per reference sentence", "[unit][text_metrics]") {
  // Lin (2004) section 3.2: r = w1 w2 w3 w4 w5; candidate sentences c1 = w1 w2 w6 w7 w8, c2 = w1 w3 w8 w9 w5.
  // LCS(r, c1) = w1 w2, LCS(r, c2) = w1 w3 w5, union = w1 w2 w3 w5: 4 hits; m = 5, n = 10:
  // R 4/5, P 4/10, F = 2 * 0.4 * 0.8 / 1.2 = 8/15
  auto s = rouge_score("w1 w2 w6 w7 w8\nw1 w3 w8 w9 w5", "w1 w2 w3 w4 w5", "rougeLsum");
  CHECK(s.recall == Approx(4.0 / 5));
  CHECK(s.precision == Approx(4.0 / 10));
  CHECK(s.fmeasure == Approx(8.0 / 15));

  // Sentence order: ref "a b c \n d e", pred "d e \n a b c". rougeL over the whole texts: LCS(a b c d e,
  // d e a b c) = a b c = 3 -> 3/5. rougeLsum: ref sentence a b c meets a b c, d e meets d e: 5 hits -> 1.
  CHECK(rouge_score("d e\na b c", "a b c\nd e", "rougeL").fmeasure == Approx(3.0 / 5));
  CHECK(rouge_score("d e\na b c", "a b c\nd e", "rougeLsum").fmeasure == Approx(1.0));

  // Which of two equally long LCS is taken matters for the union. ref sentence a b; candidate sentences
  // "b a" and "a". LCS(a b, b a) has length 1: the walk back from the end compares t[2][1] = 1 with
  // t[1][2] = 1, not greater, so it shortens the reference and takes 'a' (position 0). LCS(a b, a) = a.
  // Union {a}: 1 hit; m = 2, n = 3: R 1/2, P 1/3, F 2/5. (Taking 'b' from the first would give 2 hits, F 0.8.)
  s = rouge_score("b a\na", "a b", "rougeLsum");
  CHECK(s.recall == Approx(1.0 / 2));
  CHECK(s.precision == Approx(1.0 / 3));
  CHECK(s.fmeasure == Approx(0.4));

  // Hits come from the union of positions: ref "x x" (one sentence), pred "x\nx\nx". Each LCS(x x, x)
  // walks back from (2, 1) and matches at once: reference position 1, for all three -> union {1}: 1 hit.
  // m = 2, n = 3: R 1/2, P 1/3, F 0.4
  s = rouge_score("x\nx\nx", "x x", "rougeLsum");
  CHECK(s.recall == Approx(1.0 / 2));
  CHECK(s.fmeasure == Approx(0.4));

  // Empty lines are dropped; a blank (space-only) line stays as a sentence without tokens.
  CHECK(rouge_score("a b\n\n\nc", "a b c", "rougeLsum").fmeasure == Approx(1.0));
  CHECK(rouge_score(" \na b c", "a b c", "rougeLsum").fmeasure == Approx(1.0));
}

TEST_CASE("corpus rouge averages per-example F-measures and takes the best reference", "[unit][text_metrics]") {
  // example 1: rouge1 F 5/6 (above); example 2: empty prediction -> 0. Mean 5/12.
  auto r = corpus_rouge({"The cat sat on the mat.", ""}, {{"The cat is on the mat"}, {"anything"}});
  REQUIRE(r.size() == 4);
  CHECK(r[0].first == "rouge1");
  CHECK(r[0].second == Approx(5.0 / 12));
  CHECK(r[1].first == "rouge2");
  CHECK(r[1].second == Approx(3.0 / 10));
  CHECK(r[2].first == "rougeL");
  CHECK(r[3].first == "rougeLsum");
  // Two references: "a b" scores rouge1 F 1 against "a b" and 2/3 against "a b c d" -> the best, 1.
  RougeOptions one;
  one.rouge_types = {"rouge1"};
  CHECK(corpus_rouge({"a b"}, {{"a b c d", "a b"}}, one)[0].second == Approx(1.0));
  CHECK(corpus_rouge({}, {}, one)[0].second == 0.0);

  // use_stemmer: tokens longer than 3 characters are Porter-stemmed. "The cats were running" ->
  // the cat were run; "the cat ran" -> the cat ran: rouge1 P = 2/4, R = 2/3, F = 4/7 (without stemming
  // only "the" matches: P = 1/4, R = 1/3, F = 2/7). "was" and "ran" (3 characters) are never stemmed.
  RougeOptions stem;
  stem.rouge_types = {"rouge1", "rougeL"};
  stem.use_stemmer = true;
  CHECK(rouge_tokenize("The cats were running, happily.", true) == Strings{"the", "cat", "were", "run", "happili"});
  const auto stemmed = corpus_rouge({"The cats were running"}, {{"the cat ran"}}, stem);
  CHECK(stemmed[0].second == Approx(4.0 / 7));
  CHECK(stemmed[1].second == Approx(4.0 / 7));
  stem.use_stemmer = false;
  CHECK(corpus_rouge({"The cats were running"}, {{"the cat ran"}}, stem)[0].second == Approx(2.0 / 7));
  RougeOptions bad;
  bad.rouge_types = {"rougeW"};
  CHECK_THROWS_AS(corpus_rouge({"a"}, {{"a"}}, bad), ConfigError);
  CHECK_THROWS_AS(corpus_rouge({"a", "b"}, {{"a"}}), ConfigError);
}

TEST_CASE("13a tokenizer splits punctuation as mteval-v13a", "[unit][text_metrics]") {
  // '!' '(' ')' are symbols; the comma after 'o' and the period after 'x' split (not after a digit);
  // 3.5 keeps its period (between digits); the dash after 5 splits; the apostrophe stays.
  CHECK(tokenize_13a("Hello, world! It's 3.5-4 dollars (approx.)") ==
        Strings{"Hello", ",", "world", "!", "It's", "3.5", "-", "4", "dollars", "(", "approx", ".", ")"});
  // 1,000 keeps its comma (digits on both sides); in "e.g." both periods follow a letter and split;
  // a dash splits only after a digit.
  CHECK(tokenize_13a("1,000 people, e.g. a-b 7-up") ==
        Strings{"1,000", "people", ",", "e", ".", "g", ".", "a-b", "7", "-", "up"});
  CHECK(tokenize_13a("AT&amp;T &lt;tag&gt; &quot;q&quot;") ==
        Strings{"AT", "&", "T", "<", "tag", ">", "\"", "q", "\""});
  CHECK(tokenize_13a("line one-\ncontinued\nnext<skipped>") == Strings{"line", "onecontinued", "next"});
  CHECK(tokenize_13a("caf\xc3\xa9.") == Strings{"caf\xc3\xa9", "."});
  CHECK(tokenize_13a("a\xc2\xa0" "b").size() == 2);  // no-break space separates, as Python's str.split
  CHECK(tokenize_13a("").empty());
}

TEST_CASE("corpus BLEU on hand-checked examples", "[unit][text_metrics]") {
  SECTION("identical: every precision 100, BLEU 100") {
    auto b = corpus_bleu({"the cat sat on the mat"}, {{"the cat sat on the mat"}});
    CHECK(b.score == Approx(100.0));
    CHECK(b.bp == 1.0);
    CHECK(b.counts == std::vector<int64_t>{6, 5, 4, 3});
    CHECK(b.totals == std::vector<int64_t>{6, 5, 4, 3});
  }
  SECTION("partial matches") {
    // hyp: the cat sat on a rug; ref: the cat sat on the mat (6 tokens each, bp 1)
    // 1-grams: the cat sat on = 4/6; 2-grams: the cat, cat sat, sat on = 3/5; 3-grams: the cat sat,
    // cat sat on = 2/4; 4-grams: the cat sat on = 1/3. BLEU = 100 (4/6 * 3/5 * 2/4 * 1/3)^(1/4) = 100 (1/15)^(1/4)
    auto b = corpus_bleu({"the cat sat on a rug"}, {{"the cat sat on the mat"}});
    CHECK(b.counts == std::vector<int64_t>{4, 3, 2, 1});
    CHECK(b.totals == std::vector<int64_t>{6, 5, 4, 3});
    CHECK(b.score == Approx(100.0 * std::pow(1.0 / 15, 0.25)));  // 50.81
  }
  SECTION("zero matches of an order: exp smoothing") {
    // hyp: the dog ran fast today; ref: the dog sat fast today
    // 1-grams 4/5 = 80; 2-grams (the dog, fast today) 2/4 = 50; 3-grams 0/3 -> first zero: 100 / (2 * 3);
    // 4-grams 0/2 -> second zero: 100 / (4 * 2) = 12.5. BLEU = (80 * 50 * 16.667 * 12.5)^(1/4) = 30.21
    auto b = corpus_bleu({"the dog ran fast today"}, {{"the dog sat fast today"}});
    CHECK(b.counts == std::vector<int64_t>{4, 2, 0, 0});
    CHECK(b.precisions[2] == Approx(100.0 / 6));
    CHECK(b.precisions[3] == Approx(12.5));
    CHECK(b.score == Approx(std::pow(80.0 * 50.0 * (100.0 / 6) * 12.5, 0.25)));
    CHECK(b.score == Approx(30.214).epsilon(1e-4));
  }
  SECTION("brevity penalty") {
    // hyp: the cat sat on the (5), ref 6 tokens: every n-gram matches, bp = exp(1 - 6/5)
    auto b = corpus_bleu({"the cat sat on the"}, {{"the cat sat on the mat"}});
    CHECK(b.bp == Approx(std::exp(-0.2)));
    CHECK(b.score == Approx(100.0 * std::exp(-0.2)));  // 81.87
    CHECK(b.sys_len == 5);
    CHECK(b.ref_len == 6);
  }
  SECTION("too short for 3-grams: BLEU 0") {
    auto b = corpus_bleu({"the cat"}, {{"the cat sat on the mat"}});
    CHECK(b.totals[2] == 0);
    CHECK(b.score == 0.0);
  }
  SECTION("an empty prediction in a corpus adds reference length only") {
    // sys_len 6, ref_len 6 + 3; n-grams all match: BLEU = 100 exp(1 - 9/6)
    auto b = corpus_bleu({"the cat sat on the mat", ""}, {{"the cat sat on the mat"}, {"a b c"}});
    CHECK(b.ref_len == 9);
    CHECK(b.score == Approx(100.0 * std::exp(-0.5)));  // 60.65
  }
  SECTION("no match at all: 0 without smoothing") {
    // "a b c d" vs "e f g h": every count 0 -> BLEU 0, precisions 0 (smoothing would give 100/2/4 ... > 0)
    auto none = corpus_bleu({"a b c d"}, {{"e f g h"}});
    CHECK(none.score == 0.0);
    CHECK(none.precisions == std::vector<double>{0, 0, 0, 0});
    CHECK(none.bp == 1.0);
  }
  SECTION("empty reference, empty prediction, empty corpus") {
    // hyp "a b" vs "": nothing matches -> 0; ref_len 0 <= sys_len 2 -> bp 1
    auto b = corpus_bleu({"a b"}, {{""}});
    CHECK(b.ref_len == 0);
    CHECK(b.bp == 1.0);
    CHECK(b.score == 0.0);
    // "" vs "a": sys_len 0 < ref_len 1 -> bp 0; nothing to match -> 0
    auto e = corpus_bleu({""}, {{"a"}});
    CHECK(e.bp == 0.0);
    CHECK(e.score == 0.0);
    // nothing at all: sys_len = ref_len = 0 -> bp 1, BLEU 0
    auto empty = corpus_bleu({}, {});
    CHECK(empty.bp == 1.0);
    CHECK(empty.score == 0.0);
  }
  SECTION("several references: clipped by the most occurrences in one, closest length (shorter on a tie)") {
    // hyp "the the the the the" (5): 'the' appears twice in ref 1, once in ref 2 -> 2 of 5 count.
    // ref lengths 4 and 6 are both 1 away from 5: the shorter, 4, is taken -> bp 1.
    auto b = corpus_bleu({"the the the the the"}, {{"the the cat sat", "the mat is on a mat"}});
    CHECK(b.counts[0] == 2);
    CHECK(b.ref_len == 4);
    CHECK(b.bp == 1.0);
  }
  SECTION("punctuation is tokenized before matching") {
    // "Hello, world!" -> Hello , world ! ; ref "Hello , world !" tokenizes the same -> 100
    CHECK(corpus_bleu({"Hello, world!"}, {{"Hello , world !"}}).score == Approx(100.0));
    // case-sensitive: "hello" does not match "Hello": 1-grams 3/4
    CHECK(corpus_bleu({"hello, world!"}, {{"Hello, world!"}}).counts[0] == 3);
  }
  CHECK_THROWS_AS(corpus_bleu({"a"}, {}), ConfigError);
  CHECK_THROWS_AS(corpus_bleu({"a"}, {{}}), ConfigError);
}
