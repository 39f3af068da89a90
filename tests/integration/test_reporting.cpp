// What a user sees and what the reporters write, through the real binary: the run-start block, log
// lines and metrics tables (no JSON lines on the console), the progress bar on a terminal, log_level,
// memory / token / FLOP metrics, logs.jsonl, TensorBoard event files decoded by an independent Python
// reader (tests/reference/tensorboard_reader.py: TFRecord framing, CRC-32C and protobuf by hand), and
// `hftrain report` rendered in headless Chromium, whose drawn geometry must be an affine image of the
// logged (step, value) pairs.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <regex>
#include <tuple>

#include "cli_runner.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* kReportSpec = R"(model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}
data: {type: digit_reversal, num_digits: 3, train_size: 256, eval_size: 32, test_size: 4}
training:
  output_dir: out
  per_device_train_batch_size: 16
  max_steps: 12
  learning_rate: 0.003
  logging_steps: 4
  eval_strategy: steps
  eval_steps: 6
  save_strategy: "no"
)";

std::string reader_script() { return std::string(HFTRAIN_SOURCE_DIR) + "/tests/reference/tensorboard_reader.py"; }

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::exists(dir)) return files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(e.path());
  return files;
}

// HF rewrite_logs, written out from transformers' TensorBoardCallback.
std::string hf_tag(const std::string& key) {
  if (key.rfind("eval_", 0) == 0) return "eval/" + key.substr(5);
  if (key.rfind("test_", 0) == 0) return "test/" + key.substr(5);
  return "train/" + key;
}

// Number of model parameters outside the embeddings, from model.safetensors's header.
int64_t non_embedding_parameters(const std::string& path) {
  std::string blob = read_text(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(blob[static_cast<std::size_t>(i)]);
  json header = json::parse(blob.substr(8, n));
  int64_t total = 0;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__" || name.find(".wte.") != std::string::npos || name.find(".wpe.") != std::string::npos) continue;
    int64_t numel = 1;
    for (const auto& d : info["shape"]) numel *= d.get<int64_t>();
    total += numel;
  }
  return total;
}

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    CliResult r = run_shell(std::string("command -v ") + name + " 2>/dev/null");
    if (r.exit_code == 0 && !r.output.empty()) return r.output.substr(0, r.output.find('\n'));
  }
  return "";
}

std::string html_unescape(std::string s) {
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}}) {
    for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  }
  return s;
}

// Measures, in the browser, what each polyline actually drew: its points in screen pixels.
const char* kRenderCheckScript = R"(<script>
(function () {
  const series = [];
  for (const pl of document.querySelectorAll('polyline.series')) {
    const ctm = pl.getScreenCTM();
    const pts = [];
    for (let i = 0; i < pl.points.numberOfItems; ++i) {
      const p = pl.points.getItem(i).matrixTransform(ctm);
      pts.push([p.x, p.y]);
    }
    const box = pl.getBoundingClientRect();
    const svg = pl.ownerSVGElement.getBoundingClientRect();
    const style = getComputedStyle(pl);
    series.push({plot: pl.dataset.plot, run: pl.dataset.run, points: pts, width: box.width, height: box.height,
                 svg: [svg.left, svg.top, svg.width, svg.height], stroke: style.stroke,
                 visible: style.display !== 'none' && style.visibility === 'visible'});
  }
  const legends = [...document.querySelectorAll('section.plot .legend .item')].map(
      e => ({plot: e.closest('section').dataset.plot, run: e.dataset.run, width: e.getBoundingClientRect().width}));
  const circles = [...document.querySelectorAll('svg circle')].filter(c => c.getBoundingClientRect().width > 0).length;
  const pre = document.createElement('pre');
  pre.id = 'render-check';
  pre.textContent = JSON.stringify({series, legends, circles});
  document.body.appendChild(pre);
})();
</script>
)";

}  // namespace

