// Tests of attncert/number/traits.hpp, interval.hpp, precision_guard.hpp and format.hpp
// (with lib/src/number/format.cpp).
//
// Expected values are the definitions: epsilon 2^(1-p) and smallest normal 2^emin of each
// IEEE-like format (binary16: p = 11, emin = -14; bfloat16: p = 8, emin = -126; binary32:
// 24, -126; binary64: 53, -1022); MPFR precision as reported by MPFR itself
// (mpfr_get_prec / mpfi_get_prec of a freshly created value); exact rationals built from
// integers.
#define BOOST_TEST_MODULE number_traits
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "attncert/error.hpp"
#include "attncert/number/format.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/precision_guard.hpp"
#include "attncert/number/traits.hpp"
#include "attncert/linalg/matrix.hpp"

using namespace attncert;
using Q = mpq_rational;

namespace {

using ieee_types = std::tuple<float, double, binary16, bfloat16>;

template <class T>
struct ieee_params;
template <> struct ieee_params<float> { static constexpr int p = 24, emin = -126; static constexpr const char* name = "binary32"; };
template <> struct ieee_params<double> { static constexpr int p = 53, emin = -1022; static constexpr const char* name = "binary64"; };
template <> struct ieee_params<binary16> { static constexpr int p = 11, emin = -14; static constexpr const char* name = "binary16"; };
template <> struct ieee_params<bfloat16> { static constexpr int p = 8, emin = -126; static constexpr const char* name = "bfloat16"; };

// Precision MPFR gives a value created now (not what the traits claim).
unsigned actual_mpfr_bits() { return static_cast<unsigned>(mpfr_get_prec(mpfr_float(1).backend().data())); }
unsigned actual_mpfi_bits() { return static_cast<unsigned>(mpfi_get_prec(mpfi_float(1).backend().data())); }

Q to_q(const mpfr_float& x) {
  Q q;
  mpfr_get_q(q.backend().data(), x.backend().data());
  return q;
}

mpfi_float iv(double lo, double hi) { return hull_of(mpfi_float(lo), mpfi_float(hi)); }

Q pow10(unsigned e) { return Q(boost::multiprecision::pow(boost::multiprecision::mpz_int(10), e)); }

}  // namespace

// =====================================================================================
// number_traits
// =====================================================================================

BOOST_AUTO_TEST_CASE(tier_of_every_type) {
  BOOST_TEST((tier_of<float> == tier::approx));
  BOOST_TEST((tier_of<double> == tier::approx));
  BOOST_TEST((tier_of<binary16> == tier::approx));
  BOOST_TEST((tier_of<bfloat16> == tier::approx));
  BOOST_TEST((tier_of<mpfr_float> == tier::approx));
  BOOST_TEST((tier_of<mpfi_float> == tier::enclosure));
  BOOST_TEST((tier_of<mpq_rational> == tier::exact));
  BOOST_TEST(std::string(to_string(tier::exact)) == "exact");
  BOOST_TEST(std::string(to_string(tier::enclosure)) == "enclosure");
  BOOST_TEST(std::string(to_string(tier::approx)) == "approx");
}

