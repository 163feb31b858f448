// lib/src/number/exp_batch_avx512.cpp — exp_batch's eight-lane kernel (AVX-512F), internal.
//
// Compiled with -mavx512f (besides the fast sources' -mavx2 -mfma -ffp-contract=off) when the
// build has the AVX2 kernel (CMake option ATTNCERT_FAST_KERNEL); exp_batch.cpp calls it only
// after checking at run time that the processor and the OS support AVX-512F.  Everything this
// unit compiles has internal linkage except the two functions below (see attncert/number/vector_dd.hpp).
#include <cstddef>

#include "exp_kernel.hpp"

namespace attncert::exp_detail {

bool avx512_kernel_compiled() {
#if defined(ATTNCERT_VECTOR_DD) && defined(__AVX512F__)
  return true;
#else
  return false;
#endif
}

std::size_t exp_lanes_avx512(const double* z_hi, const double* z_lo, std::size_t n, double* w_hi, double* w_lo,
                             double* bound) {
#if defined(ATTNCERT_VECTOR_DD) && defined(__AVX512F__)
  return vector_dd::exp_lanes<__m512d>(z_hi, z_lo, n, w_hi, w_lo, bound);
#else
  (void)z_hi, (void)z_lo, (void)n, (void)w_hi, (void)w_lo, (void)bound;
  return 0;
#endif
}

}  // namespace attncert::exp_detail
