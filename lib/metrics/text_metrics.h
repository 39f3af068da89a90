// Text metrics over decoded strings, for generated predictions against references (summarisation,
// translation): ROUGE-1 / ROUGE-2 / ROUGE-L / ROUGE-Lsum as Google's rouge_score package defines them,
// and corpus BLEU as sacreBLEU computes it (13a tokenizer, exp smoothing). Pure functions of the
// strings: no LibTorch, no state. Written from the definitions (docs/generation.md states them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hftrain {

// ---- ROUGE ---------------------------------------------------------------------------------------

// rouge_score's default tokenizer: lowercase, every run of characters other than [a-z0-9] becomes a
// separator, split. (Case mapping is ASCII plus the two non-ASCII characters whose lowercase form starts
// with an ASCII letter: U+212A KELVIN SIGN -> k, U+0130 -> i; every other non-ASCII character separates.)
// With use_stemmer, tokens longer than 3 characters are Porter-stemmed (metrics/porter_stemmer).
std::vector<std::string> rouge_tokenize(const std::string& text, bool use_stemmer = false);

struct RougeScore {
  double precision = 0, recall = 0, fmeasure = 0;
};

// One prediction against one reference. `type` is rouge1 .. rouge9 (n-gram overlap), rougeL (longest
// common subsequence of the whole texts) or rougeLsum (texts split on newlines, summary-level union LCS).
RougeScore rouge_score(const std::string& prediction, const std::string& reference, const std::string& type,
                       bool use_stemmer = false);

struct RougeOptions {
  std::vector<std::string> rouge_types = {"rouge1", "rouge2", "rougeL", "rougeLsum"};
  bool use_stemmer = false;  // Porter-stem tokens longer than 3 characters (HF run_summarization: true)
};

// Corpus ROUGE streamed: each example is scored as it is added (per type, the sum of the best F-measure
// among its references), so that evaluation keeps no texts (HF batch_eval_metrics). result() is
// corpus_rouge's value for the examples added so far.
class RougeAccumulator {
 public:
  explicit RougeAccumulator(RougeOptions options = {});  // ConfigError for an unknown type
  void add(const std::string& prediction, const std::vector<std::string>& references);
  std::vector<std::pair<std::string, double>> result() const;

 private:
  RougeOptions options_;
  std::vector<double> sums_;  // per type
  int64_t count_ = 0;
};

// Corpus ROUGE: per type, the mean F-measure over the examples (what rouge_score's bootstrap aggregator
// estimates and `evaluate`'s rouge with use_aggregator=False averages to), on a 0-1 scale. With several
// references per prediction the best F-measure among them counts (rouge_score's score_multi).
// Returned in the order of options.rouge_types.
std::vector<std::pair<std::string, double>> corpus_rouge(const std::vector<std::string>& predictions,
                                                         const std::vector<std::vector<std::string>>& references,
                                                         const RougeOptions& options = {});

// ---- BLEU ----------------------------------------------------------------------------------------

// sacreBLEU's default '13a' tokenizer (mteval-v13a): drops <skipped>, joins "-\n", unescapes &quot;
// &amp; &lt; &gt;, splits off punctuation and symbols, periods and commas unless between digits, and a
// dash after a digit.
std::vector<std::string> tokenize_13a(const std::string& text);

struct BleuScore {
  double score = 0;                  // 0-100
  std::vector<int64_t> counts;       // matched n-grams, n = 1..4
  std::vector<int64_t> totals;       // n-grams in the predictions
  std::vector<double> precisions;    // 0-100, after smoothing
  double bp = 0;                     // brevity penalty
  int64_t sys_len = 0, ref_len = 0;  // tokens of the predictions; of the closest reference per example
};

// Corpus BLEU (max n-gram order 4, exp smoothing, no effective order, case-sensitive; sacreBLEU 2.x, which
// returns 0 without smoothing when no n-gram of any order matches): `references[i]` holds one or more
// references for `predictions[i]`.
BleuScore corpus_bleu(const std::vector<std::string>& predictions, const std::vector<std::vector<std::string>>& references);

// Corpus BLEU streamed: add() keeps only the example's n-gram match counts and lengths (sacreBLEU's
// sufficient statistics); result() is corpus_bleu's value for the examples added so far.
class BleuAccumulator {
 public:
  BleuAccumulator();
  void add(const std::string& prediction, const std::vector<std::string>& references);
  BleuScore result() const;

 private:
  std::vector<int64_t> counts_, totals_;
  int64_t sys_len_ = 0, ref_len_ = 0, examples_ = 0;
};

}  // namespace hftrain
