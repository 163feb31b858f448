// attncert/oracle/target.hpp — the formats a reference is rounded to, and rounding to them.
// Light (no multiprecision header): the fast kernels include it.
#pragma once

#include <string>

namespace attncert::oracle {

/// The formats a reference can be rounded to.
enum class target_format { binary64, binary32, binary16, bfloat16 };

/// "binary64", "binary32", "binary16", "bfloat16"; parse accepts also float64/fp64/f64, float32/
/// fp32/f32, float16/fp16/f16/half and bf16.  Throws input_error on anything else.
target_format parse_target(const std::string& s);
std::string to_string(target_format t);
/// Precision (bits, implicit bit included) and exponent of the smallest normal of `t`.
int target_precision(target_format t);
int target_emin(target_format t);

/// Round-to-nearest-even of the exact sum a + b (two binary64 numbers) in format t, returned
/// as the binary64 number equal to it (±Inf on overflow).  Exact: one rounding, no double
/// rounding.  Preconditions: a, b finite, |a + b| below 2^1023.
double round_sum_to_target(double a, double b, target_format t) noexcept;

/// The spacing of format t at x (ulp(x) = 2^(max(e, emin) - p + 1), e = floor(log2|x|);
/// for x = 0 the smallest subnormal).  Exact power of two.
double target_ulp(double x, target_format t) noexcept;

}  // namespace attncert::oracle
