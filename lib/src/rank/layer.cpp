// The layer model: see attncert/rank/layer.hpp.
#include "attncert/rank/layer.hpp"

#include <boost/multiprecision/integer.hpp>

namespace attncert {

layer_object parse_layer_object(const std::string& s) {
  if (s == "scores") return layer_object::scores;
  if (s == "attention") return layer_object::attention;
  if (s == "output") return layer_object::output;
  if (s == "residual") return layer_object::residual;
  throw input_error("unknown object '" + s + "' (expected scores, attention, output or residual)");
}

const char* to_string(layer_object o) {
  switch (o) {
    case layer_object::scores: return "scores";
    case layer_object::attention: return "attention";
    case layer_object::output: return "output";
    default: return "residual";
  }
}

void layer_model::validate() const { validate_layer_shapes(B.rows(), B.cols(), M, object, V, X); }

void validate_layer_shapes(Eigen::Index m, Eigen::Index n, const mask& M, layer_object object,
                           const std::optional<matrix<mpq_rational>>& V,
                           const std::optional<matrix<mpq_rational>>& X) {
  if (object == layer_object::scores) return;  // the rank of B as a matrix: any shape
  M.check_shape(m, n);
  if ((object == layer_object::output || object == layer_object::residual) && !V)
    throw input_error(std::string("the ") + to_string(object) + " rank needs values V");
  if (V && V->rows() != n)
    throw input_error("V has " + std::to_string(V->rows()) + " rows but there are " + std::to_string(n) + " keys");
  if (object == layer_object::residual) {
    if (!X) throw input_error("the residual rank needs X");
    if (X->rows() != m || X->cols() != V->cols())
      throw input_error("X must have shape (" + std::to_string(m) + ", " + std::to_string(V->cols()) + ")");
  }
  for (Eigen::Index i = 0; i < m; ++i) {
    bool any = false;
    for (Eigen::Index j = 0; j < n && !any; ++j) any = M.allows(i, j);
    if (!any) throw input_error("row " + std::to_string(i) + " is fully masked: softmax is undefined");
  }
}

mpz_int lcm_of_denominators(const matrix<mpq_rational>& A, const mask* support) {
  mpz_int l = 1;
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j)
      if (!support || support->allows(i, j)) l = boost::multiprecision::lcm(l, mpz_int(denominator(A(i, j))));
  return l;
}

mpz_int layer_exponents::gcd() const {
  mpz_int G = 0;
  for (std::size_t i = 0; i < e.size(); ++i)
    for (std::size_t j = 0; j < e[i].size(); ++j)
      if (support[i][j] && e[i][j] != 0) G = G == 0 ? e[i][j] : mpz_int(boost::multiprecision::gcd(G, e[i][j]));
  return G;
}

void layer_exponents::divide_by(const mpz_int& G) {
  for (std::size_t i = 0; i < e.size(); ++i)
    for (std::size_t j = 0; j < e[i].size(); ++j)
      if (support[i][j]) e[i][j] /= G;
}

mpz_int layer_exponents::max_exponent() const {
  mpz_int hi = 0;
  for (std::size_t i = 0; i < e.size(); ++i)
    for (std::size_t j = 0; j < e[i].size(); ++j)
      if (support[i][j] && e[i][j] > hi) hi = e[i][j];
  return hi;
}

layer_exponents row_normalized_exponents(const layer_model& layer) {
  const auto m = static_cast<std::size_t>(layer.B.rows()), n = static_cast<std::size_t>(layer.B.cols());
  layer_exponents ex;
  ex.q = lcm_of_denominators(layer.B, &layer.M);
  ex.e.assign(m, std::vector<mpz_int>(n));
  ex.support.assign(m, std::vector<bool>(n, false));
  const mpq_rational q(ex.q);
  for (std::size_t i = 0; i < m; ++i) {
    bool any = false;
    mpz_int lo = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const auto ii = static_cast<Eigen::Index>(i), jj = static_cast<Eigen::Index>(j);
      if (!layer.M.allows(ii, jj)) continue;
      ex.support[i][j] = true;
      ex.e[i][j] = numerator(mpq_rational(layer.B(ii, jj) * q));  // an integer: q clears the denominator
      if (!any || ex.e[i][j] < lo) lo = ex.e[i][j];
      any = true;
    }
    if (!any) throw input_error("row " + std::to_string(i) + " is fully masked: softmax is undefined");
    for (std::size_t j = 0; j < n; ++j)
      if (ex.support[i][j]) ex.e[i][j] -= lo;
  }
  return ex;
}

namespace {

void add_term(sparse_poly& p, const mpz_int& exponent, const mpz_int& coefficient) {
  if (coefficient == 0) return;
  auto& slot = p[exponent];
  slot += coefficient;
  if (slot == 0) p.erase(exponent);
}

}  // namespace

layer_polynomial_matrix build_layer_matrix(const layer_model& layer, const layer_exponents& ex) {
  if (layer.object == layer_object::scores) throw input_error("the scores object has no exponential matrix M(u)");
  const auto m = static_cast<std::size_t>(layer.B.rows()), n = static_cast<std::size_t>(layer.B.cols());
  layer_polynomial_matrix P;
  P.rows = m;
  if (layer.object == layer_object::attention) {
    P.cols = n;
    P.entries.assign(m * n, {});
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j)
        if (ex.on(i, j)) add_term(P.entries[i * n + j], ex.e[i][j], 1);
    return P;
  }
  const matrix<mpq_rational>& V = *layer.V;
  const bool residual = layer.object == layer_object::residual;  // X enters only the residual
  P.value_scale = lcm_of_denominators(V);
  if (residual) P.value_scale = boost::multiprecision::lcm(P.value_scale, lcm_of_denominators(*layer.X));
  const mpq_rational L(P.value_scale);
  P.cols = static_cast<std::size_t>(V.cols());
  P.entries.assign(m * P.cols, {});
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t k = 0; k < P.cols; ++k) {
      const auto ii = static_cast<Eigen::Index>(i), kk = static_cast<Eigen::Index>(k);
      for (std::size_t j = 0; j < n; ++j) {
        if (!ex.on(i, j)) continue;
        mpq_rational c = V(static_cast<Eigen::Index>(j), kk);
        if (residual) c += (*layer.X)(ii, kk);  // (D X + E V)_ik = Σ_j u^{e_ij} (X_ik + V_jk)
        add_term(P.entries[i * P.cols + k], ex.e[i][j], numerator(mpq_rational(c * L)));
      }
    }
  return P;
}

}  // namespace attncert
