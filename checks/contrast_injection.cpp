// checks/contrast_injection.cpp — a contrast injected at one position, tracked through attention, the residual
// and an MLP path, and read out at another position (the article's §10; issue 33).
//
// The model: 4 tokens, width 4, one causal head (d = 4, scale 1/2), two blocks without norms
//   x₁ = x + A(c·(xW_Q)(xW_K)ᵀ)·xW_V,   x' = x₁ + relu(x₁W₁)W₂,
// with dyadic weights.  The contrast is added to token 0.  A generic contrast must reach token 3 (through the
// attention only: causality keeps every other path at token 0) and be readable there; a contrast in the common
// left kernel of W_K, W_V and W₁ must stay at token 0, exactly, whatever the scores; a contrast along 1 is what
// every LayerNorm branch removes (and RMSNorm does not).  Proof: proofs/L8-contrast-injection.md.
#include <array>

#include "checks/common.hpp"

namespace attncert::checks {
namespace {

using Q = mpq_rational;
constexpr int n = 4;

const char* error_model =
    "Enclosure tier: both forward passes in MPFI (the softmax certified), the contrast's norms and the readout "
    "escalated until their sign is decided. Format tier: the first block's attention path at token 3, |dO_3|, "
    "computed in the format: q, k, v are exact (dyadic), the scores carry |dS| <= gamma_4 max sum |q||k|/2, so each "
    "attention weight is within rho = expm1(2 dS) + (n+3) eps e^{2 dS} relative (P02), each output entry within (rho + "
    "gamma_n(1 + rho)) max|v| of the exact, and |dO_3| within 4(rho + gamma_n(1 + rho)) max|v| + 2 eps |dO_3| (L8).";

matrix<Q> dyadic(const std::vector<int>& halves) {
  matrix<Q> M(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) M(i, j) = Q(halves[static_cast<std::size_t>(i * n + j)], 2);
  return M;
}

struct block_weights {
  matrix<Q> wq, wk, wv, w1, w2;
};

// Rows 0 and 1 of W_K, W_V and W₁ are equal in both blocks: u = e₀ − e₁ is in their common left kernel.
const std::vector<block_weights>& model() {
  static const std::vector<block_weights> m = {
      {dyadic({1, 0, -1, 2, 0, 2, 1, 0, -2, 1, 0, 1, 1, -1, 2, 0}), dyadic({2, 1, 0, -1, 2, 1, 0, -1, 0, 1, 2, 1, -1, 0, 1, 2}),
       dyadic({1, -1, 2, 0, 1, -1, 2, 0, 0, 2, -1, 1, 2, 0, 1, -1}), dyadic({2, 1, -1, 0, 2, 1, -1, 0, 1, 0, 2, -1, 0, 2, 1, 1}),
       dyadic({1, 0, 1, -1, 0, 1, -1, 2, 2, -1, 0, 1, -1, 1, 1, 0})},
      {dyadic({0, 1, 2, -1, 1, 0, -1, 1, 2, 1, 0, 0, -1, 2, 1, 1}), dyadic({1, 2, -1, 0, 1, 2, -1, 0, 2, 0, 1, 1, 0, -1, 2, 1}),
       dyadic({2, 0, 1, 1, 2, 0, 1, 1, -1, 2, 0, 1, 1, 1, -2, 0}), dyadic({1, 2, 0, -1, 1, 2, 0, -1, 0, 1, 1, 2, 2, -1, 0, 1}),
       dyadic({0, 1, -1, 1, 1, 0, 2, -1, -1, 1, 0, 2, 2, 0, 1, -1})}};
  return m;
}

const matrix<Q>& input_matrix() {
  static const matrix<Q> x = dyadic({2, 0, -1, 1, 0, 2, 1, -2, -2, 1, 2, 0, 1, -2, 0, 2});
  return x;
}
matrix<Q> input() { return input_matrix(); }

struct contrast {
  std::string name;
  std::vector<Q> c;  // added to token 0
};
const contrast generic{"generic c = (1, 1/2, 0, -1/2)", {Q(1), Q(1, 2), Q(0), Q(-1, 2)}};
const contrast kernel{"c = (1/2)(e0 - e1) in the left kernel of W_K, W_V, W_1", {Q(1, 2), Q(-1, 2), Q(0), Q(0)}};

// The paths of one block at every token: attention output o, MLP output m, block output x'.
template <class T>
struct paths {
  matrix<T> o, m, out;
};

template <class T>
T relu(const T& x) {
  return max_of(x, T(0));
}

// One block in T; `attention` maps scores to the attention matrix (certified softmax, or the format's with the fault).
template <class T, class Att>
paths<T> block(const matrix<T>& x, const block_weights& w, Att&& attention) {
  const matrix<T> q = x * from_rational_matrix<T>(w.wq), k = x * from_rational_matrix<T>(w.wk), v = x * from_rational_matrix<T>(w.wv);
  const matrix<T> S = (q * k.transpose()) * from_rational<T>(Q(1, 2));
  paths<T> p;
  p.o = attention(S) * v;
  const matrix<T> x1 = x + p.o;
  matrix<T> h = x1 * from_rational_matrix<T>(w.w1);
  for (Eigen::Index i = 0; i < h.size(); ++i) h.data()[i] = relu(h.data()[i]);
  p.m = h * from_rational_matrix<T>(w.w2);
  p.out = x1 + p.m;
  return p;
}

template <class T>
T row_norm2(const matrix<T>& a, const matrix<T>& b, Eigen::Index i) {
  T s(0);
  for (Eigen::Index j = 0; j < a.cols(); ++j) s += (a(i, j) - b(i, j)) * (a(i, j) - b(i, j));
  return s;
}

// Both forward passes in MPFI at the current precision: per block, the paths with and without the contrast.
std::vector<std::pair<paths<mpfi_float>, paths<mpfi_float>>> enclose(const contrast& ct) {
  matrix<mpfi_float> x = from_rational_matrix<mpfi_float>(input()), y = x;
  for (int j = 0; j < n; ++j) y(0, j) += from_rational<mpfi_float>(ct.c[static_cast<std::size_t>(j)]);
  std::vector<std::pair<paths<mpfi_float>, paths<mpfi_float>>> out;
  auto att = [](const matrix<mpfi_float>& S) { return masked_softmax(S, mask::causal()); };
  for (const auto& w : model()) {
    out.emplace_back(block(x, w, att), block(y, w, att));
    x = out.back().first.out;
    y = out.back().second.out;
  }
  return out;
}

void generic_claims(report::check_report& rep, const run_settings& rs) {
  const char* rule = "MPFI enclosure of both forward passes, escalated until the sign is decided";
  for (std::size_t b = 0; b < model().size(); ++b) {
    const std::string where = generic.name + ", block " + std::to_string(b + 1);
    auto sq = [&](int path, Eigen::Index tok) {
      return certify_sign(
          [&] {
            const auto e = enclose(generic)[b];
            const auto& [a, c] = e;
            return path == 0 ? row_norm2(c.out, a.out, tok) : path == 1 ? row_norm2(c.o, a.o, tok) : row_norm2(c.m, a.m, tok);
          },
          rs.certify_bits, rs.certify_max_bits, true);
    };
    rep.claims.push_back(claim_from_sign("residual-path", "|dx_0|^2 > 0 at the block's output (the residual carries it)", where,
                                         sq(0, 0), "> 0", rule));
    rep.claims.push_back(claim_from_sign("attention-path", "|dO_3|^2 > 0: token 3's attention output sees the contrast", where,
                                         sq(1, 3), "> 0", rule));
    rep.claims.push_back(claim_from_sign("mlp-path", "|dm_3|^2 > 0: token 3's MLP output sees it", where, sq(2, 3), "> 0", rule));
  }
  // The readout r = e_0 at token 3 after the last block, margin 1/1000 (declared).
  const certified_sign read = certify_sign(
      [&] {
        const auto e = enclose(generic).back();
        const mpfi_float d = e.second.out(3, 0) - e.first.out(3, 0);
        return mpfi_float(d * d - mpfi_float(1) / 1000000);
      },
      rs.certify_bits, rs.certify_max_bits, true);
  rep.claims.push_back(claim_from_sign("readout", "(r . dx_3)^2 - 10^-6 > 0 after block 2 (r = e_0; computed shows this margin): token 3 can read the contrast",
                                       generic.name, read, "readable", rule));
}

void kernel_claims(report::check_report& rep, const run_settings& rs) {
  bool zero = true;
  for (const auto& w : model())
    for (const matrix<Q>* W : {&w.wk, &w.wv, &w.w1})
      for (int j = 0; j < n; ++j) {
        Q s(0);
        for (int k = 0; k < n; ++k) s += kernel.c[static_cast<std::size_t>(k)] * (*W)(k, j);
        zero = zero && s == 0;
      }
  rep.claims.push_back(claim_exact("in-left-kernel", "c W_K = c W_V = c W_1 = 0 in both blocks", kernel.name, zero ? "0" : "nonzero",
                                   "0", zero, "rationals"));
  // Causality: token 0 attends to itself alone, so its query does not matter; the keys and values of token 0 and
  // the MLP's input do not change: the contrast stays c at token 0 and never reaches token 3 (L8).
  const certified_sign none = certify_sign(
      [&] {
        const auto e = enclose(kernel).back();
        mpfi_float worst = row_norm2(e.second.out, e.first.out, 3);
        return mpfi_float(mpfi_float(std::ldexp(1.0, -200)) - worst);
      },
      rs.certify_bits, rs.certify_max_bits, true);
  rep.claims.push_back(claim_from_sign("no-readout", "2^-200 - |dx_3|^2 > 0 after block 2 (computed shows this margin): token 3 cannot read this contrast", kernel.name,
                                       none, "unreadable", "MPFI: |dx_3|^2 is exactly 0 (L8); its enclosure certified below 2^-200"));
}

// A contrast along 1 under the norms: LayerNorm's centring removes it exactly; RMSNorm's scale changes.
void norm_claims(report::check_report& rep, const run_settings& rs) {
  const matrix<Q> x = input();
  bool same = true;
  Q mx(0), my(0);
  for (int j = 0; j < n; ++j) mx += x(0, j), my += x(0, j) + Q(1, 2);
  for (int j = 0; j < n; ++j) same = same && (x(0, j) - mx / n) == (x(0, j) + Q(1, 2) - my / n);
  rep.claims.push_back(claim_exact("layernorm-invisible", "centre(x_0 + 1/2) = centre(x_0): every LayerNorm branch sees no contrast",
                                   "c = (1/2) 1 at token 0", same ? "equal" : "differ", "equal", same, "rationals"));
  Q sx(0), sy(0);
  for (int j = 0; j < n; ++j) sx += x(0, j) * x(0, j), sy += (x(0, j) + Q(1, 2)) * (x(0, j) + Q(1, 2));
  rep.claims.push_back(claim_exact("rmsnorm-visible", "mean((x_0 + 1/2)^2) != mean(x_0^2): RMSNorm's branch sees it",
                                   "c = (1/2) 1 at token 0", sx == sy ? "equal" : "differ", "differ", sx != sy, "rationals"));
  (void)rs;
}

// In a format: the first block's attention path at token 3, against the certified value.
template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const run_settings& rs) {
  matrix<T> x = from_rational_matrix<T>(input()), y = x;
  for (int j = 0; j < n; ++j) y(0, j) += from_rational<T>(generic.c[static_cast<std::size_t>(j)]);
  auto att = [&](const matrix<T>& S) { return attention_matrix(S, mask::causal(), rs); };
  const auto& w = model()[0];
  const T d2 = row_norm2(block(y, w, att).o, block(x, w, att).o, 3);
  // The tolerance from exact data, before comparing: dS and max|v| over both inputs (L8).
  matrix<Q> shifted = input();
  for (int j = 0; j < n; ++j) shifted(0, j) += generic.c[static_cast<std::size_t>(j)];
  Q smax(0), vmax(0);
  for (const matrix<Q>* in : std::array<const matrix<Q>*, 2>{&input_matrix(), &shifted}) {
    const matrix<Q> q = *in * w.wq, k = *in * w.wk, v = *in * w.wv;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        Q s(0);
        for (int l = 0; l < n; ++l) s += abs(Q(q(i, l) * k(j, l)));
        smax = std::max(smax, Q(s / 2));
        vmax = std::max(vmax, Q(abs(v(i, j))));
      }
  }
  const mpfr_float e = ldexp(mpfr_float(1), 1 - static_cast<int>(number_traits<T>::bits() ? number_traits<T>::bits() : 64));
  auto gamma = [&](int k) { return mpfr_float(k * e / (1 - k * e)); };
  // Each weight moves by a factor in [e^{-2dS}, e^{2dS}] under the score errors, and by (1 ± (n+3)eps) under the
  // softmax's own rounding (P02): rho = e^{2dS}(1 + (n+3)eps) − 1 = expm1(2dS) + (n+3)eps e^{2dS}, without
  // cancellation (MPFR's expm1 and exp are correctly rounded: each enlarged by one unit of the working precision).
  const mpfr_float dS = gamma(4) * mpfr_float(smax);
  const mpfr_float unit = ldexp(mpfr_float(1), 1 - static_cast<int>(mpfr_get_prec(dS.backend().data())));
  const mpfr_float rho = expm1(2 * dS) * (1 + unit) + (n + 3) * e * exp(2 * dS) * (1 + unit);
  const mpfr_float abs_tol = 4 * (rho + gamma(n) * (1 + rho)) * mpfr_float(vmax);
  const certified_value truth = certify_value(
      [&] {
        const auto p = enclose(generic)[0];
        return row_norm2(p.second.o, p.first.o, 3);
      },
      rs.certify_bits, rs.certify_max_bits, certify_width_for<T>());
  mpfr_float d_lo;
  {
    precision_guard g(truth.bits);
    d_lo = sqrt(lower_of(truth.enclosure));
  }
  // |d^ - d| <= tau = abs_tol + 2 eps d gives |d^2 - d^2| <= tau (2d + tau); the squares and their sum: gamma_5.
  const mpfr_float rel = abs_tol / d_lo + 2 * e, rel2 = 2 * rel + rel * rel + gamma(5) * (1 + rel) * (1 + rel);
  rep.claims.push_back(claim_certified("attention-path-in-format", "|dO_3|^2 of block 1 computed in the format", generic.name, fmt, d2,
                                       truth, rel2, "2r + r^2 + gamma_5(1 + r)^2, r = 4(rho + gamma_n(1 + rho)) max|v| / |dO_3| + 2 eps (L8)"));
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  generic_claims(rep, rs);
  kernel_claims(rep, rs);
  norm_claims(rep, rs);
  for_each_format(rs, [&]<class T>(const format_spec& f) { evaluate<T>(rep, f, rs); });
  return rep;
}

}  // namespace

check_entry make_contrast_injection() {
  return {"contrast-injection", "Does a contrast injected at one token reach another's readout?", "§10",
          "proofs/L8-contrast-injection.md", error_model, run};
}

}  // namespace attncert::checks
