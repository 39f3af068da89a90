// jinja2's filters over sequences and mappings (join, items, select / reject, selectattr / rejectattr,
// map, first, last, list, unique, dictsort, sort, reverse, sum), added to the filter table of filters.cpp.
#pragma once

#include <map>
#include <string>

#include "jinja/library.h"

namespace hftrain::jinja {

void add_sequence_filters(std::map<std::string, FilterFunction>& table);

}  // namespace hftrain::jinja
