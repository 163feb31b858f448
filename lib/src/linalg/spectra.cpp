// The heavy parts of linalg/spectra.hpp, compiled once: Eigen's JacobiSVD over mpfr_float and the
// determinant of every approx type (approx tier: no error claim; see the header).
#include "attncert/linalg/spectra.hpp"

#include "attncert/number/precision_guard.hpp"

#include <Eigen/Eigenvalues>
#include <Eigen/SVD>
#include <algorithm>

namespace attncert {

bool approx_jacobi_svd(const matrix<mpfr_float>& A, std::vector<mpfr_float>& sigma, matrix<mpfr_float>* U,
                       matrix<mpfr_float>* V) {
  unsigned options = 0;
  if (U != nullptr) options |= Eigen::ComputeFullU;
  if (V != nullptr) options |= Eigen::ComputeFullV;
  Eigen::JacobiSVD<matrix<mpfr_float>> svd(A, options);
  const auto& s = svd.singularValues();
  sigma.assign(s.data(), s.data() + s.size());
  if (svd.info() != Eigen::Success) return false;
  if (U != nullptr) *U = svd.matrixU();
  if (V != nullptr) *V = svd.matrixV();
  return true;
}

namespace detail {

namespace {
// A column-major m×n matrix of mpfr_t at one precision (raw MPFR: the Householder loops below run
// in place, without the temporaries of Boost's operators).
struct mpfr_block {
  long m = 0, n = 0;
  std::vector<__mpfr_struct> a;  // (mpfr_t is an array of one __mpfr_struct)
  mpfr_block(long rows, long cols, mpfr_prec_t prec) : m(rows), n(cols), a(static_cast<std::size_t>(rows * cols)) {
    for (auto& x : a) mpfr_init2(&x, prec);
  }
  ~mpfr_block() {
    for (auto& x : a) mpfr_clear(&x);
  }
  mpfr_block(const mpfr_block&) = delete;
  mpfr_block& operator=(const mpfr_block&) = delete;
  mpfr_ptr at(long i, long j) { return &a[static_cast<std::size_t>(i + j * m)]; }
};

// Householder reflector of x = (x_0 … x_{k−1}) (pointers into the block): on return x holds v with
// H = I − (2/vᵀv) v vᵀ and H x = beta e_0; `two_over` = 2/vᵀv (0 when x = 0: H = I, beta = 0).
void householder(std::vector<mpfr_ptr>& x, mpfr_t beta, mpfr_t two_over, mpfr_t t) {
  mpfr_set_zero(t, 1);
  for (mpfr_ptr xi : x) mpfr_fma(t, xi, xi, t, MPFR_RNDN);  // ‖x‖²
  if (mpfr_zero_p(t)) {
    mpfr_set_zero(beta, 1);
    mpfr_set_zero(two_over, 1);
    return;
  }
  mpfr_sqrt(beta, t, MPFR_RNDN);
  if (mpfr_sgn(x[0]) > 0) mpfr_neg(beta, beta, MPFR_RNDN);  // beta = −sign(x_0)‖x‖: no cancellation in v_0
  // vᵀv = ‖x‖² − x_0² + (x_0 − beta)² = 2‖x‖(‖x‖ + |x_0|) = 2·|beta|·(|beta| + |x_0|)
  mpfr_abs(two_over, x[0], MPFR_RNDN);
  mpfr_abs(t, beta, MPFR_RNDN);
  mpfr_add(two_over, two_over, t, MPFR_RNDN);  // |x_0| + |beta|
  mpfr_mul(two_over, two_over, t, MPFR_RNDN);
  mpfr_ui_div(two_over, 1, two_over, MPFR_RNDN);  // 2/vᵀv = 1/(|beta|(|beta| + |x_0|))
  mpfr_sub(x[0], x[0], beta, MPFR_RNDN);
}
}  // namespace

std::vector<mpfr_float> approx_singular_values_bidiagonal(const matrix<mpfr_float>& A0) {
  std::vector<mpfr_float> out;
  if (A0.size() == 0) return out;
  const bool tr = A0.rows() < A0.cols();  // work on the tall one: same singular values
  const long m = tr ? A0.cols() : A0.rows(), n = tr ? A0.rows() : A0.cols();
  mpfr_prec_t prec = static_cast<mpfr_prec_t>(current_mpfr_bits());
  for (Eigen::Index i = 0; i < A0.size(); ++i) prec = std::max(prec, mpfr_get_prec(A0.data()[i].backend().data()));
  mpfr_block B(m, n, prec);
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) mpfr_set(B.at(i, j), (tr ? A0(j, i) : A0(i, j)).backend().data(), MPFR_RNDN);
  mpfr_t beta, two_over, t, w;
  mpfr_inits2(prec, beta, two_over, t, w, static_cast<mpfr_ptr>(nullptr));
  // Golub–Kahan bidiagonalization A = U B Vᵀ (U, V not formed): d_k on the diagonal, e_k above it.
  std::vector<mpfr_float> d(static_cast<std::size_t>(n)), e(static_cast<std::size_t>(n > 1 ? n - 1 : 0));
  std::vector<mpfr_ptr> x;
  for (long k = 0; k < n; ++k) {
    x.clear();
    for (long i = k; i < m; ++i) x.push_back(B.at(i, k));
    householder(x, beta, two_over, t);
    mpfr_set_prec(d[static_cast<std::size_t>(k)].backend().data(), prec);  // bits (Boost's precision() takes digits)
    mpfr_set(d[static_cast<std::size_t>(k)].backend().data(), beta, MPFR_RNDN);
    if (!mpfr_zero_p(two_over))
      for (long j = k + 1; j < n; ++j) {  // column j −= (2/vᵀv)(vᵀ col j) v
        mpfr_set_zero(w, 1);
        for (long i = k; i < m; ++i) mpfr_fma(w, B.at(i, k), B.at(i, j), w, MPFR_RNDN);
        mpfr_mul(w, w, two_over, MPFR_RNDN);
        mpfr_neg(w, w, MPFR_RNDN);
        for (long i = k; i < m; ++i) mpfr_fma(B.at(i, j), w, B.at(i, k), B.at(i, j), MPFR_RNDN);
      }
    if (k + 1 >= n) break;
    x.clear();
    for (long j = k + 1; j < n; ++j) x.push_back(B.at(k, j));
    householder(x, beta, two_over, t);
    mpfr_set_prec(e[static_cast<std::size_t>(k)].backend().data(), prec);
    mpfr_set(e[static_cast<std::size_t>(k)].backend().data(), beta, MPFR_RNDN);
    if (!mpfr_zero_p(two_over))
      for (long i = k + 1; i < m; ++i) {  // row i −= (2/vᵀv)(row i · v) vᵀ
        mpfr_set_zero(w, 1);
        for (long j = k + 1; j < n; ++j) mpfr_fma(w, B.at(k, j), B.at(i, j), w, MPFR_RNDN);
        mpfr_mul(w, w, two_over, MPFR_RNDN);
        mpfr_neg(w, w, MPFR_RNDN);
        for (long j = k + 1; j < n; ++j) mpfr_fma(B.at(i, j), w, B.at(k, j), B.at(i, j), MPFR_RNDN);
      }
  }
  mpfr_clears(beta, two_over, t, w, static_cast<mpfr_ptr>(nullptr));
  // The singular values of B are the nonnegative eigenvalues of the 2n×2n Golub–Kahan tridiagonal
  // (zero diagonal, off-diagonal d_0, e_0, d_1, …, d_{n−1}): Eigen's symmetric tridiagonal QR, values only.
  using vec = Eigen::Matrix<mpfr_float, Eigen::Dynamic, 1>;
  vec diag(2 * n), sub(2 * n - 1);
  for (long k = 0; k < 2 * n; ++k) diag(k) = mpfr_float(0);
  for (long k = 0; k < n; ++k) {
    sub(2 * k) = d[static_cast<std::size_t>(k)];
    if (k + 1 < n) sub(2 * k + 1) = e[static_cast<std::size_t>(k)];
  }
  Eigen::SelfAdjointEigenSolver<matrix<mpfr_float>> es;
  es.computeFromTridiagonal(diag, sub, Eigen::EigenvaluesOnly);
  const auto& ev = es.eigenvalues();  // increasing: the n largest are σ_1 … σ_n (±0 for zero ones)
  for (long k = 0; k < n; ++k) out.push_back(abs(ev(2 * n - 1 - k)));
  std::sort(out.begin(), out.end(), [](const mpfr_float& a, const mpfr_float& b) { return b < a; });
  return out;
}

std::vector<mpfr_float> approx_singular_values_jacobi(const matrix<mpfr_float>& A) {
  std::vector<mpfr_float> out;
  if (A.size() == 0) return out;
  approx_jacobi_svd(A, out, nullptr, nullptr);
  std::sort(out.begin(), out.end(), [](const mpfr_float& a, const mpfr_float& b) { return b < a; });
  return out;
}
}  // namespace detail

