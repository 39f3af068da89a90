// Duplicate keys in YAML and JSON input. yaml-cpp keeps every key/value pair of a mapping in file order,
// but a lookup by key finds only one of them, so a repeated key would silently drop a value. This walks
// the whole tree (mappings inside mappings and inside lists) and reports every repeat.
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

#include "config/issues.h"

namespace hftrain {

// Reports each key that appears more than once in one mapping of `node`, at any depth, as a problem at
// the repeat naming the dotted key and the file:line:col of both occurrences. `path` is `node`'s own
// dotted path ("" for a document root). JSON read through yaml-cpp is checked the same way.
void report_duplicate_keys(const YAML::Node& node, const std::string& path, Issues& issues);

}  // namespace hftrain
