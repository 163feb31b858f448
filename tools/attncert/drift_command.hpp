// tools/attncert/drift_command.hpp — the `drift` and `figures` subcommands, registered on
// the application by main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "attncert/drift/figures.hpp"
#include "attncert/io/atomic_file.hpp"

namespace attncert::cli {

/// The parsed state of `attncert drift` and `attncert figures`.
class drift_commands {
 public:
  virtual ~drift_commands() = default;
  /// If one of the two subcommands was parsed, run it and return its exit status (0 done;
  /// errors are thrown as input_error, exit 2); otherwise return -1.
  virtual int run(const std::string& command) = 0;
};

/// Renders `f` (gnuplot, in a scratch directory of `tx`) to `target` (FILE.png or FILE.svg) and stages the
/// image for it.  Errors: input_error (gnuplot missing or failing, no image written).
void stage_figure_image(io::output_transaction& tx, const std::string& target, const figure& f);

/// Add `drift` and `figures` to `app`; the returned object must outlive app.parse().
std::unique_ptr<drift_commands> add_drift_commands(CLI::App& app);

}  // namespace attncert::cli
