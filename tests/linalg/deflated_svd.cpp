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
