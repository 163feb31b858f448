// tests/drift/recipe.cpp — precision recipes (drift/recipe.hpp): names, stage
// formats, and that each stage really rounds to its format (the rounding itself is checked
// against NumPy in tests/drift/recipe_numpy.sh).
#define BOOST_TEST_MODULE attention_recipe
#include "attncert/drift/recipe.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>

#include "attncert/attention/scores.hpp"
#include "tests/support.hpp"

using namespace attncert;

namespace {

template <class Out>
matrix<double> as_double(const matrix<Out>& m) {
  matrix<double> r(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.size(); ++i) r(i) = number_traits<Out>::to_double(m(i));
  return r;
}

matrix<double> form(const recipe& rc, const recipe_input& in) {
  return with_recipe(rc, [&]<class In, class Acc, class Sm, class OAcc, class Out>() {
    return as_double(recipe_form<In, Acc, Sm, OAcc, Out>(in));
  });
}

recipe_input two_token(double a) {
  recipe_input in;
  in.Q = matrix<double>(2, 1);
  in.Q << 1, -1;
  in.K = in.Q;
  in.scale = a;
  return in;
}

}  // namespace

BOOST_AUTO_TEST_CASE(names_round_trip_and_stages) {
  for (const char* n : {"fp64", "fp32", "bf16-fp32acc", "fp16-fp32acc", "fp16", "bf16", "mpfr256", "mpfr24"}) {
    const recipe r = parse_recipe(n);
    BOOST_TEST(r.name == n);
    BOOST_TEST(parse_recipe(r.name).stages() == r.stages());
  }
  BOOST_TEST(parse_recipe("bf16-fp32acc").stages() == "bfloat16/binary32/binary32/binary32/bfloat16");
  BOOST_TEST(parse_recipe("fp16-fp32acc").stages() == "binary16/binary32/binary32/binary32/binary16");
  BOOST_TEST(parse_recipe("fp16").stages() == "binary16/binary16/binary16/binary16/binary16");
  BOOST_TEST(parse_recipe("mpfr128").stages() == "mpfr128/mpfr128/mpfr128/mpfr128/mpfr128");
  BOOST_TEST(parse_recipes("fp16,fp64").size() == 2u);
  for (const char* bad : {"", "fp8", "mpfr", "mpfr8", "mpfrx", "fp16-fp64acc", "FP16 "})
    BOOST_CHECK_THROW(parse_recipe(bad), input_error);
  BOOST_CHECK_THROW(parse_recipes("fp16,,fp32"), input_error);
  BOOST_CHECK_THROW(parse_recipes("fp16,FP16"), input_error);  // same recipe twice
}

// The fp64 and fp32 recipes are the library's primitives in one type: bit for bit.
BOOST_AUTO_TEST_CASE(single_type_recipes_equal_the_primitives) {
  auto rng = make_rng(1);
  std::uniform_int_distribution<int> u(-8, 8);
  for (int trial = 0; trial < 20; ++trial) {
    recipe_input in;
    in.Q = matrix<double>(3, 2);
    in.K = matrix<double>(4, 2);
    for (Eigen::Index i = 0; i < in.Q.size(); ++i) in.Q(i) = u(rng) / 4.0;
    for (Eigen::Index i = 0; i < in.K.size(); ++i) in.K(i) = u(rng) / 4.0;
    in.scale = std::ldexp(1.0 + u(rng) / 16.0, u(rng));
    const matrix<double> mine = form(parse_recipe("fp64"), in);
    const matrix<double> ref = masked_softmax(scores(in.Q, in.K, in.scale));
    BOOST_TEST((mine == ref));
    const matrix<double> mine32 = form(parse_recipe("fp32"), in);
    const matrix<float> ref32 = masked_softmax(scores<float>(in.Q.cast<float>(), in.K.cast<float>(), static_cast<float>(in.scale)));
    BOOST_TEST((mine32 == ref32.cast<double>()));
  }
}

// Score accumulation happens in the stated format: 1 + 2^-11 + 2^-11 is 1 in binary16 (each
// partial sum is a tie that rounds to even) but 1 + 2^-10 in binary32, which binary16 holds.
BOOST_AUTO_TEST_CASE(score_accumulation_format_is_used) {
  recipe_input in;
  in.Q = matrix<double>(1, 3);
  in.Q << 1, 1, 1;
  in.K = matrix<double>(1, 3);
  in.K << 1, std::ldexp(1.0, -11), std::ldexp(1.0, -11);
  in.scale = 1;
  in.object = layer_object::scores;
  BOOST_TEST(form(parse_recipe("fp16"), in)(0, 0) == 1.0);
  BOOST_TEST(form(parse_recipe("fp16-fp32acc"), in)(0, 0) == 1.0 + std::ldexp(1.0, -10));
  BOOST_TEST(form(parse_recipe("fp64"), in)(0, 0) == 1.0 + std::ldexp(1.0, -10));
}

