// attncert/rank/spec.hpp — a rank call as its caller states it (matrices, texts, numbers), turned into
// one validated rank_request by one function.  The CLI fills a rank_spec from its options (the
// matrices of the files it read, io/matrix_input.hpp), the Python extension from its arguments
// (arrays); both get the same validation and the same one-line errors, which name the caller's fields
// with field() (field.hpp: the CLI spells them as its options, Python as its keywords).  The rank
// layer reads no file.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "attncert/rank/analyse_rank.hpp"
#include "attncert/tensor.hpp"

namespace attncert {

/// A matrix as a caller holds it: a 2-D array of binary64 values (each taken exactly: Python's arrays),
/// or exact rationals (what the CLI read from a file, io::read_exact_matrix).  At most one is set.
struct rank_matrix_input {
  std::optional<tensor> array;
  std::optional<matrix<mpq_rational>> exact;
  bool given() const { return array.has_value() || exact.has_value(); }
};

/// Everything a rank call says.  Field names (field.hpp) are the members' names.
struct rank_spec {
  rank_matrix_input scores, q, k, v, x;  ///< scores, or q and k; v for output / residual; x for residual
  std::string scale;                     ///< "", "default" or "1/sqrt(d)": 1/sqrt(d); else an exact rational (q/k only)
  std::string mask = "none";             ///< none, causal or matrix (mask_matrix)
  std::optional<Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic>> mask_matrix;  ///< true: key allowed
  std::string object = "attention";      ///< scores, attention, output or residual
  std::string formats = "binary16,bfloat16,binary32,binary64,mpfr256", policies = "numpy,matlab,torch,lapack,eigen";
  bool formats_explicit = false;         ///< the caller named the formats (rank_request::formats_explicit)
  unsigned max_precision = 4096;         ///< cap of the singular-value enclosures, in [128, 2^20]
  std::uint64_t seed = 20261129;
  double max_seconds = 0;                ///< in [0, 1e7] (0: no limit)
  double sigma_rel_width = 0;            ///< >= 0
  long long deflate_max_k = 64;          ///< in [0, 4096]
  double deflate_seconds = 120;          ///< >= 0
  long long threads = 1;                 ///< in [1, 256]: threads of the deflation's MPFR products
  /// The report's "inputs": the caller's description of its matrices (the CLI: each file under its
  /// field, with its shape; Python: "array").  Passed through as it is.
  nlohmann::json inputs = nlohmann::json::object();
  /// A parser's message that names no field (an unknown format, policy or object) is prefixed with
  /// its field (named_field.hpp): Python's.  The command line prints them as they are.
  bool name_parse_errors = false;
};

/// The request of `s`, validated (the one validation of a rank call: what analyse_rank would reject
/// is rejected here, in the same order).  Errors (input_error, one line, fields named with field()):
/// scores and q/k both or neither given, scale with scores, a bad scale, an array that is not 2-D, a
/// bad mask, object, format or policy, a number out of its range, shapes that do not fit, an object
/// missing v or x, a fully masked row.
rank_request build_rank_request(const rank_spec& s);

}  // namespace attncert
