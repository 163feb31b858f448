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
/// names the input in error messages ("--q").  Errors (input_error, one line): unreadable
/// file, malformed content, NaN/Inf, ragged rows, not 2-D, empty.
matrix<mpq_rational> read_exact_matrix(const std::string& path, const std::string& what);

/// Read a boolean mask (true = allowed): `.npy` of bool or integers 0/1, or JSON arrays of
/// true/false or 0/1.
bool_matrix read_bool_matrix(const std::string& path, const std::string& what);

}  // namespace attncert::io
