// Tests of attncert/linalg/deflated_svd.hpp: the trailing singular values escalated on a deflated
// subspace (proofs/P16, part D).
//
// Ground truth never comes from the code under test: Eigen's JacobiSVD in mpfr_float at 4× the
// escalation's precision, on the same exact binary64 matrix (its absolute error, ~n·2^-4p·σ₁, is
// far below the enclosures' widths).  The matrices have exponentially graded trailing singular
// values far below binary64's resolution, with exact binary64 entries: causal attention matrices
// (the case that motivated the escalation), unit lower-triangular matrices with negative entries
// below the diagonal (Kahan-like), and random lower-triangular ones.  Seeds are printed and can be
// overridden with ATTNCERT_SEED.
#define BOOST_TEST_MODULE linalg_deflated_svd
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../support.hpp"
#include "attncert/linalg/deflated_svd.hpp"
#include "attncert/linalg/spectra.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/precision_guard.hpp"

using namespace attncert;

namespace {

// softmax(QKᵀ/8) with a causal mask, in binary64 (the exact matrix is whatever binary64 results).
matrix<double> causal_attention(std::mt19937_64& rng, Eigen::Index n, double scale) {
  std::normal_distribution<double> N(0, 1);
  matrix<double> Q(n, 16), K(n, 16), A = matrix<double>::Zero(n, n);
  for (Eigen::Index i = 0; i < Q.size(); ++i) {
    Q(i) = N(rng);
    K(i) = N(rng);
  }
  for (Eigen::Index i = 0; i < n; ++i) {
    double mx = -1e300, sum = 0;
    for (Eigen::Index j = 0; j <= i; ++j) mx = std::max(mx, scale * Q.row(i).dot(K.row(j)));
    for (Eigen::Index j = 0; j <= i; ++j) sum += A(i, j) = std::exp(scale * Q.row(i).dot(K.row(j)) - mx);
    for (Eigen::Index j = 0; j <= i; ++j) A(i, j) /= sum;
  }
  return A;
}

// 1 on the diagonal, −c (c in [0.5, 1]) below: σ_min falls like 2^-n.
matrix<double> kahan_like(std::mt19937_64& rng, Eigen::Index n) {
  std::uniform_real_distribution<double> U(0.5, 1.0);
  matrix<double> A = matrix<double>::Zero(n, n);
  for (Eigen::Index i = 0; i < n; ++i) {
    A(i, i) = 1;
    for (Eigen::Index j = 0; j < i; ++j) A(i, j) = -U(rng);
  }
  return A;
}

// The reference singular values at `bits` (approx tier, decreasing), computed once per matrix and
// precision.
std::vector<mpfr_float> reference(const matrix<double>& A, unsigned bits) {
  static std::vector<std::tuple<matrix<double>, unsigned, std::vector<mpfr_float>>> cache;
  for (const auto& [M, b, r] : cache)
    if (b == bits && M.rows() == A.rows() && M == A) return r;
  precision_guard g(bits);
  matrix<mpfr_float> M(A.rows(), A.cols());
  for (Eigen::Index i = 0; i < A.size(); ++i) M(i) = A(i);
  cache.emplace_back(A, bits, approx_singular_values(M));
  return std::get<2>(cache.back());
}

struct escalation {
  singular_value_enclosures b64;
  std::size_t k = 0;
  std::vector<mpfi_float> trailing;
  deflation_report rep;
};

// The binary64 path, the split, then the deflated escalation at `bits`.
escalation escalate(const matrix<double>& A, unsigned bits, int max_steps = 200, unsigned threads = 1) {
  escalation e;
  binary64_svd_factors F;
  e.b64 = certified_singular_values_binary64(binary64_enclosure{A, {}}, F);
  const std::size_t n = static_cast<std::size_t>(A.rows());
  e.k = deflation_split(e.b64.sigma, n - e.b64.certified_positive, n / 2);
  if (e.k == 0) return e;
  precision_guard g(bits);
  matrix<mpfi_float> I(A.rows(), A.cols());
  for (Eigen::Index i = 0; i < A.size(); ++i) I(i) = A(i);
  deflation_vectors v;
  e.trailing = deflated_trailing_singular_values(I, F, e.k, v, e.rep, max_steps, threads);
  return e;
}

// Every trailing enclosure contains the reference at 1536 bits (≥ 4× every precision tested here);
// returns how many are > 0.
std::size_t check_contains(const matrix<double>& A, const escalation& e, const std::string& what) {
  const std::vector<mpfr_float> ref = reference(A, 1536);
  const std::size_t n = ref.size();
  std::size_t positive = 0;
  precision_guard g(1536);
  for (std::size_t j = 0; j < e.k; ++j) {
    const mpfr_float& r = ref[n - e.k + j];
    const mpfi_float& x = e.trailing[j];
    BOOST_TEST((lower_of(x) <= r && r <= upper_of(x)),
               what << ": σ_" << n - e.k + j + 1 << " = " << r.str(8) << " outside [" << lower_of(x).str(8) << ", "
                    << upper_of(x).str(8) << "] (" << e.rep.why_not << ")");
    positive += lower_of(x) > 0;
  }
  return positive;
}

}  // namespace

