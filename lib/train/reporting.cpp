// Reporters (see reporting.h).
#include "train/reporting.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "log/console.h"
#include "log/logger.h"
#include "log/progress.h"
#include "log/tensorboard_writer.h"
#include "runspec/sections.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace {

constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
constexpr auto kPlainLineInterval = std::chrono::seconds(30);

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The final entry of a run (train_runtime, train_loss, ...) is shown as the metrics table instead.
bool is_final_train_entry(const nlohmann::json& logs) { return logs.contains("train_runtime"); }

}  // namespace

// ---- ConsoleReporter ----------------------------------------------------------------------------

ConsoleReporter::ConsoleReporter(bool bar, bool plain_lines) : bar_(bar), plain_lines_(plain_lines) {}

void ConsoleReporter::on_train_begin(const TrainerState& s, TrainerControl&) {
  start_ = last_draw_ = last_line_ = std::chrono::steady_clock::now();
  start_step_ = s.global_step;
  if (bar_) draw(s, true);
}

void ConsoleReporter::draw(const TrainerState& s, bool force) {
  const auto now = std::chrono::steady_clock::now();
  ProgressSnapshot snap;
  snap.step = s.global_step;
  snap.total = s.max_steps;
  snap.epoch = s.epoch;
  snap.loss = loss_;
  snap.learning_rate = learning_rate_;
  snap.elapsed_seconds = seconds_between(start_, now);
  snap.start_step = start_step_;
  if (bar_) {
    if (!force && now - last_draw_ < kRedrawInterval) return;
    last_draw_ = now;
    Console::instance().set_status(progress_bar_line(snap, Console::instance().width(), Console::instance().utf8()));
  } else if (plain_lines_) {
    if (!force && now - last_line_ < kPlainLineInterval) return;
    last_line_ = now;
    log_info(progress_plain_line(snap));
  }
}

void ConsoleReporter::on_step_end(const TrainerState& s, TrainerControl&) {
  if (bar_) draw(s, s.global_step >= s.max_steps);
  else draw(s, false);
}

void ConsoleReporter::on_log(const TrainerState& s, TrainerControl&, const nlohmann::json& logs) {
  if (logs.contains("loss") && logs["loss"].is_number()) loss_ = logs["loss"].get<double>();
  if (logs.contains("learning_rate") && logs["learning_rate"].is_number())
    learning_rate_ = logs["learning_rate"].get<double>();
  if (is_final_train_entry(logs)) return;
  nlohmann::json shown;
  for (const auto& item : logs.items()) {
    const std::string& k = item.key();
    const bool speed = k.size() > 11 && k.compare(k.size() - 11, 11, "_per_second") == 0;
    if (k != "total_flos" && !speed) shown[k] = item.value();  // HF drops total_flos; speeds go to the tables
  }
  log_info(log_event_line(shown, s.max_steps));
  if (!bar_) last_line_ = std::chrono::steady_clock::now();
  else draw(s, true);
}

void ConsoleReporter::on_train_end(const TrainerState& s, TrainerControl&) {
  if (bar_) {
    draw(s, true);
    Console::instance().end_status(/*keep=*/true);
  }
}

// ---- JsonlReporter ------------------------------------------------------------------------------

JsonlReporter::JsonlReporter(std::string path, bool append) : path_(std::move(path)), append_(append) {}

JsonlReporter::~JsonlReporter() {
  if (file_) std::fclose(file_);
}

void JsonlReporter::on_train_begin(const TrainerState&, TrainerControl&) {
  if (file_) return;
  file_ = std::fopen(path_.c_str(), append_ ? "a" : "w");
  if (!file_) throw RuntimeFailure("report_to jsonl: cannot open '" + path_ + "': " + std::strerror(errno));
}

void JsonlReporter::on_log(const TrainerState& s, TrainerControl& c, const nlohmann::json& logs) {
  if (!file_) on_train_begin(s, c);
  const std::string line = logs.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw RuntimeFailure("report_to jsonl: cannot write '" + path_ + "': " + std::strerror(errno));
}

void JsonlReporter::on_train_end(const TrainerState&, TrainerControl&) {
  if (file_) std::fclose(file_);
  file_ = nullptr;
  append_ = true;
}

// ---- TensorBoardReporter ------------------------------------------------------------------------

TensorBoardReporter::TensorBoardReporter(std::string log_dir, std::string spec_path)
    : log_dir_(std::move(log_dir)), spec_path_(std::move(spec_path)) {}

TensorBoardReporter::~TensorBoardReporter() = default;

std::string TensorBoardReporter::path() const { return writer_ ? writer_->path() : std::string(); }

void TensorBoardReporter::on_train_begin(const TrainerState& s, TrainerControl&) {
  if (writer_) return;
  writer_ = std::make_unique<EventFileWriter>(log_dir_);
  if (!spec_path_.empty() && std::filesystem::exists(spec_path_)) {
    // Indented four spaces: a code block in TensorBoard's markdown text view.
    std::string text, line;
    const std::string yaml = read_text_file(spec_path_);
    std::size_t pos = 0;
    while (pos < yaml.size()) {
      std::size_t end = yaml.find('\n', pos);
      if (end == std::string::npos) end = yaml.size();
      text += "    " + yaml.substr(pos, end - pos) + "\n";
      pos = end + 1;
    }
    writer_->add_text("args", text, s.global_step);
  }
  writer_->flush();
}

void TensorBoardReporter::on_log(const TrainerState& s, TrainerControl& c, const nlohmann::json& logs) {
  if (!writer_) on_train_begin(s, c);
  for (const auto& item : logs.items()) {
    if (item.key() == "step") continue;  // not part of HF's logs dict
    if (!item.value().is_number()) continue;  // HF warns and drops non-scalars
    writer_->add_scalar(tensorboard_tag(item.key()), item.value().get<double>(), s.global_step);
  }
  writer_->flush();
}

void TensorBoardReporter::on_train_end(const TrainerState&, TrainerControl&) {
  if (writer_) writer_->flush();
}

// ---- Factory ------------------------------------------------------------------------------------

std::vector<std::unique_ptr<TrainerCallback>> make_reporting_callbacks(const TrainingArgs& args) {
  std::vector<std::unique_ptr<TrainerCallback>> out;
  if (!is_world_process_zero()) return out;
  const bool tty = Console::instance().is_tty();
  out.push_back(std::make_unique<ConsoleReporter>(tty && !args.disable_tqdm, !tty && !args.disable_tqdm));
  const bool resuming = !args.resume_from_checkpoint.empty();
  if (args.report_to.has("jsonl"))
    out.push_back(std::make_unique<JsonlReporter>((std::filesystem::path(args.output_dir) / "logs.jsonl").string(), resuming));
  if (args.report_to.has("tensorboard")) {
    const std::string dir = args.logging_dir.empty() ? default_logging_dir(args.output_dir) : args.logging_dir;
    out.push_back(std::make_unique<TensorBoardReporter>(dir, (std::filesystem::path(args.output_dir) / "run_spec.yaml").string()));
  }
  return out;
}

}  // namespace hftrain
