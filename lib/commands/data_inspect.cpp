// `hftrain data inspect` (see data_inspect.h).
#include "commands/data_inspect.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "builtins/register_builtins.h"
#include "data/dataset.h"
#include "runspec/run_spec.h"
#include "util/error.h"

namespace hftrain {
namespace {

// 0, then the end of each packed example in the row (one example: 0 and its length).
std::vector<int64_t> boundaries_of(const Example& e) {
  std::vector<int64_t> out{0};
  if (e.segment_lengths.empty()) out.push_back(static_cast<int64_t>(e.input_ids.size()));
  for (int64_t n : e.segment_lengths) out.push_back(out.back() + n);
  return out;
}

// The text of each run of tokens that carry loss.
std::vector<std::string> scored_runs(const Example& e, const Tokenizer& tok) {
  std::vector<std::string> runs;
  std::vector<int64_t> run;
  for (std::size_t i = 0; i <= e.input_ids.size(); ++i) {
    const bool scored = i < e.input_ids.size() && i < e.labels.size() && e.labels[i] != -100;
    if (scored) run.push_back(e.input_ids[i]);
    if (!scored && !run.empty()) {
      runs.push_back(tok.decode(run));
      run.clear();
    }
  }
  return runs;
}

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream o;
  for (std::size_t i = 0; i < v.size(); ++i) o << (i ? " " : "") << v[i];
  return o.str();
}

void print_example(int64_t index, const Example& e, const Tokenizer& tok) {
  using Json = nlohmann::ordered_json;
  const auto dump = [](const std::string& s) { return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace); };
  int64_t scored = 0;
  for (int64_t l : e.labels) scored += l != -100;
  std::cout << "example " << index << ": " << e.input_ids.size() << " tokens, " << scored << " carry loss";
  if (e.segment_lengths.size() > 0)
    std::cout << "; a packed row of " << e.segment_lengths.size() << " examples, boundaries " << join(boundaries_of(e));
  std::cout << "\n  text: " << dump(tok.decode(e.input_ids)) << "\n  input_ids: " << join(e.input_ids)
            << "\n  labels: " << join(e.labels) << "\n  loss on:";
  for (const std::string& run : scored_runs(e, tok)) std::cout << " " << dump(run);
  std::cout << "\n";
}

}  // namespace

int run_data_inspect(const DataInspectRequest& request) {
  std::string split = request.split == "validation" ? "eval" : request.split;
  if (split != "train" && split != "eval" && split != "test")
    throw UsageError("--split: '" + request.split + "' is not a split (train, eval or validation, test)");
  if (request.n < 1) throw UsageError("--n: give at least 1 example");
  const Components& c = builtin_components();
  const RunSpec spec = load_run_spec(request.spec_path, request.overrides, c.catalog());
  const DataUse use{split == "train", split == "eval", split == "test"};
  const std::unique_ptr<DataSource> data = c.data.build(spec.data.type, spec.data.options, use);
  const std::shared_ptr<const Dataset> ds = data->split(split);
  if (!ds) throw ConfigError("data: the spec's data has no " + request.split + " split");
  const Tokenizer* tok = data->tokenizer();
  if (!tok) throw ConfigError("data: '" + spec.data.type + "' has no tokenizer, so there is no text to show");
  const int64_t n = std::min(request.n, ds->size());
  for (int64_t i = 0; i < n; ++i) {
    const Example e = ds->get(i);
    if (!request.json) {
      print_example(i, e, *tok);
      continue;
    }
    nlohmann::ordered_json j;
    j["index"] = i;
    j["text"] = tok->decode(e.input_ids);
    j["input_ids"] = e.input_ids;
    j["labels"] = e.labels;
    j["boundaries"] = boundaries_of(e);
    std::cout << j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  }
  std::cout << std::flush;
  return 0;
}

}  // namespace hftrain