// Causal attention matrices whose trailing singular values binary64 leaves undecided, from stream
// 3: (n, scale, how many binary64 leaves undecided on this machine's LAPACK, the smallest σ).
//   32, 0.5: 1, 1.8e-23;  40, 1.0: 2, 7.8e-50;  40, 1.5: 3, 4.1e-73.
std::vector<matrix<double>> graded_causal() {
  std::mt19937_64 rng = make_rng(3);
  std::vector<matrix<double>> out;
  for (int t = 0; t < 10; ++t) {
    const matrix<double> A = causal_attention(rng, 32 + 8 * (t % 4), t < 4 ? 0.5 : t < 8 ? 1.0 : 1.5);
    if (t == 0 || t == 5 || t == 9) out.push_back(A);
  }
  return out;
}

BOOST_AUTO_TEST_CASE(trailing_enclosures_contain_the_reference) {
  const std::vector<matrix<double>> M = graded_causal();
  // (matrix, precision, how many trailing σ must come out certified > 0 at that precision: those
  // above about (2^-2p/η)^(1/3), the resolution of the bound)
  const std::vector<std::tuple<std::string, const matrix<double>*, unsigned, std::size_t>> cases = {
      {"causal n=32, σ_min 1.8e-23", &M[0], 256, 1},
      {"causal n=40, σ_min 7.8e-50", &M[1], 384, 2},
      {"causal n=40, σ_min 4.1e-73", &M[2], 384, 3},
  };
  for (const auto& [what, A, bits, expect] : cases) {
    const escalation e = escalate(*A, bits);
    BOOST_TEST_REQUIRE(e.k > 0, what << ": no split (certified " << e.b64.certified_positive << ")");
    BOOST_TEST_MESSAGE(what << ": k = " << e.k << ", steps " << e.rep.refinement_steps << ", residual " << e.rep.residual
                            << ", eps " << e.rep.epsilon << ", gap " << e.rep.gap);
    BOOST_TEST(e.b64.certified_positive < static_cast<std::size_t>(A->rows()), what << ": binary64 left nothing undecided");
    const std::size_t positive = check_contains(*A, e, what);
    BOOST_TEST(positive >= expect, what << ": only " << positive << " of " << e.k << " certified > 0 (" << e.rep.why_not << ")");
  }
}

// The MPFR products on two threads (number/parallel.hpp) give the same enclosures, bit for bit,
// and the same report: each column's operations do not depend on the thread that runs them.
BOOST_AUTO_TEST_CASE(threads_give_the_same_enclosures) {
  const std::vector<matrix<double>> M = graded_causal();
  for (const matrix<double>* A : {&M[1], &M[2]}) {
    const escalation one = escalate(*A, 384, 200, 1), two = escalate(*A, 384, 200, 2);
    BOOST_TEST_REQUIRE(one.k > 0);
    BOOST_TEST_REQUIRE(one.trailing.size() == two.trailing.size());
    std::size_t same = 0;
    for (std::size_t j = 0; j < one.trailing.size(); ++j)
      same += mpfr_equal_p(&one.trailing[j].backend().data()->left, &two.trailing[j].backend().data()->left) &&
              mpfr_equal_p(&one.trailing[j].backend().data()->right, &two.trailing[j].backend().data()->right);
    BOOST_TEST(same == one.trailing.size());
    BOOST_TEST(one.rep.refinement_steps == two.rep.refinement_steps);
    BOOST_TEST(one.rep.epsilon == two.rep.epsilon);
    BOOST_TEST(one.rep.why_not == two.rep.why_not);
    check_contains(*A, two, "two threads");
  }
}

