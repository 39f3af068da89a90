// Graceful stop on SIGINT / SIGTERM. While a StopSignalGuard is alive, the first SIGINT or SIGTERM is
// only recorded: the trainer polls pending_stop_signal() after each optimizer step, saves a checkpoint
// and stops with exit code 128 + signal (130 / 143). A second signal restores the default action and
// re-raises it, so a stuck process can still be interrupted at once.
#pragma once

namespace hftrain {

inline constexpr const char* kStopAfterStep = "finishing the current optimizer step, then saving a checkpoint";

class StopSignalGuard {
 public:
  // Installs the handlers, clears any recorded signal. `on_signal` (a string literal) completes the line
  // the handler writes, "received SIGINT: <on_signal> (send it again to exit at once)"; with `announce`
  // false the signal is recorded without that line (the workers other than rank 0 of a launched job,
  // which all receive the launcher's forwarded signal).
  explicit StopSignalGuard(const char* on_signal = kStopAfterStep, bool announce = true);
  ~StopSignalGuard();  // restores the previous handlers
  StopSignalGuard(const StopSignalGuard&) = delete;
  StopSignalGuard& operator=(const StopSignalGuard&) = delete;
};

// The recorded signal number (SIGINT or SIGTERM), or 0.
int pending_stop_signal();

// "SIGINT" / "SIGTERM" / "signal N".
const char* signal_name(int signal);

}  // namespace hftrain
