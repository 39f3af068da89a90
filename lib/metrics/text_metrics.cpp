// ROUGE and corpus BLEU over decoded strings (see text_metrics.h).
#include "metrics/text_metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <unordered_map>

#include "metrics/porter_stemmer.h"
#include "util/error.h"

namespace hftrain {
namespace {

// ---- shared: UTF-8 and Python's notion of whitespace --------------------------------------------

// Decodes the code point starting at text[i] (a malformed byte counts as one code point of its own);
// returns it and sets `length` to the bytes it took.
uint32_t decode_utf8(const std::string& text, std::size_t i, std::size_t& length) {
  const auto b = static_cast<unsigned char>(text[i]);
  int extra = b >= 0xF0 && b < 0xF8 ? 3 : b >= 0xE0 && b < 0xF0 ? 2 : b >= 0xC0 && b < 0xE0 ? 1 : 0;
  if (i + static_cast<std::size_t>(extra) >= text.size()) extra = 0;  // truncated at the end
  uint32_t cp = extra == 0 ? b : b & (0x3F >> extra);
  for (int k = 1; k <= extra; ++k) {
    const auto c = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
    if ((c & 0xC0) != 0x80) {  // not a continuation byte: the lead byte stands alone
      length = 1;
      return b;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  length = static_cast<std::size_t>(extra) + 1;
  return cp;
}

// Python's str.isspace(), which str.split() and str.rstrip() use.
bool is_python_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Python's str.split() with no argument.
std::vector<std::string> split_python_whitespace(const std::string& text) {
  std::vector<std::string> out;
  std::string current;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = 1;
    const uint32_t cp = decode_utf8(text, i, n);
    if (is_python_space(cp)) {
      if (!current.empty()) out.push_back(std::move(current));
      current.clear();
    } else {
      current.append(text, i, n);
    }
    i += n;
  }
  if (!current.empty()) out.push_back(std::move(current));
  return out;
}

// Python's str.rstrip() with no argument.
std::string rstrip_python(const std::string& text) {
  std::size_t end = 0;  // one past the last non-space code point
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = 1;
    if (!is_python_space(decode_utf8(text, i, n))) end = i + n;
    i += n;
  }
  return text.substr(0, end);
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) s.replace(pos, from.size(), to);
}

// ---- ROUGE ---------------------------------------------------------------------------------------

double fmeasure(double precision, double recall) {
  return precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
}

std::map<std::vector<std::string>, int64_t> ngram_counts(const std::vector<std::string>& tokens, std::size_t n) {
  std::map<std::vector<std::string>, int64_t> counts;
  for (std::size_t i = 0; i + n <= tokens.size(); ++i) ++counts[std::vector<std::string>(tokens.begin() + i, tokens.begin() + i + n)];
  return counts;
}

RougeScore rouge_n(const std::vector<std::string>& prediction, const std::vector<std::string>& reference, std::size_t n) {
  const auto pred = ngram_counts(prediction, n), ref = ngram_counts(reference, n);
  int64_t overlap = 0, pred_total = 0, ref_total = 0;
  for (const auto& [gram, count] : ref) {
    ref_total += count;
    const auto it = pred.find(gram);
    if (it != pred.end()) overlap += std::min(count, it->second);
  }
  for (const auto& kv : pred) pred_total += kv.second;
  RougeScore s;
  s.precision = static_cast<double>(overlap) / static_cast<double>(std::max<int64_t>(pred_total, 1));
  s.recall = static_cast<double>(overlap) / static_cast<double>(std::max<int64_t>(ref_total, 1));
  s.fmeasure = fmeasure(s.precision, s.recall);
  return s;
}

// table[i][j] = LCS length of a[0, i) and b[0, j).
std::vector<std::vector<int64_t>> lcs_table(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::vector<int64_t>> t(a.size() + 1, std::vector<int64_t>(b.size() + 1, 0));
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j)
      t[i][j] = a[i - 1] == b[j - 1] ? t[i - 1][j - 1] + 1 : std::max(t[i - 1][j], t[i][j - 1]);
  return t;
}

RougeScore rouge_l(const std::vector<std::string>& prediction, const std::vector<std::string>& reference) {
  RougeScore s;
  if (prediction.empty() || reference.empty()) return s;
  const double lcs = static_cast<double>(lcs_table(reference, prediction)[reference.size()][prediction.size()]);
  s.precision = lcs / static_cast<double>(prediction.size());
  s.recall = lcs / static_cast<double>(reference.size());
  s.fmeasure = fmeasure(s.precision, s.recall);
  return s;
}