BOOST_AUTO_TEST_CASE(names_of_every_type) {
  BOOST_TEST(std::string(number_traits<mpfr_float>::name()) == "mpfr");
  BOOST_TEST(std::string(number_traits<mpfi_float>::name()) == "mpfi");
  BOOST_TEST(std::string(number_traits<mpq_rational>::name()) == "exact");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(ieee_bits_epsilon_smallest_normal, T, ieee_types) {
  using P = ieee_params<T>;
  BOOST_TEST(number_traits<T>::bits() == static_cast<unsigned>(P::p));
  BOOST_TEST(number_traits<T>::to_double(number_traits<T>::epsilon()) == std::ldexp(1.0, 1 - P::p));
  BOOST_TEST(number_traits<T>::to_double(number_traits<T>::smallest_normal()) == std::ldexp(1.0, P::emin));
  BOOST_TEST(number_traits<T>::min_normal_exponent() == P::emin);
  BOOST_TEST(std::string(number_traits<T>::name()) == P::name);
  // epsilon is the gap between 1 and the next number of the format: 1 + eps/2 rounds to 1.
  const T one(1), eps = number_traits<T>::epsilon();
  BOOST_TEST(number_traits<T>::to_double(T(one + eps)) > 1.0);
  BOOST_TEST(number_traits<T>::to_double(T(one + T(number_traits<T>::to_double(eps) / 2))) == 1.0);
}

BOOST_AUTO_TEST_CASE(mpfr_and_mpfi_bits_and_epsilon_follow_the_guard) {
  precision_guard g(256);
  const unsigned b = number_traits<mpfr_float>::bits();
  BOOST_TEST(b >= 256u);
  BOOST_TEST(b == working_bits_for(256));
  BOOST_TEST(b == g.bits());
  BOOST_TEST(b == actual_mpfr_bits());
  BOOST_TEST(number_traits<mpfi_float>::bits() == b);
  BOOST_TEST(actual_mpfi_bits() == b);
  BOOST_TEST(number_traits<mpfr_float>::epsilon() == ldexp(mpfr_float(1), 1 - static_cast<int>(b)));
  // 1 + eps is representable, 1 + eps/2 is not (ties to even: rounds back to 1).
  const mpfr_float eps = number_traits<mpfr_float>::epsilon();
  BOOST_TEST(mpfr_float(1 + eps) > 1);
  BOOST_TEST(mpfr_float(1 + eps / 2) == 1);
  const mpfi_float ieps = number_traits<mpfi_float>::epsilon();
  BOOST_TEST(lower_of(ieps) == eps);
  BOOST_TEST(upper_of(ieps) == eps);
}

BOOST_AUTO_TEST_CASE(rational_traits) {
  BOOST_TEST(number_traits<Q>::bits() == 0u);
  BOOST_TEST(number_traits<Q>::epsilon() == 0);
  // 0.1 in binary64 is 3602879701896397 / 2^55, exactly.
  BOOST_TEST(number_traits<Q>::from_double(0.1) == Q(3602879701896397LL) / Q(boost::multiprecision::mpz_int(1) << 55));
  BOOST_TEST(!number_traits<Q>::is_nan(Q(1, 3)));
}

// =====================================================================================
// precision_guard
// =====================================================================================

BOOST_AUTO_TEST_CASE(working_bits_is_the_smallest_sufficient_setting) {
  for (unsigned bits = min_precision_bits; bits <= 2100; ++bits) {
    const unsigned d = digits10_for_bits(bits), w = working_bits_for(bits);
    BOOST_TEST_REQUIRE(w >= bits);
    BOOST_TEST_REQUIRE(w <= bits + 4);  // one decimal digit is < 3.33 bits (+ Boost's 1-2)
    if (d > 1) BOOST_TEST_REQUIRE(boost::multiprecision::detail::digits10_2_2(d - 1) < bits);  // minimal
  }
  BOOST_TEST(working_bits_for(256) == 257u);
}

BOOST_AUTO_TEST_CASE(guard_restores_previous_precision_nested) {
  const unsigned d_mpfr = mpfr_float::default_precision(), d_mpfi = mpfi_float::default_precision();
  const unsigned b0 = actual_mpfr_bits();
  {
    precision_guard outer(100);
    BOOST_TEST(actual_mpfr_bits() == working_bits_for(100));
    {
      precision_guard inner(1000);
      BOOST_TEST(actual_mpfr_bits() == working_bits_for(1000));
      BOOST_TEST(actual_mpfi_bits() == working_bits_for(1000));
    }
    BOOST_TEST(actual_mpfr_bits() == working_bits_for(100));
    BOOST_TEST(actual_mpfi_bits() == working_bits_for(100));
    BOOST_TEST(number_traits<mpfr_float>::bits() == working_bits_for(100));
  }
  BOOST_TEST(mpfr_float::default_precision() == d_mpfr);
  BOOST_TEST(mpfi_float::default_precision() == d_mpfi);
  BOOST_TEST(actual_mpfr_bits() == b0);
}

BOOST_AUTO_TEST_CASE(guard_restores_precision_after_exception) {
  const unsigned d_mpfr = mpfr_float::default_precision(), d_mpfi = mpfi_float::default_precision();
  try {
    precision_guard g(512);
    BOOST_TEST_REQUIRE(actual_mpfr_bits() == working_bits_for(512));
    throw std::runtime_error("inside the guard");
  } catch (const std::runtime_error&) {
  }
  BOOST_TEST(mpfr_float::default_precision() == d_mpfr);
  BOOST_TEST(mpfi_float::default_precision() == d_mpfi);
}

BOOST_AUTO_TEST_CASE(guard_rejects_out_of_range_and_changes_nothing) {
  const unsigned d_mpfr = mpfr_float::default_precision(), d_mpfi = mpfi_float::default_precision();
  BOOST_CHECK_THROW(precision_guard(8), std::invalid_argument);
  BOOST_CHECK_THROW(precision_guard(min_precision_bits - 1), std::invalid_argument);
  BOOST_CHECK_THROW(precision_guard(1u << 21), std::invalid_argument);
  BOOST_CHECK_THROW(precision_guard(max_precision_bits + 1), std::invalid_argument);
  BOOST_TEST(mpfr_float::default_precision() == d_mpfr);
  BOOST_TEST(mpfi_float::default_precision() == d_mpfi);
  {
    precision_guard lo(min_precision_bits);
    BOOST_TEST(lo.bits() >= min_precision_bits);
  }
  {
    precision_guard hi(max_precision_bits);
    BOOST_TEST(hi.bits() >= max_precision_bits);
  }
  BOOST_TEST(mpfr_float::default_precision() == d_mpfr);
}

// =====================================================================================
// from_string
// =====================================================================================

BOOST_AUTO_TEST_CASE(rational_from_string_is_exact) {
  using N = number_traits<Q>;
  BOOST_TEST(N::from_string("1e-20") == Q(1) / pow10(20));
  BOOST_TEST(N::from_string("-0.125") == Q(-1, 8));
  BOOST_TEST(N::from_string("3/7") == Q(3, 7));
  BOOST_TEST(N::from_string("2.5E3") == Q(2500));
  BOOST_TEST(N::from_string("0.1") == Q(1, 10));  // not the binary64 0.1
  BOOST_TEST(N::from_string("+.5") == Q(1, 2));
  BOOST_TEST(N::from_string("12.") == Q(12));
  BOOST_TEST(N::from_string("-1.5e-3") == Q(-3, 2000));
  BOOST_TEST(N::from_string("1.25e+2") == Q(125));
  BOOST_TEST(N::from_string("-6/4") == Q(-3, 2));
  BOOST_TEST(N::from_string("0") == 0);
  BOOST_TEST(N::from_string("123456789012345678901234567890") == Q(boost::multiprecision::mpz_int("123456789012345678901234567890")));
}

BOOST_AUTO_TEST_CASE(rational_from_string_rejects_bad_input) {
  for (const char* bad : {"1e", "abc", "", "-", "+", ".", "e5", "1e+", "1.2.3", "1/0", "0x10", " 1", "1 ", "1e5x", "1,5",
                          "/2", "2/", "1e100001", "1e-100001", "1e99999999999999999999", "nan", "inf"}) {
    BOOST_CHECK_THROW(number_traits<Q>::from_string(bad), input_error);
  }
}

// Issue 11 item 3: one 10^6-digit entry took 17.6 s (a multiply-add per digit).  Now a
// number at the digit limit is parsed in milliseconds, exactly, and one beyond it is
// rejected at once; the time bounds leave a 10x margin for sanitizer builds.
BOOST_AUTO_TEST_CASE(rational_from_string_is_fast_and_digits_are_limited) {
  using N = number_traits<Q>;
  const std::string at_limit = "7" + std::string(max_decimal_digits - 1, '3');
  auto t0 = std::chrono::steady_clock::now();
  const Q x = N::from_string(at_limit + "e-5");
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 1.0);
  boost::multiprecision::mpz_int ref(at_limit);
  BOOST_TEST(x == Q(ref) / Q(100000));
  BOOST_TEST(N::from_string("." + std::string(max_decimal_digits - 1, '0') + "1") == Q(1) / pow10(max_decimal_digits));
  t0 = std::chrono::steady_clock::now();
  const std::string million = "1" + std::string(999999, '0');
  BOOST_CHECK_THROW(N::from_string(million), input_error);
  BOOST_CHECK_THROW(N::from_string("1/" + million), input_error);
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 1.0);
  try {
    N::from_string(million);
  } catch (const input_error& e) {
    BOOST_TEST(std::string(e.what()).size() < 200);  // the echoed number is cut short
  }
}

