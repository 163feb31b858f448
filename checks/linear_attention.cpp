// checks/linear_attention.cpp — linear attention (Katharopoulos et al., "Transformers are
// RNNs", 2020): with φ(x) = elu(x) + 1, the causal recurrent form
//   S_i = S_{i−1} + φ(k_i) v_iᵀ,  Z_i = Z_{i−1} + φ(k_i),  out_i = φ(q_i)ᵀS_i / φ(q_i)ᵀZ_i
// equals the parallel masked form out_i = Σ_{j≤i} (φ(q_i)·φ(k_j)) v_j / Σ_{j≤i} φ(q_i)·φ(k_j)
// exactly.  Proof: proofs/P12-linear-attention.md.
#include "checks/common.hpp"

namespace attncert::checks {
namespace {

constexpr int n = 7, d = 3, dv = 2;

const char* error_model =
    "Positive instance (every input in [1/4, 2], so phi(x) = x + 1 and all terms are positive): each output "
    "is a ratio of two sums of at most n*d + n products of positive numbers, in either order of summation; "
    "relative error <= gamma(d+n+2) + gamma(d+n+1) + eps <= 1.01 (2(n+d) + 4) eps, asserted as (4(n+d)+8) eps "
    "relative to the exact value. Exact tier: the identity over Q. Mixed-sign instance (phi(x) = e^x for "
    "x <= 0): MPFI certifies |recurrent - parallel| <= 2^-100 max|v| (the exact difference is 0). Negative "
    "control: the recurrence read one step late (S_{i-1}, Z_{i-1}) differs from the parallel form (exact).";

struct instance {
  matrix<double> Q, K, V;
};

// positive: binary64 inputs uniform in [1/4, 2] (53 significant bits, so every format rounds);
// mixed: dyadic k/4 in [-2, 2].
instance make_instance(std::uint64_t seed, bool positive) {
  dyadic_source src(seed ^ (positive ? 0x1A1u : 0x1A2u));
  instance in;
  std::uniform_real_distribution<double> U(0.25, 2.0);
  auto fill = [&](int r, int c) {
    matrix<double> m(r, c);
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < c; ++j) m(i, j) = positive ? U(src.engine()) : src.next(-8, 8);
    return m;
  };
  in.Q = fill(n, d);
  in.K = fill(n, d);
  in.V = fill(n, dv);
  return in;
}

/// The instance as format T stores it: every input rounded to T (exact for binary64 and wider).
template <class T>
instance rounded_to(const instance& in) {
  instance r = in;
  for (auto* m : {&r.Q, &r.K, &r.V})
    for (Eigen::Index i = 0; i < m->rows(); ++i)
      for (Eigen::Index j = 0; j < m->cols(); ++j) {
        if constexpr (std::is_same_v<T, mpfr_float> || std::is_same_v<T, mpfi_float>) continue;
        else (*m)(i, j) = static_cast<double>(T((*m)(i, j)));
      }
  return r;
}

/// φ(x) = elu(x) + 1 = x + 1 (x > 0), e^x (x <= 0), in T (x is an exact dyadic input).
template <class T>
T phi(double x) {
  if (x > 0) return T(x) + T(1);
  if constexpr (std::is_same_v<T, mpq_rational>) {
    throw std::logic_error("phi of a nonpositive input is irrational");
  } else {
    using std::exp;
    return exp(T(x));
  }
}

/// Recurrent form; `late` reads S_{i-1}, Z_{i-1} (the negative control; row 0 then uses row 0's own
/// terms so that it is defined).
template <class T>
matrix<T> recurrent(const instance& in, bool late = false) {
  matrix<T> out(n, dv);
  std::vector<T> S(d * dv, T(0)), Z(d, T(0)), Sprev, Zprev;
  for (int i = 0; i < n; ++i) {
    Sprev = S;
    Zprev = Z;
    for (int a = 0; a < d; ++a) {
      const T fk = phi<T>(in.K(i, a));
      Z[a] += fk;
      for (int c = 0; c < dv; ++c) S[a * dv + c] += fk * T(in.V(i, c));
    }
    const auto& SS = (late && i > 0) ? Sprev : S;
    const auto& ZZ = (late && i > 0) ? Zprev : Z;
    T den(0);
    for (int a = 0; a < d; ++a) den += phi<T>(in.Q(i, a)) * ZZ[a];
    for (int c = 0; c < dv; ++c) {
      T num(0);
      for (int a = 0; a < d; ++a) num += phi<T>(in.Q(i, a)) * SS[a * dv + c];
      out(i, c) = num / den;
    }
  }
  return out;
}

/// Parallel masked form.
template <class T>
matrix<T> parallel(const instance& in) {
  matrix<T> out(n, dv);
  for (int i = 0; i < n; ++i) {
    T den(0);
    std::vector<T> num(dv, T(0));
    for (int j = 0; j <= i; ++j) {
      T w(0);
      for (int a = 0; a < d; ++a) w += phi<T>(in.Q(i, a)) * phi<T>(in.K(j, a));
      den += w;
      for (int c = 0; c < dv; ++c) num[c] += w * T(in.V(j, c));
    }
    for (int c = 0; c < dv; ++c) out(i, c) = num[c] / den;
  }
  return out;
}

/// Largest error in ulps of T from the exact values (graded as the oracle grades candidates).
template <class T>
double max_ulp_error(const matrix<T>& got, const matrix<mpq_rational>& exact) {
  double worst = 0;
  const int p = static_cast<int>(number_traits<T>::bits());
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < dv; ++c) {
      precision_guard g(400);
      const mpfr_float e(exact(i, c));
      mpfr_float g_;
      if constexpr (std::is_same_v<T, mpfr_float>) g_ = got(i, c);
      else g_ = mpfr_float(static_cast<double>(got(i, c)));  // exact: binary64 holds every narrower format
      const mpfr_float err = abs(g_ - e);
      long ex = 0;
      (void)mpfr_get_d_2exp(&ex, e.backend().data(), MPFR_RNDN);  // e = m 2^ex, 0.5 <= |m| < 1
      const mpfr_float ulp = ldexp(mpfr_float(1), static_cast<int>(ex) - p);
      worst = std::max(worst, static_cast<double>(err / ulp));
    }
  return worst;
}

