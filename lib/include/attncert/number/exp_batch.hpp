// attncert/number/exp_batch.hpp — the double-double exponential with its error bound
// (double_double.hpp's exp_with_bound) over an array, vectorized.  Used by the oracle's fast
// kernels and by attention/binary64_enclosure.cpp.
#pragma once

#include <cstddef>

namespace attncert {

/// w[i] = exp_with_bound(z[i]) for i < n (number/double_double.hpp), bit for bit: the same
/// sequence of IEEE operations, evaluated eight lanes at a time with AVX-512F when the processor
/// has it (checked at run time), else four at a time with AVX2 when the build has it; lanes off
/// the common path (tiny reduced argument, subnormal low word, outside [-708, 709]) call
/// exp_with_bound itself.  bound[i] is its relative error bound.
void exp_batch(const double* z_hi, const double* z_lo, std::size_t n, double* w_hi, double* w_lo, double* bound);

/// True when exp_batch was compiled with AVX2 + FMA (four lanes at a time).
bool exp_batch_vectorized();

/// The kernel exp_batch runs now: "avx512" (eight lanes), "avx2" (four lanes) or "scalar".
const char* exp_batch_isa();

/// Caps the kernel exp_batch may use (0: scalar, 1: AVX2, 2: AVX-512; the default is 2) and
/// returns the previous cap: the tests compare every available kernel with exp_with_bound.
int exp_batch_limit_isa(int level);

}  // namespace attncert