// Issue 11 item 5: the exponent -9223372036854775808 was negated (UBSan: signed overflow).
// Exponents are range-checked digit by digit before any arithmetic; the limit is inclusive.
BOOST_AUTO_TEST_CASE(rational_from_string_exponent_limits_without_overflow) {
  using N = number_traits<Q>;
  for (const char* bad : {"1e-9223372036854775808", "1.5e-9223372036854775808", "1e9223372036854775807", "1e-9223372036854775809", "1.5e+100001",
                          "1e0000000000000000000000100001"})
    BOOST_CHECK_THROW(N::from_string(bad), input_error);
  BOOST_TEST(N::from_string("1e100000") == pow10(100000));
  BOOST_TEST(N::from_string("1e-100000") == Q(1) / pow10(100000));
  BOOST_TEST(N::from_string("1e00000000000000000000000000005") == Q(100000));
  BOOST_TEST(N::from_string("-0e-100000") == 0);
}

// Item 7: a message that echoes input stays on one line.
BOOST_AUTO_TEST_CASE(rational_from_string_messages_are_one_line) {
  try {
    number_traits<Q>::from_string("1\nx\r");
    BOOST_FAIL("no error");
  } catch (const input_error& e) {
    BOOST_TEST(std::string(e.what()).find_first_of("\n\r") == std::string::npos, e.what());
  }
}

