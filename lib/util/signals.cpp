// SIGINT / SIGTERM handling (see signals.h). The handler only uses async-signal-safe calls.
#include "util/signals.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

namespace hftrain {
namespace {

volatile sig_atomic_t g_pending = 0;
const char* volatile g_on_signal = "";
volatile sig_atomic_t g_announce = 1;
struct sigaction g_previous_int, g_previous_term;

void write_stderr(const char* text) {
  ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void on_stop_signal(int sig) {
  if (g_pending != 0) {
    write_stderr("\nsecond stop signal: exiting now without saving\n");
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  g_pending = sig;
  if (!g_announce) return;
  write_stderr(sig == SIGINT ? "\nreceived SIGINT: " : "\nreceived SIGTERM: ");
  write_stderr(g_on_signal);
  write_stderr(" (send it again to exit at once)\n");
}

}  // namespace

StopSignalGuard::StopSignalGuard(const char* on_signal, bool announce) {
  g_pending = 0;
  g_on_signal = on_signal;
  g_announce = announce ? 1 : 0;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, &g_previous_int);
  ::sigaction(SIGTERM, &sa, &g_previous_term);
}

StopSignalGuard::~StopSignalGuard() {
  ::sigaction(SIGINT, &g_previous_int, nullptr);
  ::sigaction(SIGTERM, &g_previous_term, nullptr);
}

int pending_stop_signal() { return g_pending; }

const char* signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "signal";
  }
}

}  // namespace hftrain
