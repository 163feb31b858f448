// lib/src/number/decimal.cpp — directed-rounding decimal output (see attncert/number/decimal.hpp).
#include "attncert/number/decimal.hpp"

#include "attncert/error.hpp"

namespace attncert {

namespace {

// mpfr_asprintf converts the exact value of x, correctly rounded in the mode given by the
// conversion's R-modifier (D: toward -inf, U: toward +inf); the layout follows printf.
std::string directed(mpfr_srcptr x, int digits, decimal_layout layout, bool up) {
  if (digits < 0 || digits > 100000) throw input_error("decimal output: digits out of range");
  if (layout == decimal_layout::general && digits == 0) digits = 1;  // as printf's %g
  if (mpfr_nan_p(x)) return "nan";
  if (mpfr_inf_p(x)) return mpfr_sgn(x) > 0 ? "inf" : "-inf";
  const char* fmt = layout == decimal_layout::scientific ? (up ? "%.*RUe" : "%.*RDe") : (up ? "%.*RUg" : "%.*RDg");
  char* s = nullptr;
  if (mpfr_asprintf(&s, fmt, digits, x) < 0 || s == nullptr) throw std::bad_alloc();
  std::string out(s);
  mpfr_free_str(s);
  // Boost's str() prints a negative zero without its sign; keep that layout (the value is 0).
  if (layout == decimal_layout::scientific && mpfr_zero_p(x) && !out.empty() && out[0] == '-') out.erase(0, 1);
  return out;
}

std::string directed(double x, int digits, decimal_layout layout, bool up) {
  mpfr_t t;
  mpfr_init2(t, 53);
  mpfr_set_d(t, x, MPFR_RNDN);  // exact: t has binary64's 53 bits and MPFR's default exponent range
  std::string s = directed(t, digits, layout, up);
  mpfr_clear(t);
  return s;
}

}  // namespace

std::string decimal_down(mpfr_srcptr x, int digits, decimal_layout layout) { return directed(x, digits, layout, false); }
std::string decimal_up(mpfr_srcptr x, int digits, decimal_layout layout) { return directed(x, digits, layout, true); }

std::string decimal_down(const mpfr_float& x, int digits, decimal_layout layout) {
  return directed(x.backend().data(), digits, layout, false);
}
std::string decimal_up(const mpfr_float& x, int digits, decimal_layout layout) {
  return directed(x.backend().data(), digits, layout, true);
}

std::string decimal_down(double x, int digits, decimal_layout layout) { return directed(x, digits, layout, false); }
std::string decimal_up(double x, int digits, decimal_layout layout) { return directed(x, digits, layout, true); }

std::pair<std::string, std::string> outward_decimal(const mpfi_float& x, int digits, decimal_layout layout) {
  // The ends are read without rounding: mpfi_get_left/right into MPFR numbers of the
  // interval's own precision are exact.
  const mpfr_prec_t p = mpfi_get_prec(x.backend().data());
  mpfr_t lo, hi;
  mpfr_init2(lo, p);
  mpfr_init2(hi, p);
  mpfi_get_left(lo, x.backend().data());
  mpfi_get_right(hi, x.backend().data());
  std::pair<std::string, std::string> out(directed(lo, digits, layout, false), directed(hi, digits, layout, true));
  mpfr_clear(lo);
  mpfr_clear(hi);
  return out;
}

std::string interval_text(const mpfi_float& x, int digits, decimal_layout layout) {
  const auto [lo, hi] = outward_decimal(x, digits, layout);
  return "[" + lo + ", " + hi + "]";
}

double double_down(mpfr_srcptr x) { return mpfr_get_d(x, MPFR_RNDD); }
double double_up(mpfr_srcptr x) { return mpfr_get_d(x, MPFR_RNDU); }
double double_down(const mpfr_float& x) { return mpfr_get_d(x.backend().data(), MPFR_RNDD); }
double double_up(const mpfr_float& x) { return mpfr_get_d(x.backend().data(), MPFR_RNDU); }

}  // namespace attncert
