// tools/attncert/block_command.hpp — registers `block-bound` (the output bound through complete blocks).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace attncert::cli {

/// Add `block-bound` to `app`; the returned function runs it after parsing when it was chosen (its exit
/// status; −1 otherwise).  Throws input_error on bad input (exit 2 in main).
std::function<int(const std::string& command)> add_block_command(CLI::App& app);

}  // namespace attncert::cli
