// checks/spec.hpp — a check run as its caller states it (IDs, texts, numbers), turned into the chosen
// checks and one validated run_settings by one function.  The CLI fills a check_spec from its options,
// the Python extension from its arguments; both get the same validation and the same one-line errors,
// which name the caller's fields with field() (attncert/field.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checks/common.hpp"

namespace attncert::checks {

/// Everything a check call says.  Field names (field.hpp) are the members' names.
struct check_spec {
  std::vector<std::string> ids;  ///< empty: every check
  std::string formats = "binary64,mpfr256", policies = "numpy,matlab,torch,lapack,eigen";
  std::uint64_t seed = 20261129;
  unsigned certify_bits = 128, certify_max_bits = 4096;  ///< 24 <= certify_bits <= certify_max_bits <= 2^20
  double max_seconds = 0;                                ///< in [0, 1e7] (0: no limit)
  /// A parser's message that names no field (an unknown check, format or policy) is prefixed with its
  /// field (named_field.hpp): Python's.  The command line prints them as they are.
  bool name_parse_errors = false;
};

/// The checks a spec chose and their settings.
struct check_run {
  std::vector<const check_entry*> chosen;
  run_settings settings;
};

/// The run of `s`, validated.  Errors (input_error, one line, fields named with field()): an unknown
/// check, format or policy; certify bits out of order or range; max_seconds out of its range.
check_run build_check_run(const check_spec& s);

}  // namespace attncert::checks
