// hftrain command line: each command declares its options (app/<command>_cli.cpp); main() parses the
// arguments with CLI11, runs the chosen command and maps errors to exit codes (0 ok, 1 runtime failure,
// 2 usage or config error, 130 / 143 stopped by SIGINT / SIGTERM after saving a checkpoint).
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <new>
#include <optional>

#include <c10/util/Exception.h>

#include "cli_command.h"
#include "commands/commands.h"
#include "hf_command_line.h"
#include "log/logger.h"
#include "util/error.h"
#include "util/malloc_policy.h"
#include "util/threads.h"
#include "util/version.h"

namespace {

const char* const kOutOfMemoryHint =
    "hint: this worker's memory (or its limit) does not hold the run's state: shard more of it (zero.stage 3, "
    "more workers), offload the optimizer state (zero.offload_optimizer nvme), or lower the batch size; "
    "`hftrain estimate` sizes each option";

// "error: <what>"; a failed allocation (LibTorch's CPU allocator, or one inside a collective) is named
// as running out of memory, with what to do about it.
void report_error(const std::string& what) {
  if (what.find("can't allocate memory") != std::string::npos)
    std::cerr << "error: out of memory: " << what << "\n" << kOutOfMemoryHint << std::endl;
  else
    std::cerr << "error: " << what << std::endl;
}

// Parses the command line (HF-style flags and torch.distributed.launch's --local_rank first rewritten as
// hftrain's own) into the commands' options. nullopt when a command is to run; else the exit code: 0 after
// --help / --version, 2 for a usage error.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> words;
  try {
    words = hftrain::adapt_hf_command_line(app, argc, argv);
  } catch (const hftrain::Error& e) {
    report_error(e.what());
    return e.exit_code();
  }
  std::vector<char*> word_ptrs{argv[0]};
  for (auto& w : words) word_ptrs.push_back(w.data());
  try {
    app.parse(static_cast<int>(word_ptrs.size()), word_ptrs.data());
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return std::nullopt;
}

// Runs `command`; what it throws becomes an exit code (hftrain's errors carry theirs, anything else is 1).
int run_command(hftrain::CliCommand& command) {
  try {
    return command.run();
  } catch (const hftrain::StoppedBySignal& e) {
    // Every worker of a job stops at the same step; rank 0 prints the checkpoint and the resume command.
    if (hftrain::is_world_process_zero()) std::cerr << e.what() << std::endl;
    return hftrain::finish_after_error(e.exit_code());
  } catch (const hftrain::Error& e) {
    report_error(e.what());
    return hftrain::finish_after_error(e.exit_code());
  } catch (const c10::Error& e) {
    report_error(std::string("LibTorch: ") + e.what_without_backtrace());
    return hftrain::finish_after_error(1);
  } catch (const std::bad_alloc&) {
    report_error("can't allocate memory (std::bad_alloc)");
    return hftrain::finish_after_error(1);
  } catch (const std::exception& e) {
    report_error(e.what());
    return hftrain::finish_after_error(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  hftrain::reexec_with_short_openmp_spin(argv);  // see util/threads.h
  CLI::App app{"hftrain: HF Trainer + DeepSpeed ZeRO style training from a YAML/JSON run spec"};
  app.set_version_flag("--version", hftrain::version_text());
  app.require_subcommand(1);
  const auto commands = hftrain::declare_commands(app);

  hftrain::init_logging();
  if (std::optional<int> code = parse_command_line(app, argc, argv)) return *code;
  for (const auto& command : commands) {
    if (!command->chosen()) continue;
    // Training keeps freed memory for the next step; the other commands give large blocks back as soon as
    // they are freed (util/malloc_policy.h): evaluation and prediction meet batches of every length, whose
    // logits would otherwise fragment a heap that never shrinks, so their peak would grow with the data.
    if (command->trains())
      hftrain::keep_freed_memory_for_reuse();
    else
      hftrain::return_freed_memory_promptly();
    return run_command(*command);
  }
  return 2;
}