// A fraction has exactly one '/', and an exponent is digits right after 'e'.  "1/2/3" is not
// a fraction (it must not silently become 3/2), "1e 5" is not a decimal (it must not become
// 100000 because strtol skips blanks).
BOOST_AUTO_TEST_CASE(rational_from_string_rejects_nested_fractions_and_blank_exponents) {
  BOOST_CHECK_THROW(number_traits<Q>::from_string("1/2/3"), input_error);
  BOOST_CHECK_THROW(number_traits<Q>::from_string("1e 5"), input_error);
  BOOST_CHECK_THROW(number_traits<Q>::from_string("1e\t-5"), input_error);
}

BOOST_AUTO_TEST_CASE(floating_from_string) {
  BOOST_TEST(number_traits<double>::from_string("0.1") == 0.1);
  BOOST_TEST(number_traits<float>::from_string("0.1") == 0.1f);
  BOOST_TEST(number_traits<binary16>::to_double(number_traits<binary16>::from_string("0.5")) == 0.5);
  precision_guard g(200);
  // MPFR: correctly rounded, so within half an ulp (2^-bits relative) of 1/10.
  const mpfr_float x = number_traits<mpfr_float>::from_string("0.1");
  const Q err = abs(Q(to_q(x) - Q(1, 10)));
  BOOST_TEST(err <= Q(1, 10) / Q(boost::multiprecision::mpz_int(1) << working_bits_for(200)));
  // MPFI: encloses 1/10 (the ends are rounded outward).
  const mpfi_float y = number_traits<mpfi_float>::from_string("0.1");
  BOOST_TEST(to_q(lower_of(y)) < Q(1, 10));
  BOOST_TEST(Q(1, 10) < to_q(upper_of(y)));
}

// =====================================================================================
// interval helpers, three-valued predicates, judging a tolerance
// =====================================================================================