// Stopping the refinement early leaves the bases coupled (ε large): the bound must still hold (or
// claim nothing), whatever the state of the vectors.
BOOST_AUTO_TEST_CASE(partly_refined_vectors_still_give_sound_enclosures) {
  const std::vector<matrix<double>> M = graded_causal();
  for (int steps = 1; steps <= 5; ++steps) {
    const escalation e = escalate(M[0], 256, steps);
    BOOST_TEST_REQUIRE(e.k > 0);
    BOOST_TEST_MESSAGE(steps << " steps: eps " << e.rep.epsilon << ", gap " << e.rep.gap << " " << e.rep.why_not);
    check_contains(M[0], e, "n=32 scale 0.5, " + std::to_string(steps) + " refinement steps");
  }
}

// A matrix singular over ℚ (a row repeated exactly) is never certified full rank, at any precision
// and however far the refinement goes: its smallest singular value is exactly 0.
BOOST_AUTO_TEST_CASE(a_singular_matrix_is_never_certified_full_rank) {
  const std::vector<matrix<double>> M = graded_causal();
  for (const matrix<double>* base : {&M[0], &M[2]}) {
    matrix<double> A = *base;
    A.row(A.rows() - 1) = A.row(A.rows() / 2);
    for (unsigned bits : {128u, 256u, 384u})
      for (int steps : {3, 200}) {
        const escalation e = escalate(A, bits, steps);
        if (e.k == 0) continue;
        BOOST_TEST_MESSAGE(A.rows() << " at " << bits << " bits, " << steps << " steps: k " << e.k << " eps " << e.rep.epsilon
                                    << " gap " << e.rep.gap << " " << e.rep.why_not << " last [" << lower_of(e.trailing.back()).str(5)
                                    << ", " << upper_of(e.trailing.back()).str(5) << "]");
        BOOST_TEST(lower_of(e.trailing.back()) == 0, "n = " << A.rows() << " at " << bits << " bits: σ_min certified > 0");
      }
  }
}

// A start deliberately tilted toward the next singular vector, with no refinement: the Ritz value
// lies above σ_min, and only the shift δ of Li and Li (ε²/η) brings the lower end below it.
BOOST_AUTO_TEST_CASE(a_coupled_start_is_carried_by_the_shift) {
  matrix<double> A(3, 3);
  A << 1, 0, 0, 0.5, 1e-3, 0, 0.25, 0.3, 1e-6;
  binary64_svd_factors F;
  (void)certified_singular_values_binary64(binary64_enclosure{A, {}}, F);
  const mpfr_float truth = reference(A, 1536).back();
  precision_guard g(256);
  matrix<mpfi_float> I(3, 3);
  for (Eigen::Index i = 0; i < A.size(); ++i) I(i) = A(i);
  for (double tilt : {1e-10, 3e-10, 1e-9}) {
    deflation_vectors v;
    v.V2.resize(3, 1);
    for (Eigen::Index i = 0; i < 3; ++i) v.V2(i, 0) = mpfr_float(F.V(i, 2)) + tilt * mpfr_float(F.V(i, 1));
    escalation e;
    e.k = 1;
    e.trailing = deflated_trailing_singular_values(I, F, 1, v, e.rep, 1);
    BOOST_TEST_MESSAGE("tilt " << tilt << ": eps " << e.rep.epsilon << ", gap " << e.rep.gap << ", ["
                               << lower_of(e.trailing[0]).str(8) << ", " << upper_of(e.trailing[0]).str(8) << "], truth "
                               << truth.str(8) << " " << e.rep.why_not);
    BOOST_TEST(e.rep.why_not.empty(), "tilt " << tilt << ": no claim: " << e.rep.why_not);
    check_contains(A, e, "3x3, tilt " + std::to_string(tilt));
  }
}

