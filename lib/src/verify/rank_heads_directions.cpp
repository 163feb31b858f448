// rank_heads_hardmax_directions certificates (proofs/L4-rank-heads-tradeoff.md, part E): every hardmax layer of
// rank-one heads with the claim's query directions a_1 ... a_H in ℝ^d has MSE ≥ the relaxed error ½(1 − tr(K⁻¹B)).
// The checker re-derives an enclosure of the relaxed error, each step by another method than the prover's:
//   distinct  a row parallel or antiparallel to an earlier kept one is dropped (its sign profile is ± a kept one's, so
//            the relaxed error is unchanged), decided exactly: ⟨a, b⟩² = |a|²|b|², with every row first scaled by the
//            lcm of its denominators to an integer vector (t below is invariant under that scaling; the prover works in ℚ);
//   t_hg     ⟨a_h, a_g⟩/√(|a_h|²|a_g|²) in MPFI from the exact integers (one square root of the exact product),
//            intersected with [−1, 1];
//   K_hg     (2/π) asin t_hg, K_hh = 1;
//   B_hg     Σ_{ℓ odd ≤ L} E_ℓ² P_ℓ(t)/N(d, ℓ) from ONE exact rational polynomial R(t) = Σ e_ℓ² P_ℓ(t)/N(d, ℓ), its
//            monomial coefficients from the explicit Gegenbauer sum C_ℓ^α(t) = Σ_k (−1)^k (α)_{ℓ−k}/(k!(ℓ−2k)!) (2t)^{ℓ−2k},
//            α = (d − 2)/2, P_ℓ = C_ℓ^α/C_ℓ^α(1), C_ℓ^α(1) = (2α)_ℓ/ℓ! (each P_ℓ(1) = 1 checked exactly), evaluated by
//            Horner in t² (the prover evaluates each P_ℓ(t) in MPFI by the three-term recurrence and sums with MPFI
//            weights); e_ℓ = E_ℓ for odd d and π²E_ℓ for even d (energy()), so B_hg = R(t) or R(t)/π⁴; plus ±τ,
//            τ = T²/N(d, L + 2), T = 1 − Σ_{ℓ ≤ L} E_ℓ (|P_ℓ| ≤ 1, E_ℓ ≤ T beyond L, N increasing in ℓ and E_ℓ = 0 for even ℓ;
//            the prover divides by N(d, L + 1));
//   B_hh     M_d = a + b/π², exact from the Fourier expansion of cos^{d−2} (arcsin_moment_fourier; the prover integrates by
//            parts);
//   solve    interval Cholesky K = LLᵀ (every pivot certainly positive), W = L⁻¹ by forward substitution, and
//            tr(K⁻¹B) = tr(WᵀWB) = Σ_k Σ_{i,j ≤ k} W_ki B_ij W_kj, all in MPFI: O(H³) (the prover inverts K approximately in
//            binary64 and bounds the residual ‖KX − I‖_F);
//   MSE      ½(1 − tr(K⁻¹B)).
// Precision starts at 128 bits and doubles up to the cap while a pivot is not certainly positive or the verdict is not
// decided; when doubling the precision narrows the enclosure by less than 10% (its width is then the truncation term τ,
// not rounding), the check ends as beyond_cap at once.  The stated enclosure must meet the re-derived one; the claim holds
// when value ≤ the re-derived lower end (a lower bound: a value above the upper end is no refutation, and no REFUTED
// certificate exists for this quantity).
#include "checker.hpp"

