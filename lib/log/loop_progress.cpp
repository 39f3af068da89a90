// Evaluation / prediction loop progress (see loop_progress.h).
#include "log/loop_progress.h"

#include "log/console.h"
#include "log/logger.h"
#include "log/progress.h"

namespace hftrain {
namespace {

constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

}  // namespace

LoopProgress::Mode LoopProgress::mode_for(bool disable_tqdm) {
  if (disable_tqdm || !is_world_process_zero()) return Mode::kOff;
  return Console::instance().is_tty() ? Mode::kBar : Mode::kLines;
}

LoopProgress::LoopProgress(std::string title, int64_t total, Mode mode, double line_interval_seconds)
    : title_(std::move(title)), total_(total), mode_(mode), line_interval_(line_interval_seconds) {
  start_ = last_draw_ = last_line_ = std::chrono::steady_clock::now();
  show(true);
}

LoopProgress::~LoopProgress() {
  if (mode_ == Mode::kBar && !finished_) Console::instance().end_status(/*keep=*/true);
}

void LoopProgress::advance(int64_t done) {
  done_ += done;
  show(false);
}

void LoopProgress::finish() {
  if (finished_) return;
  show(true);
  finished_ = true;
  if (mode_ == Mode::kBar) Console::instance().end_status(/*keep=*/true);
}

void LoopProgress::show(bool force) {
  if (mode_ == Mode::kOff || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  ProgressSnapshot snap;
  snap.title = title_;
  snap.step = done_;
  snap.total = total_;
  snap.elapsed_seconds = std::chrono::duration<double>(now - start_).count();
  if (mode_ == Mode::kBar) {
    if (!force && now - last_draw_ < kRedrawInterval) return;
    last_draw_ = now;
    Console::instance().set_status(progress_bar_line(snap, Console::instance().width(), Console::instance().utf8()));
  } else {
    if (!force && std::chrono::duration<double>(now - last_line_).count() < line_interval_) return;
    last_line_ = now;
    log_info(progress_plain_line(snap));
  }
}

}  // namespace hftrain
