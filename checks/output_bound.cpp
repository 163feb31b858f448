// checks/output_bound.cpp — approximation error must reach the output (§11).
//
// For every row i: ‖((Â − A)V)_i‖₂ ≤ ‖Â_i − A_i‖₁ · max_j ‖v_j‖₂, and the entrywise-max
// form with its factor n.  Declared finite family of perturbations: random, sparse (top-2
// renormalized), and a witness attaining equality.  Proof: proofs/P04-output-bound.md.
#include "checks/common.hpp"

namespace attncert::checks {
namespace {

constexpr int n = 5, dv = 3;

const char* error_model =
    "Both sides are sums of at most n*dv rounded products followed by a square root: each side carries "
    "relative error <= (n+dv+4) eps, so the inequality is asserted with a rounding allowance of "
    "2(n+dv+4) eps * rhs (the equality witness: |lhs - rhs| <= the same allowance). The exact tier compares "
    "squares of both sides over Q, with no allowance.";

struct family {
  matrix<double> S, V, Vw;  // scores, values, witness values (v_0 = w, v_1 = −w, ‖w‖ maximal)
  matrix<double> noise;     // random perturbation direction
};

family make_family(std::uint64_t seed) {
  dyadic_source src(seed ^ 0x0Bu);
  family f;
  f.S = src.matrix_of(n, n);
  f.V = src.matrix_of(n, dv);
  f.Vw = src.matrix_of(n, dv, -2, 2);
  for (int k = 0; k < dv; ++k) { f.Vw(0, k) = 1.5 - k; f.Vw(1, k) = -(1.5 - k); }  // w = (1.5, 0.5, −0.5)
  f.noise = src.matrix_of(n, n);
  return f;
}

// The three perturbations of A, in T.
template <class T>
std::vector<std::pair<std::string, matrix<T>>> perturbations(const matrix<T>& A, const family& f) {
  std::vector<std::pair<std::string, matrix<T>>> out;
  const T small = T(1) / T(1024);
  matrix<T> R = A;
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) R(i, j) = A(i, j) + small * T(f.noise(i, j));
  out.push_back({"random", R});
  // Sparse: keep each row's two largest entries (by index of the approx values) and renormalize.
  matrix<T> Sp = matrix<T>::Zero(A.rows(), A.cols());
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    Eigen::Index b1 = 0, b2 = 1;
    auto val = [&](Eigen::Index j) { return number_traits<T>::to_double(A(i, j)); };
    if (val(b2) > val(b1)) std::swap(b1, b2);
    for (Eigen::Index j = 2; j < A.cols(); ++j) {
      if (val(j) > val(b1)) { b2 = b1; b1 = j; }
      else if (val(j) > val(b2)) b2 = j;
    }
    const T z = A(i, b1) + A(i, b2);
    Sp(i, b1) = A(i, b1) / z;
    Sp(i, b2) = A(i, b2) / z;
  }
  out.push_back({"sparse-top2", Sp});
  // Witness: Â_i = A_i + δ (e_0 − e_1); with v_0 = w, v_1 = −w the bound is attained.
  matrix<T> W = A;
  const T delta = T(1) / T(64);
  for (Eigen::Index i = 0; i < A.rows(); ++i) { W(i, 0) += delta; W(i, 1) -= delta; }
  out.push_back({"equality-witness", W});
  return out;
}

