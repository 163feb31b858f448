// lib/src/number/exp_batch.cpp — exp_with_bound over an array, eight or four lanes at a time
// (number/exp_batch.hpp).
//
// Compiled like the oracle's fast kernels: -ffp-contract=off always, and -mavx2 -mfma when the
// build machine has them (CMake option ATTNCERT_FAST_KERNEL).  Every lane performs exactly the
// IEEE operations of the scalar exp_with_bound (vector arithmetic is IEEE binary64, round to
// nearest), so the results are bit for bit those of the scalar loop at the end
// (number/exp_kernel.hpp).  The eight-lane kernel lives in exp_batch_avx512.cpp, the one unit
// compiled with -mavx512f, and runs only on a processor that has AVX-512F.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "attncert/number/double_double.hpp"
#include "attncert/number/exp_batch.hpp"
#include "exp_kernel.hpp"
#ifdef ATTNCERT_VECTOR_DD
#define ATTNCERT_VECTOR_EXP 1
#endif

namespace attncert {

namespace exp_detail {
// exp_batch_avx512.cpp (compiled with -mavx512f): the eight-lane kernel, or 0 entries when that
// unit was built without AVX-512.
bool avx512_kernel_compiled();
std::size_t exp_lanes_avx512(const double* z_hi, const double* z_lo, std::size_t n, double* w_hi, double* w_lo,
                             double* bound);
}  // namespace exp_detail

namespace {
std::atomic<int> isa_cap{2};

int available_isa() {
#ifdef ATTNCERT_VECTOR_EXP
  // __builtin_cpu_supports also checks that the OS saves the AVX-512 state (XCR0).
  static const bool avx512 = exp_detail::avx512_kernel_compiled() && __builtin_cpu_supports("avx512f");
  return avx512 ? 2 : 1;
#else
  return 0;
#endif
}

int current_isa() { return std::min(available_isa(), isa_cap.load(std::memory_order_relaxed)); }
}  // namespace

bool exp_batch_vectorized() {
#ifdef ATTNCERT_VECTOR_EXP
  return true;
#else
  return false;
#endif
}

const char* exp_batch_isa() {
  switch (current_isa()) {
    case 2: return "avx512";
    case 1: return "avx2";
    default: return "scalar";
  }
}

int exp_batch_limit_isa(int level) { return isa_cap.exchange(level); }

void exp_batch(const double* z_hi, const double* z_lo, std::size_t n, double* w_hi, double* w_lo, double* bound) {
  std::size_t i = 0;
#ifdef ATTNCERT_VECTOR_EXP
  const int isa = current_isa();
  if (isa > 0 && dd_detail::environment_ok()) {
    i = isa == 2 ? exp_detail::exp_lanes_avx512(z_hi, z_lo, n, w_hi, w_lo, bound)
                 : vector_dd::exp_lanes<__m256d>(z_hi, z_lo, n, w_hi, w_lo, bound);
    for (std::size_t t = 0; t < i; ++t) {
      if (bound[t] >= 0) continue;  // a lane off the kernel's path (exp_kernel.hpp)
      const dd_with_error s = exp_with_bound(dd{z_hi[t], z_lo[t]});
      w_hi[t] = s.value.hi;
      w_lo[t] = s.value.lo;
      bound[t] = s.rel_error_bound;
    }
  }
#endif
  for (; i < n; ++i) {
    const dd_with_error s = exp_with_bound(dd{z_hi[i], z_lo[i]});
    w_hi[i] = s.value.hi;
    w_lo[i] = s.value.lo;
    bound[i] = s.rel_error_bound;
  }
}

}  // namespace attncert