// Positions in `ref` of one longest common subsequence with `cand`, found by walking the table back from
// the end: a match is taken; otherwise the step goes left (shorter candidate) only when that keeps a strictly
// longer subsequence than going up (shorter reference). The choice among equally long subsequences
// matters for the union below, so this walk is part of the definition (rouge_score's).
std::vector<std::size_t> lcs_positions(const std::vector<std::string>& ref, const std::vector<std::string>& cand) {
  const auto t = lcs_table(ref, cand);
  std::vector<std::size_t> positions;
  std::size_t i = ref.size(), j = cand.size();
  while (i > 0 && j > 0) {
    if (ref[i - 1] == cand[j - 1]) {
      positions.push_back(i - 1);
      --i;
      --j;
    } else if (t[i][j - 1] > t[i - 1][j]) {
      --j;
    } else {
      --i;
    }
  }
  std::reverse(positions.begin(), positions.end());
  return positions;
}

// Summary-level LCS (Lin 2004, section 3.2): for each reference sentence, the union of its LCS positions
// with every prediction sentence; each token of the union is a hit while both texts still have an unused
// occurrence of it.
RougeScore rouge_lsum(const std::vector<std::vector<std::string>>& prediction, const std::vector<std::vector<std::string>>& reference) {
  RougeScore s;
  if (prediction.empty() || reference.empty()) return s;
  std::size_t m = 0, n = 0;
  std::unordered_map<std::string, int64_t> ref_left, pred_left;
  for (const auto& sentence : reference) {
    m += sentence.size();
    for (const auto& t : sentence) ++ref_left[t];
  }
  for (const auto& sentence : prediction) {
    n += sentence.size();
    for (const auto& t : sentence) ++pred_left[t];
  }
  if (m == 0 || n == 0) return s;
  int64_t hits = 0;
  for (const auto& ref_sentence : reference) {
    std::set<std::size_t> union_positions;
    for (const auto& pred_sentence : prediction)
      for (std::size_t p : lcs_positions(ref_sentence, pred_sentence)) union_positions.insert(p);
    for (std::size_t p : union_positions) {
      const std::string& token = ref_sentence[p];
      auto& in_pred = pred_left[token];
      auto& in_ref = ref_left[token];
      if (in_pred > 0 && in_ref > 0) {
        ++hits;
        --in_pred;
        --in_ref;
      }
    }
  }
  s.recall = static_cast<double>(hits) / static_cast<double>(m);
  s.precision = static_cast<double>(hits) / static_cast<double>(n);
  s.fmeasure = fmeasure(s.precision, s.recall);
  return s;
}

// Lines of `text` (split on "\n"; empty lines dropped, as rouge_score does), each tokenized.
std::vector<std::vector<std::string>> rouge_sentences(const std::string& text, bool use_stemmer) {
  std::vector<std::vector<std::string>> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(rouge_tokenize(text.substr(start, end - start), use_stemmer));
    start = end + 1;
  }
  return out;
}

// 0 for rougeL / rougeLsum, N for rougeN; throws for anything else.
std::size_t rouge_order(const std::string& type) {
  if (type == "rougeL" || type == "rougeLsum") return 0;
  if (type.size() == 6 && type.compare(0, 5, "rouge") == 0 && type[5] >= '1' && type[5] <= '9')
    return static_cast<std::size_t>(type[5] - '0');
  throw ConfigError("unknown ROUGE type '" + type + "': use rouge1 .. rouge9, rougeL or rougeLsum");
}

// ---- BLEU ----------------------------------------------------------------------------------------

constexpr int kBleuOrder = 4;

// Symbols 13a surrounds with spaces: { | } ~  [ \ ] ^ _ `  space ! " # $ % &  ( ) * +  : ; < = > ? @  /
bool is_13a_symbol(unsigned char c) {
  return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) || (c >= 0x28 && c <= 0x2B) ||
         (c >= 0x3A && c <= 0x40) || c == '/';
}