// Gaussian elimination with partial pivoting (the largest |entry| of the column, the first of
// equal ones), written out as matrix.hpp's `multiply` is: every operation in T, in a fixed order.
// (Eigen's PartialPivLU computes the same factorization in exact arithmetic, with another order of
// rounded operations; instantiated for five number types it was most of this unit's compile time,
// for a function only the tests call.  The tests hold it to the same tolerances as before.)
template <class T>
T approx_determinant(const matrix<T>& A) {
  static_assert(tier_of<T> == tier::approx, "approx_determinant needs an approx type");
  if (A.rows() != A.cols()) throw input_error("determinant of a non-square matrix");
  const Eigen::Index n = A.rows();
  if (n == 0) return T(1);
  if (n == 2) return A(0, 0) * A(1, 1) - A(0, 1) * A(1, 0);
  matrix<T> U = A;
  T det(1);
  for (Eigen::Index k = 0; k < n; ++k) {
    Eigen::Index p = k;
    for (Eigen::Index i = k + 1; i < n; ++i)
      if (abs_of(U(i, k)) > abs_of(U(p, k))) p = i;
    if (p != k) {
      U.row(p).swap(U.row(k));
      det = -det;
    }
    det = det * U(k, k);
    if (U(k, k) == T(0)) return det;  // singular: a zero pivot column
    for (Eigen::Index i = k + 1; i < n; ++i) {
      const T f = U(i, k) / U(k, k);
      for (Eigen::Index j = k + 1; j < n; ++j) U(i, j) = U(i, j) - f * U(k, j);
    }
  }
  return det;
}

template float approx_determinant<float>(const matrix<float>&);
template double approx_determinant<double>(const matrix<double>&);
template binary16 approx_determinant<binary16>(const matrix<binary16>&);
template bfloat16 approx_determinant<bfloat16>(const matrix<bfloat16>&);
template mpfr_float approx_determinant<mpfr_float>(const matrix<mpfr_float>&);

}  // namespace attncert
