// docs/training_arguments.md against the code it describes, so that the page cannot drift from behaviour
// unnoticed: every option of the spec's training section is documented there; every field its tables call
// "training" is one the spec accepts under that name; every field they call "not built" is in the table of
// unbuilt HF fields (accepted only at values that ask for nothing) and is no option of the section.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "runspec/hf_flags.h"
#include "runspec/hf_unbuilt.h"
#include "runspec/sections.h"

using namespace hftrain;

namespace {

struct DocRow {
  std::vector<std::string> names;  // the backticked names of the first cell
  std::string treatment;           // the second cell
  int line = 0;
};

std::string doc_text() {
  const char* source = std::getenv("HFTRAIN_SOURCE_DIR");
  REQUIRE(source != nullptr);
  std::ifstream in(std::string(source) + "/docs/training_arguments.md");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The rows of the page's tables: "| `a`, `b` | treatment |".
std::vector<DocRow> doc_rows(const std::string& text) {
  std::vector<DocRow> rows;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  const std::regex name("`([a-z0-9_]+)`");
  while (std::getline(lines, line)) {
    ++number;
    if (line.rfind("| `", 0) != 0) continue;
    const auto second = line.find(" | ");
    if (second == std::string::npos) continue;
    DocRow row;
    row.line = number;
    const std::string first = line.substr(0, second);
    for (auto it = std::sregex_iterator(first.begin(), first.end(), name); it != std::sregex_iterator(); ++it)
      row.names.push_back((*it)[1]);
    row.treatment = line.substr(second + 3);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_CASE("docs/training_arguments.md: every training option is documented", "[unit][docs]") {
  const std::string text = doc_text();
  for (const std::string& option : schema_of<TrainingArgs>().names()) {
    INFO(option);
    CHECK(text.find("`" + option + "`") != std::string::npos);
  }
}

TEST_CASE("docs/training_arguments.md: what the tables call training loads, what they call not built is refused",
          "[unit][docs]") {
  const std::vector<DocRow> rows = doc_rows(doc_text());
  REQUIRE(rows.size() > 80);
  std::size_t accepted = 0, unbuilt = 0;
  for (const DocRow& row : rows) {
    for (const std::string& field : row.names) {
      INFO("docs/training_arguments.md:" << row.line << ": " << field);
      if (row.treatment.rfind("training", 0) == 0) {
        ++accepted;
        CHECK(find_hf_flag(field).has_value());  // an option of the section, an HF name mapped onto one, or accepted
      } else if (row.treatment.rfind("not built", 0) == 0) {
        ++unbuilt;
        CHECK(is_unbuilt_hf_field(field));
        CHECK(schema_of<TrainingArgs>().find(field) == nullptr);  // a built option is not "not built"
      }
    }
  }
  CHECK(accepted > 80);
  CHECK(unbuilt > 30);
}
