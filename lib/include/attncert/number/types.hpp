// attncert/number/types.hpp — the multiprecision number types of the three tiers.
//
//   exact      mpq_rational  (GMP rationals)                       equality is meaningful
//   enclosure  mpfi_float    (MPFI intervals at run-time precision) the true value lies inside
//   approx     mpfr_float    (MPFR at run-time precision)           a floating result, no claim
//
// All three use `et_off`: expression templates are disabled because `auto` on an
// expression template dangles (docs/architecture.md, "No expression templates").  Precision of the MPFR and
// MPFI types is set only through attncert::precision_guard (precision_guard.hpp).
#pragma once

#include <boost/multiprecision/gmp.hpp>
#include <boost/multiprecision/mpfi.hpp>
#include <boost/multiprecision/mpfr.hpp>

namespace attncert {

using mpfr_float = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>,
                                                 boost::multiprecision::et_off>;
using mpfi_float = boost::multiprecision::number<boost::multiprecision::mpfi_float_backend<0>,
                                                 boost::multiprecision::et_off>;
using mpq_rational = boost::multiprecision::number<boost::multiprecision::gmp_rational,
                                                   boost::multiprecision::et_off>;

}  // namespace attncert