TEST_CASE("train: readable console, metrics tables, memory/token/FLOP metrics, logs.jsonl, TensorBoard", "[integration]") {
  std::string dir = fresh_dir("reporting");
  write_text(dir + "/spec.yaml", kReportSpec);
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string out = dir + "/out";

  // Console: the start block, one line per log event, the tables; no JSON lines.
  CHECK_THAT(r.output, Catch::Contains("***** Running training *****"));
  CHECK_THAT(r.output, Catch::Contains("  Num examples = 256\n"));
  CHECK_THAT(r.output, Catch::Contains("  Global batch size (per device x accumulation x world size) = 16\n"));
  CHECK_THAT(r.output, Catch::Contains("  Steps per epoch = 16 (16 batches per device)\n"));
  CHECK_THAT(r.output, Catch::Contains("  Total optimization steps = 12\n"));
  CHECK_THAT(r.output, Catch::Contains("  Device = cpu, "));
  CHECK_THAT(r.output, Catch::Contains("step 4/12 | epoch 0.25 | loss "));
  CHECK_THAT(r.output, Catch::Contains("step 6/12 | epoch 0.38 | eval_loss "));
  CHECK_THAT(r.output, Catch::Contains("***** train metrics *****\n"));
  CHECK_THAT(r.output, Catch::Contains("***** eval metrics *****\n"));
  CHECK(std::regex_search(r.output, std::regex("\n  train_runtime +=  *[0-9]+:[0-9][0-9]:[0-9][0-9]\\.[0-9][0-9]\n")));
  CHECK(std::regex_search(r.output, std::regex("\n  train_mem_cpu_peaked_delta += +-?[0-9]+MB\n")));
  CHECK(r.output.find("\n{") == std::string::npos);
  CHECK(r.output.rfind("{", 0) == std::string::npos);

  // Metrics as HF defines them.
  json train = json::parse(read_text(out + "/train_results.json"));
  for (const char* k : {"init_mem_cpu_alloc_delta", "init_mem_cpu_peaked_delta", "train_mem_cpu_alloc_delta",
                        "train_mem_cpu_peaked_delta", "before_init_mem_cpu", "train_tokens_per_second", "total_flos"})
    CHECK(train.contains(k));
  CHECK(train["train_mem_cpu_peaked_delta"].get<int64_t>() >= 0);
  CHECK(train["before_init_mem_cpu"].get<int64_t>() > 0);
  const int64_t tokens = 12 * 16 * 7;  // steps x batch x "ddd=ddd"
  const int64_t n = non_embedding_parameters(out + "/model.safetensors");
  CHECK(train["total_flos"].get<double>() == 6.0 * static_cast<double>(n) * tokens);
  CHECK(train["train_tokens_per_second"].get<double>() ==
        Approx(tokens / train["train_runtime"].get<double>()).epsilon(0.01).margin(1.0));
  json eval = json::parse(read_text(out + "/eval_results.json"));
  CHECK(eval.contains("eval_mem_cpu_alloc_delta"));
  CHECK(eval.contains("eval_mem_cpu_peaked_delta"));
  CHECK_FALSE(eval.contains("init_mem_cpu_alloc_delta"));  // init went with train

  json state = json::parse(read_text(out + "/trainer_state.json"));
  const json& history = state["log_history"];
  REQUIRE(history.size() == 3 + 2 + 1);  // 3 train logs, 2 evaluations, the final train metrics

  // logs.jsonl: exactly the log_history entries, in order.
  std::ifstream jsonl(out + "/logs.jsonl");
  std::string line;
  std::vector<json> lines;
  while (std::getline(jsonl, line)) lines.push_back(json::parse(line));
  CHECK(json(lines) == history);

  // TensorBoard: one event file under out/runs/<date>_<host>/, decoded independently.
  const auto files = event_files(out + "/runs");
  REQUIRE(files.size() == 1);
  CHECK(files[0].parent_path().parent_path() == fs::path(out) / "runs");
  CliResult decoded = run_shell("python3 '" + reader_script() + "' '" + files[0].string() + "'");
  REQUIRE(decoded.exit_code == 0);
  json events = json::parse(decoded.output)["files"][0]["events"];
  REQUIRE(events.size() >= 2);
  CHECK(events[0]["file_version"] == "brain.Event:2");
  bool saw_args = false;
  std::vector<std::tuple<std::string, int64_t, double>> got, want;
  for (const auto& e : events) {
    if (!e.contains("values")) continue;
    for (const auto& v : e["values"]) {
      if (v.contains("simple_value")) got.emplace_back(v["tag"], e["step"], v["simple_value"]);
      if (v.value("tag", "") == "args/text_summary") {
        saw_args = v.value("plugin_name", "") == "text" &&
                   v["tensor"]["string_val"][0].get<std::string>().find("learning_rate: 0.003") != std::string::npos;
      }
    }
  }
  CHECK(saw_args);
  for (const auto& entry : history)
    for (const auto& [k, v] : entry.items())
      if (k != "step" && v.is_number())
        want.emplace_back(hf_tag(k), entry["step"], static_cast<double>(static_cast<float>(v.get<double>())));
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  CHECK(json(got).dump() == json(want).dump());
  for (const char* tag : {"train/loss", "train/learning_rate", "train/grad_norm", "eval/loss", "eval/exact_match",
                          "train/train_runtime", "train/epoch"})
    CHECK(std::any_of(got.begin(), got.end(), [&](const auto& t) { return std::get<0>(t) == tag; }));

  // The reader really checks the CRCs: one flipped bit in the last record is caught.
  std::string blob = read_text(files[0].string());
  blob[blob.size() - 6] = static_cast<char>(blob[blob.size() - 6] ^ 0x01);
  write_text(dir + "/corrupt.tfevents", blob);
  CliResult bad = run_shell("python3 '" + reader_script() + "' '" + dir + "/corrupt.tfevents' 2>&1");
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.output, Catch::Contains("data CRC mismatch"));
}

