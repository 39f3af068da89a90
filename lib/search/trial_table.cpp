// The table of a study's trials (see trial_table.h).
#include "search/trial_table.h"

#include <algorithm>
#include <cstdio>

namespace hftrain {

std::string short_value(const nlohmann::json& value) {
  if (value.is_null()) return "-";
  if (value.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", value.get<double>());
    return buf;
  }
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

std::string trials_table(const nlohmann::json& trials, const std::vector<std::string>& names, int64_t best) {
  std::vector<std::string> header = {"trial", "state", "value"};
  header.insert(header.end(), names.begin(), names.end());
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : trials) {
    const int64_t number = t.at("number").get<int64_t>();
    std::vector<std::string> row = {std::to_string(number) + (number == best ? "*" : ""), t.at("state").get<std::string>(),
                                    short_value(t.at("value"))};
    for (const auto& name : names) row.push_back(t.at("params").contains(name) ? short_value(t["params"][name]) : "-");
    rows.push_back(row);
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (std::size_t c = 0; c < cells.size(); ++c) text += (c ? "  " : "") + cells[c] + std::string(width[c] - cells[c].size(), ' ');
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return text + "\n";
  };
  std::string out = line(header);
  for (const auto& row : rows) out += line(row);
  if (best >= 0) out += "* best trial\n";
  return out;
}

}  // namespace hftrain
