// tools/attncert/cli_common.hpp — what every subcommand of the CLI shares: the exit codes and
// the one function that maps an exception to them, the interrupt handler, and the outputs of
// a command committed together.
#pragma once

#include <functional>
#include <string>

#include "attncert/field.hpp"
#include "attncert/io/atomic_file.hpp"

namespace attncert::cli {

/// The documented exit codes (README "Exit status"; every --help lists them).
inline constexpr int exit_ok = 0;            ///< success
inline constexpr int exit_failed = 1;        ///< refuted / failed / candidate over --max-ulp
inline constexpr int exit_usage = 2;         ///< bad input or usage (input_error, CLI11 errors)
inline constexpr int exit_undecided = 3;     ///< undecided / cannot check (certify, verify-certificate)
inline constexpr int exit_internal = 70;     ///< internal error (EX_SOFTWARE): a bug, not bad input
inline constexpr int exit_interrupted = 130; ///< SIGINT / SIGTERM (128 + SIGINT)

/// The command line as one string (arguments with blanks or quotes quoted), for reports.
std::string join_args(int argc, char** argv);

/// Maps the exception being handled to its exit code and prints its one-line message
/// ("attncert: ...", input echoed through one_line) on stderr.  Call only inside a catch block.
///   CLI::ParseError, input_error, std::invalid_argument -> 2; time_limit_reached -> 3;
///   interrupted -> 130; internal_error and anything else -> 70.
int exit_code_of_current_exception() noexcept;

/// Installs the SIGINT / SIGTERM handler: with no output staged the process ends at once
/// (exit 130, nothing to clean up); otherwise it requests an interruption (deadline.hpp), the
/// running computation throws `interrupted` at its next poll, the output transaction removes
/// its temporaries and main() exits 130.  A second signal ends the process at once.
void install_interrupt_handlers();

/// A progress callback for the library's long loops: when stderr is a terminal, shows
/// "WHAT: done/total UNIT"; with `poll`, it also polls the interruption (throws `interrupted`:
/// only for loops that may unwind from the callback, i.e. not from a thread pool's worker).
std::function<void(std::size_t, std::size_t)> progress_reporter(const std::string& what, const std::string& unit,
                                                                bool poll);
/// A stage callback: when stderr is a terminal, shows "WHAT: STAGE (elapsed s)" on one line
/// (the previous stage's line is replaced); polls the interruption.  Empty otherwise.
std::function<void(const std::string&)> stage_progress(const std::string& what);
/// Clears the progress line (when stderr is a terminal).
void clear_progress();

/// The outputs of one command, made visible together at the end: files staged in `files`
/// (io::output_transaction) and the report, which goes to --out FILE (staged as well) or, when
/// FILE is empty or "-", to stdout once every file is committed.  Destroyed without commit()
/// (an error, an interruption), it leaves nothing behind and prints nothing.
class command_output {
 public:
  io::output_transaction files;
  /// The report `text`, for `out_path` or stdout, its fields (field.hpp) spelled as options.
  void report(const std::string& out_path, const std::string& text);
  /// Text for stdout in addition to (after) the report, its fields spelled as options.
  void print(const std::string& text) { stdout_ += spell_fields(text, cli_spelling); }
  /// Throws `interrupted` if an interruption was requested; else commits the files, then
  /// writes the stdout text.
  void commit();

 private:
  std::string stdout_;
};

}  // namespace attncert::cli