TEST_CASE("report_to none, log_level warning, skip_memory_metrics, include_tokens_per_second", "[integration]") {
  std::string dir = fresh_dir("reporting_quiet");
  write_text(dir + "/spec.yaml", kReportSpec);
  CliResult r = run_hftrain("train spec.yaml --set training.report_to=none --set training.log_level=warning "
                            "--set training.skip_memory_metrics=true --set training.include_tokens_per_second=false "
                            "--set training.max_steps=4",
                            dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(fs::exists(dir + "/out/logs.jsonl"));
  CHECK_FALSE(fs::exists(dir + "/out/runs"));
  CHECK(r.output.find("Running training") == std::string::npos);
  CHECK(r.output.find("step 4/4") == std::string::npos);
  CHECK_THAT(r.output, Catch::Contains("***** train metrics *****"));  // results still print
  json train = json::parse(read_text(dir + "/out/train_results.json"));
  CHECK_FALSE(train.contains("train_mem_cpu_alloc_delta"));
  CHECK_FALSE(train.contains("train_tokens_per_second"));

  CliResult list = run_hftrain("train spec.yaml --set training.report_to=[jsonl] --set training.max_steps=2 "
                               "--set training.output_dir=out2",
                               dir);
  CHECK(list.exit_code == 0);
  CHECK(fs::exists(dir + "/out2/logs.jsonl"));
  CHECK_FALSE(fs::exists(dir + "/out2/runs"));
  CliResult typo = run_hftrain("train spec.yaml --set training.report_to=tensorbord", dir);
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.output, Catch::Contains("did you mean 'tensorboard'?"));
}

