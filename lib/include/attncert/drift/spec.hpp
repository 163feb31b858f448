// attncert/drift/spec.hpp — a drift sweep as its caller states it (texts and numbers), turned into one
// validated drift_request by one function.  The CLI fills a drift_spec from its options, the Python
// extension from its arguments; both get the same validation and the same one-line errors, which name
// the caller's fields with field() (field.hpp: the CLI spells them as its options, Python as its
// keywords; `from` and `to` are Python's start= and stop=).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attncert/drift/sweep.hpp"

namespace attncert {

/// Everything a drift call says.  Field names (field.hpp) are the members' names.
struct drift_spec {
  std::string family = "two-token";   ///< parse_drift_family
  std::string param = "a";            ///< the swept parameter: only the score scale a
  double from = 0, to = 1;
  long long points = 101;             ///< in [2, 10000000]
  bool log = false;
  std::string recipes = "fp16,bf16-fp32acc,fp32,fp64,mpfr256", policies = "numpy,absolute:1e-6,relative:1e-3";
  std::string object;                 ///< attention or output; "": the family's (output for identical-values)
  std::uint64_t seed = 20261129;
  std::optional<long long> n, d;      ///< in [1, drift_max_n]; none: the family's
  double resolution = 1e-9;
  double max_seconds = 0;             ///< in [0, 1e7] (0: no limit)
  bool enclosures = true;
  unsigned max_precision = 4096;      ///< cap of the enclosures, in [128, 2^20]
  std::vector<double> grid;           ///< drift_request::grid (empty: the whole grid)
  /// A parser's message that names no field (an unknown family, recipe or policy) is prefixed with its
  /// field (named_field.hpp): Python's.  The command line prints them as they are.
  bool name_parse_errors = false;
};

/// The request of `s`, validated (validate() in drift/sweep.hpp included).  Errors (input_error, one
/// line, fields named with field()): an unknown family, parameter, recipe, policy or object; a number
/// out of its range; what validate() rejects.  No progress callback and no diagnostics: the caller adds
/// them (validate() accepts any).
drift_request build_drift_request(const drift_spec& s);

}  // namespace attncert
