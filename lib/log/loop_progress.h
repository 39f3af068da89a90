// Progress of an evaluation or prediction loop, as training shows its own (log/progress.h): a tqdm-style
// bar on a terminal ("predict: 35%|███▌      | 42/120 [00:03<00:06, 12.30it/s]"), else plain lines
// ("predict 42/120 (35%) | 12.30it/s | 00:03 elapsed, 00:06 left") when the loop starts, every
// `line_interval_seconds` and when it ends. World process zero only; training.disable_tqdm turns it off.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace hftrain {

class LoopProgress {
 public:
  enum class Mode { kOff, kBar, kLines };
  // The mode for this process: off on ranks other than world zero or with disable_tqdm, a bar on a
  // terminal, lines otherwise.
  static Mode mode_for(bool disable_tqdm);

  LoopProgress(std::string title, int64_t total, Mode mode, double line_interval_seconds = 30);
  ~LoopProgress();  // ends a bar left open (an exception), keeping its last state on screen
  LoopProgress(const LoopProgress&) = delete;
  LoopProgress& operator=(const LoopProgress&) = delete;

  void advance(int64_t done = 1);  // `done` more items finished
  void finish();                   // the final bar / line (once)
  int64_t done() const { return done_; }

 private:
  void show(bool force);
  std::string title_;
  int64_t total_;
  Mode mode_;
  double line_interval_;
  int64_t done_ = 0;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_, last_line_;
};

}  // namespace hftrain
