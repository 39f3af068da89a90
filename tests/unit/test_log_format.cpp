// Console text: Python float repr / round, HF's metrics table (expected strings produced by HF's
// metrics_format + log_metrics code run under CPython), progress bar and log-line formats, and the
// per-process log level rule of HF TrainingArguments.get_process_log_level.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "log/logger.h"
#include "log/metrics_format.h"
#include "log/progress.h"
#include "log/run_summary.h"

using namespace hftrain;
using json = nlohmann::json;

TEST_CASE("python_float_repr prints floats as CPython's repr does", "[unit][log]") {
  // Expected values: repr(v) in CPython 3.11.
  CHECK(python_float_repr(0.1) == "0.1");
  CHECK(python_float_repr(1e-05) == "1e-05");
  CHECK(python_float_repr(0.0001) == "0.0001");
  CHECK(python_float_repr(1e16) == "1e+16");
  CHECK(python_float_repr(1e15) == "1000000000000000.0");
  CHECK(python_float_repr(123.456) == "123.456");
  CHECK(python_float_repr(3.0) == "3.0");
  CHECK(python_float_repr(-0.5) == "-0.5");
  CHECK(python_float_repr(1.2345678901234567) == "1.2345678901234567");
  CHECK(python_float_repr(0.1 + 0.2) == "0.30000000000000004");
  CHECK(python_float_repr(1.5e-7) == "1.5e-07");
  CHECK(python_float_repr(1e22) == "1e+22");
  CHECK(python_float_repr(123456789012345678.0) == "1.2345678901234568e+17");
  CHECK(python_float_repr(5e-324) == "5e-324");
  CHECK(python_float_repr(1.7976931348623157e308) == "1.7976931348623157e+308");
  CHECK(python_float_repr(0.0) == "0.0");
}

TEST_CASE("python_round rounds the exact binary value, as CPython's round does", "[unit][log]") {
  CHECK(python_round(2.675, 2) == 2.67);  // 2.675 is stored as 2.67499999...
  CHECK(python_round(0.12345, 4) == 0.1235);
  CHECK(python_round(1234.5678, 3) == 1234.568);
  CHECK(python_round(0.00005, 4) == 0.0001);
  CHECK(python_round(-0.00005, 4) == -0.0001);
}

TEST_CASE("secs_to_timedelta matches HF _secs2timedelta", "[unit][log]") {
  CHECK(secs_to_timedelta(3725.456) == "1:02:05.45");
  CHECK(secs_to_timedelta(0.5) == "0:00:00.50");
  CHECK(secs_to_timedelta(90061.25) == "1 day, 1:01:01.25");
  CHECK(secs_to_timedelta(172800.999) == "2 days, 0:00:00.99");
}

TEST_CASE("metrics_table is HF's log_metrics output", "[unit][log]") {
  // Produced by transformers' metrics_format + log_metrics (trainer_pt_utils) under CPython.
  json m = {{"epoch", 3.0},
            {"train_loss", 0.123456789},
            {"train_runtime", 3725.456},
            {"train_samples_per_second", 1234.5678},
            {"train_steps_per_second", 0.08},
            {"total_flos", 5.5e12},
            {"init_mem_cpu_alloc_delta", 123456789},
            {"init_mem_cpu_peaked_delta", -5},
            {"train_mem_cpu_alloc_delta", 0},
            {"before_init_mem_cpu", 987654321},
            {"train_tokens_per_second", 1.5e-05}};
  const std::string expected =
      "***** train metrics *****\n"
      "  before_init_mem_cpu       =      941MB\n"
      "  epoch                     =        3.0\n"
      "  init_mem_cpu_alloc_delta  =      117MB\n"
      "  init_mem_cpu_peaked_delta =       -1MB\n"
      "  total_flos                =     5122GF\n"
      "  train_loss                =     0.1235\n"
      "  train_mem_cpu_alloc_delta =        0MB\n"
      "  train_runtime             = 1:02:05.45\n"
      "  train_samples_per_second  =  1234.5678\n"
      "  train_steps_per_second    =       0.08\n"
      "  train_tokens_per_second   =        0.0\n";
  CHECK(metrics_table("train", m) == expected);
  // Values parsed from JSON (unsigned integers) format the same way.
  CHECK(metrics_table("train", json::parse(m.dump())) == expected);
}

