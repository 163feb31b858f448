// attncert/number/format.hpp — evaluation formats named on the command line and in
// reports (binary16, bfloat16, binary32, binary64, mpfrN, mpfiN), and dispatch from a
// format to the number type that implements it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "attncert/number/traits.hpp"

namespace attncert {

/// A parsed evaluation format.
struct format_spec {
  enum class kind { binary16, bfloat16, binary32, binary64, mpfr, mpfi };
  kind type = kind::binary64;
  unsigned requested_bits = 53;  ///< N of mpfrN / mpfiN, else the format's precision
  std::string name;              ///< canonical name, e.g. "binary64", "mpfr256"

  /// Precision in bits actually used (mpfr/mpfi: see precision_guard; may exceed N).
  unsigned precision_bits() const;
  /// Exponent of the smallest positive normal number (2^e) of the format.
  long min_normal_exponent() const;
  tier number_tier() const { return type == kind::mpfi ? tier::enclosure : tier::approx; }
};

/// Parse one format name; throws input_error with the list of valid names otherwise, or
/// when N of mpfrN/mpfiN is outside [min_precision_bits, max_precision_bits].
format_spec parse_format(const std::string& name);
/// Parse a comma-separated list; duplicates are rejected.
std::vector<format_spec> parse_formats(const std::string& list);

/// The binary floating-point number nearest to the exact rational q (ties to even) in the
/// format with `precision` significand bits, smallest normal 2^emin and largest exponent emax:
/// one rounding, subnormals and overflow (to ±inf) included.  Returned as a double, which holds
/// it exactly for every format up to binary64.  (Rounding to 53 bits first and then to the
/// format is two roundings: wrong near midpoints and for every subnormal result.)
double nearest_in_format(mpq_srcptr q, int precision, long emin, long emax);
/// nearest_in_format for binary64.
double nearest_binary64(mpq_srcptr q);

/// Call f.template operator()<T>() with T the number type of `fmt`, under a
/// precision_guard for mpfr/mpfi formats.  Returns what f returns.
template <class F>
decltype(auto) with_format(const format_spec& fmt, F&& f) {
  switch (fmt.type) {
    case format_spec::kind::binary16: return f.template operator()<binary16>();
    case format_spec::kind::bfloat16: return f.template operator()<bfloat16>();
    case format_spec::kind::binary32: return f.template operator()<float>();
    case format_spec::kind::binary64: return f.template operator()<double>();
    case format_spec::kind::mpfr: {
      precision_guard g(fmt.requested_bits);
      return f.template operator()<mpfr_float>();
    }
    default: {
      precision_guard g(fmt.requested_bits);
      return f.template operator()<mpfi_float>();
    }
  }
}

}  // namespace attncert
