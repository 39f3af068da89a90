// Console: the process's human-facing stderr. Log lines are written above an optional status line
// (the progress bar), which is redrawn in place with '\r' when stderr is a terminal. All writers go
// through one mutex so a log line never tears the bar.
#pragma once

#include <mutex>
#include <string>

namespace hftrain {

class Console {
 public:
  static Console& instance();

  bool is_tty() const { return tty_; }
  // Terminal width in columns (80 when unknown or not a terminal).
  int width() const;
  // Whether the terminal takes UTF-8 (block characters in the bar), from LC_ALL / LC_CTYPE / LANG.
  bool utf8() const { return utf8_; }

  // Writes one line (no trailing newline needed) above the status line.
  void write_line(const std::string& line);
  // Replaces the status line (terminal only; ignored otherwise).
  void set_status(const std::string& line);
  // Ends the status line: keep = leave its last text on screen, else erase it.
  void end_status(bool keep);

  // For tests: pretend stderr is (not) a terminal.
  void set_tty_for_testing(bool tty) { tty_ = tty; }

 private:
  Console();
  void clear_status_locked();

  std::mutex mutex_;
  bool tty_ = false;
  bool utf8_ = false;
  std::string status_;
  bool status_shown_ = false;
};

}  // namespace hftrain
