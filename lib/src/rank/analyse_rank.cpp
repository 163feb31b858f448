#include "attncert/rank/analyse_rank.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <sstream>
#include <unistd.h>

#include <flint/nmod_mat.h>

#include "attncert/attention/binary64_enclosure.hpp"
#include "attncert/attention/heads.hpp"
#include "attncert/deadline.hpp"
#include "attncert/field.hpp"
#include "attncert/linalg/deflated_svd.hpp"
#include "attncert/linalg/fast_svd.hpp"
#include "attncert/attention/softmax.hpp"
#include "attncert/number/parallel.hpp"
#include "attncert/number/ziv.hpp"
#include "attncert/rank/numerical.hpp"

namespace attncert {

namespace {

bool perfect_square(Eigen::Index d, long& root) {
  root = static_cast<long>(std::llround(std::sqrt(static_cast<double>(d))));
  return root * root == d;
}

// The algebraic factor c of the scores S = c·B with B rational: "1", or "1/sqrt(d)" when the scale
// is 1/√d and d is not a perfect square (reported with the exact rank).
std::string algebraic_factor(const rank_request& r) {
  long root = 0;
  if (r.S || !r.inv_sqrt_d || perfect_square(r.Q->cols(), root)) return "1";
  return "1/sqrt(" + std::to_string(r.Q->cols()) + ")";
}

// The object formed in T from the same exact inputs, every operation in T.
template <class T>
matrix<T> form_object(const rank_request& r) {
  matrix<T> S;
  if (r.S) {
    S = from_rational_matrix<T>(*r.S);
  } else {
    const matrix<T> Q = from_rational_matrix<T>(*r.Q), K = from_rational_matrix<T>(*r.K);
    T s = T(1);
    if (r.inv_sqrt_d) s = default_scale<T>(Q.cols());
    else if (r.scale) s = from_rational<T>(*r.scale);
    S = scores(Q, K, s);
  }
  if (r.object == layer_object::scores) return S;
  const matrix<T> A = masked_softmax(S, r.M);
  if (r.object == layer_object::attention) return A;
  const matrix<T> AV = multiply(A, from_rational_matrix<T>(*r.V));
  if (r.object == layer_object::output) return AV;
  return residual(from_rational_matrix<T>(*r.X), AV);
}

// The object enclosed in MPFI at the current precision.  Scores and attention from binary64 Q, K
// take the exactly summed scores of enclose_scores_mpfi (cheap at large n); anything else is the
// generic MPFI evaluation.  Both enclose the exact object.
matrix<mpfi_float> form_object_mpfi(const rank_request& r) {
  if (!r.S && (r.object == layer_object::scores || r.object == layer_object::attention)) {
    auto q = exactly_binary64(*r.Q), k = exactly_binary64(*r.K);
    if (q && k) {
      score_scale c;
      if (r.inv_sqrt_d) c.inv_sqrt_d = true;
      else c.rational = r.scale ? *r.scale : mpq_rational(1);
      if (r.object == layer_object::scores) return enclose_scores_mpfi(*q, *k, c, mask::none(), r.threads);
      // masked_softmax, its rows on r.threads threads (each row's operations as in the plain loop)
      const matrix<mpfi_float> S = enclose_scores_mpfi(*q, *k, c, r.M, r.threads);
      r.M.check_shape(S.rows(), S.cols());
      matrix<mpfi_float> A(S.rows(), S.cols());
      parallel_for(static_cast<std::size_t>(S.rows()), r.threads, [&](std::size_t i) {
        detail::masked_softmax_row(S, r.M, static_cast<Eigen::Index>(i), A, empty_row_policy::error);
      }, 16);
      return A;
    }
  }
  return form_object<mpfi_float>(r);
}

}  // namespace

void validate(const rank_request& req) {
  if (!req.S && !(req.Q && req.K)) throw input_error("give either " + field("scores") + " or both " + field("q") + " and " + field("k"));
  if (req.Q && req.K && req.Q->cols() != req.K->cols())
    throw input_error("Q has " + std::to_string(req.Q->cols()) + " columns but K has " + std::to_string(req.K->cols()));
  const Eigen::Index nq = req.S ? req.S->rows() : req.Q->rows(), nk = req.S ? req.S->cols() : req.K->rows();
  req.M.check_shape(nq, nk);
  if (req.object == layer_object::scores && req.M.type() != mask::kind::none) {
    bool all = true;
    for (Eigen::Index i = 0; i < nq && all; ++i)
      for (Eigen::Index j = 0; j < nk && all; ++j) all = req.M.allows(i, j);
    // A masked score is -inf: the scores' rank is that of the unmasked Q K^T, which a report
    // naming the mask would misstate.
    if (!all)
      throw input_error("the mask (" + req.M.describe() +
                        ") does not apply to the scores, whose rank is that of the unmasked Q K^T: drop the mask, or "
                        "ask for the attention (softmax of the masked scores)");
  }
  if ((req.object == layer_object::output || req.object == layer_object::residual) && !req.V)
    throw input_error(field("object") + " " + to_string(req.object) + " needs " + field("v"));
  if (req.V && req.V->rows() != nk)
    throw input_error("V has " + std::to_string(req.V->rows()) + " rows but there are " + std::to_string(nk) + " keys");
  if (req.object == layer_object::residual) {
    if (!req.X) throw input_error(field("object") + " residual needs " + field("x"));
    if (req.X->rows() != nq || req.X->cols() != req.V->cols())
      throw input_error("X must have shape (" + std::to_string(nq) + ", " + std::to_string(req.V->cols()) + ")");
  }
  for (Eigen::Index i = 0; i < nq; ++i) {
    bool any = false;
    for (Eigen::Index j = 0; j < nk && !any; ++j) any = req.M.allows(i, j);
    if (!any && req.object != layer_object::scores)
      throw input_error("row " + std::to_string(i) + " is fully masked: softmax is undefined");
  }
}

namespace {

// The settings echoed by the report.
void describe(const rank_request& req, rank_analysis& a) {
  const bool square = req.object == layer_object::scores || req.object == layer_object::attention;
  a.object = req.object;
  a.rows = req.S ? req.S->rows() : req.Q->rows();
  a.cols = square ? (req.S ? req.S->cols() : req.K->rows()) : req.V->cols();
  a.mask = req.M.describe();
  a.scale = req.S ? std::string("scores given") : req.inv_sqrt_d ? std::string("1/sqrt(d)")
                                                                 : (req.scale ? req.scale->str() : std::string("1"));
  a.formats = req.formats;
  a.policies = req.policies;
  a.start_bits = req.start_bits;
  a.max_bits = req.max_bits;
  a.seed = req.seed;
  a.inputs = req.inputs;
}

// The stages' stopwatch.  Expiry is the command's one budget (deadline.hpp: --max-seconds set by
// analyse_rank, polled inside the stages' own loops as well as between them).
class stage_clock {
 public:
  stage_clock() : start_(std::chrono::steady_clock::now()) {}
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  bool expired() const { return deadline_passed(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

// The object enclosed in binary64 (attention/binary64_enclosure.hpp) when every input is a
// binary64 number and the bounds apply; nullopt otherwise, with the reason in `why` (the MPFI
// path then decides, and a note that the path was not taken says which reason held).
std::optional<binary64_enclosure> enclose_object_binary64(const rank_request& r, std::string& why) {
  const char* not_binary64 = "the inputs are not all binary64 numbers";
  try {
    binary64_enclosure S;
    if (r.S) {
      auto s = exactly_binary64(*r.S);
      if (!s) return why = not_binary64, std::nullopt;
      S.mid = std::move(*s);
    } else {
      auto q = exactly_binary64(*r.Q), k = exactly_binary64(*r.K);
      if (!q || !k) return why = not_binary64, std::nullopt;
      score_scale c;
      if (r.inv_sqrt_d) c.inv_sqrt_d = true;
      else c.rational = r.scale ? *r.scale : mpq_rational(1);
      S = enclose_scores_binary64(*q, *k, c);
    }
    if (r.object == layer_object::scores) return S;
    binary64_enclosure A = enclose_attention_binary64(S, r.M);
    if (r.object == layer_object::attention) return A;
    auto v = exactly_binary64(*r.V);
    if (!v) return why = not_binary64, std::nullopt;
    binary64_enclosure AV = enclose_product_binary64(A, *v);
    if (r.object == layer_object::output) return AV;
    auto x = exactly_binary64(*r.X);
    if (!x) return why = not_binary64, std::nullopt;
    return enclose_sum_binary64(*x, AV);
  } catch (const input_error& e) {
    why = std::string("the binary64 bounds do not apply: ") + e.what();  // overflow, a bound that does not apply
    return std::nullopt;
  }
}

// Largest (hi − lo)/lo over the enclosures with lo > 0, rounded up (in MPFR at the enclosures'
// precision: a width below binary64's resolution is measured, not rounded to an ulp).
double max_relative_width(const singular_value_enclosures& sv) {
  double w = 0;
  for (const auto& x : sv.sigma) {
    const mpfr_srcptr lo = &x.backend().data()->left, hi = &x.backend().data()->right;
    if (mpfr_sgn(lo) <= 0) continue;
    mpfr_t d;
    mpfr_init2(d, std::max<mpfr_prec_t>(mpfr_get_prec(lo), 53));
    mpfr_sub(d, hi, lo, MPFR_RNDU);
    mpfr_div(d, d, lo, MPFR_RNDU);
    w = std::max(w, mpfr_get_d(d, MPFR_RNDU));
    mpfr_clear(d);
  }
  return w;
}

// The bounds [τ_lo, τ_hi] of a policy's threshold for the exact matrix (m×n, formed in f): every
// policy's threshold is nondecreasing in σ₁ (rank/policy.hpp), so τ(lower σ₁) ≤ τ(σ₁) ≤ τ(upper σ₁).
// Each is evaluated in MPFR at 256 bits — at most two roundings, or an exact power-of-two step — and
// widened by 2^-240 relative.
// For σ₁ itself the threshold is a function of the same number: with τ(σ₁) = max(β, α·σ₁) (every policy
// but matlab), σ₁ > τ(σ₁) ⇔ σ₁ > β and α < 1 (σ₁ ≥ τ: σ₁ ≥ β and α ≤ 1), decided exactly for α — the bounds
// [τ_lo, τ_hi] alone never separate σ₁ from α·σ₁ when α = 1 (e.g. numpy's max(m,n)·ε = 128·2⁻⁷ for bfloat16 at
// 128 rows), and an escalation would run to the precision cap for nothing.
struct threshold_bounds {
  mpfr_float lo, hi;
  bool inclusive = false;
  bool linear = false;  ///< τ(σ₁) = max(beta, alpha·σ₁)
  mpfr_float alpha, beta;
};

threshold_bounds policy_threshold_bounds(const rank_policy& P, const mpfi_float& s1, long m, long n, const format_spec& f) {
  precision_guard g(256);
  mpfr_float lo, hi;
  mpfr_set(lo.backend().data(), &s1.backend().data()->left, MPFR_RNDD);
  mpfr_set(hi.backend().data(), &s1.backend().data()->right, MPFR_RNDU);
  if (lo < 0) lo = 0;
  threshold_bounds t;
  t.inclusive = P.inclusive();
  const mpfr_float widen = pow(mpfr_float(2), -240);
  t.lo = P.threshold(lo, m, n, f) * (1 - widen);
  t.hi = P.threshold(hi, m, n, f) * (1 + widen);
  double alpha = 0, beta = 0;
  if (P.linear_threshold(m, n, f, alpha, beta)) {
    t.linear = true;
    t.alpha = alpha;
    t.beta = beta;
  } else if (P.type() == rank_policy::kind::eigen) {
    // max(σ₁·min(m,n)·ε, smallest normal): β = τ(0), α = τ(1) (exact powers of two times an integer at 256 bits)
    t.beta = P.threshold(mpfr_float(0), m, n, f);
    t.alpha = P.threshold(mpfr_float(1), m, n, f);
    t.linear = t.alpha > t.beta;  // else τ(1) is β and α is not read off it
  }
  return t;
}

// The thresholds of the numerical ranks the report will show (approx formats; an mpfrN format left
// out by default is not asked about), from the enclosure of σ₁.
std::vector<threshold_bounds> reported_thresholds(const rank_request& req, long m, long n, const singular_value_enclosures& sv) {
  std::vector<threshold_bounds> out;
  if (sv.sigma.empty()) return out;
  for (const auto& f : req.formats) {
    if (f.type == format_spec::kind::mpfr && !req.formats_explicit && std::max(m, n) > req.mpfr_svd_max_dim) continue;
    if (f.type == format_spec::kind::mpfi) continue;
    for (const auto& P : req.policies) out.push_back(policy_threshold_bounds(P, sv.sigma[0], m, n, f));
  }
  return out;
}

// Is σ (enclosed by x) certainly counted by a threshold's rule (σ > τ, or σ ≥ τ), certainly not,
// or undecided (1, 0, −1)?
int counted(const mpfi_float& x, const threshold_bounds& t, bool largest) {
  const mpfr_float lo = lower_of(x), hi = upper_of(x);
  if (largest && t.linear) {  // σ₁ against τ(σ₁) = max(β, α·σ₁): see threshold_bounds
    if (!t.inclusive && t.alpha >= 1) return 0;  // σ₁ > α·σ₁ ≥ σ₁ is impossible
    if (t.inclusive && t.alpha > 1) return lo > 0 || t.beta > 0 ? 0 : -1;  // σ₁ ≥ α·σ₁ only at σ₁ = 0
    // α < 1 (≤ 1 for ≥): σ₁ > α·σ₁ once σ₁ > 0, which σ₁ > β ≥ 0 gives; σ₁ ≥ α·σ₁ always
    if (t.inclusive ? lo >= t.beta : lo > t.beta) return 1;
    if (t.inclusive ? hi < t.beta : hi <= t.beta) return 0;
    return -1;
  }
  if (t.inclusive ? lo >= t.hi : lo > t.hi) return 1;
  if (t.inclusive ? hi < t.lo : hi <= t.lo) return 0;
  return -1;
}

// Undecided for the question asked, beyond "> 0": certified > 0 but wider than sigma_rel_width, or on
// both sides of a reported policy threshold.
bool undecided_beyond_zero(const rank_request& req, const std::vector<threshold_bounds>& th, const mpfi_float& x, bool largest) {
  if (lower_of(x) > 0 && req.sigma_rel_width > 0) {
    singular_value_enclosures one;
    one.sigma = {x};
    if (max_relative_width(one) > req.sigma_rel_width) return true;
  }
  for (const auto& t : th)
    if (counted(x, t, largest) < 0) return true;
  return false;
}

// The first index undecided for the question asked (not certified > 0, or undecided_beyond_zero);
// sv.sigma.size() when none.  The escalation takes at least the singular values from there on.
std::size_t first_undecided(const rank_request& req, const rank_analysis& a, const singular_value_enclosures& sv) {
  const std::vector<threshold_bounds> th = reported_thresholds(req, a.rows, a.cols, sv);
  for (std::size_t i = 0; i < sv.sigma.size(); ++i)
    if ((i < a.exact.lo && !(lower_of(sv.sigma[i]) > 0)) || undecided_beyond_zero(req, th, sv.sigma[i], i == 0)) return i;
  return sv.sigma.size();
}

// When the exact rank r is decided (lo == hi), σ_i = 0 exactly for i ≥ r: those enclosures become
// [0, 0] (the rank's witnesses prove it), so no threshold question about them stays open.
void zeros_beyond_the_exact_rank(const rank_analysis& a, singular_value_enclosures& sv) {
  if (a.exact.lo != a.exact.hi) return;
  for (std::size_t i = a.exact.lo; i < sv.sigma.size(); ++i) mpfi_set_si(sv.sigma[i].backend().data(), 0);
}

// sigma's last entries ∩= trailing (both enclose the same singular values).
void intersect_trailing(std::vector<mpfi_float>& sigma, const std::vector<mpfi_float>& trailing) {
  const std::size_t n = sigma.size(), k = trailing.size();
  for (std::size_t j = 0; j < k; ++j) {
    mpfi_float& x = sigma[n - k + j];
    const mpfr_float lo = std::max(lower_of(x), lower_of(trailing[j])), hi = std::min(upper_of(x), upper_of(trailing[j]));
    mpfi_float y;  // at the ends' precision in bits (Boost's precision() takes digits)
    mpfi_set_prec(y.backend().data(), std::max(mpfr_get_prec(lo.backend().data()), mpfr_get_prec(hi.backend().data())));
    mpfi_interv_fr(y.backend().data(), lo.backend().data(), hi.backend().data());
    x = y;
  }
}

// The undecided trailing singular values of a large square object escalated on a deflated subspace
// (linalg/deflated_svd.hpp, proofs/P16 part D): the object enclosed in MPFI at each precision of
// the schedule, the refined vectors carried from one precision to the next, each result intersected
// with the binary64 enclosures (both hold).  Stops when the trailing ones are decided, at max_bits,
// or at --max-seconds (what is undecided then stays so, and the note says where it stopped).
void escalate_deflated(const rank_request& req, rank_analysis& a, const binary64_svd_factors& F, const mpfr_float& det_lo,
                       const stage_clock& clock) {
  const std::size_t n = a.singular_values.sigma.size();
  const std::size_t first = first_undecided(req, a, a.singular_values);
  const std::size_t k = deflation_split(a.singular_values.sigma, n - first, std::min<std::size_t>(n - 1, req.deflation_max_k));
  if (k == 0) {
    a.notes.push_back("singular values: no well-separated split within the " + std::to_string(req.deflation_max_k) +
                      " smallest for the deflated escalation: the undecided ones stay UNDECIDED");
    return;
  }
  deflation_vectors vectors;
  std::size_t decided_count = 0;
  unsigned reached = 0;
  deflation_report last;
  std::string stopped;
  const double start = clock.elapsed();
  double level_seconds = 0;
  int failed_in_a_row = 0;
  for (unsigned bits = std::max(req.start_bits, 64u); bits <= req.max_bits; bits *= 2) {
    const double spent = clock.elapsed() - start, estimate = 3 * level_seconds;
    if (clock.expired()) {
      a.partial = true;
      stopped = "stopped at " + field("max_seconds");
      break;
    }
    if (req.deflation_seconds > 0 && reached > 0 && spent + estimate > req.deflation_seconds) {
      std::ostringstream os;
      os.precision(2);
      os << "stopped before " << bits << " bits: estimated " << estimate << " s more, past " << field("deflate_seconds") << " "
         << req.deflation_seconds;
      stopped = os.str();
      break;
    }
    if (req.progress)
      req.progress("singular values: the " + std::to_string(k) + " smallest on a deflated subspace at " + std::to_string(bits) + " bits");
    const double t0 = clock.elapsed();
    std::vector<mpfi_float> trailing;
    try {
      // --deflate-seconds bounds every level, the first included: the level stops inside when
      // the earlier of it and --max-seconds passes (time_limit_reached; nothing of it is kept).
      deadline_scope level_budget(req.deflation_seconds > 0 ? std::max(0.001, req.deflation_seconds - (clock.elapsed() - start)) : 0.0);
      precision_guard g(bits);
      const matrix<mpfi_float> A = form_object_mpfi(req);
      trailing = deflated_trailing_singular_values(A, F, k, vectors, last, 200, req.threads);
    } catch (const time_limit_reached&) {
      std::ostringstream os;
      os.precision(3);
      os << "stopped inside the " << bits << "-bit level after " << clock.elapsed() - t0 << " s, at "
         << field(clock.expired() ? "max_seconds" : "deflate_seconds");
      if (clock.expired()) a.partial = true;
      stopped = os.str();
      break;
    }
    level_seconds = clock.elapsed() - t0;
    reached = bits;
    failed_in_a_row = last.why_not.empty() ? 0 : failed_in_a_row + 1;
    ++a.singular_value_steps;
    intersect_trailing(a.singular_values.sigma, trailing);
    raise_lower_ends_by_determinant(det_lo, a.singular_values);  // tighter upper ends: higher lower ends
    const std::size_t now_first = first_undecided(req, a, a.singular_values);
    decided_count = now_first > n - k ? now_first - (n - k) : 0;
    if (now_first == n) {
      decided_count = k;
      break;
    }
    if (failed_in_a_row >= 2) {
      stopped = "the bound did not apply at two precisions in a row: more bits would not help";
      break;
    }
  }
  a.singular_values.certified_positive = 0;
  for (const auto& x : a.singular_values.sigma) a.singular_values.certified_positive += lower_of(x) > 0;
  if (reached == 0) {
    a.notes.push_back("singular values: the deflated escalation did not start (" + stopped + ")");
    return;
  }
  a.singular_value_method = "binary64+deflated";
  a.singular_values.bits = reached;
  std::ostringstream os;
  os << "singular values: the " << k << " smallest escalated on a deflated subspace up to " << reached << " bits ("
     << last.refinement_steps << " refinement steps at the last precision): " << decided_count << " of them decided";
  if (!last.why_not.empty()) os << "; at " << reached << " bits no bound applied (" << last.why_not << ")";
  if (decided_count < k) os << "; the rest stay UNDECIDED";
  if (!stopped.empty()) os << " (" << stopped << ")";
  a.notes.push_back(os.str());
}

// Seconds the binary64 path (linalg/fast_svd.hpp) would take on an m×n object: a 256×256
// instance timed here, scaled by m·n·min(m, n) (dgesdd and the products are cubic).
double estimate_binary64_path_seconds(long m, long n) {
  const Eigen::Index s = 256;
  binary64_enclosure A;
  A.mid.resize(s, s);
  A.rad = matrix<double>::Zero(s, s);
  std::mt19937_64 rng(1);
  std::normal_distribution<double> N(0, 1);
  for (Eigen::Index i = 0; i < A.mid.size(); ++i) A.mid.data()[i] = N(rng);
  const auto t0 = std::chrono::steady_clock::now();
  (void)certified_singular_values_binary64(A);
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t * (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(std::min(m, n))) / (256.0 * 256.0 * 256.0);
}

// The determinant's lower bound of a triangular object (0 otherwise) into det_lo, at its own 64
// bits (set exactly, not through Boost's assignment, whose precision rules vary by version), and
// the lower ends it raises in a.singular_values, with a note (proofs/P16, part E).
void determinant_stage(const binary64_enclosure& enc, rank_analysis& a, mpfr_float& det_lo) {
  const mpfr_float d = triangular_determinant_lower_bound(enc);
  mpfr_set_prec(det_lo.backend().data(), mpfr_get_prec(d.backend().data()));
  mpfr_set(det_lo.backend().data(), d.backend().data(), MPFR_RNDD);
  if (const std::size_t raised = raise_lower_ends_by_determinant(det_lo, a.singular_values)) {
    std::ostringstream os;
    os << "singular values: the object is triangular, |det| >= " << det_lo.str(3)
       << " (the product of its diagonal's lower ends); with the other singular values' upper ends it raised "
       << raised << " lower ends: sigma_i >= (|det| / prod_{l<i} sigma_l)^(1/(n-i)) (proofs/P16, part E)";
    a.notes.push_back(os.str());
  }
}

// The filter's second stage: the same factors, their residual from split products (about ten
// dgemms; P16 part B′) instead of BLAS's worst-case rounding bound; the determinant's bounds
// again after it.  True when the enclosures were replaced by tighter ones.
// It cannot stop inside: it does not start when --max-seconds leaves less than twice what the
// binary64 stage took (`took`; it took about as long at n = 1024 and 2048 here).  Nor when its
// working set (the slices of A and V, the level sums, BLAS's operands and results, the 128-bit
// product: about 240 bytes per entry of A) passes the physical memory.  Each skip leaves a note.
bool split_residual_stage(const rank_request& req, rank_analysis& a, const binary64_enclosure& enc,
                          binary64_svd_factors& factors, const mpfr_float& det_lo, double took) {
  if (!factors.valid) return false;
  const double need = 240.0 * static_cast<double>(a.rows) * static_cast<double>(a.cols);
  const double phys = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (std::isfinite(seconds_left()) && seconds_left() < 2 * took) {
    a.notes.push_back("singular values: the residual from split products was not computed (less than twice the binary64 "
                      "stage's time left of " + field("max_seconds") + ")");
    return false;
  }
  if (phys > 0 && need > phys) {
    std::ostringstream os;
    os.precision(3);
    os << "singular values: the residual from split products was not computed (it needs about " << need / 1073741824.0
       << " GiB, more than this machine's " << phys / 1073741824.0 << " GiB)";
    a.notes.push_back(os.str());
    return false;
  }
  if (req.progress) req.progress("singular values: the binary64 residual again from split products");
  const double r0 = factors.rho;
  if (!tighten_residual_split(enc, factors, a.singular_values, req.threads)) return false;
  zeros_beyond_the_exact_rank(a, a.singular_values);
  raise_lower_ends_by_determinant(det_lo, a.singular_values);
  std::ostringstream os;
  os.precision(3);
  os << "singular values: the binary64 residual bound from split products is " << factors.rho << " (BLAS's: " << r0 << ")";
  a.notes.push_back(os.str());
  return true;
}

// Certified singular values, filter then escalate: the binary64 path (LAPACK + residual bound,
// proofs/P16) first; where it is unavailable or undecided (fewer certified > 0 than the exact
// rank's lower bound, or wider than sigma_rel_width), Rump's bound in MPFI escalating (Ziv) up
// to max_bits — only up to mpfi_svd_max_dim rows and columns, where it is the right tool.  Above
// that, a square object escalates its undecided trailing singular values on a deflated subspace.
void enclose_singular_values(const rank_request& req, rank_analysis& a, const stage_clock& clock) {
  // Decided: as many certified > 0 as the exact rank's lower bound, and no singular value undecided
  // for the width asked or a reported threshold (zeros beyond the rank are not asked about).
  auto decided = [&](const singular_value_enclosures& sv) {
    if (sv.certified_positive < a.exact.lo) return false;
    const std::vector<threshold_bounds> th = reported_thresholds(req, a.rows, a.cols, sv);
    for (std::size_t i = 0; i < sv.sigma.size(); ++i)
      if (undecided_beyond_zero(req, th, sv.sigma[i], i == 0)) return false;
    return true;
  };
  auto finish = [&] { a.singular_value_max_rel_width = max_relative_width(a.singular_values); };
  const long dim0 = std::max(a.rows, a.cols);
  if (std::isfinite(seconds_left()) && dim0 > 512) {
    // One LAPACK SVD and its BLAS products cannot stop inside: the path does not start past the
    // budget (a 256x256 instance timed here, scaled by the cube of the size).
    const double est = estimate_binary64_path_seconds(a.rows, a.cols), left = seconds_left();
    if (est > left) {
      std::ostringstream os;
      os.precision(2);
      os << "singular values: not computed (the binary64 path would take about " << est << " s here, past the " << left
         << " s left of " << field("max_seconds") << ")";
      a.partial = true;
      a.notes.push_back(os.str());
      return finish();
    }
  }
  binary64_svd_factors factors;
  std::string why_not_binary64;
  mpfr_float det_lo(0);  // a lower bound on |det| of the object when it is triangular (0: none)
  const double binary64_start = clock.elapsed();
  if (auto enc = enclose_object_binary64(req, why_not_binary64)) {
    a.singular_values = certified_singular_values_binary64(*enc, factors);
    zeros_beyond_the_exact_rank(a, a.singular_values);
    determinant_stage(*enc, a, det_lo);
    a.singular_value_method = "binary64";
    a.singular_value_steps = 1;
    a.singular_values_decided = decided(a.singular_values);
    if (a.singular_values_decided) return finish();
    if (split_residual_stage(req, a, *enc, factors, det_lo, clock.elapsed() - binary64_start)) {
      ++a.singular_value_steps;
      a.singular_values_decided = decided(a.singular_values);
      if (a.singular_values_decided) return finish();
    }
  }
  const long dim = std::max(a.rows, a.cols);
  if (dim > req.mpfi_svd_max_dim) {
    if (a.singular_value_method == "binary64" && a.rows == a.cols && factors.valid && !factors.transposed &&
        req.deflation_max_k > 0) {
      escalate_deflated(req, a, factors, det_lo, clock);
      a.singular_values_decided = decided(a.singular_values);
      return finish();
    }
    a.notes.push_back(a.singular_value_method == "binary64"
                          ? "singular values: the binary64 enclosures leave some undecided; the MPFI path runs only up to " +
                                std::to_string(req.mpfi_svd_max_dim) + " rows and columns (this is " + std::to_string(dim) +
                                "): those stay UNDECIDED"
                          : "singular values: not enclosed (no binary64 path: " + why_not_binary64 +
                                "; and the MPFI path runs only up to " + std::to_string(req.mpfi_svd_max_dim) +
                                " rows and columns; this is " + std::to_string(dim) + ")");
    return finish();
  }
  if (req.progress) req.progress("singular values: escalating in MPFI (Jacobi + Rump's bound)");
  const precision_schedule schedule{req.start_bits, req.max_bits};
  auto out = ziv_escalate(schedule, [&](unsigned bits) {
    precision_guard g(bits);
    singular_value_enclosures sv = certified_singular_values(form_object<mpfi_float>(req));
    zeros_beyond_the_exact_rank(a, sv);
    raise_lower_ends_by_determinant(det_lo, sv);
    const bool ok = decided(sv);
    return ziv_step<singular_value_enclosures>{std::move(sv), ok};
  });
  a.singular_values = std::move(out.value);
  a.singular_values_decided = out.decided;
  a.singular_value_steps += out.steps;
  a.singular_value_method = "mpfi";
  finish();
}

// Seconds an SVD of an m×n matrix in T would take here: an s×s sample of N(0, 1) entries timed
// now, scaled by m·n·min(m, n) (cubic: LAPACK's SVD; Jacobi's sweeps, whose number grows slowly).
template <class T>
double estimate_svd_seconds(Eigen::Index s, long m, long n) {
  matrix<T> S(s, s);
  std::mt19937_64 rng(1);
  std::normal_distribution<double> N(0, 1);
  for (Eigen::Index i = 0; i < S.size(); ++i) S.data()[i] = T(N(rng));
  const auto t0 = std::chrono::steady_clock::now();
  (void)approx_singular_values(S);
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double c = static_cast<double>(s);
  return t * (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(std::min(m, n))) / (c * c * c);
}

// The mpfrN SVD (Householder bidiagonalization + tridiagonal QR in MPFR): a 48×48 sample.
double estimate_mpfr_svd_seconds(const format_spec& f, long m, long n) {
  precision_guard g(f.requested_bits);
  return estimate_svd_seconds<mpfr_float>(48, m, n);
}

// LAPACK's SVD (the binary formats'): a 256×256 binary64 sample.
double estimate_lapack_svd_seconds(long m, long n) { return estimate_svd_seconds<double>(256, m, n); }

std::string duration_text(double s) {
  std::ostringstream os;
  os.precision(2);
  if (s < 120) os << s << " s";
  else if (s < 7200) os << s / 60 << " min";
  else os << s / 3600 << " h";
  return os.str();
}

// e.exact_lo/hi: the exact singular values the policy's rule counts (threshold from the exact σ₁).
void count_exact(const rank_analysis& a, const rank_policy& P, const format_spec& f, numerical_rank_entry& e) {
  const auto& sigma = a.singular_values.sigma;
  e.exact_lo = 0;
  e.exact_hi = static_cast<std::size_t>(std::min(a.rows, a.cols));
  if (sigma.empty()) return;
  const threshold_bounds t = policy_threshold_bounds(P, sigma[0], a.rows, a.cols, f);
  e.exact_hi = 0;
  for (std::size_t i = 0; i < sigma.size(); ++i) {
    const int c = counted(sigma[i], t, i == 0);
    e.exact_lo += c == 1;
    e.exact_hi += c != 0;
  }
}

// Numerical ranks of the object formed in each format, under each policy.
void numerical_in_format(const rank_request& req, rank_analysis& a, const format_spec& f);

void measure_numerical(const rank_request& req, rank_analysis& a, const stage_clock& clock) {
  for (const auto& f : req.formats) {
    if (clock.expired()) {
      a.partial = true;
      a.notes.push_back("numerical ranks in " + f.name + ": not computed (stopped at " + field("max_seconds") + ")");
      continue;
    }
    if (f.type == format_spec::kind::mpfr && !req.formats_explicit && std::max(a.rows, a.cols) > req.mpfr_svd_max_dim) {
      a.notes.push_back(f.name + " left out of the default formats above " + std::to_string(req.mpfr_svd_max_dim) +
                        " rows or columns: its SVD in MPFR would take about " +
                        duration_text(estimate_mpfr_svd_seconds(f, a.rows, a.cols)) + " here; name it in " + field("formats") + " to run it");
      continue;
    }
    if (std::isfinite(seconds_left()) && (f.type == format_spec::kind::mpfr || std::max(a.rows, a.cols) > 512)) {
      // An SVD (in MPFR, or LAPACK's) cannot stop inside: it does not start
      // past the budget.  (Forming the object polls the budget itself.)
      const double est = f.type == format_spec::kind::mpfr ? estimate_mpfr_svd_seconds(f, a.rows, a.cols)
                                                           : estimate_lapack_svd_seconds(a.rows, a.cols),
                   left = seconds_left();
      if (est > left) {
        a.partial = true;
        a.notes.push_back("numerical ranks in " + f.name + ": not computed (its SVD would take about " + duration_text(est) +
                          " here, past the " + duration_text(left) + " left of " + field("max_seconds") + ")");
        continue;
      }
    }
    if (req.progress) req.progress("numerical ranks: " + f.name);
    try {
      numerical_in_format(req, a, f);
    } catch (const time_limit_reached&) {
      a.partial = true;
      a.notes.push_back("numerical ranks in " + f.name + ": not computed (stopped at " + field("max_seconds") + ")");
    }
  }
}

// One format's numerical ranks under every policy (measure_numerical).
void numerical_in_format(const rank_request& req, rank_analysis& a, const format_spec& f) {
  with_format(f, [&]<class T>() {
    if constexpr (tier_of<T> == tier::approx) {
      const matrix<T> M = form_object<T>(req);
      const auto m = approx_numerical_rank(M, f, req.policies, a.exact.lo, a.exact.hi);
      using S = typename decltype(m.sigma)::value_type;
      for (std::size_t k = 0; k < req.policies.size(); ++k) {
        numerical_rank_entry e;
        e.format = f.name;
        e.policy = req.policies[k].name();
        e.rank = m.ranks[k];
        e.threshold = m.sigma.empty() ? std::string("0") : number_traits<S>::to_string(m.thresholds[k], 17);
        e.diverges = m.diverges[k];
        count_exact(a, req.policies[k], f, e);
        a.divergences += e.diverges;
        a.numerical.push_back(std::move(e));
      }
    } else {
      throw input_error("format '" + f.name + "' is an enclosure format: numerical ranks need binary16, bfloat16, binary32, binary64 or mpfrN");
    }
  });
}

// Memory before any stage allocates: each stage's largest working set, estimated from the
// shapes alone.  One above 1 GiB is shown (notes, progress) before anything is allocated; one
// above the machine's physical memory is refused with the stage and the size, before the first
// stage runs (an n×n stage that cannot fit must not start, nor leave a library to abort on a
// failed allocation).
void plan_memory(const rank_request& req, rank_analysis& a) {
  const double m = static_cast<double>(a.rows), nk = static_cast<double>(req.S ? req.S->cols() : req.K->rows());
  const double c = static_cast<double>(a.cols), big = std::max({m, nk, c});
  const double GiB = 1024.0 * 1024.0 * 1024.0;
  struct stage {
    std::string name;
    double bytes;
  };
  std::vector<stage> stages;
  // Exact rank: the m×n_k matrix mod p, its row echelon copy and the witness (three word
  // matrices), the integer matrix it is reduced from.
  stages.push_back({"the exact rank (matrices mod p)", 4.0 * 8.0 * m * nk});
  // Singular values: about twelve binary64 matrices of the larger side squared.
  stages.push_back({"the singular values (binary64 path)", 12.0 * 8.0 * big * big});
  for (const auto& f : req.formats) {
    if (f.type == format_spec::kind::mpfr && !req.formats_explicit && std::max(a.rows, a.cols) > req.mpfr_svd_max_dim) continue;
    // The object formed in the format and an SVD's copies of it (about six).
    const double entry = f.type == format_spec::kind::mpfr || f.type == format_spec::kind::mpfi
                             ? 32.0 + 8.0 * std::ceil(static_cast<double>(f.precision_bits()) / 64.0)
                             : 8.0;
    stages.push_back({"the numerical ranks in " + f.name, 6.0 * entry * m * c});
  }
  const double phys = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / GiB;
  for (const auto& st : stages) {
    const double gib = st.bytes / GiB;
    if (gib <= 1.0) continue;
    std::ostringstream os;
    os.precision(3);
    os << a.rows << "x" << (req.S ? req.S->cols() : req.K->rows()) << " " << to_string(req.object) << ": " << st.name
       << " needs about " << gib << " GiB";
    if (phys > 0 && gib > phys) {
      os << ", more than this machine's " << phys << " GiB (nothing was computed)";
      throw input_error(os.str());
    }
    a.notes.push_back(os.str());
    if (req.progress) req.progress(os.str());
  }
}

// Seconds one elimination mod p of an m×n word matrix would take here: a 384×384 determinant
// timed now, scaled by (size/384)^2.8 (FLINT's elimination multiplies blocks by Strassen).
double estimate_elimination_seconds(long m, long n) {
  const slong s = 384;
  nmod_mat_t A;
  nmod_mat_init(A, s, s, 1000003);
  flint_rand_t st;
  flint_randinit(st);
  nmod_mat_randfull(A, st);
  const auto t0 = std::chrono::steady_clock::now();
  (void)nmod_mat_det(A);
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  flint_randclear(st);
  nmod_mat_clear(A);
  const double size = std::cbrt(static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(std::min(m, n)));
  return t * std::pow(size / static_cast<double>(s), 2.8);
}

// The exact rank (transcendence method, proofs/P08) within the budget: not started when its
// eliminations (up to three: rank, pivots, witness) are estimated past the time left, and stopped
// if a polled loop (the polynomial method's) passes the deadline.  Not computed, the interval is
// the trivial [0, min(rows, cols)] and the note says why.
void exact_stage(const rank_request& req, const score_factors& F, const rank_options& opt, rank_analysis& a) {
  const long m = a.rows, nk = req.S ? static_cast<long>(req.S->cols()) : static_cast<long>(req.K->rows());
  auto not_computed = [&](const std::string& why) {
    a.partial = true;
    a.exact = {};
    a.exact.hi = static_cast<std::size_t>(std::min(a.rows, a.cols));
    a.exact.lo_witness = "trivial (rank >= 0): the exact rank was not computed";
    a.exact.hi_witness = "structure: min(rows, cols) = " + std::to_string(a.exact.hi);
    a.notes.push_back("exact rank: not computed (" + why + ")");
  };
  const double left = seconds_left();
  if (std::isfinite(left) && static_cast<double>(m) * static_cast<double>(nk) > 256.0 * 256.0) {
    const double est = 3 * estimate_elimination_seconds(m, nk);
    if (est > left) {
      std::ostringstream os;
      os.precision(2);
      os << "its eliminations mod p would take about " << est << " s here, past the " << left
         << " s left of " << field("max_seconds");
      return not_computed(os.str());
    }
  }
  try {
    a.exact = layer_rank_from_factors(F, req.M, req.object, req.V, req.X, opt);
  } catch (const time_limit_reached&) {
    not_computed("stopped at " + field("max_seconds"));
  }
}

}  // namespace

rank_analysis analyse_rank(const rank_request& req) {
  validate(req);
  rank_analysis a;
  describe(req, a);
  plan_memory(req, a);
  deadline_scope budget(req.max_seconds);  // the one budget of the whole analysis (deadline.hpp)
  const stage_clock clock;
  double t = 0;
  auto stage_done = [&](const char* name) {
    const double now = clock.elapsed();
    a.stage_seconds.emplace_back(name, now - t);
    t = now;
  };
  // Exact rank (transcendence method, proofs/P08).
  if (req.progress) req.progress("exact rank: modular evaluation");
  rank_options opt;
  opt.seed = req.seed;
  score_factors F;
  if (req.S) {
    F.S = &*req.S;
  } else {
    F.Q = &*req.Q;
    F.K = &*req.K;
    F.inv_sqrt_d = req.inv_sqrt_d;
    if (!req.inv_sqrt_d && req.scale) F.scale = *req.scale;
  }
  a.algebraic_factor = algebraic_factor(req);
  exact_stage(req, F, opt, a);
  stage_done("exact rank");
  if (clock.expired()) {
    a.partial = true;
    a.notes.push_back("singular values: not computed (stopped at " + field("max_seconds") + ")");
  } else {
    if (req.progress) req.progress("singular values: binary64 SVD + residual bound");
    try {
      enclose_singular_values(req, a, clock);
    } catch (const time_limit_reached&) {
      // Stopped inside (an MPFI escalation step): what an earlier step certified stays.
      a.partial = true;
      a.singular_values_decided = false;
      a.singular_value_max_rel_width = max_relative_width(a.singular_values);  // of what is kept (finish() did not run)
      a.notes.push_back(a.singular_value_method.empty()
                            ? "singular values: stopped at " + field("max_seconds") + " inside the binary64 stage; nothing is certified"
                            : "singular values: stopped at " + field("max_seconds") + " while escalating past the " +
                                  a.singular_value_method + " stage; its enclosures are kept, and what they leave undecided stays UNDECIDED");
    }
    stage_done("singular values");
  }
  measure_numerical(req, a, clock);
  stage_done("numerical ranks");
  return a;
}

}  // namespace attncert