BOOST_AUTO_TEST_CASE(certainly_positive_is_three_valued) {
  precision_guard g(64);
  BOOST_TEST((certainly_positive(iv(1, 2)) == truth::certainly_true));
  BOOST_TEST((certainly_positive(iv(-2, -1)) == truth::certainly_false));
  BOOST_TEST((certainly_positive(iv(-1, 1)) == truth::unknown));
  BOOST_TEST((certainly_positive(iv(0, 1)) == truth::unknown));  // 0 is possible
  BOOST_TEST((certainly_positive(iv(-1, 0)) == truth::certainly_false));
  BOOST_TEST((certainly_positive(iv(0, 0)) == truth::certainly_false));
  BOOST_TEST((certainly_nonzero(iv(1, 2)) == truth::certainly_true));
  BOOST_TEST((certainly_nonzero(iv(-2, -1)) == truth::certainly_true));
  BOOST_TEST((certainly_nonzero(iv(0, 0)) == truth::certainly_false));
  BOOST_TEST((certainly_nonzero(iv(-1, 1)) == truth::unknown));
  BOOST_TEST((certainly_nonzero(iv(0, 1)) == truth::unknown));
  BOOST_TEST(std::string(to_string(truth::unknown)) == "unknown");
}

BOOST_AUTO_TEST_CASE(certainly_le_and_helpers) {
  precision_guard g(64);
  BOOST_TEST((certainly_le(iv(1, 2), iv(3, 4)) == truth::certainly_true));
  BOOST_TEST((certainly_le(iv(1, 3), iv(3, 4)) == truth::certainly_true));  // touching: x <= y for all
  BOOST_TEST((certainly_le(iv(1, 3.5), iv(3, 4)) == truth::unknown));
  BOOST_TEST((certainly_le(iv(5, 6), iv(3, 4)) == truth::certainly_false));
  BOOST_TEST((certainly_le(iv(4, 6), iv(3, 4)) == truth::unknown));  // 4 <= 4 is possible
  BOOST_TEST(contains(iv(1, 2), mpfr_float(1)));
  BOOST_TEST(contains(iv(1, 2), mpfr_float(2)));
  BOOST_TEST(!contains(iv(1, 2), mpfr_float(2.5)));
  BOOST_TEST(contains_zero(iv(-1, 1)));
  BOOST_TEST(!contains_zero(iv(0.5, 1)));
  const mpfi_float m = interval_max(iv(1, 3), iv(2, 4));
  BOOST_TEST(lower_of(m) == 2);
  BOOST_TEST(upper_of(m) == 4);
  const mpfi_float mo = max_of(iv(-5, 0), iv(-1, -0.5));
  BOOST_TEST(lower_of(mo) == -1);  // x = -5, y = -1 gives max -1
  BOOST_TEST(upper_of(mo) == 0);
  BOOST_TEST(max_of(2.0, 3.0) == 3.0);
  BOOST_TEST(max_of(Q(1, 3), Q(1, 4)) == Q(1, 3));
  const mpfi_float s = shift_point(iv(1, 2));
  BOOST_TEST(lower_of(s) == 2);
  BOOST_TEST(upper_of(s) == 2);
  BOOST_TEST(shift_point(7.0) == 7.0);
  const mpfi_float t = thin(mpfr_float(0.25));
  BOOST_TEST(lower_of(t) == upper_of(t));
  BOOST_TEST(contains(iv(1, 2), approx_mid(iv(1, 2))));
  const mpfi_float a = abs_of(iv(-3, 1));
  BOOST_TEST(lower_of(a) == 0);
  BOOST_TEST(upper_of(a) == 3);
  BOOST_TEST(abs_of(Q(-2, 3)) == Q(2, 3));
  BOOST_TEST(number_traits<mpfi_float>::is_nan(mpfi_float(std::numeric_limits<double>::quiet_NaN())));
  BOOST_TEST(!number_traits<mpfi_float>::is_nan(iv(1, 2)));
}

