// The hftrain side of tests/reference/porter_reference.py (hidden: run by that script, which sets
// HFTRAIN_PORTER_REFERENCE_DIR): stems every word of words.txt and writes {word: stem} to stems.json for
// the script to compare with NLTK's PorterStemmer.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

#include "metrics/porter_stemmer.h"

using namespace hftrain;

TEST_CASE("Porter stems of words generated outside hftrain (driven by porter_reference.py)", "[.][porter_ref]") {
  const char* root = std::getenv("HFTRAIN_PORTER_REFERENCE_DIR");
  REQUIRE(root != nullptr);
  std::ifstream in(std::string(root) + "/words.txt");
  REQUIRE(in);
  nlohmann::json stems = nlohmann::json::object();
  for (std::string word; std::getline(in, word);)
    if (!word.empty()) stems[word] = porter_stem(word);
  REQUIRE(stems.size() > 1000);
  std::ofstream(std::string(root) + "/stems.json") << stems.dump();
}
