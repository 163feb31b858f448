// attncert/number/exp_batch.hpp — the double-double exponential with its error bound
// (double_double.hpp's exp_with_bound) over an array, vectorized.  Used by the oracle's fast
// kernels and by attention/binary64_enclosure.cpp.
#pragma once

#include <cstddef>

namespace attncert {

/// w[i] = exp_with_bound(z[i]) for i < n (number/double_double.hpp), bit for bit: the same
/// sequence of IEEE operations, evaluated four lanes at a time with AVX2 when available; lanes
/// off the common path (tiny reduced argument, subnormal low word, outside [-708, 709]) call
/// exp_with_bound itself.  bound[i] is its relative error bound.
void exp_batch(const double* z_hi, const double* z_lo, std::size_t n, double* w_hi, double* w_lo, double* bound);

/// True when exp_batch was compiled with AVX2 + FMA (four lanes at a time).
bool exp_batch_vectorized();

}  // namespace attncert