// judge_le: intervals pass only if the whole error is within the tolerance, fail if none of
// it is, and are undecided when they straddle it; point types pass or fail (NaN fails).
BOOST_AUTO_TEST_CASE(judge_le_on_intervals) {
  precision_guard g(64);
  const mpfi_float tol = iv(3, 3);
  BOOST_TEST((judge_le(iv(1, 2), tol) == verdict::pass));
  BOOST_TEST((judge_le(iv(1, 3), tol) == verdict::pass));
  BOOST_TEST((judge_le(iv(2, 4), tol) == verdict::undecided));
  BOOST_TEST((judge_le(iv(3, 4), tol) == verdict::undecided));
  BOOST_TEST((judge_le(iv(3.5, 4), tol) == verdict::fail));
  // A thick tolerance straddled by a thin error is undecided too.
  BOOST_TEST((judge_le(iv(3, 3), iv(2, 4)) == verdict::undecided));
  BOOST_TEST(std::string(to_string(verdict::undecided)) == "undecided");
  BOOST_TEST(std::string(to_string(verdict::pass)) == "pass");
  BOOST_TEST(std::string(to_string(verdict::fail)) == "fail");
}

BOOST_AUTO_TEST_CASE(judge_le_on_points) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  BOOST_TEST((judge_le(1.0, 2.0) == verdict::pass));
  BOOST_TEST((judge_le(2.0, 2.0) == verdict::pass));
  BOOST_TEST((judge_le(3.0, 2.0) == verdict::fail));
  BOOST_TEST((judge_le(nan, 2.0) == verdict::fail));
  BOOST_TEST((judge_le(1.0, nan) == verdict::fail));
  BOOST_TEST((judge_le(binary16(0.5), binary16(1)) == verdict::pass));
  BOOST_TEST((judge_le(binary16(nan), binary16(1)) == verdict::fail));
  BOOST_TEST((judge_le(Q(1, 3), Q(1, 3)) == verdict::pass));
  BOOST_TEST((judge_le(Q(1, 3), Q(33, 100)) == verdict::fail));
  precision_guard g(64);
  BOOST_TEST((judge_le(mpfr_float(1), mpfr_float(std::numeric_limits<double>::quiet_NaN())) == verdict::fail));
}

// =====================================================================================
// formats
// =====================================================================================

BOOST_AUTO_TEST_CASE(parse_format_every_name) {
  struct expect {
    const char* text;
    format_spec::kind kind;
    const char* name;
    unsigned bits;
    long emin;
  };
  const expect cases[] = {
      {"binary16", format_spec::kind::binary16, "binary16", 11, -14},
      {"fp16", format_spec::kind::binary16, "binary16", 11, -14},
      {"half", format_spec::kind::binary16, "binary16", 11, -14},
      {"bfloat16", format_spec::kind::bfloat16, "bfloat16", 8, -126},
      {"bf16", format_spec::kind::bfloat16, "bfloat16", 8, -126},
      {"binary32", format_spec::kind::binary32, "binary32", 24, -126},
      {"fp32", format_spec::kind::binary32, "binary32", 24, -126},
      {"float", format_spec::kind::binary32, "binary32", 24, -126},
      {"binary64", format_spec::kind::binary64, "binary64", 53, -1022},
      {"fp64", format_spec::kind::binary64, "binary64", 53, -1022},
      {"double", format_spec::kind::binary64, "binary64", 53, -1022},
      {"BINARY16", format_spec::kind::binary16, "binary16", 11, -14},
      {"Double", format_spec::kind::binary64, "binary64", 53, -1022},
  };
  for (const auto& c : cases) {
    const format_spec f = parse_format(c.text);
    BOOST_TEST((f.type == c.kind), c.text);
    BOOST_TEST(f.name == c.name);
    BOOST_TEST(f.precision_bits() == c.bits);
    BOOST_TEST(f.requested_bits == c.bits);
    BOOST_TEST(f.min_normal_exponent() == c.emin);
    BOOST_TEST((f.number_tier() == tier::approx));
  }
  const format_spec r = parse_format("mpfr256");
  BOOST_TEST((r.type == format_spec::kind::mpfr));
  BOOST_TEST(r.name == "mpfr256");
  BOOST_TEST(r.requested_bits == 256u);
  BOOST_TEST(r.precision_bits() == working_bits_for(256));
  BOOST_TEST((r.number_tier() == tier::approx));
  BOOST_TEST(r.min_normal_exponent() == mpfr_get_emin() - 1);
  const format_spec i = parse_format("MPFI128");
  BOOST_TEST((i.type == format_spec::kind::mpfi));
  BOOST_TEST(i.name == "mpfi128");
  BOOST_TEST(i.requested_bits == 128u);
  BOOST_TEST((i.number_tier() == tier::enclosure));
  BOOST_TEST(parse_format("mpfr24").requested_bits == 24u);
  BOOST_TEST(parse_format("mpfi1048576").requested_bits == 1048576u);
}

