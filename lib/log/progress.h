// Progress text for the training loop (and, titled, for the eval / predict loops): a tqdm-style bar for terminals
//   " 35%|███▌      | 42/120 [00:03<00:06, 12.30it/s, epoch=1.05, loss=2.345, lr=0.0003]"
// a plain line for logs and pipes
//   "step 42/120 (35%) | epoch 1.05 | loss 2.345 | lr 0.0003 | 12.30it/s | 00:03 elapsed, 00:06 left"
// and the one-line rendering of a log event ("step 4/12 | epoch 0.25 | loss 2.1234 | ...").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace hftrain {

struct ProgressSnapshot {
  int64_t step = 0;
  int64_t total = 0;
  int64_t start_step = 0;  // the step this process started from (resume): rates count from here
  double epoch = 0;
  double elapsed_seconds = 0;
  std::optional<double> loss;           // the last logged training loss
  std::optional<double> learning_rate;  // the last logged learning rate
  // Evaluation / prediction loops: their name ("predict") leads the line, in place of "step", and they
  // have no epoch.
  std::string title;
};

// tqdm format_interval: "MM:SS", or "H:MM:SS" from one hour on.
std::string format_interval(double seconds);
// tqdm rate: "12.30it/s", or "3.21s/it" below one step per second; "?it/s" before the first step.
std::string format_rate(int64_t steps, double seconds);
// A short number for people: 4 decimals from 0.01 up, else 4 significant digits (Python style).
std::string short_number(double v);

std::string progress_bar_line(const ProgressSnapshot& s, int width, bool utf8);
std::string progress_plain_line(const ProgressSnapshot& s);
// A log_history entry as one line: "step S/T | epoch E | " then the values (losses first).
std::string log_event_line(const nlohmann::json& entry, int64_t max_steps);

}  // namespace hftrain
