// tools/attncert/audit_command.hpp — registers `audit` (the article's protocol on a captured model).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace attncert::cli {

/// Add `audit` to `app`; the returned function runs it after parsing when it was chosen (its exit
/// status; −1 otherwise).  Throws input_error on bad input (exit 2 in main).
std::function<int(const std::string& command)> add_audit_command(CLI::App& app);

}  // namespace attncert::cli