template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const family& f, const run_settings& rs) {
  const T e = eps<T>();
  const matrix<T> A = attention_matrix(from_double_matrix<T>(f.S), mask::none(), rs);
  const T allow_factor = T(2 * (n + dv + 4)) * e;
  for (const auto& [name, Ahat] : perturbations(A, f)) {
    const bool witness = name == "equality-witness";
    const matrix<T> V = from_double_matrix<T>(witness ? f.Vw : f.V);
    auto rows = output_bound_rows(Ahat, A, V);
    if (rs.fault != 0) {  // testing hook: shrink the bound (see run_settings::fault)
      const T shrink = T(1) - number_traits<T>::from_double(rs.fault);
      for (auto& r : rows) { r.rhs_l1 = r.rhs_l1 * shrink; r.rhs_max = r.rhs_max * shrink; }
    }
    // Worst row for each form: the largest lhs − rhs (≤ allowance required), and the
    // smallest slack rhs − lhs reported.
    for (int form = 0; form < 2; ++form) {
      std::size_t worst = 0;
      T worst_margin(0);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const T rhs = form == 0 ? rows[i].rhs_l1 : rows[i].rhs_max;
        const T margin = rows[i].lhs - rhs;
        if (i == 0 || number_traits<T>::to_double(margin) > number_traits<T>::to_double(worst_margin)) {
          worst = i;
          worst_margin = margin;
        }
      }
      const T rhs = form == 0 ? rows[worst].rhs_l1 : rows[worst].rhs_max;
      report::claim_row r = claim_le(form == 0 ? "row-l1-bound" : "entrywise-max-bound",
                                     form == 0 ? "||((Ahat-A)V)_i|| <= ||Ahat_i - A_i||_1 max_j ||v_j|| for every row"
                                               : "||((Ahat-A)V)_i|| <= n max_j |Ahat_ij - A_ij| max_j ||v_j|| for every row",
                                     name + ",worst row " + std::to_string(worst), fmt, rows[worst].lhs, rhs,
                                     T(allow_factor * rhs), "2(n+dv+4) eps * rhs");
      r.note = "slack rhs - lhs = " + str(T(rhs - rows[worst].lhs)) + " on the tightest row";
      rep.claims.push_back(r);
    }
    if (witness) {
      T worst(0);
      for (const auto& r : rows) worst = max_of(worst, abs_of(T(r.lhs - r.rhs_l1)));
      rep.claims.push_back(claim_close("bound-attained", "the witness attains equality: lhs = rhs on every row",
                                       name, fmt, worst, T(0), T(allow_factor * rows[0].rhs_l1), false,
                                       "2(n+dv+4) eps * rhs (max |lhs - rhs| over rows)"));
    }
  }
}

// Exact tier: the same family over Q with rational row-stochastic A, squares compared.
void exact_part(report::check_report& rep, const family& f) {
  using Q = mpq_rational;
  matrix<Q> A(n, n);
  for (int i = 0; i < n; ++i) {
    Q s(0);
    for (int j = 0; j < n; ++j) { A(i, j) = Q(static_cast<int>(f.S(i, j) * 4) + 9); s += A(i, j); }
    for (int j = 0; j < n; ++j) A(i, j) /= s;
  }
  const auto pert = perturbations(A, f);
  for (const auto& [name, Ahat] : pert) {
    const bool witness = name == "equality-witness";
    const matrix<Q> V = from_double_matrix<Q>(witness ? f.Vw : f.V);
    const auto rows = output_bound_rows_squared(Ahat, A, V);
    int ok1 = 0, ok2 = 0, eq = 0;
    for (const auto& r : rows) {
      ok1 += r.lhs <= r.rhs_l1;
      ok2 += r.lhs <= r.rhs_max;
      eq += r.lhs == r.rhs_l1;
    }
    const std::string cnt = std::to_string(n);
    rep.claims.push_back(claim_exact("row-l1-bound", "row-L1 bound holds on every row (squares over Q)", name,
                                     std::to_string(ok1) + "/" + cnt + " rows", cnt + "/" + cnt + " rows", ok1 == n,
                                     "lhs^2 <= rhs^2 in rationals"));
    rep.claims.push_back(claim_exact("entrywise-max-bound", "entrywise-max bound holds on every row (squares over Q)", name,
                                     std::to_string(ok2) + "/" + cnt + " rows", cnt + "/" + cnt + " rows", ok2 == n,
                                     "lhs^2 <= rhs^2 in rationals"));
    if (witness)
      rep.claims.push_back(claim_exact("bound-attained", "the witness attains equality on every row", name,
                                       std::to_string(eq) + "/" + cnt + " rows equal", cnt + "/" + cnt, eq == n,
                                       "lhs^2 == rhs^2 in rationals"));
  }
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  const family f = make_family(rs.seed);
  exact_part(rep, f);
  for_each_format(rs, [&]<class T>(const format_spec& fmt) { evaluate<T>(rep, fmt, f, rs); });
  return rep;
}

}  // namespace

check_entry make_output_bound() {
  return {"output-bound", "Attention error reaches the output: the row-L1 bound", "§11", "proofs/P04-output-bound.md",
          error_model, run};
}

}  // namespace attncert::checks