std::unordered_map<std::string, int64_t> bleu_ngrams(const std::vector<std::string>& tokens) {
  std::unordered_map<std::string, int64_t> counts;
  for (int n = 1; n <= kBleuOrder; ++n)
    for (std::size_t i = 0; i + static_cast<std::size_t>(n) <= tokens.size(); ++i) {
      std::string key = tokens[i];  // tokens hold no spaces, so joining with one is unambiguous
      for (int k = 1; k < n; ++k) key += " " + tokens[i + static_cast<std::size_t>(k)];
      ++counts[key];
    }
  return counts;
}

}  // namespace

std::vector<std::string> rouge_tokenize(const std::string& text, bool use_stemmer) {
  std::vector<std::string> tokens;
  std::string current;
  auto flush = [&] {
    if (!current.empty()) tokens.push_back(std::move(current));
    current.clear();
  };
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = 1;
    const uint32_t cp = decode_utf8(text, i, n);
    i += n;
    if (cp >= 'A' && cp <= 'Z') {
      current += static_cast<char>(cp - 'A' + 'a');
    } else if ((cp >= 'a' && cp <= 'z') || (cp >= '0' && cp <= '9')) {
      current += static_cast<char>(cp);
    } else if (cp == 0x212A) {  // KELVIN SIGN lowercases to 'k'
      current += 'k';
    } else if (cp == 0x0130) {  // LATIN CAPITAL I WITH DOT lowercases to 'i' + a combining dot (a separator)
      current += 'i';
      flush();
    } else {
      flush();
    }
  }
  flush();
  if (use_stemmer)  // rouge_score stems only tokens longer than 3 characters
    for (auto& t : tokens)
      if (t.size() > 3) t = porter_stem(t);
  return tokens;
}

RougeScore rouge_score(const std::string& prediction, const std::string& reference, const std::string& type,
                       bool use_stemmer) {
  const std::size_t order = rouge_order(type);
  if (type == "rougeLsum") return rouge_lsum(rouge_sentences(prediction, use_stemmer), rouge_sentences(reference, use_stemmer));
  const auto pred = rouge_tokenize(prediction, use_stemmer), ref = rouge_tokenize(reference, use_stemmer);
  return order == 0 ? rouge_l(pred, ref) : rouge_n(pred, ref, order);
}

RougeAccumulator::RougeAccumulator(RougeOptions options) : options_(std::move(options)) {
  for (const auto& type : options_.rouge_types) rouge_order(type);  // unknown types fail before any work
  sums_.assign(options_.rouge_types.size(), 0.0);
}

void RougeAccumulator::add(const std::string& prediction, const std::vector<std::string>& references) {
  if (references.empty()) throw ConfigError("ROUGE: prediction " + std::to_string(count_) + " has no reference");
  for (std::size_t t = 0; t < options_.rouge_types.size(); ++t) {
    double best = -1;
    for (const auto& ref : references)
      best = std::max(best, rouge_score(prediction, ref, options_.rouge_types[t], options_.use_stemmer).fmeasure);
    sums_[t] += best;
  }
  ++count_;
}

std::vector<std::pair<std::string, double>> RougeAccumulator::result() const {
  std::vector<std::pair<std::string, double>> out;
  for (std::size_t t = 0; t < options_.rouge_types.size(); ++t)
    out.emplace_back(options_.rouge_types[t], count_ == 0 ? 0.0 : sums_[t] / static_cast<double>(count_));
  return out;
}

std::vector<std::pair<std::string, double>> corpus_rouge(const std::vector<std::string>& predictions,
                                                         const std::vector<std::vector<std::string>>& references,
                                                         const RougeOptions& options) {
  if (predictions.size() != references.size())
    throw ConfigError("ROUGE: " + std::to_string(predictions.size()) + " predictions but " +
                      std::to_string(references.size()) + " references");
  RougeAccumulator rouge(options);
  for (std::size_t i = 0; i < predictions.size(); ++i) rouge.add(predictions[i], references[i]);
  return rouge.result();
}