BOOST_AUTO_TEST_CASE(raising_the_precision_decides_deeper_singular_values) {
  const std::vector<matrix<double>> M = graded_causal();
  std::size_t previous = 0;
  for (unsigned bits : {128u, 256u, 384u}) {
    const escalation e = escalate(M[2], bits);
    BOOST_TEST_REQUIRE(e.k > 0);
    const std::size_t positive = check_contains(M[2], e, "n=40 scale 1.5 at " + std::to_string(bits) + " bits");
    BOOST_TEST_MESSAGE(bits << " bits: " << positive << " of " << e.k << " certified > 0");
    BOOST_TEST(positive >= previous);
    previous = positive;
  }
  BOOST_TEST(previous == 3u);
}

BOOST_AUTO_TEST_CASE(bad_input_is_refused) {
  std::mt19937_64 rng(1);
  const matrix<double> A = kahan_like(rng, 8);
  binary64_svd_factors F;
  (void)certified_singular_values_binary64(binary64_enclosure{A, {}}, F);
  precision_guard g(128);
  matrix<mpfi_float> I(8, 8);
  for (Eigen::Index i = 0; i < A.size(); ++i) I(i) = A(i);
  deflation_vectors v;
  deflation_report rep;
  BOOST_CHECK_THROW(deflated_trailing_singular_values(I, F, 0, v, rep), input_error);
  BOOST_CHECK_THROW(deflated_trailing_singular_values(I, F, 8, v, rep), input_error);
  BOOST_CHECK_THROW(deflated_trailing_singular_values(I.leftCols(7), F, 2, v, rep), input_error);
}
// Below 64 bits the conversions of binary64 bounds to mpfr_float would round: no claim (every
// interval [0, +∞), why_not says so); at 64 bits the escalation runs.
BOOST_AUTO_TEST_CASE(no_claim_below_64_bits) {
  const std::vector<matrix<double>> M = graded_causal();
  const escalation low = escalate(M[0], 53);
  BOOST_TEST_REQUIRE(low.k > 0);
  BOOST_TEST(low.rep.why_not.find("below 64 bits") != std::string::npos, low.rep.why_not);
  for (const mpfi_float& x : low.trailing) {
    BOOST_TEST(lower_of(x) == 0);
    BOOST_TEST(mpfr_inf_p(upper_of(x).backend().data()) != 0);
  }
  const escalation ok = escalate(M[0], 64);
  BOOST_TEST(ok.rep.why_not.find("below 64 bits") == std::string::npos, ok.rep.why_not);
}

// ---- split products (part D, "Split products") ----------------------------------------------