TEST_CASE("on a terminal the progress bar is drawn, disable_tqdm turns it off", "[integration]") {
  std::string dir = fresh_dir("reporting_tty");
  write_text(dir + "/spec.yaml", kReportSpec);
  // `script` runs the command on a pseudo-terminal (util-linux, essential in Debian).
  auto on_tty = [&](const std::string& args) {
    const std::string cmd = "cd '" + dir + "' && TERM=xterm LANG=C.UTF-8 script -qefc \"'" + std::string(HFTRAIN_BINARY) +
                            "' " + args + "\" /dev/null";
    return run_shell(cmd);
  };
  CliResult r = on_tty("train spec.yaml --set training.report_to=none");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("100%|"));
  CHECK_THAT(r.output, Catch::Contains("| 12/12 ["));
  CHECK_THAT(r.output, Catch::Contains("\r\x1b[2K"));  // redrawn in place
  CHECK_THAT(r.output, Catch::Contains("it/s"));
  CHECK_THAT(r.output, Catch::Contains("step 4/12 | epoch 0.25 | loss "));  // log lines above the bar

  CliResult plain = on_tty("train spec.yaml --set training.report_to=none --set training.disable_tqdm=true "
                           "--set training.output_dir=out2");
  INFO(plain.output);
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.output.find("100%|") == std::string::npos);
  CHECK_THAT(plain.output, Catch::Contains("step 4/12 | epoch 0.25 | loss "));
}

