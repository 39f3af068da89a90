// Callbacks: the HF event order through a real (tiny) training run, control-flag resets, and
// EarlyStoppingCallback's patience / threshold rule (HF trainer_callback.py semantics).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "builtins/register_builtins.h"
#include "train/trainer.h"

using namespace hftrain;

namespace {

class Recorder : public TrainerCallback {
 public:
  explicit Recorder(std::vector<std::string>& events) : events_(events) {}
  std::string name() const override { return "Recorder"; }
  void on_init_end(const TrainerState&, TrainerControl&) override { events_.push_back("init_end"); }
  void on_train_begin(const TrainerState&, TrainerControl&) override { events_.push_back("train_begin"); }
  void on_train_end(const TrainerState&, TrainerControl&) override { events_.push_back("train_end"); }
  void on_epoch_begin(const TrainerState&, TrainerControl&) override { events_.push_back("epoch_begin"); }
  void on_epoch_end(const TrainerState&, TrainerControl&) override { events_.push_back("epoch_end"); }
  void on_step_begin(const TrainerState&, TrainerControl&) override { events_.push_back("step_begin"); }
  void on_substep_end(const TrainerState&, TrainerControl&) override { events_.push_back("substep_end"); }
  void on_pre_optimizer_step(const TrainerState&, TrainerControl&) override { events_.push_back("pre_optimizer_step"); }
  void on_optimizer_step(const TrainerState&, TrainerControl&) override { events_.push_back("optimizer_step"); }
  void on_step_end(const TrainerState& s, TrainerControl&) override { events_.push_back("step_end:" + std::to_string(s.global_step)); }
  void on_evaluate(const TrainerState&, TrainerControl&, const nlohmann::json& m) override {
    events_.push_back(m.contains("eval_loss") ? "evaluate" : "evaluate?");
  }
  void on_log(const TrainerState&, TrainerControl&, const nlohmann::json& logs) override {
    events_.push_back(logs.contains("loss") ? "log" : logs.contains("eval_loss") ? "log_eval" : "log_other");
  }

 private:
  std::vector<std::string>& events_;
};

std::string tiny_spec(const std::string& extra) {
  auto dir = std::filesystem::temp_directory_path() / ("hftrain_unit_callbacks_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "spec.yaml").string();
  std::ofstream(path) << "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 8}\n"
                         "data: {type: digit_reversal, num_digits: 2, train_size: 12, eval_size: 4, test_size: 2}\n"
                         "training:\n  output_dir: " << (dir / "out").string() << "\n"
                         "  per_device_train_batch_size: 4\n  save_strategy: 'no'\n  report_to: none\n" << extra;
  return path;
}

}  // namespace

TEST_CASE("events fire in HF order with accumulation and a shorter last window", "[unit][callbacks]") {
  // 12 examples / batch 4 = 3 batches per epoch; accumulation 2 -> windows of 2 and 1 -> 2 steps/epoch.
  const auto& c = builtin_components();
  RunSpec spec = load_run_spec(tiny_spec("  gradient_accumulation_steps: 2\n  max_steps: 3\n  logging_steps: 2\n"
                                         "  eval_strategy: steps\n  eval_steps: 3\n"),
                               {}, c.catalog());
  ModelAndData p = build_model_and_data(spec, c);
  std::vector<std::string> events;
  Trainer trainer(spec, c, p);
  trainer.add_callback(std::make_unique<Recorder>(events));
  trainer.train();
  const std::vector<std::string> expected = {
      "init_end",    "train_begin",
      "epoch_begin", "step_begin", "substep_end", "pre_optimizer_step", "optimizer_step", "step_end:1",
      "step_begin",  "pre_optimizer_step", "optimizer_step", "step_end:2", "log", "epoch_end",
      "epoch_begin", "step_begin", "substep_end", "pre_optimizer_step", "optimizer_step", "step_end:3",
      "log_eval",    "evaluate",   "log_other", "train_end"};
  CHECK(events == expected);
  CHECK(trainer.state().global_step == 3);
  CHECK(trainer.state().epoch == Approx(1.0 + 2.0 / 3.0));
}

TEST_CASE("the handler resets control flags where HF does", "[unit][callbacks]") {
  CallbackHandler h;
  TrainerState s;
  h.control().should_log = h.control().should_evaluate = h.control().should_save = true;
  h.control().should_epoch_stop = true;
  h.on_step_begin(s);
  CHECK_FALSE(h.control().should_log);
  CHECK_FALSE(h.control().should_evaluate);
  CHECK_FALSE(h.control().should_save);
  CHECK(h.control().should_epoch_stop);
  h.on_epoch_begin(s);
  CHECK_FALSE(h.control().should_epoch_stop);
}

TEST_CASE("early stopping counts evaluations without improvement beyond the threshold", "[unit][callbacks]") {
  EarlyStoppingCallback::Options o;
  o.early_stopping_patience = 2;
  o.early_stopping_threshold = 0.1;
  EarlyStoppingCallback cb(o, "eval_loss", /*greater_is_better=*/false);
  TrainerState s;
  TrainerControl c;
  cb.on_evaluate(s, c, {{"eval_loss", 2.0}});  // no best yet -> improvement
  CHECK(cb.patience_counter() == 0);
  s.best_metric = 2.0;
  cb.on_evaluate(s, c, {{"eval_loss", 1.95}});  // better, but by less than the threshold
  CHECK(cb.patience_counter() == 1);
  CHECK_FALSE(c.should_training_stop);
  cb.on_evaluate(s, c, {{"eval_loss", 1.5}});  // a real improvement resets
  CHECK(cb.patience_counter() == 0);
  s.best_metric = 1.5;
  cb.on_evaluate(s, c, {{"eval_loss", 1.6}});
  cb.on_evaluate(s, c, {{"eval_loss", 1.7}});
  CHECK(c.should_training_stop);
  CHECK(cb.export_state()["attributes"]["early_stopping_patience_counter"] == 2);
  CHECK_THROWS_AS(cb.on_evaluate(s, c, {{"eval_accuracy", 1.0}}), ConfigError);
}

TEST_CASE("metric_for_best_model defaults follow HF", "[unit][callbacks]") {
  TrainingArgs a;
  CHECK(best_metric_context(a).metric_for_best_model == "eval_loss");
  CHECK_FALSE(best_metric_context(a).greater_is_better);
  a.metric_for_best_model = "exact_match";
  CHECK(best_metric_context(a).metric_for_best_model == "eval_exact_match");
  CHECK(best_metric_context(a).greater_is_better);
  a.greater_is_better = false;
  CHECK_FALSE(best_metric_context(a).greater_is_better);
}

TEST_CASE("early stopping from the spec stops training and records the best checkpoint", "[unit][callbacks]") {
  const auto& c = builtin_components();
  // A learning rate of 0 never improves eval_loss: patience 2 stops after the 3rd evaluation.
  RunSpec spec = load_run_spec(tiny_spec("  max_steps: 30\n  learning_rate: 0.0\n  eval_strategy: steps\n  eval_steps: 2\n"
                                         "callbacks: [{type: early_stopping, early_stopping_patience: 2}]\n"),
                               {}, c.catalog());
  ModelAndData p = build_model_and_data(spec, c);
  Trainer trainer(spec, c, p);
  trainer.train();
  CHECK(trainer.state().global_step == 6);
  CHECK(trainer.state().best_global_step == 2);
}
