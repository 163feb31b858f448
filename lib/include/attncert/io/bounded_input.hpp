// attncert/io/bounded_input.hpp — the limits on input (README "Limits on input") and the
// bounded reader every input file goes through (the digit and exponent limits of decimal
// numbers are in attncert/number/traits.hpp): no file, device or FIFO is ever read
// beyond the limit, so hostile input ends in one input_error line (exit 2), not in
// std::bad_alloc or a crash.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace attncert::io {

/// Default limit on the size of one input file (.npy, JSON matrix, claim, certificate):
/// 64 MiB.  Raised or lowered process-wide with set_max_input_bytes (the CLI's
/// --max-input-bytes).  Why this value: a JSON matrix of 64 MiB holds up to ~32 M entries
/// and already needs a few GiB once read exactly; a float64 .npy of 64 MiB holds 8 M values.
inline constexpr std::size_t default_max_input_bytes = std::size_t{64} << 20;

/// Deepest JSON nesting accepted in claims, certificates and JSON matrices: 64 levels
/// (the deepest claim or certificate needs 6).  Deeper input is rejected while parsing, before any
/// value is built, so no recursive copy or destruction can exhaust the stack.
inline constexpr std::size_t max_json_depth = 64;

/// The current process-wide limit on one input file, in bytes (default_max_input_bytes
/// until changed).  Thread-safe.
std::size_t max_input_bytes();

/// Sets the process-wide limit on one input file (0 is rejected: input_error).  Thread-safe;
/// meant to be called once at start-up by a front end.
void set_max_input_bytes(std::size_t bytes);

/// Reads the whole file at `path`, but never more than `limit` bytes: a larger file, or a
/// device or FIFO that keeps producing bytes (/dev/zero), stops the read at limit + 1 bytes
/// with input_error "PATH: larger than the input limit of N bytes (raise it with " + field("max_input_bytes") + ")".
/// FIFOs are opened without blocking on a missing writer (they then read as empty).
/// Errors (input_error, one line starting with the escaped path): cannot open, cannot read
/// (e.g. a directory), too large.
std::string read_file_bounded(const std::string& path, std::size_t limit);
inline std::string read_file_bounded(const std::string& path) { return read_file_bounded(path, max_input_bytes()); }

/// JSON text in which every number literal that nlohmann's parser would reject as a "number
/// overflow" (its binary64 value is infinite: 1e100000, or an integer of 310 digits) is turned
/// into a string holding the same text, so that callers that read numbers exactly from their
/// text (claims, JSON matrices) treat the literal 1e100000 like the string "1e100000"; the
/// digit and exponent limits then apply to both alike.  Everything else is left as it is
/// (byte offsets in parse errors stay exact unless such a literal precedes them), including
/// malformed tokens, which the parser still reports.  Linear in the size of `text`.
std::string quote_huge_number_literals(std::string_view text);

}  // namespace attncert::io