std::vector<std::string> tokenize_13a(const std::string& text) {
  std::string line = text;
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {  // in this order, as mteval-v13a
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  std::string spaced = " ";
  for (char c : line) {
    if (is_13a_symbol(static_cast<unsigned char>(c))) {
      spaced += ' ';
      spaced += c;
      spaced += ' ';
    } else {
      spaced += c;
    }
  }
  spaced += ' ';
  // Left-to-right, non-overlapping substitutions, one rule after the other (as re.sub).
  static const std::regex period_comma_after_non_digit("([^0-9])([.,])");
  static const std::regex period_comma_before_non_digit("([.,])([^0-9])");
  static const std::regex dash_after_digit("([0-9])(-)");
  spaced = std::regex_replace(spaced, period_comma_after_non_digit, "$1 $2 ");
  spaced = std::regex_replace(spaced, period_comma_before_non_digit, " $1 $2");
  spaced = std::regex_replace(spaced, dash_after_digit, "$1 $2 ");
  return split_python_whitespace(spaced);
}

BleuAccumulator::BleuAccumulator() : counts_(kBleuOrder, 0), totals_(kBleuOrder, 0) {}

void BleuAccumulator::add(const std::string& prediction, const std::vector<std::string>& references) {
  if (references.empty()) throw ConfigError("BLEU: prediction " + std::to_string(examples_) + " has no reference");
  const auto hyp = tokenize_13a(rstrip_python(prediction));
  const auto hyp_len = static_cast<int64_t>(hyp.size());
  std::unordered_map<std::string, int64_t> ref_max;  // per n-gram, its most occurrences in one reference
  int64_t closest = -1, closest_diff = -1;            // the reference length closest to hyp_len, shorter on a tie
  for (const auto& reference : references) {
    const auto ref = tokenize_13a(rstrip_python(reference));
    const auto len = static_cast<int64_t>(ref.size());
    const int64_t diff = std::abs(hyp_len - len);
    if (closest_diff < 0 || diff < closest_diff || (diff == closest_diff && len < closest)) {
      closest_diff = diff;
      closest = len;
    }
    for (const auto& [gram, count] : bleu_ngrams(ref)) ref_max[gram] = std::max(ref_max[gram], count);
  }
  sys_len_ += hyp_len;
  ref_len_ += closest;
  for (const auto& [gram, count] : bleu_ngrams(hyp)) {
    const auto n = static_cast<std::size_t>(std::count(gram.begin(), gram.end(), ' '));
    totals_[n] += count;
    const auto it = ref_max.find(gram);
    if (it != ref_max.end()) counts_[n] += std::min(count, it->second);
  }
  ++examples_;
}

BleuScore corpus_bleu(const std::vector<std::string>& predictions, const std::vector<std::vector<std::string>>& references) {
  if (predictions.size() != references.size())
    throw ConfigError("BLEU: " + std::to_string(predictions.size()) + " predictions but " +
                      std::to_string(references.size()) + " references");
  BleuAccumulator bleu;
  for (std::size_t i = 0; i < predictions.size(); ++i) bleu.add(predictions[i], references[i]);
  return bleu.result();
}

BleuScore BleuAccumulator::result() const {
  BleuScore b;
  b.counts = counts_;
  b.totals = totals_;
  b.precisions.assign(kBleuOrder, 0.0);
  b.sys_len = sys_len_;
  b.ref_len = ref_len_;
  if (b.sys_len < b.ref_len)
    b.bp = b.sys_len > 0 ? std::exp(1.0 - static_cast<double>(b.ref_len) / static_cast<double>(b.sys_len)) : 0.0;
  else
    b.bp = 1.0;
  // Not a single matching n-gram of any order: BLEU 0 and precisions 0, without smoothing.
  if (std::all_of(b.counts.begin(), b.counts.end(), [](int64_t c) { return c == 0; })) return b;
  double smooth = 1.0;
  for (int n = 0; n < kBleuOrder; ++n) {
    if (b.totals[n] == 0) break;  // no n-grams this long: precision stays 0, so BLEU is 0
    if (b.counts[n] == 0) {       // 'exp' smoothing: 1 / 2^k for the k-th order without a match
      smooth *= 2;
      b.precisions[n] = 100.0 / (smooth * static_cast<double>(b.totals[n]));
    } else {
      b.precisions[n] = 100.0 * static_cast<double>(b.counts[n]) / static_cast<double>(b.totals[n]);
    }
  }
  if (std::any_of(b.precisions.begin(), b.precisions.end(), [](double p) { return p == 0; })) return b;  // score 0
  double log_sum = 0;
  for (double p : b.precisions) log_sum += std::log(p);
  b.score = b.bp * std::exp(log_sum / kBleuOrder);
  return b;
}

}  // namespace hftrain
