// The reporters of a training run, as TrainerCallbacks (HF attaches ProgressCallback or
// PrinterCallback plus the report_to integrations the same way):
//   ConsoleReporter     - a progress bar on a terminal (unless disable_tqdm), else a plain progress
//                         line every 30 s; every log event as one readable line (at info level).
//   JsonlReporter       - report_to jsonl: each log event as one JSON object per line in
//                         output_dir/logs.jsonl (the entries of trainer_state.json's log_history).
//   TensorBoardReporter - report_to tensorboard: scalars named as HF's TensorBoardCallback names them
//                         (train/loss, train/learning_rate, eval/loss, ...) plus the run spec as text.
// All of them act on world process zero only.
#pragma once

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "train/callbacks.h"

namespace hftrain {

class EventFileWriter;

class ConsoleReporter : public TrainerCallback {
 public:
  // bar: draw a progress bar (terminal and !disable_tqdm); plain_lines: periodic progress lines otherwise.
  ConsoleReporter(bool bar, bool plain_lines);
  std::string name() const override { return "ConsoleReporter"; }
  void on_train_begin(const TrainerState& s, TrainerControl& c) override;
  void on_step_end(const TrainerState& s, TrainerControl& c) override;
  void on_log(const TrainerState& s, TrainerControl& c, const nlohmann::json& logs) override;
  void on_train_end(const TrainerState& s, TrainerControl& c) override;

 private:
  void draw(const TrainerState& s, bool force);
  bool bar_;
  bool plain_lines_;
  std::chrono::steady_clock::time_point start_, last_draw_, last_line_;
  int64_t start_step_ = 0;
  std::optional<double> loss_, learning_rate_;
};

class JsonlReporter : public TrainerCallback {
 public:
  // append: keep earlier lines (resuming), else start the file afresh.
  JsonlReporter(std::string path, bool append);
  ~JsonlReporter() override;
  std::string name() const override { return "JsonlReporter"; }
  void on_train_begin(const TrainerState& s, TrainerControl& c) override;
  void on_log(const TrainerState& s, TrainerControl& c, const nlohmann::json& logs) override;
  void on_train_end(const TrainerState& s, TrainerControl& c) override;

 private:
  std::string path_;
  bool append_;
  std::FILE* file_ = nullptr;
};

class TensorBoardReporter : public TrainerCallback {
 public:
  // spec_path: the resolved run spec, written as the "args" text summary when it exists.
  TensorBoardReporter(std::string log_dir, std::string spec_path);
  ~TensorBoardReporter() override;
  std::string name() const override { return "TensorBoardCallback"; }
  void on_train_begin(const TrainerState& s, TrainerControl& c) override;
  void on_log(const TrainerState& s, TrainerControl& c, const nlohmann::json& logs) override;
  void on_train_end(const TrainerState& s, TrainerControl& c) override;
  // The event file being written ("" before train begins).
  std::string path() const;

 private:
  std::string log_dir_;
  std::string spec_path_;
  std::unique_ptr<EventFileWriter> writer_;
};

// The reporters the spec asks for (none on processes other than world rank 0).
std::vector<std::unique_ptr<TrainerCallback>> make_reporting_callbacks(const TrainingArgs& args);

}  // namespace hftrain
