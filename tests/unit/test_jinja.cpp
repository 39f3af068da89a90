// The chat-template interpreter (lib/jinja): syntax and render errors name the template, line and column;
// raise_exception's message is kept verbatim; generation spans; HF's render inputs; and the reference case
// that renders every template x context pair of tests/data/chat_templates with python3-jinja2 in HF's
// environment (tests/reference/jinja_reference.py) and requires the same bytes and spans.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "jinja/template.h"

using namespace hftrain::jinja;
using nlohmann::ordered_json;

namespace {

std::filesystem::path source_dir() {
  const char* src = std::getenv("HFTRAIN_SOURCE_DIR");
  return src ? std::filesystem::path(src) : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string render(const std::string& source, const ordered_json& context = ordered_json::object()) {
  return Template::parse(source, "t.jinja").render(context).text;
}

// The TemplateError that parsing (and rendering, with `context`) `source` raises.
TemplateError error_of(const std::string& source, const ordered_json& context = ordered_json::object()) {
  try {
    Template::parse(source, "bad.jinja").render(context);
  } catch (const TemplateError& e) {
    return e;
  }
  FAIL("no error for: " << source);
  throw;
}

void check_error(const std::string& source, int line, int column, const std::string& problem_part) {
  INFO(source);
  const TemplateError e = error_of(source);
  CHECK(e.template_name() == "bad.jinja");
  CHECK(e.line() == line);
  CHECK(e.column() == column);
  CHECK_THAT(e.problem(), Catch::Contains(problem_part));
  CHECK_THAT(e.what(), Catch::StartsWith("chat template bad.jinja:" + std::to_string(line) + ":" + std::to_string(column) + ": "));
  CHECK(e.exit_code() == 2);
}

struct Shell {
  int status;
  std::string output;
};

Shell run_shell(const std::string& cmd) {
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (pipe && fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  return {pipe ? pclose(pipe) : -1, out};
}

}  // namespace

TEST_CASE("jinja syntax errors name the template, line and column of the problem", "[unit][jinja]") {
  check_error("line one\n{{ x + }}", 2, 8, "unexpected 'end of print statement'");
  check_error("{% for x in xs %}\nno end", 2, 7, "Jinja was looking for the following tags: 'endfor' or 'else'");
  check_error("{% if x %}\n  {% endfor %}", 2, 6, "Encountered unknown tag 'endfor'");
  check_error("ok\n{{ x | no_such_filter }}", 2, 8, "No filter named 'no_such_filter'.");
  check_error("{{ x is no_such_test }}", 1, 9, "No test named 'no_such_test'.");
  check_error("a\n{# never closed", 2, 3, "Missing end of comment tag");
  check_error("{{ (1 ] }}", 1, 7, "unexpected ']', expected ')'");
  check_error("{{ 'unterminated }}", 1, 4, "unexpected char");
  check_error("{% include 'other.jinja' %}", 1, 4, "not supported");
  check_error("a\n\n  {% break %}", 3, 6, "'break' outside of a loop");
  check_error("{% macro m(a=1, b) %}{% endmacro %}", 1, 18, "non-default argument follows default argument");
  check_error("{{ f(*args) }}", 1, 6, "*args");
}

TEST_CASE("jinja render errors name where they happened and keep raise_exception's message verbatim", "[unit][jinja]") {
  const TemplateError raised = error_of("ok\n  {{ raise_exception('Bad role: ' ~ role ~ '!') }}", {{"role", "tool"}});
  CHECK(raised.problem() == "Bad role: tool!");
  CHECK(raised.line() == 2);
  CHECK_THAT(raised.what(), Catch::Contains("bad.jinja:2:"));
  CHECK(error_of("{{ 1 }}\n{{ foo.bar }}").problem() == "'foo' is undefined");
  CHECK(error_of("{{ foo.bar }}").line() == 1);
  CHECK(error_of("{{ d.x.y }}", {{"d", ordered_json::object()}}).problem() == "'dict object' has no attribute 'x'");
  CHECK(error_of("{{ messages.append(1) }}", {{"messages", ordered_json::array()}}).problem() ==
        "access to attribute 'append' of 'list' object is unsafe.");
  CHECK(error_of("{{ d.update({}) }}", {{"d", ordered_json::object()}}).problem() ==
        "access to attribute 'update' of 'dict' object is unsafe.");
  CHECK(error_of("{{ 1 // 0 }}").problem() == "integer division or modulo by zero");
  CHECK(error_of("{% set ns = 1 %}{% set ns.a = 2 %}").problem() == "cannot assign attribute on non-namespace object");
  CHECK(error_of("{{ 'a' + 1 }}").problem() == "can only concatenate str (not \"int\") to str");
  CHECK(error_of("{{ [1] | tojson }}{{ x | tojson }}").problem() == "Object of type Undefined is not JSON serializable");
  CHECK(error_of("{{ (messages | selectattr('role')) | length }}", {{"messages", ordered_json::array()}}).problem() ==
        "object of type 'generator' has no len()");
  CHECK(error_of("{% for a, b in [[1, 2, 3]] %}{% endfor %}").problem() == "too many values to unpack (expected 2)");
  CHECK(error_of("{{ range(200000) | length }}").problem() ==
        "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
}

TEST_CASE("jinja whitespace: one trailing newline dropped, trim_blocks and lstrip_blocks on", "[unit][jinja]") {
  CHECK(render("a\n") == "a");
  CHECK(render("a\n\n") == "a\n");
  CHECK(render("a\r\nb\rc\r\n") == "a\nb\nc");
  CHECK(render("{% if true %}\nyes\n{% endif %}\n") == "yes\n");
  CHECK(render("x\n    {% if true %}in{% endif %}\n") == "x\nin");
  CHECK(render("{{ 1 }}  {% if true %}kept{% endif %}") == "1  kept");
  CHECK(render("a  {%- if true -%}  b  {%- endif -%}  c") == "abc");
  CHECK(render("  {%+ if true %}x{% endif +%}\ny") == "  x\ny");
  CHECK(render("{% raw %}{{ a }}{% endraw %}") == "{{ a }}");
}

TEST_CASE("jinja values print as Python prints them", "[unit][jinja]") {
  CHECK(render("{{ [1, 'a', none, true, 2.5] }}") == "[1, 'a', None, True, 2.5]");
  CHECK(render("{{ {'k': \"it's\"} }}") == "{'k': \"it's\"}");
  CHECK(render("{{ 1e16 }} {{ 1.5e-5 }} {{ 10 / 4 }} {{ 0.1 + 0.2 }}") == "1e+16 1.5e-05 2.5 0.30000000000000004");
  CHECK(render("{{ x }}|{{ x is defined }}") == "|False");
  CHECK(render("{{ (1,) }} {{ d.items() }}", {{"d", {{"a", 1}}}}) == "(1,) dict_items([('a', 1)])");
}

TEST_CASE("jinja values convert from JSON and back with the key order kept", "[unit][jinja]") {
  const auto j = ordered_json::parse(R"({"z": 1, "a": [1.5, "\u00e9", null, true, {"k": []}], "m": {}})");
  CHECK(to_json(from_json(j)).dump() == j.dump());
  CHECK(render("{{ d | tojson }}", {{"d", j}}) == R"({"z": 1, "a": [1.5, "é", null, true, {"k": []}], "m": {}})");
  CHECK_THROWS_AS(to_json(Value()), Problem);
}

TEST_CASE("jinja generation blocks record the byte spans of the text they render", "[unit][jinja]") {
  const Template t = Template::parse("é{% generation %}ü{{ x }}{% endgeneration %}-{% generation %}{% endgeneration %}", "g");
  const RenderResult r = t.render({{"x", "ß"}});
  CHECK(r.text == "éüß-");
  REQUIRE(r.generation_spans.size() == 2);
  CHECK(r.generation_spans[0].begin == 2);
  CHECK(r.generation_spans[0].end == 6);
  CHECK(r.text.substr(2, 4) == "üß");
  CHECK(r.generation_spans[1].begin == 7);
  CHECK(r.generation_spans[1].end == 7);
}

TEST_CASE("jinja render_chat passes what apply_chat_template passes (tools none, unset tokens undefined)", "[unit][jinja]") {
  const Template t = Template::parse(
      "{{ messages | length }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|"
      "{{ bos_token is defined }}|{{ eos_token is defined }}|{{ eos_token }}",
      "chat");
  ChatTemplateInputs inputs;
  inputs.messages = ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  inputs.add_generation_prompt = true;
  inputs.variables = {{"eos_token", "</s>"}};
  CHECK(t.render_chat(inputs).text == "1|True|True|True|False|True|</s>");
  inputs.variables = {{"messages", ordered_json::array()}};
  CHECK_THROWS_AS(t.render_chat(inputs), hftrain::ConfigError);
}

TEST_CASE("jinja strftime_now formats the local time", "[unit][jinja]") {
  const std::string year = render("{{ strftime_now('%Y') }}");
  REQUIRE(year.size() == 4);
  CHECK(std::all_of(year.begin(), year.end(), ::isdigit));
}

TEST_CASE("jinja chat templates render byte-equal to python3-jinja2 in HF's environment", "[reference][jinja]") {
  if (run_shell("/usr/bin/python3 -c 'import jinja2' 2>&1").status != 0) {
    WARN("python3-jinja2 is not installed: the chat-template reference comparison is skipped");
    return;
  }
  const auto dir = source_dir() / "tests" / "data" / "chat_templates";
  const Shell py = run_shell("/usr/bin/python3 '" + (source_dir() / "tests" / "reference" / "jinja_reference.py").string() +
                             "' --cases '" + (dir / "cases.json").string() + "' 2>&1");
  REQUIRE(py.status == 0);
  const auto expected = nlohmann::json::parse(py.output);
  const auto cases = nlohmann::json::parse(read_file(dir / "cases.json")).at("cases");
  size_t compared = 0, errors = 0, with_spans = 0;
  for (const auto& c : cases) {
    const std::string name = c.at("template").get<std::string>();
    const Template t = Template::parse(read_file(dir / name), name);
    for (const auto& context_name : c.at("contexts")) {
      const std::string key = name + "|" + context_name.get<std::string>();
      INFO(key);
      const auto& want = expected.at(key);
      const auto context = ordered_json::parse(read_file(dir / context_name.get<std::string>()));
      if (want.contains("error")) {
        ++errors;
        try {
          t.render(context);
          FAIL("hftrain rendered what python3-jinja2 refused: " << want.dump());
        } catch (const TemplateError& e) {
          if (want.at("type") == "TemplateError") CHECK(e.problem() == want.at("error").get<std::string>());
        }
        continue;
      }
      const RenderResult got = t.render(context);
      CHECK(got.text == want.at("text").get<std::string>());
      nlohmann::json spans = nlohmann::json::array();
      for (const auto& s : got.generation_spans) spans.push_back({s.begin, s.end});
      CHECK(spans == want.at("spans"));
      with_spans += got.generation_spans.empty() ? 0 : 1;
      ++compared;
    }
  }
  CHECK(compared >= 40);
  CHECK(errors >= 4);
  CHECK(with_spans >= 6);
}
