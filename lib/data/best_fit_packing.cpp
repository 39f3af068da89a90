// Best-fit decreasing and wrapped packing (see best_fit_packing.h).
#include "data/best_fit_packing.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <utility>

#include "util/error.h"

namespace hftrain {
namespace {

void append(Example& row, const Example& e, std::size_t n) {
  row.input_ids.insert(row.input_ids.end(), e.input_ids.begin(), e.input_ids.begin() + static_cast<std::ptrdiff_t>(n));
  for (std::size_t t = 0; t < n; ++t) row.labels.push_back(t < e.labels.size() ? e.labels[t] : -100);
}

std::vector<Example> best_fit_decreasing(const std::vector<Example>& examples, int64_t max_length) {
  const auto limit = static_cast<std::size_t>(max_length);
  std::vector<std::size_t> order(examples.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  auto length = [&](std::size_t i) { return std::min(examples[i].input_ids.size(), limit); };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return length(a) > length(b); });
  std::vector<Example> rows;
  std::set<std::pair<std::size_t, std::size_t>> room;  // (tokens free, row index): the tightest fit first
  for (std::size_t i : order) {
    const std::size_t n = length(i);
    if (n == 0) continue;
    auto it = room.lower_bound({n, 0});
    std::size_t r = rows.size();
    if (it != room.end()) {
      r = it->second;
      room.erase(it);
    } else {
      rows.emplace_back();
    }
    Example& row = rows[r];
    if (row.segment_lengths.empty()) row.prompt_length = static_cast<int64_t>(n) / 2;
    append(row, examples[i], n);
    row.segment_lengths.push_back(static_cast<int64_t>(n));
    if (row.input_ids.size() < limit) room.insert({limit - row.input_ids.size(), r});
  }
  return rows;
}

std::vector<Example> wrapped(const std::vector<Example>& examples, int64_t max_length) {
  Example stream;
  for (const Example& e : examples) append(stream, e, e.input_ids.size());
  std::vector<Example> rows;
  const auto limit = static_cast<std::size_t>(max_length);
  for (std::size_t at = 0; at < stream.input_ids.size(); at += limit) {
    const std::size_t end = std::min(at + limit, stream.input_ids.size());
    Example row;
    row.input_ids.assign(stream.input_ids.begin() + static_cast<std::ptrdiff_t>(at),
                         stream.input_ids.begin() + static_cast<std::ptrdiff_t>(end));
    row.labels.assign(stream.labels.begin() + static_cast<std::ptrdiff_t>(at),
                      stream.labels.begin() + static_cast<std::ptrdiff_t>(end));
    row.prompt_length = static_cast<int64_t>(end - at) / 2;
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

std::vector<Example> pack_examples(const std::vector<Example>& examples, const std::string& strategy, int64_t max_length) {
  if (max_length < 1) throw ConfigError("data.max_length: packing needs the length of a packed row (max_length > 0)");
  if (strategy == "bfd") return best_fit_decreasing(examples, max_length);
  if (strategy == "wrapped") return wrapped(examples, max_length);
  throw ConfigError("data.packing_strategy: '" + strategy + "' is not a packing strategy (bfd, wrapped)");
}

}  // namespace hftrain
