// attncert/number/decimal.hpp — decimal text of the ends of an enclosure, rounded outward.
//
// An enclosure that is printed is an enclosure: every interval end that attncert writes (in
// text, JSON, Markdown, CSV, data files or certificates) goes through these functions, never
// through a round-to-nearest conversion (Boost's str(), an ostream, convert_to<double>()).
//
// Tier: enclosure.  Guarantee: read back as an exact rational, the decimal printed by
// decimal_down(x, ...) is <= x and the one printed by decimal_up(x, ...) is >= x (MPFR's
// formatted output, mpfr_asprintf with the rounding modes RNDD / RNDU, is correctly rounded
// in the stated direction).  Consequently, for an interval [lo, hi] containing a value v,
// outward_decimal gives strings [LO, HI] with LO <= lo <= v <= hi <= HI.  double_down(x) is
// the largest binary64 <= x and double_up(x) the smallest binary64 >= x (mpfr_get_d with
// RNDD / RNDU; ±inf beyond the binary64 range, on the safe side).
//
// The layout and the number of digits are those of the round-to-nearest conversion being
// replaced, so outputs change at most in their last digit, and only where the value is not
// exactly representable in that many digits: a value that prints exactly (0, 1, 0.125,
// 1e-20 as a binary64 read from "1e-20" is *not* exact) prints the same string in both
// directions and the same string as before.
//   * decimal_layout::scientific is printf's "%.{digits}e": `digits` digits after the point
//     (digits + 1 significant), "1.2345e-05".  It is exactly the layout of Boost's
//     str(digits, std::ios_base::scientific) for mpfr_float / mpfi_float ends (tested), zero
//     included ("0.0000e+00", without the sign of a negative zero, as Boost prints it).
//   * decimal_layout::general is printf's "%.{digits}g": `digits` significant digits,
//     trailing zeros removed, fixed or scientific notation by the exponent — exactly the
//     layout of an ostream with precision(digits) printing a double (tested).
// Non-finite values print "inf", "-inf", "nan" (a NaN end encloses nothing; callers that can
// meet one state what it means).
#pragma once

#include <mpfr.h>

#include <string>
#include <utility>

#include "attncert/number/types.hpp"

namespace attncert {

/// How a decimal is laid out (see the header comment): printf's %e or %g.
enum class decimal_layout { scientific, general };

/// Decimal of x rounded toward -inf (a lower end): the printed value is <= x.
std::string decimal_down(mpfr_srcptr x, int digits, decimal_layout layout = decimal_layout::scientific);
/// Decimal of x rounded toward +inf (an upper end): the printed value is >= x.
std::string decimal_up(mpfr_srcptr x, int digits, decimal_layout layout = decimal_layout::scientific);

std::string decimal_down(const mpfr_float& x, int digits, decimal_layout layout = decimal_layout::scientific);
std::string decimal_up(const mpfr_float& x, int digits, decimal_layout layout = decimal_layout::scientific);

/// The same for a binary64 end (exactly converted first): the printed value is <= x (down)
/// or >= x (up).  With decimal_layout::general and 17 digits this replaces `os.precision(17);
/// os << x` for interval ends.
std::string decimal_down(double x, int digits, decimal_layout layout = decimal_layout::general);
std::string decimal_up(double x, int digits, decimal_layout layout = decimal_layout::general);

/// Both ends of an interval, rounded outward: {lower end rounded down, upper end rounded up}.
/// The printed interval contains the interval x, hence every value x encloses.
std::pair<std::string, std::string> outward_decimal(const mpfi_float& x, int digits,
                                                    decimal_layout layout = decimal_layout::scientific);

/// "[LO, HI]" from outward_decimal: the text form of an enclosure used in reports.
std::string interval_text(const mpfi_float& x, int digits, decimal_layout layout = decimal_layout::scientific);

/// Largest binary64 <= x (a lower end emitted as a double); -inf below -DBL_MAX.
double double_down(mpfr_srcptr x);
/// Smallest binary64 >= x (an upper end emitted as a double); +inf above DBL_MAX.
double double_up(mpfr_srcptr x);
double double_down(const mpfr_float& x);
double double_up(const mpfr_float& x);

}  // namespace attncert