TEST_CASE("hftrain report draws every logged point of every run (checked in headless Chromium)", "[integration]") {
  std::string dir = fresh_dir("report_html");
  write_text(dir + "/spec.yaml", kReportSpec);
  REQUIRE(run_hftrain("train spec.yaml --set training.output_dir=a --set training.report_to=none "
                      "--set training.max_steps=8 --set training.logging_steps=2 --set training.eval_steps=4 "
                      "--set training.metric_for_best_model=exact_match",
                      dir).exit_code == 0);
  REQUIRE(run_hftrain("train spec.yaml --set training.output_dir=b --set training.report_to=none "
                      "--set training.max_steps=6 --set training.logging_steps=1 --set training.eval_steps=3 "
                      "--set training.learning_rate=0.001",
                      dir).exit_code == 0);
  CliResult r = run_hftrain("report a b -o report.html", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("report written to report.html (2 runs, 5 plots)"));
  CHECK(run_hftrain("report a", dir).exit_code == 0);
  CHECK(fs::exists(dir + "/a/report.html"));
  CliResult missing = run_hftrain("report nowhere", dir);
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.output, Catch::Contains("'nowhere' is not a run directory"));

  const std::string html = read_text(dir + "/report.html");
  // The summary's best metric names its metric (run a sets one; run b none, so HF leaves best_metric null).
  const json state_a = json::parse(read_text(dir + "/a/trainer_state.json"));
  REQUIRE(state_a["best_metric"].is_number());
  CHECK_THAT(html, Catch::Contains(" (eval_exact_match)</td>"));
  CHECK(json::parse(read_text(dir + "/b/trainer_state.json"))["best_metric"].is_null());
  for (const char* external : {"src=", "href=", "url(", "<script", "<link"}) CHECK(html.find(external) == std::string::npos);

  // The logged (step, value) pairs, read by the test itself.
  std::map<std::string, json> history;
  for (const char* run : {"a", "b"}) history[run] = json::parse(read_text(dir + "/" + run + "/trainer_state.json"))["log_history"];
  auto logged = [&](const std::string& run, const std::string& key) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& e : history[run])
      if (e.contains(key) && e[key].is_number()) pts.emplace_back(e["step"].get<double>(), e[key].get<double>());
    return pts;
  };
  REQUIRE(logged("a", "loss").size() == 4);
  REQUIRE(logged("b", "loss").size() == 6);

  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    std::cout << "HFTRAIN_TEST_SKIPPED: chromium not found; the report's rendering was not checked "
                 "(install the Debian package 'chromium', as scripts/install-deps.sh does)"
              << std::endl;
    return;
  }
  std::string page = html;
  const std::size_t body_end = page.rfind("</body>");
  REQUIRE(body_end != std::string::npos);
  page.insert(body_end, kRenderCheckScript);
  write_text(dir + "/check.html", page);
  const std::string cmd = "timeout 120 '" + chromium +
                          "' --headless --no-sandbox --disable-gpu --disable-background-networking "
                          "--disable-component-update --disable-sync --no-first-run --user-data-dir='" + dir +
                          "/chromium-profile' --dump-dom 'file://" + dir + "/check.html' 2>/dev/null";
  CliResult dom = run_shell(cmd);
  REQUIRE(dom.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(dom.output, m, std::regex("<pre id=\"render-check\">([^<]*)</pre>")));
  json rendered = json::parse(html_unescape(m[1].str()));
  INFO(rendered.dump());

  std::size_t total_points = 0;
  for (const std::string plot : {"loss", "eval_loss", "eval_exact_match", "learning_rate", "grad_norm"}) {
    INFO("plot " << plot);
    std::vector<json> series;
    for (const auto& s : rendered["series"])
      if (s["plot"] == plot) series.push_back(s);
    REQUIRE(series.size() == 2);  // both runs, overlaid
    // Screen x must be one increasing affine function of the step and screen y one decreasing affine
    // function of the value, shared by both runs (same axes): fit on run a, check every point.
    std::vector<std::pair<std::pair<double, double>, std::pair<double, double>>> pairs;  // (data, screen)
    for (const auto& s : series) {
      const auto data = logged(s["run"], plot);
      REQUIRE(s["points"].size() == data.size());
      CHECK(s["visible"].get<bool>());
      CHECK(s["stroke"] != "none");
      CHECK((s["width"].get<double>() > 0 || s["height"].get<double>() > 0));
      const auto& svg = s["svg"];
      for (std::size_t i = 0; i < data.size(); ++i) {
        const double x = s["points"][i][0], y = s["points"][i][1];
        CHECK(x >= svg[0].get<double>());
        CHECK(x <= svg[0].get<double>() + svg[2].get<double>());
        CHECK(y >= svg[1].get<double>());
        CHECK(y <= svg[1].get<double>() + svg[3].get<double>());
        pairs.push_back({data[i], {x, y}});
      }
      total_points += data.size();
    }
    auto lo_x = *std::min_element(pairs.begin(), pairs.end(), [](auto& p, auto& q) { return p.first.first < q.first.first; });
    auto hi_x = *std::max_element(pairs.begin(), pairs.end(), [](auto& p, auto& q) { return p.first.first < q.first.first; });
    auto lo_y = *std::min_element(pairs.begin(), pairs.end(), [](auto& p, auto& q) { return p.first.second < q.first.second; });
    auto hi_y = *std::max_element(pairs.begin(), pairs.end(), [](auto& p, auto& q) { return p.first.second < q.first.second; });
    REQUIRE(hi_x.first.first > lo_x.first.first);
    const double ax = (hi_x.second.first - lo_x.second.first) / (hi_x.first.first - lo_x.first.first);
    CHECK(ax > 1.0);  // at least a pixel per step
    const bool flat = hi_y.first.second == lo_y.first.second;
    const double ay = flat ? 0 : (hi_y.second.second - lo_y.second.second) / (hi_y.first.second - lo_y.first.second);
    if (!flat) CHECK(ay < 0);  // larger values higher up
    for (const auto& [data, screen] : pairs) {
      CHECK(screen.first == Approx(lo_x.second.first + ax * (data.first - lo_x.first.first)).margin(0.05));
      CHECK(screen.second == Approx(lo_y.second.second + ay * (data.second - lo_y.first.second)).margin(0.05));
    }
    // A visible legend entry per run.
    int legends = 0;
    for (const auto& l : rendered["legends"])
      if (l["plot"] == plot && l["width"].get<double>() > 0) ++legends;
    CHECK(legends == 2);
  }
  CHECK(rendered["series"].size() == 10);
  CHECK(rendered["circles"].get<std::size_t>() == total_points);
}