// Storage rounds the inputs and the result format rounds the output; the scale lives in the
// accumulation format (as FlashAttention's fp32 softmax_scale).
BOOST_AUTO_TEST_CASE(storage_scale_and_result_formats) {
  // a = 2^-26 is below binary16's smallest subnormal/2 (2^-25): the fp16 recipe's scale is 0,
  // so A = [[1/2, 1/2], [1/2, 1/2]].
  const double a = std::ldexp(1.0, -26);
  const matrix<double> h = form(parse_recipe("fp16"), two_token(a));
  BOOST_TEST(h(0, 0) == 0.5);
  BOOST_TEST(h(0, 1) == 0.5);
  // a = 2^-12: binary32 softmax gives p = 1/(1 + e^{-2^-11}) ≈ 1/2 + 2^-13, which binary16
  // (spacing 2^-11 at 1/2) stores as 1/2; bfloat16 (spacing 2^-8) as well; fp32 keeps it.
  const double b = std::ldexp(1.0, -12);
  BOOST_TEST(form(parse_recipe("fp16-fp32acc"), two_token(b))(0, 0) == 0.5);
  BOOST_TEST(form(parse_recipe("bf16-fp32acc"), two_token(b))(0, 0) == 0.5);
  BOOST_TEST(form(parse_recipe("fp32"), two_token(b))(0, 0) > 0.5);
  // Every entry of a 16-bit result is representable in its format.
  auto rng = make_rng(2);
  std::uniform_real_distribution<double> ua(0.01, 5.0);
  for (int t = 0; t < 50; ++t) {
    const double x = ua(rng);
    for (const char* n : {"fp16", "fp16-fp32acc"}) {
      const matrix<double> m = form(parse_recipe(n), two_token(x));
      for (Eigen::Index i = 0; i < m.size(); ++i) BOOST_TEST(static_cast<double>(binary16(m(i))) == m(i));
    }
    for (const char* n : {"bf16", "bf16-fp32acc"}) {
      const matrix<double> m = form(parse_recipe(n), two_token(x));
      for (Eigen::Index i = 0; i < m.size(); ++i) BOOST_TEST(static_cast<double>(bfloat16(m(i))) == m(i));
    }
  }
}

// bf16-fp32acc is: round the binary32 softmax of binary32 scores to bfloat16 (inputs exact).
BOOST_AUTO_TEST_CASE(mixed_recipe_composes_its_stages) {
  auto rng = make_rng(3);
  std::uniform_int_distribution<int> u(-8, 8);
  for (int trial = 0; trial < 20; ++trial) {
    recipe_input in;
    in.Q = matrix<double>(3, 2);
    in.K = matrix<double>(3, 2);
    in.V = matrix<double>(3, 2);
    for (Eigen::Index i = 0; i < 6; ++i) {
      in.Q(i) = u(rng) / 4.0;
      in.K(i) = u(rng) / 4.0;
      (*in.V)(i) = u(rng) / 4.0;
    }
    in.scale = 0.75;
    if (trial % 2) in.M = mask::causal();
    const matrix<float> A = masked_softmax(scores<float>(in.Q.cast<float>(), in.K.cast<float>(), 0.75f), in.M);
    const matrix<double> got = form(parse_recipe("bf16-fp32acc"), in);
    for (Eigen::Index i = 0; i < A.size(); ++i) BOOST_TEST(got(i) == static_cast<double>(bfloat16(A(i))));
    in.object = layer_object::output;
    const matrix<float> O = multiply(A, in.V->cast<float>().eval());
    const matrix<double> gotO = form(parse_recipe("bf16-fp32acc"), in);
    for (Eigen::Index i = 0; i < O.size(); ++i) BOOST_TEST(gotO(i) == static_cast<double>(bfloat16(O(i))));
  }
}

// mpfrN works at N bits: a = 2^-40 is resolved at 256 bits, lost at 24.
BOOST_AUTO_TEST_CASE(mpfr_recipe_precision) {
  const double a = std::ldexp(1.0, -40);
  const matrix<double> hi = form(parse_recipe("mpfr256"), two_token(a));
  const matrix<double> lo = form(parse_recipe("mpfr24"), two_token(a));
  BOOST_TEST(hi(0, 0) > hi(0, 1));
  BOOST_TEST(lo(0, 0) == lo(0, 1));
  // The recipe's precision guard is gone afterwards.
  const unsigned before = current_mpfr_bits();
  (void)form(parse_recipe("mpfr1000"), two_token(a));
  BOOST_TEST(current_mpfr_bits() == before);
}

BOOST_AUTO_TEST_CASE(errors) {
  recipe_input in = two_token(1e6);  // binary16 max is 65504: the fp16 scale overflows
  BOOST_CHECK_THROW(form(parse_recipe("fp16"), in), input_error);
  BOOST_CHECK_NO_THROW(form(parse_recipe("fp32"), in));
  in.object = layer_object::output;  // no V
  BOOST_CHECK_THROW(form(parse_recipe("fp64"), in), input_error);
  in.object = layer_object::residual;
  BOOST_CHECK_THROW(form(parse_recipe("fp64"), in), input_error);
}