namespace {

// A random p-bit matrix: entries of both signs spread over 2^-40 .. 2^8 relative to each other,
// some exact zeros and some entries far below the slices' reach (2^-700).
matrix<mpfr_float> random_mpfr(std::mt19937_64& rng, Eigen::Index r, Eigen::Index c, long p) {
  std::uniform_real_distribution<double> U(-1, 1);
  std::uniform_int_distribution<int> E(-40, 8), pick(0, 19);
  matrix<mpfr_float> M(r, c);
  for (Eigen::Index i = 0; i < M.size(); ++i) {
    mpfr_set_prec(M(i).backend().data(), p);  // p bits (Boost's precision() takes decimal digits)
    const int w = pick(rng);
    if (w == 0) {
      M(i) = 0;
      continue;
    }
    mpfr_ptr x = M(i).backend().data();
    mpfr_set_d(x, U(rng), MPFR_RNDN);
    for (int t = 0; t < 8; ++t) {  // fill all p bits
      mpfr_mul_2si(x, x, 53, MPFR_RNDN);
      mpfr_add_d(x, x, U(rng), MPFR_RNDN);
    }
    mpfr_mul_2si(x, x, (w == 1 ? -700 : E(rng)) - 8 * 53, MPFR_RNDN);
  }
  return M;
}

// sum_l a_l·x_l at `bits` with raw MPFR (Boost's operators round a product to its operands'
// precision, not to the default one): every product exact, each addition rounded at `bits`.
mpfr_float wide_dot(const std::vector<const mpfr_float*>& a, const std::vector<const mpfr_float*>& x, long bits,
                    mpfr_float* magnitude = nullptr) {
  mpfr_t s, t, m;
  mpfr_inits2(bits, s, t, m, static_cast<mpfr_ptr>(nullptr));
  mpfr_set_ui(s, 0, MPFR_RNDN);
  mpfr_set_ui(m, 0, MPFR_RNDN);
  for (std::size_t l = 0; l < a.size(); ++l) {
    mpfr_mul(t, a[l]->backend().data(), x[l]->backend().data(), MPFR_RNDN);  // exact: bits >= 2·p
    mpfr_add(s, s, t, MPFR_RNDN);
    mpfr_abs(t, t, MPFR_RNDN);
    mpfr_add(m, m, t, MPFR_RNDN);
  }
  mpfr_float out, mag;
  mpfr_set_prec(out.backend().data(), bits);
  mpfr_set_prec(mag.backend().data(), bits);
  mpfr_set(out.backend().data(), s, MPFR_RNDN);
  mpfr_set(mag.backend().data(), m, MPFR_RNDN);
  if (magnitude) *magnitude = mag;
  mpfr_clears(s, t, m, static_cast<mpfr_ptr>(nullptr));
  return out;
}

// max over entries of |Y − exact| / (2^-p|Y| + eps), the exact product at 8p bits (every product
// exact, the sums' error below n·2^-8p relative: far inside the comparison's margin).
double worst_ratio(const matrix<mpfr_float>& A, bool tr, const matrix<mpfr_float>& B, const matrix<mpfr_float>& Y,
                   const mpfr_float& eps, long p) {
  precision_guard g(static_cast<unsigned>(8 * p));
  double worst = 0;
  const Eigen::Index inner = B.rows();
  for (Eigen::Index j = 0; j < Y.cols(); ++j)
    for (Eigen::Index i = 0; i < Y.rows(); ++i) {
      std::vector<const mpfr_float*> a, x;
      for (Eigen::Index l = 0; l < inner; ++l) {
        a.push_back(tr ? &A(l, i) : &A(i, l));
        x.push_back(&B(l, j));
      }
      const mpfr_float s = wide_dot(a, x, 8 * p);
      const mpfr_float err = abs(mpfr_float(Y(i, j)) - s);
      const mpfr_float bound = abs(mpfr_float(Y(i, j))) * pow(mpfr_float(2), -p) + mpfr_float(eps);
      if (bound == 0) {
        BOOST_TEST(err == 0);
        continue;
      }
      worst = std::max(worst, static_cast<double>(err / bound));
    }
  return worst;
}

}  // namespace

