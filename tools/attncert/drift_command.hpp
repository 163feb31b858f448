// tools/attncert/drift_command.hpp — the `drift` and `figures` subcommands, registered on
// the application by main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace attncert::cli {

/// The parsed state of `attncert drift` and `attncert figures`.
class drift_commands {
 public:
  virtual ~drift_commands() = default;
  /// If one of the two subcommands was parsed, run it and return its exit status (0 done;
  /// errors are thrown as input_error, exit 2); otherwise return -1.
  virtual int run(const std::string& command) = 0;
};

/// Add `drift` and `figures` to `app`; the returned object must outlive app.parse().
std::unique_ptr<drift_commands> add_drift_commands(CLI::App& app);

}  // namespace attncert::cli
