// tools/attncert/cli_common.cpp — exit codes, interrupts and outputs shared by the
// subcommands, see cli_common.hpp.
#include "cli_common.hpp"

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <iostream>
#include <new>
#include <sstream>
#include <unistd.h>

#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/field.hpp"

namespace attncert::cli {

std::string join_args(int argc, char** argv) {
  std::string s = "attncert";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    s += " " + (a.find_first_of(" \t\"'") == std::string::npos ? a : "'" + a + "'");
  }
  return s;
}

int exit_code_of_current_exception() noexcept {
  // The library names fields (field.hpp); the command line spells them as its options.
  auto say = [](const std::string& what) {
    std::cerr << "attncert: " << one_line(spell_fields(what, cli_spelling), 4096) << "\n";
  };
  try {
    throw;
  } catch (const CLI::ParseError& e) {
    say(std::string(e.what()) + " (see attncert --help)");
    return exit_usage;
  } catch (const interrupted& e) {
    say(e.what());
    return exit_interrupted;
  } catch (const input_error& e) {
    say(e.what());
    return exit_usage;
  } catch (const std::invalid_argument& e) {
    say(e.what());
    return exit_usage;
  } catch (const std::bad_alloc&) {
    // Stages estimate their memory and refuse first; this is an allocation that still failed.
    say("out of memory: an allocation failed (the input is too large for this machine's memory)");
    return exit_usage;
  } catch (const time_limit_reached& e) {
    say(std::string("undecided: ") + e.what());
    return exit_undecided;
  } catch (const std::exception& e) {
    say(std::string("internal error: ") + e.what());
    return exit_internal;
  } catch (...) {
    say("internal error: unknown exception");
    return exit_internal;
  }
}

namespace {

extern "C" void on_interrupt(int) {
  static volatile std::sig_atomic_t signals = 0;
  signals = signals + 1;
  // After the outputs were committed the work is done: the command finishes with its own exit
  // status (a second signal still ends it at once). Exiting 130 here would claim that nothing
  // was left behind while the outputs exist.
  if (signals == 1 && io::outputs_committed()) return;
  if (signals > 1 || !io::outputs_pending()) {
    static const char msg[] = "attncert: interrupted\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(exit_interrupted);
  }
  request_interrupt();
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

std::function<void(std::size_t, std::size_t)> progress_reporter(const std::string& what, const std::string& unit,
                                                                bool poll) {
  const bool tty = ::isatty(2);
  if (!tty && !poll) return {};
  return [tty, poll, what, unit](std::size_t done, std::size_t total) {
    if (poll) check_interrupt();
    if (tty) std::cerr << "\r" << what << ": " << done << "/" << total << " " << unit << std::flush;
  };
}

std::function<void(const std::string&)> stage_progress(const std::string& what) {
  if (!::isatty(2)) return [](const std::string&) { check_interrupt(); };
  const auto start = std::chrono::steady_clock::now();
  return [what, start](const std::string& stage) {
    check_interrupt();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::ostringstream os;
    os.precision(3);
    os << what << ": " << spell_fields(stage, cli_spelling) << " (" << s << " s)";
    std::string line = os.str();
    if (line.size() < 78) line += std::string(78 - line.size(), ' ');
    std::cerr << "\r" << line << std::flush;
  };
}

void clear_progress() {
  if (::isatty(2)) std::cerr << "\r" << std::string(80, ' ') << "\r" << std::flush;
}

void command_output::report(const std::string& out_path, const std::string& raw) {
  const std::string text = spell_fields(raw, cli_spelling);
  if (out_path.empty() || out_path == "-") stdout_ = text + stdout_;
  else files.stage_file(out_path, text);
}

void command_output::commit() {
  check_interrupt();
  files.commit();
  std::cout << stdout_;
  std::cout.flush();
}

}  // namespace attncert::cli
