// tests/block/block_bound.cpp — block-bound (block/block_bound.hpp): soundness (every certified bound at or
// above the certified lower end of the measured error, at every stage of every approximation; the interval
// functions contain MPFR's values), the bound's propagation necessary (removing it makes the bound fall below
// the measured error), completeness of the measurement (the measured enclosures are tight), bad input refused.
// tests/python/test_block_bound.py re-checks every claim against mpmath.
#define BOOST_TEST_MODULE block_bound
#include <boost/test/unit_test.hpp>

#include <mpfr.h>

#include <cmath>
#include <random>
#include <string>

#include "../../lib/src/block/ops.hpp"
#include "attncert/block/block_bound.hpp"
#include "attncert/error.hpp"

using namespace attncert;
using namespace attncert::block;

namespace {

std::uint64_t seed() {
  const char* s = std::getenv("ATTNCERT_SEED");
  const std::uint64_t v = s ? std::stoull(s) : 20261204;
  BOOST_TEST_MESSAGE("seed " << v << " (ATTNCERT_SEED overrides)");
  return v;
}

request small_request(std::uint64_t sd, const std::string& approx) {
  request r;
  r.m = random_model(2, 16, 2, sd);
  r.x = random_input(24, 16, sd);
  for (const auto& a : {"float32", "bfloat16", "linear", "top-k:4", "random-features:16"})
    if (approx.empty() || approx == a) r.approximations.push_back(parse_approximation(a));
  r.seed = sd;
  return r;
}

// MPFR's value of f at x (200 bits), as a long double is not enough: compare through mpfr_cmp_d.
bool mpfr_inside(block::detail::ival v, double x, int (*f)(mpfr_ptr, mpfr_srcptr, mpfr_rnd_t)) {
  mpfr_t a;
  mpfr_init2(a, 200);
  mpfr_set_d(a, x, MPFR_RNDN);
  f(a, a, MPFR_RNDN);
  const bool ok = mpfr_cmp_d(a, v.lo) >= 0 && mpfr_cmp_d(a, v.hi) <= 0;
  mpfr_clear(a);
  return ok;
}

}  // namespace

BOOST_AUTO_TEST_CASE(interval_functions_contain_mpfr) {
  std::mt19937_64 gen(seed());
  std::uniform_real_distribution<double> u(-40, 40);
  for (int t = 0; t < 2000; ++t) {
    const double x = u(gen);
    BOOST_TEST(mpfr_inside(block::detail::exp_of({x, x}), x, mpfr_exp));
    BOOST_TEST(mpfr_inside(block::detail::tanh_of({x, x}), x, mpfr_tanh));
  }
  // The activations' derivative bound is at least |φ'| sampled inside the interval (central differences at
  // 200 bits would be overkill: φ' is smooth, and the sampled value is computed in long double).
  for (const char* name : {"gelu_tanh", "silu"}) {
    for (int t = 0; t < 200; ++t) {
      const double a = u(gen) / 4, w = std::fabs(u(gen)) / 40;
      const double sup = block::detail::activation_derivative_sup(name, {a, a + w});
      for (int k = 0; k <= 8; ++k) {
        const long double x = a + w * k / 8.0L, h = 1e-6L;
        auto phi = [&](long double z) {
          if (std::string(name) == "silu") return z / (1 + std::exp(-z));
          return 0.5L * z * (1 + std::tanh(0.7978845608028654L * (z + 0.044715L * z * z * z)));
        };
        const long double d = (phi(x + h) - phi(x - h)) / (2 * h);
        BOOST_TEST(static_cast<double>(std::fabs(d)) <= sup * (1 + 1e-6) + 1e-9);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(every_bound_covers_the_measured_error) {
  const std::uint64_t sd = seed();
  const result res = run(small_request(sd, ""));
  BOOST_TEST(res.approximations.size() == 5u);
  for (const auto& a : res.approximations) {
    BOOST_TEST(a.rows.size() == 14u);
    for (const auto& s : a.rows) {
      BOOST_TEST_CONTEXT(a.approx.name << " block " << s.block << " " << s.stage) {
        BOOST_TEST(s.measured_lo <= s.measured_hi);
        BOOST_TEST(s.measured_lo <= s.bound_article);
        BOOST_TEST(s.measured_lo <= s.bound_direct);
        BOOST_TEST(s.measured_lo <= s.stage_bound);
        // Completeness of the measurement: the exact model's enclosure is far narrower than the error.
        if (s.stage != "norm-1" || s.block > 0) BOOST_TEST(s.measured_hi - s.measured_lo <= 1e-6 * s.measured_hi);
      }
    }
    // The direct local term is exact up to rounding at the first attention: its bound is the measurement.
    BOOST_TEST(a.rows[1].bound_direct <= 1.001 * a.rows[1].measured_hi);
  }
}

BOOST_AUTO_TEST_CASE(the_propagation_term_is_needed) {
  // Without the attention's propagation, the second block's heads see only their own local error: the bound
  // falls below the certified lower end of the measured error, somewhere.
  request r = small_request(seed(), "bfloat16");
  r.drop_propagation = true;
  const result res = run(r);
  bool below = false;
  for (const auto& s : res.approximations[0].rows) below = below || s.bound_direct < s.measured_lo;
  BOOST_TEST(below);
}

BOOST_AUTO_TEST_CASE(bad_input_is_refused) {
  BOOST_CHECK_THROW(parse_approximation("float64"), input_error);
  BOOST_CHECK_THROW(parse_approximation("top-k"), input_error);
  BOOST_CHECK_THROW(parse_approximation("top-k:0"), input_error);
  BOOST_CHECK_THROW(parse_approximation("float32:3"), input_error);
  BOOST_CHECK_THROW(parse_approximation("random-features:x"), input_error);
  request r = small_request(1, "float32");
  r.m.blocks[1].w_q.resize(16, 15);
  BOOST_CHECK_THROW(run(r), input_error);
  r = small_request(1, "float32");
  r.m.heads = 3;
  BOOST_CHECK_THROW(run(r), input_error);
  r = small_request(1, "float32");
  r.x(2, 3) = std::nan("");
  BOOST_CHECK_THROW(run(r), input_error);
  r = small_request(1, "float32");
  r.depth = 3;
  BOOST_CHECK_THROW(run(r), input_error);
  r = small_request(1, "float32");
  r.m.eps = 0;
  BOOST_CHECK_THROW(run(r), input_error);
  r = small_request(1, "float32");
  r.x(0, 0) = 1e300;  // overflows the scores / norms
  BOOST_CHECK_THROW(run(r), input_error);
}
