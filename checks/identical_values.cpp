// checks/identical_values.cpp — values can remove every apparent distinction (§7).
//
// If every value row equals v, any row-stochastic A returns v at every output position
// (AV = A 1 vᵀ = 1 vᵀ).  More generally rank(AV) ≤ min(rank A, rank V).
// Proof: proofs/P02-identical-values.md.
#include "checks/common.hpp"

namespace attncert::checks {
namespace {

const char* error_model =
    "Softmax entries carry relative error <= (n+3) eps; an output entry sum_j A_ij v_k then differs from v_k "
    "by <= |v_k| (|sum_j A_ij - 1| + n eps) <= (3n+6) eps |v_k|: relative tolerance (3n+6) eps per entry. "
    "The rank inequality is decided exactly over Q on random rational row-stochastic instances.";

constexpr int n = 5;

struct instance {
  std::string name;
  matrix<double> S;  // scores
};

std::vector<instance> instances(std::uint64_t seed) {
  dyadic_source src(seed ^ 0x1Du);
  std::vector<instance> out;
  out.push_back({"random-scores", src.matrix_of(n, n)});
  matrix<double> t(2, 2);
  t << 1, -1, -1, 1;  // the two-token family at a = 1
  out.push_back({"two-token-a=1", t});
  return out;
}

const std::vector<double> v = {0.75, -1.25, 2.5};

matrix<double> identical_values(Eigen::Index rows) {
  matrix<double> V(rows, static_cast<Eigen::Index>(v.size()));
  for (Eigen::Index i = 0; i < rows; ++i)
    for (std::size_t k = 0; k < v.size(); ++k) V(i, static_cast<Eigen::Index>(k)) = v[k];
  return V;
}

// Exact tier: random rational row-stochastic A and random rational V of prescribed rank:
// rank(AV) <= min(rank A, rank V), decided by exact elimination.
void exact_part(report::check_report& rep, const run_settings& rs, std::map<std::string, std::size_t>& rankA,
                std::map<std::string, std::string>& srcA, std::map<std::string, std::string>& srcAV) {
  std::mt19937_64 gen(rs.seed ^ 0xE1u);
  std::uniform_int_distribution<int> pos(1, 9), val(-4, 4), dim(1, 5);
  int holds = 0, total = 0;
  std::string worst;
  for (int t = 0; t < 40; ++t) {
    const int m = dim(gen) + 1, k = dim(gen), d = dim(gen), r = std::uniform_int_distribution<int>(1, std::min(k, d))(gen);
    matrix<mpq_rational> A(m, k);
    for (int i = 0; i < m; ++i) {
      mpq_rational s(0);
      for (int j = 0; j < k; ++j) { A(i, j) = pos(gen); s += A(i, j); }
      for (int j = 0; j < k; ++j) A(i, j) /= s;
    }
    // Sometimes duplicate a row so that rank A < min(m, k).
    if (t % 3 == 0 && m > 1) A.row(m - 1) = A.row(0);
    matrix<mpq_rational> B(k, r), C(r, d);
    for (int i = 0; i < k; ++i) for (int j = 0; j < r; ++j) B(i, j) = val(gen);
    for (int i = 0; i < r; ++i) for (int j = 0; j < d; ++j) C(i, j) = val(gen);
    const matrix<mpq_rational> V = multiply(B, C);
    const std::size_t ra = rank(A), rv = rank(V), rav = rank(multiply(A, V));
    ++total;
    if (rav <= std::min(ra, rv)) ++holds;
    else worst = "instance " + std::to_string(t) + ": rank AV = " + std::to_string(rav);
  }
  rep.claims.push_back(claim_exact("rank-AV-le-min", "rank(AV) <= min(rank A, rank V)", "40 random rational instances",
                                   std::to_string(holds) + "/" + std::to_string(total) + " hold", "all hold",
                                   holds == total, "ranks over Q by Gaussian elimination" + (worst.empty() ? "" : "; " + worst)));
  // With identical values, AV = 1 vᵀ exactly for any row-stochastic A: check over Q.
  {
    matrix<mpq_rational> A(3, 3);
    A << mpq_rational(1, 2), mpq_rational(1, 3), mpq_rational(1, 6), mpq_rational(1, 7), mpq_rational(5, 7), mpq_rational(1, 7),
        mpq_rational(0), mpq_rational(0), mpq_rational(1);
    const matrix<mpq_rational> V = from_double_matrix<mpq_rational>(identical_values(3));
    const matrix<mpq_rational> O = multiply(A, V);
    const bool equal = O == V;
    rep.claims.push_back(claim_exact("identical-values-erase", "every output row equals v (row-stochastic A, all v_j = v)",
                                     "rational 3x3 A", equal ? "AV = 1 v^T" : "AV != 1 v^T", "AV = 1 v^T", equal,
                                     "exact rational product"));
  }
  // Certified rank of each softmax A used below (lower bound from a nonzero minor; upper
  // bound n): exact rank when they meet.
  for (const auto& in : instances(rs.seed)) {
    precision_guard g(rs.certify_bits);
    const auto lb = certified_rank_lower_bound(masked_softmax(from_double_matrix<mpfi_float>(in.S)));
    const auto xr = cross_checked_rank(rep, "A", in.name, lb.rank,
                                       "MPFI minor " + number_traits<mpfi_float>::to_string(lb.minor, 12) + " != 0 at " +
                                           std::to_string(g.bits()) + " bits",
                                       layer_rank(exact_of(in.S), mask::none(), layer_object::attention));
    rankA[in.name] = xr.rank;
    srcA[in.name] = xr.source;
    const auto xo = cross_checked_rank(rep, "AV", in.name, 1, "AV = 1 v^T (P02)",
                                       layer_rank(exact_of(in.S), mask::none(), layer_object::output,
                                                  exact_of(identical_values(in.S.rows()))));
    srcAV[in.name] = xo.source;
  }
}

template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const instance& in, std::size_t rank_A,
              const std::string& src_A, const std::string& src_AV, const run_settings& rs) {
  const T e = eps<T>();
  const Eigen::Index m = in.S.rows();
  const matrix<T> A = attention_matrix(from_double_matrix<T>(in.S), mask::none(), rs);
  const matrix<T> V = from_double_matrix<T>(identical_values(m));
  const matrix<T> O = multiply(A, V);
  // Relative error per entry, worst over the output.
  T worst(0);
  for (Eigen::Index i = 0; i < O.rows(); ++i)
    for (Eigen::Index k = 0; k < O.cols(); ++k) worst = max_of(worst, abs_of(T((O(i, k) - V(0, k)) / V(0, k))));
  rep.claims.push_back(claim_close("outputs-equal-v", "every output row equals v", in.name, fmt, worst, T(0),
                                   T(T(3 * static_cast<int>(m) + 6) * e), false, "(3n+6) eps (worst relative error per entry)"));
  rep.ranks.push_back(measure_rank("A", in.name, fmt, A, rank_A, src_A, rs));
  rep.ranks.push_back(measure_rank("V", in.name, fmt, V, 1, "exact: all rows equal v != 0", rs));
  rep.ranks.push_back(measure_rank("AV", in.name, fmt, O, 1, src_AV, rs));
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  std::map<std::string, std::size_t> rankA;
  std::map<std::string, std::string> srcA, srcAV;
  exact_part(rep, rs, rankA, srcA, srcAV);
  const auto ins = instances(rs.seed);
  for_each_format(rs, [&]<class T>(const format_spec& f) {
    for (const auto& in : ins) evaluate<T>(rep, f, in, rankA[in.name], srcA[in.name], srcAV[in.name], rs);
  });
  return rep;
}

}  // namespace

check_entry make_identical_values() {
  return {"identical-values", "Identical values erase every distinction", "§7", "proofs/P02-identical-values.md",
          error_model, run};
}

}  // namespace attncert::checks
