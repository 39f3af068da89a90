// The Porter stemmer as ROUGE's use_stemmer applies it: M. F. Porter's 1980 suffix-stripping algorithm
// ("An algorithm for suffix stripping", Program 14(3)) in the variant rouge_score uses, NLTK's default
// mode (NLTK_EXTENSIONS), which departs from the paper in documented places: a table of irregular forms
// (sky/skies, dying, lying, tying, news, innings, outings, cannings, howe, proceed, exceed, succeed), words
// of one or two letters left alone, -ies / -ied of four-letter words to -ie, other -ied to -i, -y to -i
// only after a consonant that is not the first letter, -bli to -ble (not -abli), -alli to -al before the
// step 2 table, -fulli to -ful and -logi to -log, and a two-letter vowel-consonant word counting as *o.
// Lowercase ASCII input (rouge_score's tokens: [a-z0-9]+); digits count as consonants.
#pragma once

#include <string>

namespace hftrain {

std::string porter_stem(const std::string& word);

}  // namespace hftrain
