// Tests of attncert/rank/analyse_rank.hpp: the singular-value stage of `attncert rank` — the binary64
// path, then the deflated escalation of the undecided trailing singular values (proofs/P16, parts C
// and D), forced here at a small size by lowering mpfi_svd_max_dim.
//
// Ground truth: the same layer formed in MPFR at 2048 bits from the exact inputs (scores, causal
// softmax) and Eigen's JacobiSVD at that precision: independent of the code under test.
#define BOOST_TEST_MODULE rank_analyse_rank
#include <boost/test/unit_test.hpp>

#include <random>
#include <string>
#include <vector>

#include "../support.hpp"
#include "attncert/attention/scores.hpp"
#include "attncert/attention/softmax.hpp"
#include "attncert/linalg/spectra.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/precision_guard.hpp"
#include "attncert/rank/analyse_rank.hpp"

using namespace attncert;

namespace {

// A causal mask that also lets the first query see the second key: as graded as the causal
// attention, but not triangular, so the determinant's bound (P16 part E) does not apply and the
// deflated escalation is what decides.
mask nearly_causal(Eigen::Index n) {
  Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic> allowed(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) allowed(i, j) = j <= i || (i == 0 && j == 1);
  return mask::from_matrix(allowed);
}

// Attention with Q, K of binary32 normals, d = 16, scale 1, under the nearly causal mask: its
// trailing singular values fall far below binary64's resolution.
rank_request causal_request(Eigen::Index n) {
  std::mt19937_64 rng = make_rng(11);
  std::normal_distribution<double> N(0, 1);
  matrix<mpq_rational> Q(n, 16), K(n, 16);
  for (Eigen::Index i = 0; i < Q.size(); ++i) {
    Q(i) = mpq_rational(static_cast<double>(static_cast<float>(N(rng))));
    K(i) = mpq_rational(static_cast<double>(static_cast<float>(N(rng))));
  }
  rank_request req;
  req.Q = Q;
  req.K = K;
  req.scale = mpq_rational(1);
  req.M = nearly_causal(n);
  req.mpfi_svd_max_dim = 16;  // the deflated path, at a size the reference can check
  req.start_bits = 128;
  req.max_bits = 512;
  return req;
}

std::vector<mpfr_float> reference(const rank_request& req) {
  precision_guard g(2048);
  const matrix<mpfr_float> A =
      masked_softmax(scores(from_rational_matrix<mpfr_float>(*req.Q), from_rational_matrix<mpfr_float>(*req.K), mpfr_float(1)), req.M);
  return approx_singular_values(A);
}

// Every enclosure of a holds the reference singular value.
void require_enclosed(const rank_analysis& a, const std::vector<mpfr_float>& ref) {
  precision_guard g(2048);
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const mpfi_float& x = a.singular_values.sigma[i];
    BOOST_TEST((lower_of(x) <= ref[i] && ref[i] <= upper_of(x)),
               "σ_" << i + 1 << " = " << ref[i].str(10) << " outside [" << lower_of(x).str(10) << ", " << upper_of(x).str(10) << "]");
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(undecided_trailing_values_escalate_on_a_deflated_subspace) {
  const rank_request req = causal_request(40);
  const rank_analysis a = analyse_rank(req);
  for (const auto& note : a.notes) BOOST_TEST_MESSAGE(note);
  BOOST_TEST(a.singular_value_method == "binary64+deflated");
  BOOST_TEST(a.exact.lo == 40u);
  BOOST_TEST(a.singular_values_decided);
  BOOST_TEST(a.singular_values.certified_positive == 40u);
  const std::vector<mpfr_float> ref = reference(req);
  require_enclosed(a, ref);
  BOOST_TEST_MESSAGE("σ_min = " << ref.back().str(6) << ", " << a.singular_value_steps << " steps, " << a.singular_values.bits << " bits");
}

// The causal mask itself: the attention is lower triangular, its determinant Π A_ii bounds every
// trailing singular value from below (P16 part E), and the residual from split products (part B′)
// decides the rest: no deflated escalation.  The enclosures hold against the 2048-bit reference.
BOOST_AUTO_TEST_CASE(a_triangular_object_is_decided_by_its_determinant) {
  rank_request req = causal_request(40);
  req.M = mask::causal();
  const rank_analysis a = analyse_rank(req);
  for (const auto& note : a.notes) BOOST_TEST_MESSAGE(note);
  BOOST_TEST(a.singular_value_method == "binary64");
  BOOST_TEST(a.singular_values_decided);
  BOOST_TEST(a.singular_values.certified_positive == 40u);
  bool noted = false;
  for (const auto& note : a.notes) noted = noted || note.find("the object is triangular") != std::string::npos;
  BOOST_TEST(noted);
  const std::vector<mpfr_float> ref = reference(req);
  require_enclosed(a, ref);
  BOOST_TEST_MESSAGE("σ_min = " << ref.back().str(6) << ", enclosed in [" << lower_of(a.singular_values.sigma.back()).str(6) << ", "
                                << upper_of(a.singular_values.sigma.back()).str(6) << "]");
}

BOOST_AUTO_TEST_CASE(without_deflation_the_trailing_values_stay_undecided) {
  rank_request req = causal_request(40);
  req.deflation_max_k = 0;
  const rank_analysis a = analyse_rank(req);
  BOOST_TEST(a.singular_value_method == "binary64");
  BOOST_TEST(!a.singular_values_decided);
  BOOST_TEST(a.singular_values.certified_positive < 40u);
  bool noted = false;
  for (const auto& note : a.notes) noted = noted || note.find("UNDECIDED") != std::string::npos;
  BOOST_TEST(noted);
}

BOOST_AUTO_TEST_CASE(a_precision_cap_below_the_need_leaves_some_undecided_and_says_so) {
  rank_request req = causal_request(40);
  req.max_bits = 128;
  const rank_analysis a = analyse_rank(req);
  for (const auto& note : a.notes) BOOST_TEST_MESSAGE(note);
  BOOST_TEST(a.singular_value_method == "binary64+deflated");
  BOOST_TEST(a.singular_values.bits == 128u);
  if (!a.singular_values_decided) {
    bool noted = false;
    for (const auto& note : a.notes) noted = noted || note.find("stay UNDECIDED") != std::string::npos;
    BOOST_TEST(noted);
  }
  const std::vector<mpfr_float> ref = reference(req);
  precision_guard g(2048);
  for (std::size_t i = 0; i < ref.size(); ++i)
    BOOST_TEST((lower_of(a.singular_values.sigma[i]) <= ref[i] && ref[i] <= upper_of(a.singular_values.sigma[i])), "σ_" << i + 1);
}

// Each numerical entry's exact count (the exact singular values its policy's rule counts, threshold
// from the exact σ₁) contains the count from the 2048-bit reference, and is decided: the escalation
// also decides σ lying across a reported threshold.
BOOST_AUTO_TEST_CASE(exact_counts_at_each_policy_threshold) {
  rank_request req = causal_request(40);
  req.formats = {parse_format("binary64"), parse_format("binary32"), parse_format("bfloat16")};
  req.policies = {rank_policy::parse("numpy"), rank_policy::parse("matlab"), rank_policy::parse("eigen"),
                  rank_policy::parse("absolute:1e-30")};
  const rank_analysis a = analyse_rank(req);
  BOOST_TEST(a.singular_values_decided);
  const std::vector<mpfr_float> ref = reference(req);
  BOOST_TEST_REQUIRE(a.numerical.size() == 12u);
  std::size_t i = 0;
  for (const auto& f : req.formats)
    for (const auto& P : req.policies) {
      const numerical_rank_entry& e = a.numerical[i++];
      precision_guard g(2048);
      const mpfr_float tau = P.threshold(ref[0], 40, 40, f);
      std::size_t count = 0;
      for (const auto& s : ref) count += P.inclusive() ? s >= tau : s > tau;
      BOOST_TEST((e.exact_lo <= count && count <= e.exact_hi),
                 e.format << "/" << e.policy << ": reference count " << count << " outside [" << e.exact_lo << ", " << e.exact_hi << "]");
      BOOST_TEST(e.exact_lo == e.exact_hi, e.format << "/" << e.policy << " undecided");
      BOOST_TEST_MESSAGE(e.format << "/" << e.policy << ": numerical rank " << e.rank << ", exact count " << e.exact_lo);
    }
}

// A threshold equal to σ₁ itself (α = 1: relative:1, torch:1; numpy's max(m,n)·ε is 1 for bfloat16 at 128 rows)
// is decided exactly for σ₁ (σ₁ > σ₁ is false) without escalating: the enclosures of σ₁ and of α·σ₁ always
// overlap, and before this was decided exactly the MPFI escalation ran to the precision cap (minutes at n = 128).
BOOST_AUTO_TEST_CASE(a_threshold_equal_to_sigma_one_is_decided_without_escalation) {
  rank_request req = causal_request(40);
  req.formats = {parse_format("binary64")};
  req.policies = {rank_policy::parse("relative:1"), rank_policy::parse("torch:1"), rank_policy::parse("relative:0.5")};
  const rank_analysis a = analyse_rank(req);
  BOOST_TEST(a.singular_values_decided);
  BOOST_TEST(a.singular_value_method.find("mpfi") == std::string::npos);  // no MPFI escalation of the whole matrix
  BOOST_TEST_REQUIRE(a.numerical.size() == 3u);
  BOOST_TEST(a.numerical[0].exact_lo == 0u);
  BOOST_TEST(a.numerical[0].exact_hi == 0u);
  BOOST_TEST(a.numerical[1].exact_hi == 0u);
  const std::vector<mpfr_float> ref = reference(req);
  std::size_t half = 0;
  for (const auto& s : ref) half += s > ref[0] / 2;
  BOOST_TEST(a.numerical[2].exact_lo == half);
  BOOST_TEST(a.numerical[2].exact_hi == half);
}

// Stopped by --max-seconds inside the MPFI escalation: the binary64 enclosures are kept with their true relative
// width (it was reported as "<= 0", as if exact), and the note names the escalation, not the binary64 stage.
BOOST_AUTO_TEST_CASE(a_stop_inside_the_escalation_keeps_the_binary64_enclosures_and_their_width) {
  rank_request req = causal_request(40);
  req.M = mask::none();
  req.formats = {parse_format("binary64")};
  req.policies = {rank_policy::parse("numpy")};
  req.mpfi_svd_max_dim = 128;  // the MPFI path, not the deflated one
  req.sigma_rel_width = 1e-300;  // never decided: the escalation runs until the budget stops it
  req.max_bits = 1u << 14;
  req.max_seconds = 1;
  const rank_analysis a = analyse_rank(req);
  BOOST_TEST(a.partial);
  BOOST_TEST(!a.singular_values_decided);
  BOOST_TEST_REQUIRE(!a.singular_values.sigma.empty());
  BOOST_TEST(a.singular_value_max_rel_width > 0);
  bool named = false;
  for (const auto& n : a.notes) named = named || n.find("while escalating past the binary64 stage") != std::string::npos;
  BOOST_TEST(named);
}
