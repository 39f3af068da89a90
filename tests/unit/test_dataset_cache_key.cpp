// The tokenized-dataset cache key against the file data source's option schema: changing any option
// changes the key, except the few the cache leaves out by name (options_outside_cache_key). The options are
// taken from the schema, so an option declared later is checked without this file changing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "config/issues.h"
#include "data/dataset_cache.h"
#include "data/file_sources.h"

using namespace hftrain;

namespace {

using Options = FileDataSource::Options;

std::string key_of(const Options& options) {
  CacheKey key;
  add_options_to_key(key, options);
  return key.hex();
}

// Another valid value for an option of type `type` (as the schema describes it) now holding `value`.
YAML::Node changed_value(const YAML::Node& value, const std::string& type) {
  if (type.rfind("one of ", 0) == 0) {  // a choice: the first other one
    std::string rest = type.substr(7) + " ";
    for (std::size_t at = 0, end; (end = rest.find(' ', at)) != std::string::npos; at = end + 1)
      if (rest.substr(at, end - at) != value.Scalar()) return YAML::Node(rest.substr(at, end - at));
  }
  if (value.IsSequence()) {
    YAML::Node more = YAML::Clone(value);
    more.push_back("extra");
    return more;
  }
  if (type == "bool") return YAML::Node(!value.as<bool>());
  if (type == "bool or null") return YAML::Node(value.IsNull() ? false : !value.as<bool>());
  if (type == "integer") return YAML::Node(value.as<int64_t>() + 1);
  if (type == "number") return YAML::Node(value.as<double>() + 0.125);
  if (type == "string") return YAML::Node(value.Scalar() + "-changed");
  FAIL("no way to change an option of type '" << type << "': teach changed_value in this test");
  return value;
}

// `base` with option `name` changed, through the options' own YAML form and validation.
Options with_changed(const Options& base, const std::string& name, const std::string& type) {
  const auto& schema = schema_of<Options>();
  YAML::Node node = schema.dump(base);
  node[name] = changed_value(node[name], type);
  Options out = base;
  Issues issues("test");
  schema.parse(node, "data", out, issues);
  INFO(name << ": " << (issues.empty() ? std::string() : issues.messages().front()));
  REQUIRE(issues.empty());
  return out;
}

}  // namespace

TEST_CASE("changing any option of a file data source changes its cache key unless the cache leaves it out by name",
          "[unit][datasets]") {
  Options base;
  base.train_file = "train.jsonl";
  const std::string base_key = key_of(base);
  const auto& outside = options_outside_cache_key();
  for (const auto& info : schema_of<Options>().describe()) {
    const Options changed = with_changed(base, info.name, info.type);
    const bool left_out = std::find(outside.begin(), outside.end(), info.name) != outside.end();
    INFO("option " << info.name << (left_out ? " (left out of the key)" : ""));
    CHECK((key_of(changed) == base_key) == left_out);
  }
}

TEST_CASE("the options left out of the dataset cache key are options of the file data source", "[unit][datasets]") {
  const auto names = schema_of<Options>().names();
  for (const auto& name : options_outside_cache_key()) {
    INFO(name);
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
  }
}
