// attncert/attention/empty_rows.hpp — the policy for a fully masked row, in a header of its own:
// the oracle's request and its double-double kernels name it without including the templated
// softmax (and with it Eigen and Boost.Multiprecision).
#pragma once

#include <string>

#include "attncert/error.hpp"

namespace attncert {

/// What to do with a row whose every entry is masked (softmax would be 0/0).
///  error (default): throw input_error naming the row;  zeros: the row is all zeros (as
///  FlashAttention returns);  nan: the row is all NaN (as a naive PyTorch softmax returns).
enum class empty_row_policy { error, zeros, nan };

inline empty_row_policy parse_empty_row_policy(const std::string& s) {
  if (s == "error") return empty_row_policy::error;
  if (s == "zeros") return empty_row_policy::zeros;
  if (s == "nan") return empty_row_policy::nan;
  throw input_error("unknown empty-row policy '" + s + "' (expected error, zeros or nan)");
}

}  // namespace attncert
