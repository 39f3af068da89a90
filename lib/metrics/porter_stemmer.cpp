// Porter stemmer, NLTK_EXTENSIONS variant (see porter_stemmer.h). Written from the algorithm's
// description: five steps of (suffix, replacement, condition on the remaining stem) rules, where the
// first rule whose suffix matches decides: its condition holding replaces the suffix, failing leaves the
// word as it is.
#include "metrics/porter_stemmer.h"

#include <functional>
#include <map>
#include <vector>

#include "util/strings.h"

namespace hftrain {
namespace {

std::string without(const std::string& word, const std::string& suffix) { return word.substr(0, word.size() - suffix.size()); }

// Porter's consonant: not a, e, i, o, u, and y only when it follows a vowel (or starts the word).
bool is_consonant(const std::string& word, std::size_t i) {
  const char c = word[i];
  if (c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u') return false;
  if (c == 'y') return i == 0 || !is_consonant(word, i - 1);
  return true;
}

// m in [C](VC)^m[V]: the number of vowel-to-consonant transitions.
int measure(const std::string& stem) {
  int m = 0;
  for (std::size_t i = 1; i < stem.size(); ++i) m += !is_consonant(stem, i - 1) && is_consonant(stem, i);
  return m;
}

bool has_vowel(const std::string& stem) {
  for (std::size_t i = 0; i < stem.size(); ++i)
    if (!is_consonant(stem, i)) return true;
  return false;
}

bool ends_double_consonant(const std::string& w) {
  return w.size() >= 2 && w[w.size() - 1] == w[w.size() - 2] && is_consonant(w, w.size() - 1);
}

// *o: consonant-vowel-consonant, the last not w, x or y; or (the extension) a two-letter vowel-consonant word.
bool ends_cvc(const std::string& w) {
  const std::size_t n = w.size();
  if (n >= 3 && is_consonant(w, n - 3) && !is_consonant(w, n - 2) && is_consonant(w, n - 1) && w[n - 1] != 'w' &&
      w[n - 1] != 'x' && w[n - 1] != 'y')
    return true;
  return n == 2 && !is_consonant(w, 0) && is_consonant(w, 1);
}

using Condition = std::function<bool(const std::string& stem)>;
struct Rule {
  std::string suffix, replacement;
  Condition condition;  // empty = always
};

// The first rule whose suffix ends the word decides. The suffix "*d" stands for a double consonant (the
// stem is the word without both letters).
std::string apply_rules(const std::string& word, const std::vector<Rule>& rules) {
  for (const auto& r : rules) {
    std::string stem;
    if (r.suffix == "*d") {
      if (!ends_double_consonant(word)) continue;
      stem = word.substr(0, word.size() - 2);
    } else {
      if (!ends_with(word, r.suffix)) continue;
      stem = without(word, r.suffix);
    }
    return !r.condition || r.condition(stem) ? stem + r.replacement : word;
  }
  return word;
}

bool positive_measure(const std::string& stem) { return measure(stem) > 0; }
bool measure_above_one(const std::string& stem) { return measure(stem) > 1; }

std::string step1a(const std::string& w) {
  if (ends_with(w, "ies") && w.size() == 4) return without(w, "ies") + "ie";
  return apply_rules(w, {{"sses", "ss", {}}, {"ies", "i", {}}, {"ss", "ss", {}}, {"s", "", {}}});
}

std::string step1b(const std::string& w) {
  if (ends_with(w, "ied")) return without(w, "ied") + (w.size() == 4 ? "ie" : "i");
  if (ends_with(w, "eed")) {
    const std::string stem = without(w, "eed");
    return measure(stem) > 0 ? stem + "ee" : w;
  }
  std::string stem;
  bool removed = false;
  for (const char* suffix : {"ed", "ing"})
    if (ends_with(w, suffix) && has_vowel(without(w, suffix))) {
      stem = without(w, suffix);
      removed = true;
      break;
    }
  if (!removed) return w;
  const char last = stem.back();
  return apply_rules(stem, {{"at", "ate", {}},
                            {"bl", "ble", {}},
                            {"iz", "ize", {}},
                            {"*d", std::string(1, last), [last](const std::string&) { return last != 'l' && last != 's' && last != 'z'; }},
                            {"", "e", [](const std::string& s) { return measure(s) == 1 && ends_cvc(s); }}});
}

std::string step1c(const std::string& w) {
  return apply_rules(w, {{"y", "i", [](const std::string& s) { return s.size() > 1 && is_consonant(s, s.size() - 1); }}});
}

std::string step2(const std::string& w) {
  if (ends_with(w, "alli") && positive_measure(without(w, "alli"))) return step2(without(w, "alli") + "al");
  const Condition pm = positive_measure;
  return apply_rules(w, {{"ational", "ate", pm}, {"tional", "tion", pm}, {"enci", "ence", pm},   {"anci", "ance", pm},
                         {"izer", "ize", pm},    {"bli", "ble", pm},     {"alli", "al", pm},      {"entli", "ent", pm},
                         {"eli", "e", pm},       {"ousli", "ous", pm},   {"ization", "ize", pm},  {"ation", "ate", pm},
                         {"ator", "ate", pm},    {"alism", "al", pm},    {"iveness", "ive", pm},  {"fulness", "ful", pm},
                         {"ousness", "ous", pm}, {"aliti", "al", pm},    {"iviti", "ive", pm},    {"biliti", "ble", pm},
                         {"fulli", "ful", pm},
                         // the 'l' of -logi stays with the stem for the measure (geo-logi like archaeo-logi)
                         {"logi", "log", [&w](const std::string&) { return positive_measure(w.substr(0, w.size() - 3)); }}});
}

std::string step3(const std::string& w) {
  const Condition pm = positive_measure;
  return apply_rules(w, {{"icate", "ic", pm}, {"ative", "", pm}, {"alize", "al", pm}, {"iciti", "ic", pm},
                         {"ical", "ic", pm},  {"ful", "", pm},   {"ness", "", pm}});
}

std::string step4(const std::string& w) {
  const Condition m1 = measure_above_one;
  return apply_rules(w, {{"al", "", m1},   {"ance", "", m1}, {"ence", "", m1}, {"er", "", m1},  {"ic", "", m1},
                         {"able", "", m1}, {"ible", "", m1}, {"ant", "", m1},  {"ement", "", m1}, {"ment", "", m1},
                         {"ent", "", m1},
                         {"ion", "", [](const std::string& s) { return measure(s) > 1 && !s.empty() && (s.back() == 's' || s.back() == 't'); }},
                         {"ou", "", m1},   {"ism", "", m1},  {"ate", "", m1},  {"iti", "", m1}, {"ous", "", m1},
                         {"ive", "", m1},  {"ize", "", m1}});
}

std::string step5a(const std::string& w) {
  if (!ends_with(w, "e")) return w;
  const std::string stem = without(w, "e");
  const int m = measure(stem);
  return m > 1 || (m == 1 && !ends_cvc(stem)) ? stem : w;
}

std::string step5b(const std::string& w) {
  return apply_rules(w, {{"ll", "l", [&w](const std::string&) { return measure(w.substr(0, w.size() - 1)) > 1; }}});
}

const std::map<std::string, std::string>& irregular_forms() {
  static const std::map<std::string, std::string> forms = {
      {"skies", "sky"},     {"sky", "sky"},         {"dying", "die"},     {"lying", "lie"},       {"tying", "tie"},
      {"news", "news"},     {"innings", "inning"},  {"inning", "inning"}, {"outings", "outing"},  {"outing", "outing"},
      {"cannings", "canning"}, {"canning", "canning"}, {"howe", "howe"}, {"proceed", "proceed"}, {"exceed", "exceed"},
      {"succeed", "succeed"}};
  return forms;
}

}  // namespace

std::string porter_stem(const std::string& word) {
  auto irregular = irregular_forms().find(word);
  if (irregular != irregular_forms().end()) return irregular->second;
  if (word.size() <= 2) return word;
  return step5b(step5a(step4(step3(step2(step1c(step1b(step1a(word))))))));
}

}  // namespace hftrain