TEST_CASE("progress text: tqdm intervals and rates, bar layout, plain line, log line", "[unit][log]") {
  CHECK(format_interval(5.9) == "00:05");
  CHECK(format_interval(3725) == "1:02:05");
  CHECK(format_rate(10, 2.0) == "5.00it/s");
  CHECK(format_rate(1, 4.0) == "4.00s/it");
  CHECK(format_rate(0, 1.0) == "?it/s");

  ProgressSnapshot s;
  s.step = 5;
  s.total = 10;
  s.epoch = 0.5;
  s.elapsed_seconds = 2.0;
  s.loss = 2.1234;
  s.learning_rate = 2.5e-05;
  const std::string bar = progress_bar_line(s, 100, /*utf8=*/false);
  CHECK(bar.size() == 99);
  CHECK(bar.rfind(" 50%|", 0) == 0);
  CHECK_THAT(bar, Catch::EndsWith("| 5/10 [00:02<00:02, 2.50it/s, epoch=0.5, loss=2.1234, lr=2.5e-05]"));
  const std::size_t open = bar.find('|'), close = bar.find('|', open + 1);
  const std::string cells = bar.substr(open + 1, close - open - 1);
  CHECK(std::count(cells.begin(), cells.end(), '#') == static_cast<long>(cells.size() / 2));
  // A narrow terminal: the postfix gives way so the line never wraps (it could not be redrawn).
  const std::string narrow = progress_bar_line(s, 60, /*utf8=*/false);
  CHECK(narrow.size() <= 59);
  CHECK(narrow.find("lr=") == std::string::npos);
  CHECK_THAT(narrow, Catch::Contains("| 5/10 [00:02<00:02, 2.50it/s"));
  // UTF-8 blocks: a full bar at 100%.
  s.step = 10;
  const std::string full = progress_bar_line(s, 80, /*utf8=*/true);
  const std::size_t cells_end = full.find("| 10/10");
  REQUIRE(cells_end != std::string::npos);
  CHECK(full.rfind("100%|", 0) == 0);
  const std::string blocks = full.substr(5, cells_end - 5);
  CHECK(blocks.find(' ') == std::string::npos);
  CHECK(blocks.size() % std::string("█").size() == 0);
  CHECK(blocks.size() >= 10 * std::string("█").size());

  s.step = 5;
  CHECK(progress_plain_line(s) == "step 5/10 (50%) | epoch 0.5 | loss 2.1234 | lr 2.5e-05 | 2.50it/s | 00:02 elapsed, 00:02 left");
  // A resumed run measures its speed from the step it started at.
  s.start_step = 4;  // 1 step in 2 s here; 5 steps left
  CHECK(progress_plain_line(s) == "step 5/10 (50%) | epoch 0.5 | loss 2.1234 | lr 2.5e-05 | 2.00s/it | 00:02 elapsed, 00:10 left");

  json entry = {{"loss", 2.1234}, {"grad_norm", 0.5}, {"learning_rate", 2.5e-05}, {"epoch", 0.25}, {"step", 4}};
  CHECK(log_event_line(entry, 12) == "step 4/12 | epoch 0.25 | loss 2.1234 | grad_norm 0.5 | learning_rate 2.5e-05");
  json eval = {{"eval_loss", 1.5}, {"eval_accuracy", 0.875}, {"epoch", 1.0}, {"step", 12}};
  CHECK(log_event_line(eval, 12) == "step 12/12 | epoch 1.0 | eval_loss 1.5 | eval_accuracy 0.875");
}

TEST_CASE("run summary numbers use thousands separators", "[unit][log]") {
  CHECK(thousands(0) == "0");
  CHECK(thousands(999) == "999");
  CHECK(thousands(1000) == "1,000");
  CHECK(thousands(124439808) == "124,439,808");
  CHECK(thousands(-1234567) == "-1,234,567");
  TrainingSummary s;
  s.num_examples = 1000;
  s.max_steps = 375;
  s.parameters.trainable = 124439808;
  s.parameters.total = 124439808;
  const std::string text = format_training_summary(s);
  CHECK_THAT(text, Catch::StartsWith("***** Running training *****\n"));
  CHECK_THAT(text, Catch::Contains("  Num examples = 1,000\n"));
  CHECK_THAT(text, Catch::Contains("  Total optimization steps = 375\n"));
  CHECK_THAT(text, Catch::Contains("  Number of trainable parameters = 124,439,808 (total 124,439,808)\n"));
}

TEST_CASE("log level per process follows HF get_process_log_level", "[unit][log]") {
  ProcessIdentity main{0, 0, 4}, node2_first{2, 0, 4}, replica{3, 1, 4};
  CHECK(process_log_level("debug", "error", true, main) == "debug");
  CHECK(process_log_level("debug", "error", true, node2_first) == "debug");   // local rank 0 of its node
  CHECK(process_log_level("debug", "error", false, node2_first) == "error");  // only global rank 0 is main
  CHECK(process_log_level("debug", "error", true, replica) == "error");
  CHECK(process_log_level("passive", "passive", true, replica) == "info");
}
