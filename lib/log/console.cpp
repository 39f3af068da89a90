// Console (see console.h).
#include "log/console.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "util/fd_io.h"

namespace hftrain {
namespace {

bool locale_is_utf8() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* v = std::getenv(name);
    if (v && *v) {
      std::string s(v);
      for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s.find("utf-8") != std::string::npos || s.find("utf8") != std::string::npos;
    }
  }
  return false;
}

}  // namespace

Console& Console::instance() {
  static Console console;
  return console;
}

Console::Console() : tty_(isatty(STDERR_FILENO) == 1), utf8_(locale_is_utf8()) {
  const char* term = std::getenv("TERM");
  if (term && std::strcmp(term, "dumb") == 0) tty_ = false;
}

int Console::width() const {
  if (!tty_) return 80;
  winsize ws{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

void Console::clear_status_locked() {
  if (status_shown_) write_all(STDERR_FILENO, "\r\033[2K");
  status_shown_ = false;
}

void Console::write_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool had_status = status_shown_;
  clear_status_locked();
  std::string text = line;
  if (text.empty() || text.back() != '\n') text += '\n';
  if (had_status) text += status_;
  write_all(STDERR_FILENO, text);
  status_shown_ = had_status;
}

void Console::set_status(const std::string& line) {
  if (!tty_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  status_ = line;
  write_all(STDERR_FILENO, "\r\033[2K" + status_);
  status_shown_ = true;
}

void Console::end_status(bool keep) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!status_shown_) return;
  if (keep) {
    write_all(STDERR_FILENO, "\n");
    status_shown_ = false;
  } else {
    clear_status_locked();
  }
  status_.clear();
}

}  // namespace hftrain