namespace attncert::verify::checker {

namespace {


// Entry (i, j), j ≤ i, of a lower triangle stored row by row.
std::size_t tri(long i, long j) { return static_cast<std::size_t>(i * (i + 1) / 2 + j); }

// What the enclosure is computed from: all exact.
struct exact_data {
  long d = 0, L = 0, n = 0;  // dimension, series degree, kept directions
  std::vector<Z> gram;       // lower triangle of the kept (integer-scaled) directions' Gram matrix
  qpoly R;                   // R's coefficient of t^{2j+1} at index j
  Q energy_sum;              // Σ_{ℓ ≤ L} e_ℓ
  Z tail_N;                  // N(d, L + 2)
  Q Ma, Mb;                  // M_d = Ma + Mb π⁻²
};

// R(t) = Σ_{ℓ odd ≤ L} e_ℓ² P_ℓ(t)/N(d, ℓ) from the explicit Gegenbauer sums; also Σ e_ℓ.
void series_polynomial(exact_data& ex) {
  const Q alpha(ex.d - 2, 2);
  ex.R.assign(static_cast<std::size_t>((ex.L + 1) / 2), Q(0));
  ex.energy_sum = 0;
  for (long l = 1; l <= ex.L; l += 2) {
    poll();
    const Q e = energy(ex.d, l);
    ex.energy_sum += e;
    const Q w = e * e / Q(dimension(ex.d, l));
    // c_0 = (α)_ℓ 2^ℓ/(2α)_ℓ, the coefficient of t^ℓ in P_ℓ; c_k/c_{k−1} = −(ℓ−2k+2)(ℓ−2k+1)/(4k(α+ℓ−k)).
    Q c = 1;
    for (long i = 0; i < l; ++i) c *= Q(2) * (alpha + Q(i)) / (Q(2) * alpha + Q(i));
    Q at_one = 0;
    for (long k = 0; 2 * k <= l; ++k) {
      if (k > 0) c = -c * Q((l - 2 * k + 2) * (l - 2 * k + 1)) / (Q(4 * k) * (alpha + Q(l - k)));
      at_one += c;
      ex.R[static_cast<std::size_t>((l - 2 * k - 1) / 2)] += w * c;
    }
    check(at_one == 1, "/rank_heads_hardmax_directions: internal: the Gegenbauer sum of degree " + std::to_string(l) + " is not 1 at t = 1");
  }
}

// An MPFR end as text, rounded outward ('D' down, 'U' up).
std::string end_text(mpfr_srcptr x, bool down) {
  char* s = nullptr;
  if (mpfr_asprintf(&s, down ? "%.12RDg" : "%.12RUg", x) < 0 || s == nullptr) return "?";
  std::string out(s);
  mpfr_free_str(s);
  return out;
}

// K (lower triangle: 2 asin(t)/π, K_hh = 1) and B (R(t) or R(t)/π⁴ ± τ, B_hh = M_d) in MPFI at `bits`, from the exact data.
void enclose_kernels(const exact_data& ex, mpfr_prec_t bits, interval_pool& K, interval_pool& B) {
  const long n = ex.n;
  iv pi(bits), pi2(bits), scaleB(bits), Md(bits), T(bits), tail(bits), t(bits), u(bits), acc(bits), tmp(bits), s(bits);
  mpfi_const_pi(pi.x);
  mpfi_sqr(pi2.x, pi.x);
  // M_d = Ma + Mb/π²
  mpfi_q_div(Md.x, ex.Mb.backend().data(), pi2.x);
  mpfi_add_q(Md.x, Md.x, ex.Ma.backend().data());
  // T = 1 − Σ E_ℓ; B = R or R/π⁴
  mpfi_set_q(T.x, ex.energy_sum.backend().data());
  mpfi_set_ui(scaleB.x, 1);
  if (ex.d % 2 == 0) {
    mpfi_div(T.x, T.x, pi2.x);
    mpfi_sqr(scaleB.x, pi2.x);
    mpfi_ui_div(scaleB.x, 1, scaleB.x);
  }
  mpfi_ui_sub(T.x, 1, T.x);
  // ±τ, τ ≥ T²/N(d, L + 2)
  mpfi_sqr(tmp.x, T.x);
  mpfi_div_z(tmp.x, tmp.x, ex.tail_N.backend().data());
  mpfi_interv_fr(tail.x, &tmp.x->right, &tmp.x->right);
  mpfi_neg(s.x, tail.x);
  mpfi_put(tail.x, s.x);
  // R's coefficients
  const std::size_t m = ex.R.size();
  interval_pool coef(m, bits);
  for (std::size_t j = 0; j < m; ++j) mpfi_set_q(coef[j], ex.R[j].backend().data());

  // K and B (lower triangles)
  Z q;
  for (long i = 0; i < n; ++i) {
    poll();
    mpfi_set_ui(K[tri(i, i)], 1);
    mpfi_set(B[tri(i, i)], Md.x);
    for (long j = 0; j < i; ++j) {
      q = ex.gram[tri(i, i)] * ex.gram[tri(j, j)];
      mpfi_set_z(tmp.x, q.backend().data());
      mpfi_sqrt(tmp.x, tmp.x);
      mpfi_z_div(t.x, ex.gram[tri(i, j)].backend().data(), tmp.x);
      if (mpfr_cmp_si(&t.x->right, 1) > 0) mpfr_set_si(&t.x->right, 1, MPFR_RNDU);
      if (mpfr_cmp_si(&t.x->left, -1) < 0) mpfr_set_si(&t.x->left, -1, MPFR_RNDD);
      mpfi_ptr k = K[tri(i, j)];
      mpfi_asin(k, t.x);
      mpfi_mul_2ui(k, k, 1);
      mpfi_div(k, k, pi.x);
      // R(t) = t·Σ_j r_j (t²)^j by Horner
      mpfi_sqr(u.x, t.x);
      mpfi_set(acc.x, coef[m - 1]);
      for (std::size_t r = m - 1; r-- > 0;) {
        mpfi_mul(acc.x, acc.x, u.x);
        mpfi_add(acc.x, acc.x, coef[r]);
      }
      mpfi_ptr b = B[tri(i, j)];
      mpfi_mul(b, acc.x, t.x);
      mpfi_mul(b, b, scaleB.x);
      mpfi_add(b, b, tail.x);
    }
  }
}

// ½(1 − tr(K⁻¹B)) by interval Cholesky of K (in place) into `out`; false when a pivot is not certainly positive.
bool cholesky_relaxed_mse(long n, mpfr_prec_t bits, interval_pool& K, interval_pool& B, mpfi_ptr out) {
  iv s(bits), tmp(bits);
  const std::size_t size = tri(n, 0);
  // K = LLᵀ in place (L over K's lower triangle)
  for (long j = 0; j < n; ++j) {
    poll();
    mpfi_set(s.x, K[tri(j, j)]);
    for (long k = 0; k < j; ++k) {
      mpfi_sqr(tmp.x, K[tri(j, k)]);
      mpfi_sub(s.x, s.x, tmp.x);
    }
    if (mpfr_sgn(&s.x->left) <= 0) return false;  // not certainly positive
    mpfi_sqrt(K[tri(j, j)], s.x);
    for (long i = j + 1; i < n; ++i) {
      mpfi_set(s.x, K[tri(i, j)]);
      for (long k = 0; k < j; ++k) {
        mpfi_mul(tmp.x, K[tri(i, k)], K[tri(j, k)]);
        mpfi_sub(s.x, s.x, tmp.x);
      }
      mpfi_div(K[tri(i, j)], s.x, K[tri(j, j)]);
    }
  }
  // W = L⁻¹ (lower triangular): W_ii = 1/L_ii, W_ij = −(Σ_{j ≤ k < i} L_ik W_kj)/L_ii
  interval_pool W(size, bits);
  for (long i = 0; i < n; ++i) {
    poll();
    mpfi_ui_div(W[tri(i, i)], 1, K[tri(i, i)]);
    for (long j = 0; j < i; ++j) {
      mpfi_set_ui(s.x, 0);
      for (long k = j; k < i; ++k) {
        mpfi_mul(tmp.x, K[tri(i, k)], W[tri(k, j)]);
        mpfi_add(s.x, s.x, tmp.x);
      }
      mpfi_div(W[tri(i, j)], s.x, K[tri(i, i)]);
      mpfi_neg(W[tri(i, j)], W[tri(i, j)]);
    }
  }
  // tr(WᵀWB) = Σ_k w_kᵀ B w_k, w_k = row k of W: Σ_{i ≤ k} (W_ki² B_ii + 2 W_ki Σ_{j < i} B_ij W_kj)
  iv tr(bits), inner(bits);
  mpfi_set_ui(tr.x, 0);
  for (long k = 0; k < n; ++k) {
    poll();
    for (long i = 0; i <= k; ++i) {
      mpfi_set_ui(inner.x, 0);
      for (long j = 0; j < i; ++j) {
        mpfi_mul(tmp.x, B[tri(i, j)], W[tri(k, j)]);
        mpfi_add(inner.x, inner.x, tmp.x);
      }
      mpfi_mul_2ui(inner.x, inner.x, 1);
      mpfi_mul(inner.x, inner.x, W[tri(k, i)]);
      mpfi_add(tr.x, tr.x, inner.x);
      mpfi_sqr(tmp.x, W[tri(k, i)]);
      mpfi_mul(tmp.x, tmp.x, B[tri(i, i)]);
      mpfi_add(tr.x, tr.x, tmp.x);
    }
  }
  mpfi_ui_sub(out, 1, tr.x);
  mpfi_div_2ui(out, out, 1);
  return true;
}

// out ∋ ½(1 − tr(K⁻¹B)) at `bits`; false when a Cholesky pivot is not certainly positive at this precision.
bool enclose_relaxed_mse(const exact_data& ex, mpfr_prec_t bits, mpfi_ptr out) {
  const std::size_t size = tri(ex.n, 0);
  interval_pool K(size, bits), B(size, bits);
  enclose_kernels(ex, bits, K, B);
  return cholesky_relaxed_mse(ex.n, bits, K, B, out);
}

// Each row of the claim's directions as an integer vector: the rationals times the lcm of their denominators (a
// positive scaling, which changes no cosine).  Malformed: a row of the wrong length, a non-number, a zero row.
std::vector<std::vector<Z>> integer_rows(const nlohmann::json& dirs, long d) {
  const long H = static_cast<long>(dirs.size());
  std::vector<std::vector<Z>> rows(static_cast<std::size_t>(H));
  for (long h = 0; h < H; ++h) {
    poll();
    const std::string w = "/claim/directions/" + std::to_string(h);
    const nlohmann::json& row = dirs[static_cast<std::size_t>(h)];
    if (!row.is_array() || row.size() != static_cast<std::size_t>(d)) throw malformed(w + ": expected an array of d = " + std::to_string(d) + " exact numbers");
    std::vector<Q> x(static_cast<std::size_t>(d));
    Z l = 1;
    bool nonzero = false;
    for (long k = 0; k < d; ++k) {
      x[static_cast<std::size_t>(k)] = exact_number(row[static_cast<std::size_t>(k)], w + "/" + std::to_string(k));
      nonzero = nonzero || x[static_cast<std::size_t>(k)] != 0;
      mpz_lcm(l.backend().data(), l.backend().data(), mpq_denref(x[static_cast<std::size_t>(k)].backend().data()));
    }
    if (!nonzero) throw malformed(w + ": a direction must be nonzero");
    std::vector<Z>& r = rows[static_cast<std::size_t>(h)];
    r.resize(static_cast<std::size_t>(d));
    for (long k = 0; k < d; ++k) {
      const mpq_srcptr v = x[static_cast<std::size_t>(k)].backend().data();
      mpz_divexact(r[static_cast<std::size_t>(k)].backend().data(), l.backend().data(), mpq_denref(v));
      mpz_mul(r[static_cast<std::size_t>(k)].backend().data(), r[static_cast<std::size_t>(k)].backend().data(), mpq_numref(v));
    }
  }
  return rows;
}

// Drops the rows parallel or antiparallel to an earlier kept one (exactly: ⟨a, b⟩² = |a|²|b|²) and appends the kept
// rows' Gram matrix to `gram` (lower triangle, row by row); returns the number kept.
long keep_distinct(const std::vector<std::vector<Z>>& rows, long d, std::vector<Z>& gram) {
  const long H = static_cast<long>(rows.size());
  std::vector<long> kept;
  std::vector<Z> dots;
  Z dot, lhs, rhs;
  for (long h = 0; h < H; ++h) {
    poll();
    const std::vector<Z>& a = rows[static_cast<std::size_t>(h)];
    dots.clear();
    bool parallel = false;
    for (std::size_t k = 0; k <= kept.size() && !parallel; ++k) {  // k = kept.size(): the row with itself
      const std::vector<Z>& b = k < kept.size() ? rows[static_cast<std::size_t>(kept[k])] : a;
      dot = 0;
      for (long c = 0; c < d; ++c)
        mpz_addmul(dot.backend().data(), a[static_cast<std::size_t>(c)].backend().data(), b[static_cast<std::size_t>(c)].backend().data());
      dots.push_back(dot);
    }
    const Z& norm = dots.back();
    for (std::size_t k = 0; k < kept.size() && !parallel; ++k) {
      lhs = dots[k] * dots[k];
      rhs = norm * gram[tri(static_cast<long>(k), static_cast<long>(k))];
      parallel = lhs == rhs;
    }
    if (parallel) continue;
    kept.push_back(h);
    gram.insert(gram.end(), dots.begin(), dots.end());
  }
  return static_cast<long>(kept.size());
}

}  // namespace

void verify_rank_heads_directions(const nlohmann::json& cert, const nlohmann::json& cl, const note_fn& note) {
  const long d = integer<long>(field(cl, "d", "/claim"), "/claim/d");
  if (d < 3 || d > 64) throw malformed("/claim/d: expected 3 <= d <= 64");
  const nlohmann::json& dirs = field(cl, "directions", "/claim");
  if (!dirs.is_array() || dirs.empty() || dirs.size() > 256) throw malformed("/claim/directions: expected an array of 1 ... 256 directions");
  const long H = static_cast<long>(dirs.size());
  const std::vector<std::vector<Z>> rows = integer_rows(dirs, d);
  if (text_field(cl, "relation", "/claim") != ">=") throw malformed("/claim/relation: rank_heads_hardmax_directions is '>='");
  const Q value = exact_number(field(cl, "value", "/claim"), "/claim/value");
  const nlohmann::json& body = field(cert, "rank_heads_hardmax_directions", "");
  exact_data ex;
  ex.d = d;
  ex.L = integer<long>(field(body, "max_degree", "/rank_heads_hardmax_directions"), "/rank_heads_hardmax_directions/max_degree");
  if (ex.L < 1 || ex.L > 201 || ex.L % 2 == 0) throw malformed("/rank_heads_hardmax_directions/max_degree: an odd degree in [1, 201]");
  const long distinct = integer<long>(field(body, "distinct", "/rank_heads_hardmax_directions"), "/rank_heads_hardmax_directions/distinct");
  const nlohmann::json& stated = field(body, "relaxed_mse", "/rank_heads_hardmax_directions");
  if (!stated.is_array() || stated.size() != 2) throw malformed("/rank_heads_hardmax_directions/relaxed_mse: expected [lower, upper]");
  const Q slo = exact_number(stated[0], "/rank_heads_hardmax_directions/relaxed_mse/0");
  const Q shi = exact_number(stated[1], "/rank_heads_hardmax_directions/relaxed_mse/1");
  if (slo > shi) throw malformed("/rank_heads_hardmax_directions/relaxed_mse: expected lower <= upper");
  check(!cert.contains("counterexample"), "/counterexample: a lower-bound certificate states none");

  // 1. Drop the rows parallel or antiparallel to an earlier kept one (exact); the Gram matrix of the kept ones.
  ex.n = keep_distinct(rows, d, ex.gram);
  check(ex.n == distinct, "/rank_heads_hardmax_directions/distinct: " + std::to_string(ex.n) +
                              " directions remain after dropping those parallel or antiparallel to an earlier one");

  // 2. The exact parts: R(t), Σ e_ℓ, N(d, L + 2), M_d.
  series_polynomial(ex);
  ex.tail_N = dimension(d, ex.L + 2);
  arcsin_moment_fourier(d, ex.Ma, ex.Mb);

  // 3. The enclosure, at doubling precision.
  double previous_width = -1;
  std::string why = "the enclosure is computed from 128 bits on: nothing was tried";
  for (unsigned long bits = 128; bits <= precision_cap(); bits *= 2) {
    poll();
    iv mse(static_cast<mpfr_prec_t>(bits));
    if (!enclose_relaxed_mse(ex, static_cast<mpfr_prec_t>(bits), mse.x)) {
      why = "a Cholesky pivot of the arcsine Gram matrix K is not certainly positive";
      continue;
    }
    check(mpfr_cmp_q(&mse.x->left, shi.backend().data()) <= 0 && mpfr_cmp_q(&mse.x->right, slo.backend().data()) >= 0,
          "/rank_heads_hardmax_directions/relaxed_mse: the stated enclosure does not meet the re-derived one");
    const std::string range = "[" + end_text(&mse.x->left, true) + ", " + end_text(&mse.x->right, false) + "]";
    if (q_le_left(value, mse.x)) {
      note("relaxed MSE of " + std::to_string(H) + " heads (" + std::to_string(ex.n) + " distinct) in d = " + std::to_string(d) + " re-derived in " +
           range + " by interval Cholesky at " + std::to_string(bits) + " bits (explicit Gegenbauer sums, degree " + std::to_string(ex.L) + ")");
      check_verdict(cert, true, note);
      return;
    }
    check(mpfr_cmp_q(&mse.x->right, value.backend().data()) >= 0,
          "/verdict: the relaxed error is below the value; only CERTIFIED certificates exist for this quantity");
    why = "the re-derived enclosure " + range + " of the relaxed error contains the value";
    mpfr_t width;
    mpfr_init2(width, 53);
    mpfr_sub(width, &mse.x->right, &mse.x->left, MPFR_RNDU);
    const double w = mpfr_get_d(width, MPFR_RNDU);
    mpfr_clear(width);
    if (previous_width >= 0 && w > 0.9 * previous_width)  // rounding no longer dominates: the truncation at degree L does
      throw beyond_cap(why + " at " + std::to_string(bits) + " bits, and more precision does not narrow it (the series is cut at degree " +
                       std::to_string(ex.L) + ")");
    previous_width = w;
  }
  throw beyond_cap(why + " within " + precision_cap_text());
}

}  // namespace attncert::verify::checker
