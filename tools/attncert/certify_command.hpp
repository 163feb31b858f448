// tools/attncert/certify_command.hpp — registers `certify` and `verify-certificate`.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace attncert::cli {

/// Add the two subcommands to `app`; the returned function runs the chosen one after
/// parsing (returns its exit status, or −1 when neither was chosen).  Throws input_error on
/// bad input (exit 2 in main).
std::function<int()> add_certify_commands(CLI::App& app);

}  // namespace attncert::cli
