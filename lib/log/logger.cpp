// Logging setup (see logger.h).
#include "log/logger.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <mutex>

#include "log/console.h"
#include "runspec/sections.h"

namespace hftrain {
namespace {

ProcessIdentity g_identity;

// Formats a record for people (no timestamps: runs print little, and each line says what it is).
class ConsoleSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string line;
    if (g_identity.rank != 0) line += "[rank " + std::to_string(g_identity.rank) + "] ";
    if (msg.level != spdlog::level::info) {
      const auto name = spdlog::level::to_string_view(msg.level);
      line.append(name.data(), name.size());
      line += ": ";
    }
    line.append(msg.payload.data(), msg.payload.size());
    Console::instance().write_line(line);
  }
  void flush_() override {}
};

spdlog::level::level_enum to_spdlog(const std::string& name) {
  if (name == "debug") return spdlog::level::debug;
  if (name == "warning") return spdlog::level::warn;
  if (name == "error") return spdlog::level::err;
  if (name == "critical") return spdlog::level::critical;
  return spdlog::level::info;
}

std::shared_ptr<spdlog::logger> console_logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>("hftrain", std::make_shared<ConsoleSink>());
    l->set_level(spdlog::level::info);
    l->flush_on(spdlog::level::trace);
    spdlog::set_default_logger(l);
    return l;
  }();
  return logger;
}

}  // namespace

std::string process_log_level(const std::string& log_level, const std::string& log_level_replica,
                              bool log_on_each_node, const ProcessIdentity& who) {
  // HF TrainingArguments.should_log: local process zero with log_on_each_node, else global zero.
  const bool main_process = log_on_each_node ? who.local_rank == 0 : who.rank == 0;
  const std::string& chosen = main_process ? log_level : log_level_replica;
  return chosen == "passive" ? "info" : chosen;
}

void init_logging() { console_logger(); }

void configure_logging(const TrainingArgs& args, const ProcessIdentity& who) {
  g_identity = who;
  console_logger()->set_level(
      to_spdlog(process_log_level(args.log_level, args.log_level_replica, args.log_on_each_node, who)));
}

const ProcessIdentity& process_identity() { return g_identity; }
bool is_world_process_zero() { return g_identity.rank == 0; }

void log_debug(const std::string& message) { console_logger()->debug(message); }
void log_info(const std::string& message) { console_logger()->info(message); }
void log_warning(const std::string& message) { console_logger()->warn(message); }
void log_error(const std::string& message) { console_logger()->error(message); }

}  // namespace hftrain
