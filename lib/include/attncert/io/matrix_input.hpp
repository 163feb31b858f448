// attncert/io/matrix_input.hpp — read matrices exactly from .npy or JSON files.
#pragma once

#include <Eigen/Core>
#include <string>

#include "attncert/linalg/matrix.hpp"

namespace attncert::io {

using bool_matrix = Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic>;

/// Read a 2-D matrix exactly.  `.npy`: float16/32/64 (dyadic rationals, hence exact) or
/// int32/int64/bool; `.json`: nested arrays [[...], ...] whose entries are JSON numbers (read
/// from their decimal text, exactly) or strings such as "3/7", "-1e-17" (exact).  `what`
/// names the input in error messages (field("q"): field.hpp).  Errors (input_error, one line): unreadable
/// file, a file above io::max_input_bytes() (bounded_input.hpp), malformed content, NaN/Inf,
/// ragged rows, not 2-D, empty, a number beyond the digit or exponent limit (traits.hpp).
matrix<mpq_rational> read_exact_matrix(const std::string& path, const std::string& what);

/// The JSON part of read_exact_matrix on text already in memory (`label` starts every
/// message).  Same errors; used by the fuzz harness tests/fuzz/matrix_input.cpp.
matrix<mpq_rational> parse_exact_matrix_json(const std::string& text, const std::string& label);

/// Read a boolean mask (true = allowed): `.npy` of bool or integers 0/1, or JSON arrays of
/// true/false or 0/1.
bool_matrix read_bool_matrix(const std::string& path, const std::string& what);

}  // namespace attncert::io
