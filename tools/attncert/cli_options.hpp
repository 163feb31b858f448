// tools/attncert/cli_options.hpp — the options every subcommand shares, parsed and validated
// the same way everywhere (CLI11 validators: a bad value is a usage error, exit 2, before any
// work), and the text of the exit codes shown in every --help.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attncert::cli {

/// --format FORMAT, one of `allowed` (the first is the default).
CLI::Option* add_format_option(CLI::App* app, std::string& format, const std::vector<std::string>& allowed);

/// --out FILE: the report goes to FILE (atomically, committed with the command's other outputs)
/// instead of stdout ("-" is stdout).  FILE's directory must exist and FILE must not be a
/// directory.
CLI::Option* add_out_option(CLI::App* app, std::string& out);

/// --mask: none, causal or a file (`files` describes which); never empty.
CLI::Option* add_mask_option(CLI::App* app, std::string& mask, const std::string& files);

/// --scale: a rational, or `default` / `1/sqrt(d)`; never empty (an empty value is rejected,
/// not read as the default).  Left empty when the option is not given.
CLI::Option* add_scale_option(CLI::App* app, std::string& scale, const std::string& description);

/// --max-precision BITS in [lo, hi].
CLI::Option* add_max_precision_option(CLI::App* app, unsigned& bits, unsigned lo, unsigned hi,
                                      const std::string& description);

/// --threads N in [1, 256].
CLI::Option* add_threads_option(CLI::App* app, unsigned& threads);

/// --seed N: a non-negative decimal integer below 2^64 (no sign, no wrap-around).
CLI::Option* add_seed_option(CLI::App* app, std::uint64_t& seed, const std::string& description);

/// A non-negative decimal integer (digits only): for unsigned options, which CLI11 would
/// otherwise read "-1" into as 2^64 - 1.
const CLI::Validator& non_negative_integer();
/// A --max-seconds value: a number in [0, 1e7] (0: no limit); NaN and ±Inf are refused.
const CLI::Validator& seconds_budget();

/// A path an output file can be written to: "-" (stdout), or a name whose directory exists
/// and which is not itself a directory.
const CLI::Validator& writable_file();

/// What --mask / --scale mean, parsed once.
struct mask_choice {
  enum class kind { none, causal, file } type = kind::none;
  std::string file;
};
mask_choice parse_mask(const std::string& mask);
/// True when `scale` (unset, "default" or "1/sqrt(d)") asks for 1/sqrt(d).
bool scale_is_default(const std::string& scale);

/// The "Exit status:" block of a --help footer: the subcommand's own codes (`own`, e.g.
/// {{0, "every claim holds"}, {1, "a claim failed"}}), then the codes every subcommand shares
/// (2 usage, 70 internal error, 130 interrupted).  With `own` empty: the whole table.
std::string exit_codes_text(const std::vector<std::pair<int, std::string>>& own);

}  // namespace attncert::cli
