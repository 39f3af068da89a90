// `hftrain report` data and markup: which curves come out of log_history, nice axes, escaping, and
// that the page is self-contained (the rendering itself is checked in headless Chromium by
// tests/integration/test_reporting.cpp).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <regex>

#include "log/report_html.h"
#include "log/report_plots.h"

using namespace hftrain;
using json = nlohmann::json;

namespace {

std::vector<RunHistory> two_runs() {
  json a = {{"global_step", 6},
            {"log_history",
             {{{"loss", 2.0}, {"learning_rate", 0.003}, {"grad_norm", 1.5}, {"epoch", 0.3}, {"step", 2}},
              {{"eval_loss", 1.9}, {"eval_accuracy", 0.25}, {"eval_runtime", 0.5}, {"eval_samples_per_second", 64.0},
               {"epoch", 0.5}, {"step", 3}},
              {{"loss", 1.5}, {"learning_rate", 0.002}, {"grad_norm", 1.0}, {"epoch", 0.6}, {"step", 4}},
              {{"loss", nullptr}, {"learning_rate", 0.001}, {"epoch", 0.9}, {"step", 6}},  // a NaN loss, saved as null
              {{"eval_loss", 1.2}, {"eval_accuracy", 0.5}, {"eval_runtime", 0.4}, {"epoch", 1.0}, {"step", 6}},
              {{"train_loss", 1.7}, {"train_runtime", 3.0}, {"epoch", 1.0}, {"step", 6}}}}};
  json b = {{"global_step", 4},
            {"log_history", {{{"loss", 2.5}, {"step", 2}}, {{"loss", 2.2}, {"step", 4}}}}};
  return {{"a<b>&", "runs/a", a}, {"b", "runs/b", b}};
}

}  // namespace

TEST_CASE("collect_plots: loss, eval metrics, learning rate, grad norm, speed figures left out", "[unit][log]") {
  const auto plots = collect_plots(two_runs());
  std::vector<std::string> keys;
  for (const auto& p : plots) keys.push_back(p.key);
  CHECK(keys == std::vector<std::string>{"loss", "eval_loss", "eval_accuracy", "learning_rate", "grad_norm"});
  const Plot& loss = plots[0];
  REQUIRE(loss.series.size() == 2);
  CHECK(loss.series[0].run == 0);
  CHECK(loss.series[0].points == std::vector<std::pair<double, double>>{{2, 2.0}, {4, 1.5}});  // null skipped
  CHECK(loss.series[1].points == std::vector<std::pair<double, double>>{{2, 2.5}, {4, 2.2}});
  CHECK(plots[1].series.size() == 1);  // run b never evaluated
  CHECK(plots[1].series[0].points == std::vector<std::pair<double, double>>{{3, 1.9}, {6, 1.2}});
  CHECK(plots[3].series[0].points.size() == 3);
}

TEST_CASE("nice_axis covers the data with 1-2-5 spaced ticks", "[unit][log]") {
  Axis a = nice_axis(0, 9.3);
  CHECK(a.min == 0);
  CHECK(a.max == 10);
  CHECK(a.ticks == std::vector<double>{0, 2, 4, 6, 8, 10});
  for (auto [lo, hi] : std::vector<std::pair<double, double>>{{0.00012, 0.0031}, {-3, 7}, {5, 5}, {1.0e6, 1.0e6 + 3}}) {
    Axis x = nice_axis(lo, hi);
    CHECK(x.min <= lo);
    CHECK(x.max >= hi);
    REQUIRE(x.ticks.size() >= 3);
    const double d = x.ticks[1] - x.ticks[0];
    const double mantissa = d / std::pow(10.0, std::floor(std::log10(d)));
    CHECK((std::fabs(mantissa - 1) < 1e-9 || std::fabs(mantissa - 2) < 1e-9 || std::fabs(mantissa - 5) < 1e-9));
    for (std::size_t i = 1; i < x.ticks.size(); ++i) CHECK(x.ticks[i] - x.ticks[i - 1] == Approx(d));
  }
}

TEST_CASE("the report page: one chart per plot, one polyline per series, escaped, self-contained", "[unit][log]") {
  const std::string html = render_report_html(two_runs());
  auto count = [&](const std::string& re) {
    std::regex r(re);
    return std::distance(std::sregex_iterator(html.begin(), html.end(), r), std::sregex_iterator());
  };
  CHECK(count("<section class=\"plot\"") == 5);
  CHECK(count("<polyline class=\"series\"") == 2 + 1 + 1 + 1 + 1);
  CHECK(count("<circle ") == (2 + 2) + 2 + 2 + 3 + 2);
  CHECK(html.find("data-plot=\"loss\" data-run=\"a&lt;b&gt;&amp;\" data-points=\"2\"") != std::string::npos);
  CHECK(html.find("a<b>&") == std::string::npos);
  for (const char* external : {"src=", "href=", "url(", "@import", "<script", "<link"})
    CHECK(html.find(external) == std::string::npos);
  CHECK(html.find("eval_runtime") == std::string::npos);
}

TEST_CASE("log_axis spans whole decades with 1-2-5 ticks, and a loss over a decade or more gets it", "[unit][log]") {
  Axis a = log_axis(0.03, 2.4);
  CHECK(a.log);
  CHECK(a.min == Approx(0.01));
  CHECK(a.max == Approx(10.0));
  const std::vector<double> expected{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10};
  REQUIRE(a.ticks.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) CHECK(a.ticks[i] == Approx(expected[i]));
  Axis wide = log_axis(1e-5, 3.0);  // more than 3 decades: the powers of ten only
  CHECK(wide.ticks.size() == 7);
  CHECK(wide.ticks.front() == Approx(1e-5));
  CHECK(wide.ticks.back() == Approx(10.0));
  CHECK(value_axis("loss", 0.001, 5.0).log);
  CHECK(value_axis("eval_loss", 0.2, 2.0).log);
  CHECK_FALSE(value_axis("loss", 0.5, 1.5).log);         // less than a decade
  CHECK_FALSE(value_axis("loss", -0.1, 5.0).log);        // not all positive
  CHECK_FALSE(value_axis("eval_accuracy", 0.001, 1).log);  // not a loss
}

TEST_CASE("a loss falling by decades is drawn on a log scale: equal ratios, equal distances", "[unit][log]") {
  json run = {{"global_step", 3},
              {"log_history", {{{"loss", 10.0}, {"step", 1}}, {{"loss", 1.0}, {"step", 2}}, {{"loss", 0.1}, {"step", 3}}}}};
  const std::string html = render_report_html({{"r", "runs/r", run}});
  CHECK(html.find("loss (log scale)") != std::string::npos);
  std::smatch m;
  REQUIRE(std::regex_search(html, m, std::regex("data-plot=\"loss\"[^>]*points=\"([^\"]*)\"")));
  std::vector<double> ys;
  const std::string points = m[1].str();
  std::regex pair("[0-9.]+,([0-9.]+)");
  for (auto it = std::sregex_iterator(points.begin(), points.end(), pair); it != std::sregex_iterator(); ++it)
    ys.push_back(std::stod((*it)[1].str()));
  REQUIRE(ys.size() == 3);
  CHECK(ys[1] - ys[0] > 1.0);  // falling values go down the page
  CHECK(ys[2] - ys[1] == Approx(ys[1] - ys[0]).epsilon(0.01));
}
