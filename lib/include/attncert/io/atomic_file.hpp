// attncert/io/atomic_file.hpp — the one way attncert writes files: atomically, durably, and
// several outputs as one transaction.
//
// A file is written to a fresh temporary file in the target's directory (O_EXCL, so an
// existing name is never reused), flushed to disk (fsync), then renamed over the target, and
// the directory is flushed too: a reader sees the old file or the complete new one, never a
// partial one, and a crash leaves at most a temporary file named `.NAME.attncert-tmp-…`.
//
// An output_transaction stages several outputs (files, and whole directories filled by the
// caller or by a subprocess such as gnuplot) and makes them visible only in commit().  If a
// staging step fails, or the transaction is destroyed without commit() (an exception, an
// interruption), every temporary is removed and no target is touched.
//
// A target that is not a regular file — a device (/dev/null), a FIFO, a terminal, any path under
// /dev/ or /proc/ (/dev/stdout) — is written through instead, at commit: opened and written,
// never replaced by a rename.  Two outputs of one transaction on the same file are refused.
//
// All failures are attncert::input_error with a one-line message naming the target.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace attncert::io {

/// Writes `bytes` to `path` atomically (temporary file beside it, fsync, rename, fsync of the
/// directory).  Errors: input_error ("PATH: cannot write: REASON", one line) when the
/// directory does not exist, `path` is a directory, or any step fails; `path` is then left as
/// it was and no temporary file remains.
void write_file_atomic(const std::string& path, std::string_view bytes);

/// True while some output_transaction of this process holds staged outputs.
/// Async-signal-safe (a lock-free atomic load): a signal handler uses it to decide whether it
/// may end the process at once or must let the transaction clean up.
bool outputs_pending() noexcept;

/// True once some output_transaction of this process has made its outputs visible (commit()
/// began moving them into place).  Async-signal-safe.  A signal handler that sees it must not
/// report "interrupted, no output left behind": the outputs exist, so the command finishes.
bool outputs_committed() noexcept;

/// Several outputs made visible together, or not at all.
///
/// Not thread-safe; one transaction per command.  Destroying it without commit() removes
/// every temporary file and directory it created (rollback).
class output_transaction {
 public:
  output_transaction() = default;
  output_transaction(const output_transaction&) = delete;
  output_transaction& operator=(const output_transaction&) = delete;
  ~output_transaction();

  /// Stages `bytes` for `path`: written and flushed now to a temporary file beside `path`,
  /// renamed over it at commit().  Errors: input_error as write_file_atomic (the
  /// transaction itself stays usable and still owns what it staged before).
  void stage_file(const std::string& path, std::string_view bytes);

  /// Stages the directory `path` (created with its missing parents): returns an empty
  /// temporary directory beside it for the caller to fill.  At commit() its files are fsynced
  /// and it is renamed to `path`; if `path` already is a directory, its files are moved into
  /// it one by one (each replacing a file of the same name atomically).  Parents created here
  /// are removed again on rollback.  Errors: input_error when `path` exists and is not a
  /// directory, or cannot be created.
  std::filesystem::path stage_directory(const std::string& path);

  /// A private scratch directory beside `near` (a file or directory path), removed when the
  /// transaction ends, committed or not.  Errors: input_error when it cannot be created.
  std::filesystem::path scratch_directory(const std::string& near);

  /// Makes every staged output visible, in staging order.  A rename failure (rare: each
  /// temporary already lives in its target's directory) undoes the renames done so far —
  /// files that existed before are restored from hard-link backups — and throws input_error.
  void commit();

 private:
  struct staged {
    std::filesystem::path temp, target;
    bool directory = false;
    bool through = false;  ///< a device or descriptor (/dev/null, /dev/stdout, a FIFO): written through at commit
    std::string bytes;     ///< what a write-through target receives
  };
  void begin_pending();
  void rollback() noexcept;

  std::vector<staged> staged_;
  std::vector<std::filesystem::path> scratch_;
  std::vector<std::filesystem::path> created_parents_;  // outermost last
  bool pending_ = false;
};

/// Writes `bytes` to the new file `path` (which must not exist) and flushes it to disk: for
/// files inside a directory staged by output_transaction::stage_directory, which the
/// directory's rename makes visible.  Errors: input_error.
void write_new_file(const std::filesystem::path& path, std::string_view bytes);

}  // namespace attncert::io
