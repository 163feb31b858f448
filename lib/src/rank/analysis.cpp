#include "attncert/rank/analysis.hpp"

#include <cmath>

#include "attncert/attention/heads.hpp"
#include "attncert/number/ziv.hpp"
#include "attncert/rank/numerical.hpp"

namespace attncert {

namespace {

bool perfect_square(Eigen::Index d, long& root) {
  root = static_cast<long>(std::llround(std::sqrt(static_cast<double>(d))));
  return root * root == d;
}

// The scores divided by the algebraic factor c (c = 1 or 1/√d): exact rationals.
matrix<mpq_rational> base_scores(const rank_request& r, std::string& factor) {
  factor = "1";
  if (r.S) return *r.S;
  const matrix<mpq_rational> QK = multiply(*r.Q, transpose(*r.K));
  if (r.inv_sqrt_d) {
    long root = 0;
    if (perfect_square(r.Q->cols(), root)) return QK * mpq_rational(1, root);
    factor = "1/sqrt(" + std::to_string(r.Q->cols()) + ")";
    return QK;
  }
  return QK * (r.scale ? *r.scale : mpq_rational(1));
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

// Shapes and masks: one input_error naming the first problem.
void validate(const rank_request& req) {
  if (!req.S && !(req.Q && req.K)) throw input_error("give either --scores or both --q and --k");
  if (req.Q && req.K && req.Q->cols() != req.K->cols())
    throw input_error("Q has " + std::to_string(req.Q->cols()) + " columns but K has " + std::to_string(req.K->cols()));
  const Eigen::Index nq = req.S ? req.S->rows() : req.Q->rows(), nk = req.S ? req.S->cols() : req.K->rows();
  req.M.check_shape(nq, nk);
  if ((req.object == layer_object::output || req.object == layer_object::residual) && !req.V)
    throw input_error(std::string("--object ") + to_string(req.object) + " needs --v");
  if (req.V && req.V->rows() != nk)
    throw input_error("V has " + std::to_string(req.V->rows()) + " rows but there are " + std::to_string(nk) + " keys");
  if (req.object == layer_object::residual) {
    if (!req.X) throw input_error("--object residual needs --x");
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

// Rump's certified singular values of the object in MPFI, escalating (Ziv) until as many are
// certified > 0 as the exact rank's lower bound, or the cap.
void enclose_singular_values(const rank_request& req, rank_analysis& a) {
  const precision_schedule schedule{req.start_bits, req.max_bits};
  auto out = ziv_escalate(schedule, [&](unsigned bits) {
    precision_guard g(bits);
    singular_value_enclosures sv = certified_singular_values(form_object<mpfi_float>(req));
    const bool decided = sv.certified_positive >= a.exact.lo;
    return ziv_step<singular_value_enclosures>{std::move(sv), decided};
  });
  a.singular_values = std::move(out.value);
  a.singular_values_decided = out.decided;
  a.singular_value_steps = out.steps;
}

// Numerical ranks of the object formed in each format, under each policy.
void measure_numerical(const rank_request& req, rank_analysis& a) {
  for (const auto& f : req.formats) {
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
          a.divergences += e.diverges;
          a.numerical.push_back(std::move(e));
        }
      } else {
        throw input_error("format '" + f.name + "' is an enclosure format: numerical ranks need binary16, bfloat16, binary32, binary64 or mpfrN");
      }
    });
  }
}

}  // namespace

rank_analysis analyse_rank(const rank_request& req) {
  validate(req);
  rank_analysis a;
  describe(req, a);
  // Exact rank (transcendence method, proofs/P08).
  const matrix<mpq_rational> B = base_scores(req, a.algebraic_factor);
  rank_options opt;
  opt.seed = req.seed;
  a.exact = layer_rank(B, req.M, req.object, req.V, req.X, opt);
  enclose_singular_values(req, a);
  measure_numerical(req, a);
  return a;
}

}  // namespace attncert