// The slices reconstruct the matrix: M = Σ 2^(e − (s+1)β)·m_s + R with |R| < 2^(e − Sβ), every m_s
// an integer matrix below 2^β, e the least with |M| < 2^e (MPFR and binary64 versions).
BOOST_AUTO_TEST_CASE(slices_reconstruct_the_matrix) {
  std::mt19937_64 rng = make_rng(11);
  for (long p : {64L, 200L}) {
    precision_guard g(static_cast<unsigned>(p));
    const matrix<mpfr_float> M = random_mpfr(rng, 30, 7, p);
    const int beta = detail::split::slice_bits(300), S = detail::split::slice_count(p, beta);
    const detail::split::slices sl = detail::split::slice(M, S, beta, 2);
    matrix<double> D(30, 7);
    for (Eigen::Index i = 0; i < D.size(); ++i) D(i) = static_cast<double>(M(i));
    D(3) = 0x1p-1070;  // a subnormal, far below the slices' reach
    D(4) = -0x1p-30;
    const detail::split::slices sd = detail::split::slice(D, S, beta);
    precision_guard wide(4000);
    for (const auto& [what, s, exact] :
         {std::tuple{"mpfr", &sl, M}, std::tuple{"binary64", &sd, from_double_matrix<mpfr_float>(D)}}) {
      BOOST_TEST(!s->zero);
      long e = std::numeric_limits<long>::min();
      for (Eigen::Index i = 0; i < exact.size(); ++i)
        if (exact(i) != 0) e = std::max<long>(e, mpfr_get_exp(exact(i).backend().data()));
      BOOST_TEST(s->e == e, what);
      BOOST_TEST_REQUIRE(s->m.size() == static_cast<std::size_t>(S));
      std::size_t bad = 0;
      for (Eigen::Index i = 0; i < exact.size(); ++i) {
        mpfr_float r = exact(i);
        for (int t = 0; t < S; ++t) {
          const double v = s->m[static_cast<std::size_t>(t)](i);
          bad += !(v == std::trunc(v) && std::fabs(v) < std::ldexp(1.0, beta));
          r -= ldexp(mpfr_float(v), static_cast<int>(e - (t + 1) * beta));
        }
        bad += !(abs(r) < ldexp(mpfr_float(1), static_cast<int>(e - S * beta)));
      }
      BOOST_TEST(bad == 0u, what);
    }
  }
  BOOST_TEST(detail::split::slice_bits(1024) == 21);
  BOOST_TEST(detail::split::slice_bits(1025) == 21);
  BOOST_TEST(detail::split::slice_bits(40) == 23);
  BOOST_TEST(detail::split::slice_count(128, 21) == 7);
  // a beta too wide for the inner dimension (its slice products could round) is refused
  precision_guard g(64);
  const matrix<mpfr_float> M = matrix<mpfr_float>::Ones(4, 4);
  mpfr_float eps;
  BOOST_TEST(detail::split::slice_bits(4) == 25);
  const detail::split::slices wide = detail::split::slice(M, 3, 26), fits = detail::split::slice(M, 3, 25);
  BOOST_CHECK_THROW(detail::split::product(wide, false, wide, 4, 3, 26, eps), std::invalid_argument);  // 4·2^52 > 2^53
  const matrix<mpfr_float> Y = detail::split::product(fits, false, fits, 4, 3, 25, eps);
  BOOST_TEST((Y(0, 0) == 4 && Y(3, 2) == 4));
}