BOOST_AUTO_TEST_CASE(parse_format_errors) {
  for (const char* bad : {"mpfr8", "mpfr23", "mpfr0", "mpfr", "mpfi", "binary8", "mpfi99999999999", "mpfr1048577",
                          "mpfr99999999", "mpfr-5", "mpfr 256", "mpfr25x", "", "fp8", "binary128", "mpq"}) {
    BOOST_CHECK_THROW(parse_format(bad), input_error);
  }
  // The messages say why.
  try {
    parse_format("mpfr8");
    BOOST_ERROR("mpfr8 accepted");
  } catch (const input_error& e) {
    BOOST_TEST(std::string(e.what()).find("too low") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(parse_formats_lists) {
  const auto fs = parse_formats("binary64,mpfr128,fp16");
  BOOST_TEST_REQUIRE(fs.size() == 3u);
  BOOST_TEST(fs[0].name == "binary64");
  BOOST_TEST(fs[1].name == "mpfr128");
  BOOST_TEST(fs[2].name == "binary16");
  for (const char* bad : {"binary64,binary64", "binary64,double", "fp16,half", "mpfr128,MPFR128", "", ",", "binary64,",
                          ",binary64", "binary64,,binary32", "binary64,foo"}) {
    BOOST_CHECK_THROW(parse_formats(bad), input_error);
  }
}

// A format name is canonical: "mpfr0256" is either rejected or named "mpfr256", and in
// either case a list cannot name the same format twice by padding it with zeros.
BOOST_AUTO_TEST_CASE(format_names_are_canonical_with_leading_zeros) {
  bool accepted = true;
  format_spec f;
  try {
    f = parse_format("mpfr0256");
  } catch (const input_error&) {
    accepted = false;
  }
  if (accepted) BOOST_TEST(f.name == "mpfr256");
  BOOST_CHECK_THROW(parse_formats("mpfr256,mpfr0256"), input_error);
}

// with_format calls the functor with the format's number type, under a guard for MPFR/MPFI
// that is released afterwards.
BOOST_AUTO_TEST_CASE(with_format_dispatches_the_right_type) {
  const unsigned d_before = mpfr_float::default_precision();
  const auto probe = []<class T>() {
    return std::make_tuple(std::string(number_traits<T>::name()), number_traits<T>::bits(), tier_of<T>);
  };
  const std::tuple<const char*, const char*, unsigned, tier> cases[] = {
      {"binary16", "binary16", 11, tier::approx},     {"bf16", "bfloat16", 8, tier::approx},
      {"binary32", "binary32", 24, tier::approx},     {"double", "binary64", 53, tier::approx},
      {"mpfr200", "mpfr", working_bits_for(200), tier::approx},
      {"mpfi100", "mpfi", working_bits_for(100), tier::enclosure}};
  for (const auto& [text, name, bits, t] : cases) {
    const auto [got_name, got_bits, got_tier] = with_format(parse_format(text), probe);
    BOOST_TEST(got_name == name, text);
    BOOST_TEST(got_bits == bits, text);
    BOOST_TEST((got_tier == t), text);
    BOOST_TEST(mpfr_float::default_precision() == d_before, "precision restored after " << text);
  }
  // The MPFR value made inside really has the format's precision.
  const unsigned inside = with_format(parse_format("mpfr300"), []<class T>() -> unsigned {
    if constexpr (std::is_same_v<T, mpfr_float>) return static_cast<unsigned>(mpfr_get_prec(T(1).backend().data()));
    else return 0;
  });
  BOOST_TEST(inside == working_bits_for(300));
}

// =====================================================================================
// from_rational (linalg/matrix.hpp) and nearest_in_format (format.cpp): one rounding
// =====================================================================================
//
// The truth is round-half-even on the format's grid computed in exact integers: the spacing at
// q is 2^(max(⌊log2 |q|⌋, emin) − p + 1), and the nearest grid point is found by one exact
// division with remainder.  The cases are the ones two roundings get wrong: midpoints between
// two subnormals (or two normals) shifted by far less than a binary64 ulp, which rounding to
// 53 bits first puts on the midpoint, whose tie then goes to the even neighbour.
namespace {

Q pow2q(long e) {
  Q r(1);
  if (e >= 0) mpq_mul_2exp(r.backend().data(), r.backend().data(), static_cast<unsigned long>(e));
  else mpq_div_2exp(r.backend().data(), r.backend().data(), static_cast<unsigned long>(-e));
  return r;
}

// RN (ties to even) of q > 0 on the grid of a format with p bits and smallest normal 2^emin,
// assuming no overflow; exact.
Q nearest_by_integers(const Q& q, int p, int emin) {
  long e = emin;  // ⌊log2 q⌋, at least emin
  while (pow2q(e + 1) <= q) ++e;
  if (q >= pow2q(emin))
    while (pow2q(e) > q) --e;
  const Q spacing = pow2q(e - p + 1);
  const Q x = q / spacing;  // round x to the nearest integer, ties to even
  boost::multiprecision::mpz_int fl = numerator(x) / denominator(x);
  const Q frac = x - Q(fl);
  if (frac > Q(1, 2) || (frac == Q(1, 2) && fl % 2 != 0)) fl += 1;
  return Q(fl) * spacing;
}

}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(from_rational_rounds_once_subnormals_included, T, ieee_types) {
  constexpr int p = ieee_params<T>::p, emin = ieee_params<T>::emin;
  const long tiny = emin - p + 1;  // exponent of the smallest subnormal
  const Q far = pow2q(-3000);     // far below half a binary64 ulp of anything here
  std::vector<Q> cases;
  for (long k : {1L, 2L, 3L, 5L, 7L, 101L, 1023L})
    for (long e : {tiny, tiny + 1, tiny + 5, static_cast<long>(emin) - 2, static_cast<long>(emin), static_cast<long>(emin) + 3, 0L, 5L}) {
      const Q mid = Q(2 * k + 1) * pow2q(e - 1);  // a midpoint between k·2^e and (k+1)·2^e
      cases.push_back(mid);
      cases.push_back(mid + far);
      cases.push_back(mid - far);
      cases.push_back(Q(k) * pow2q(e) / 3);
    }
  cases.push_back(pow2q(tiny - 1) + far);  // just above half the smallest subnormal: rounds up
  cases.push_back(pow2q(tiny - 1));        // exactly half: ties to 0
  cases.push_back(Q(3) * pow2q(-56 - 1020));  // the R1 case's scale, 3/2^1076
  int wrong = 0;
  for (const Q& q : cases)
    for (int sign : {1, -1}) {
      const Q x = sign * q;
      const Q want = sign * nearest_by_integers(q, p, emin);
      const double got = static_cast<double>(from_rational<T>(x));
      if (Q(got) != want) {
        ++wrong;
        if (wrong <= 5) BOOST_TEST_MESSAGE(ieee_params<T>::name << ": wrong rounding of " << x.str() << ": got " << got);
      }
      BOOST_TEST(std::signbit(got) == (sign < 0));
    }
  BOOST_TEST(wrong == 0);
}

BOOST_AUTO_TEST_CASE(nearest_binary64_overflows_to_infinity_at_the_rounding_boundary) {
  // Just below 2^1024(1 − 2^-54) rounds to DBL_MAX, at it to +inf (ties to even: DBL_MAX is odd).
  const Q boundary = pow2q(1024) - pow2q(1024 - 54);
  BOOST_TEST(nearest_binary64((boundary - pow2q(-10)).backend().data()) == std::numeric_limits<double>::max());
  BOOST_TEST(std::isinf(nearest_binary64(boundary.backend().data())));
  BOOST_TEST(nearest_binary64(Q(-1).backend().data()) == -1.0);
}