/// max |got - exact| / |exact| over the outputs, computed at 400 bits from the exact values.
template <class T>
mpfr_float max_rel_error(const matrix<T>& got, const matrix<mpq_rational>& exact, double fault) {
  precision_guard g(400);
  mpfr_float worst(0);
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < dv; ++c) {
      mpfr_float x;
      if constexpr (std::is_same_v<T, mpfr_float>) x = got(i, c);
      else x = mpfr_float(static_cast<double>(got(i, c)));  // exact: binary64 holds every narrower format
      if (fault != 0) x = x * (1 + mpfr_float(fault));
      const mpfr_float e(exact(i, c));
      const mpfr_float r = abs(x - e) / abs(e);
      if (r > worst) worst = r;
    }
  return worst;
}

template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const instance& pos0, const run_settings& rs) {
  const instance pos = rounded_to<T>(pos0);
  const matrix<mpq_rational> exact = parallel<mpq_rational>(pos);  // the exact output of T's inputs
  const T e = eps<T>();
  const T tol = T(4 * (n + d) + 8) * e;
  const matrix<T> rec = recurrent<T>(pos), par = parallel<T>(pos);
  const std::string inst = "inputs in [1/4, 2] as stored in " + fmt.name + ", n=" + std::to_string(n) +
                           ", d=" + std::to_string(d);
  for (int form = 0; form < 2; ++form) {
    const matrix<T>& m = form == 0 ? rec : par;
    const mpfr_float err = max_rel_error(m, exact, rs.fault);
    T err_t;
    if constexpr (std::is_same_v<T, mpfr_float>) err_t = err;
    else err_t = T(static_cast<double>(err));
    auto r = claim_close<T>(form == 0 ? "recurrent-form-accuracy" : "parallel-form-accuracy",
                            std::string(form == 0 ? "recurrent" : "parallel") +
                                " form within its rounding bound of the exact output",
                            inst, fmt, err_t, T(0), tol, false,
                            "(4(n+d)+8) eps relative (max over outputs, error measured from the exact value)");
    r.note = "max error " + std::to_string(max_ulp_error(m, exact)) + " ulps of " + fmt.name + " from the exact value";
    rep.claims.push_back(r);
  }
  T dist(0);
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < dv; ++c) dist = max_of(dist, abs_of(T((rec(i, c) - par(i, c)) / par(i, c))));
  auto r = claim_le<T>("forms-agree", "the two forms agree within both rounding bounds", inst, fmt, dist,
                       T(tol + tol), T(0), "none (each form within tol of the truth)");
  r.note = "max relative distance between the forms " + str(dist);
  rep.claims.push_back(r);
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  const instance pos = make_instance(rs.seed, true), mixed = make_instance(rs.seed, false);
  // exact tier: the identity over Q, and the negative control
  const matrix<mpq_rational> rq = recurrent<mpq_rational>(pos), pq = parallel<mpq_rational>(pos);
  const matrix<mpq_rational> late = recurrent<mpq_rational>(pos, true);
  int equal = 0, differ = 0;
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < dv; ++c) {
      equal += rq(i, c) == pq(i, c);
      differ += late(i, c) != pq(i, c);
    }
  const std::string cnt = std::to_string(n * dv);
  rep.claims.push_back(claim_exact("recurrent-equals-parallel", "recurrent form = parallel masked form (exactly)",
                                   "positive inputs", std::to_string(equal) + "/" + cnt + " outputs equal",
                                   cnt + "/" + cnt, equal == n * dv, "rational arithmetic"));
  rep.claims.push_back(claim_exact("control-late-recurrence-differs",
                                   "negative control: reading S_{i-1}, Z_{i-1} is NOT the parallel form (refuted)",
                                   "positive inputs", std::to_string(differ) + " outputs differ", "> 0 outputs differ",
                                   differ > 0, "rational arithmetic"));
  // enclosure tier: mixed signs, phi = e^x on the negative inputs
  double vmax = 0;
  for (int j = 0; j < n; ++j)
    for (int c = 0; c < dv; ++c) vmax = std::max(vmax, std::fabs(mixed.V(j, c)));
  const certified_sign s = certify_sign(
      [&]() {
        const matrix<mpfi_float> a = recurrent<mpfi_float>(mixed), b = parallel<mpfi_float>(mixed);
        mpfi_float worst(0);
        for (int i = 0; i < n; ++i)
          for (int c = 0; c < dv; ++c) worst = max_of(worst, abs_of(mpfi_float(a(i, c) - b(i, c))));
        return mpfi_float(ldexp(mpfi_float(vmax), -100) - worst);
      },
      rs.certify_bits, rs.certify_max_bits, true);
  rep.claims.push_back(claim_from_sign("recurrent-equals-parallel",
                                       "|recurrent - parallel| <= 2^-100 max|v| (exactly 0; mixed signs, phi = e^x)",
                                       "mixed-sign inputs", s, "2^-100 max|v| - max|diff| > 0",
                                       "certified: the whole enclosure is positive"));
  // The requested formats, plus binary32 and binary64 always (the two forms' distance in fp32 and
  // binary64 is part of the statement).
  run_settings fs = rs;
  for (const char* name : {"binary32", "binary64"})
    if (std::none_of(fs.formats.begin(), fs.formats.end(), [&](const format_spec& f) { return f.name == name; }))
      fs.formats.push_back(parse_format(name));
  for_each_format(fs, [&]<class T>(const format_spec& fmt) {
    if constexpr (std::is_same_v<T, mpfi_float>) {
      rep.claims.push_back(claim_skipped("recurrent-form-accuracy", "accuracy of the forms", "positive inputs", fmt,
                                         tier::enclosure, "intervals: see the enclosure claim above"));
    } else {
      evaluate<T>(rep, fmt, pos, rs);
    }
  });
  return rep;
}

}  // namespace

check_entry make_linear_attention() {
  return {"linear-attention", "Linear attention: the recurrent and the parallel form are the same function",
          "literature: Katharopoulos et al. 2020", "proofs/P12-linear-attention.md", error_model, run};
}

}  // namespace attncert::checks
