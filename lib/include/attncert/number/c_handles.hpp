// attncert/number/c_handles.hpp — the one set of RAII owners of the C types of MPFR, MPFI
// and FLINT that the library uses directly (where Boost.Multiprecision's wrappers do not
// reach: fixed per-variable precision in hot loops, FLINT's polynomial matrices).  Each owns
// one initialized object, clears it exactly once, and is neither copyable nor movable, so an
// exception can never leak or double-free one.  (The independent checker, verify/, has its
// own: it includes nothing else of ours.)
#pragma once

#include <flint/flint.h>
#include <flint/fmpq_poly.h>
#include <flint/fmpz_mat.h>
#include <flint/fmpz.h>
#include <flint/fmpz_poly.h>
#include <flint/fmpz_poly_mat.h>
#include <flint/nmod_mat.h>
#include <mpfi.h>
#include <mpfr.h>

#include <cstdint>

namespace attncert {

#define ATTNCERT_NO_COPY(T) \
  T(const T&) = delete;     \
  T& operator=(const T&) = delete

/// An MPFR number of fixed precision.
struct mpfr_var {
  mpfr_t v;
  explicit mpfr_var(mpfr_prec_t p) { mpfr_init2(v, p); }
  ~mpfr_var() { mpfr_clear(v); }
  ATTNCERT_NO_COPY(mpfr_var);
};

/// An MPFI interval of fixed precision.
struct mpfi_var {
  mpfi_t v;
  explicit mpfi_var(mpfr_prec_t p) { mpfi_init2(v, p); }
  ~mpfi_var() { mpfi_clear(v); }
  ATTNCERT_NO_COPY(mpfi_var);
};

/// A FLINT integer.
struct fmpz_var {
  fmpz_t v;
  fmpz_var() { fmpz_init(v); }
  ~fmpz_var() { fmpz_clear(v); }
  ATTNCERT_NO_COPY(fmpz_var);
};

/// A FLINT integer polynomial.
struct fmpz_poly_var {
  fmpz_poly_t v;
  fmpz_poly_var() { fmpz_poly_init(v); }
  ~fmpz_poly_var() { fmpz_poly_clear(v); }
  ATTNCERT_NO_COPY(fmpz_poly_var);
};

/// A FLINT rational polynomial.
struct fmpq_poly_var {
  fmpq_poly_t v;
  fmpq_poly_var() { fmpq_poly_init(v); }
  ~fmpq_poly_var() { fmpq_poly_clear(v); }
  ATTNCERT_NO_COPY(fmpq_poly_var);
};

/// A FLINT integer matrix.
struct fmpz_mat_var {
  fmpz_mat_t v;
  fmpz_mat_var(slong rows, slong cols) { fmpz_mat_init(v, rows, cols); }
  ~fmpz_mat_var() { fmpz_mat_clear(v); }
  ATTNCERT_NO_COPY(fmpz_mat_var);
};

/// A FLINT matrix of integer polynomials.
struct fmpz_poly_mat_var {
  fmpz_poly_mat_t v;
  fmpz_poly_mat_var(slong rows, slong cols) { fmpz_poly_mat_init(v, rows, cols); }
  ~fmpz_poly_mat_var() { fmpz_poly_mat_clear(v); }
  ATTNCERT_NO_COPY(fmpz_poly_mat_var);
};

/// A FLINT matrix over ℤ/pℤ.
struct nmod_mat_var {
  nmod_mat_t v;
  nmod_mat_var(slong rows, slong cols, mp_limb_t p) { nmod_mat_init(v, rows, cols, p); }
  ~nmod_mat_var() { nmod_mat_clear(v); }
  ATTNCERT_NO_COPY(nmod_mat_var);
};

/// FLINT's random state, seeded.
struct flint_rand_var {
  flint_rand_t v;
  explicit flint_rand_var(std::uint64_t seed) {
    flint_randinit(v);
    flint_randseed(v, static_cast<ulong>(seed), static_cast<ulong>(seed * 0x9E3779B97F4A7C15ull + 1));
  }
  ~flint_rand_var() { flint_randclear(v); }
  ATTNCERT_NO_COPY(flint_rand_var);
};

#undef ATTNCERT_NO_COPY

}  // namespace attncert