// Soundness and completeness of the split product: every entry within 2^-p|Y| + eps of the exact
// product, and the bound not loose by more than a factor 2^20 (the worst entry's error is close
// to its bound in the cases whose slices are few).
BOOST_AUTO_TEST_CASE(split_products_are_within_their_bound) {
  std::mt19937_64 rng = make_rng(12);
  for (long p : {64L, 128L, 300L})
    for (bool tr : {false, true})
      for (auto [rows, inner, k] : {std::tuple{40, 33, 5}, std::tuple{3, 60, 9}, std::tuple{25, 25, 25}}) {
        precision_guard g(static_cast<unsigned>(p));
        const matrix<mpfr_float> A = tr ? random_mpfr(rng, inner, rows, p) : random_mpfr(rng, rows, inner, p);
        const matrix<mpfr_float> B = random_mpfr(rng, inner, k, p);
        const int beta = detail::split::slice_bits(inner);
        for (int S : {detail::split::slice_count(p, beta), 2}) {
          mpfr_float eps;
          const matrix<mpfr_float> Y =
              detail::split::product(detail::split::slice(A, S, beta), tr, detail::split::slice(B, S, beta, 2), inner, S,
                                     beta, eps, 2);
          const double w = worst_ratio(A, tr, B, Y, eps, p);
          BOOST_TEST_MESSAGE("p " << p << (tr ? " Aᵀ" : " A") << " " << rows << "x" << inner << "x" << k << " S " << S
                                  << ": worst error / bound " << w);
          BOOST_TEST(w <= 1.0);
          if (S == 2) BOOST_TEST(w >= 0x1p-20);
        }
      }
}
// The banded product (A's entries and X's in bands of exponents): every entry within
// 2^-p|Y| + err of the exact product, for graded A and X (entries over 2^-300 .. 1 and exact zeros),
// both orientations, and err componentwise: an entry whose row of A meets only the small entries
// of X's column gets a bound of their size, not of the largest ones.
BOOST_AUTO_TEST_CASE(banded_products_are_within_their_componentwise_bound) {
  std::mt19937_64 rng = make_rng(13);
  std::uniform_real_distribution<double> U(-1, 1);
  std::uniform_int_distribution<int> E(-300, 0), pick(0, 9);
  for (long p : {64L, 200L})
    for (bool tr : {false, true}) {
      precision_guard g(static_cast<unsigned>(p));
      const Eigen::Index n = 37, k = 4;
      matrix<mpfr_float> A(n, n), X(n, k);
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index l = 0; l < n; ++l) {  // lower triangular (causal), graded by column
          if ((tr ? i < l : l > i) || pick(rng) == 0) A(i, l) = 0;
          else A(i, l) = ldexp(mpfr_float(U(rng)) + ldexp(mpfr_float(U(rng)), -60), -(tr ? i : l) * 3 - pick(rng) * 20);
        }
      for (Eigen::Index i = 0; i < X.size(); ++i)
        X(i) = pick(rng) == 0 ? mpfr_float(0) : ldexp(mpfr_float(U(rng)) + ldexp(mpfr_float(U(rng)), -60), E(rng));
      const int beta = detail::split::slice_bits(n), S = detail::split::slice_count(p, beta);
      for (std::size_t bands : {std::size_t{1}, std::size_t{3}, std::size_t{16}}) {
        const detail::split::banded B = detail::split::slice_banded(A, S, beta, bands, 2);
        matrix<mpfr_float> err;
        const matrix<mpfr_float> Y = detail::split::product_banded(B, tr, X, S, beta, err, 2);
        BOOST_TEST_REQUIRE(err.rows() == Y.rows());
        precision_guard wide(static_cast<unsigned>(8 * p));
        double worst = 0, loosest = 0;
        for (Eigen::Index j = 0; j < k; ++j)
          for (Eigen::Index i = 0; i < n; ++i) {
            std::vector<const mpfr_float*> a, x;
            for (Eigen::Index l = 0; l < n; ++l) {
              a.push_back(tr ? &A(l, i) : &A(i, l));
              x.push_back(&X(l, j));
            }
            mpfr_float mag;
            const mpfr_float exact = wide_dot(a, x, 8 * p, &mag);
            const mpfr_float bound = abs(mpfr_float(Y(i, j))) * pow(mpfr_float(2), -p) + mpfr_float(err(i, j));
            const mpfr_float e = abs(mpfr_float(Y(i, j)) - exact);
            if (bound == 0) {
              BOOST_TEST(e == 0);
              continue;
            }
            worst = std::max(worst, static_cast<double>(e / bound));
            // componentwise: err within 2^(4·beta + 8)·2^-p of the terms' magnitude (band slack:
            // one band width on each side, the rounding of H·G, the factor S + 3)
            if (mag > 0) loosest = std::max(loosest, static_cast<double>(log2(mpfr_float(err(i, j)) / mag)) + p);
          }
        BOOST_TEST_MESSAGE("p " << p << (tr ? " Aᵀ" : " A") << " bands " << bands << ": worst error / bound " << worst
                                << ", largest err / (2^-p·sum|terms|) = 2^" << loosest);
        BOOST_TEST(worst <= 1.0);
        if (bands == 16) BOOST_TEST(loosest <= 4.0 * beta + 8);  // 16 bands reach every entry here
      }
    }
}

// The escalation with the products split and with MPFR loops (ATTNCERT_NO_SPLIT_PRODUCTS): both
// contain the reference, and neither decides fewer σ than the other by more than one.
BOOST_AUTO_TEST_CASE(split_and_mpfr_products_both_contain_the_reference) {
  const std::vector<matrix<double>> M = graded_causal();
  for (unsigned bits : {256u, 320u}) {
    const escalation split = escalate(M[2], bits);
    setenv("ATTNCERT_NO_SPLIT_PRODUCTS", "1", 1);
    const escalation loops = escalate(M[2], bits);
    unsetenv("ATTNCERT_NO_SPLIT_PRODUCTS");
    const std::size_t a = check_contains(M[2], split, "split at " + std::to_string(bits));
    const std::size_t b = check_contains(M[2], loops, "MPFR loops at " + std::to_string(bits));
    BOOST_TEST_MESSAGE(bits << " bits: split decides " << a << ", MPFR loops " << b << " (residuals " << split.rep.residual
                            << ", " << loops.rep.residual << ")");
    BOOST_TEST(a + 1 >= b);
    BOOST_TEST(b + 1 >= a);
  }
}
