// nearest_neighbour_model_mse certificates (proofs/L4-rank-heads-tradeoff.md, parts H and I): the mean squared error
// of an attention-only model (content dimension d = 8, N keys and a query, L layers of H heads of rank r, a readout,
// positions none / concatenated / additive) on the fixed nearest-neighbour test set of M inputs.  Every weight is an
// exact binary64 number and every input is one, so the MSE is a definite real number; the checker encloses it.
//
// The test set, rebuilt here from its definition (part H; the prover is rank_heads::trained_test_set_of):
//   generator  SplitMix64 seeded with 20261205 + N: state += 0x9E3779B97F4A7C15, z = state,
//              z = (z ^ z>>30)·0xBF58476D1CE4E5B9, z = (z ^ z>>27)·0x94D049BB133111EB, next = z ^ z>>31;
//   points     8 coordinates c = ((next() >> 32) mod 8193) − 4096, the whole point redrawn unless 0 < |c|² ≤ 4096²;
//              then x_k = (double)c_k / sqrt((double)|c|²), both operations correctly rounded in binary64;
//   inputs     a query y, then N keys; the target is the key maximising ⟨x_i, y⟩ (exactly); an input whose maximum is
//              tied is discarded (counted as redrawn) and another drawn, until M are kept.
// The model (part H, with part I's positions): tokens X₀ = [x_i, 0…] for the keys, [y, 1, 0…] for the query, plus the
// position rows P; a layer adds to every row i Σ_h Σ_{j<N} softmax_j(S^h_i·)·(X_j Wv_h), S^h_ij = (X_i Wq_h)·(X_j Wk_h)
// (the N keys only, never the query); the prediction is X_query·Wr and the MSE (1/M) Σ_inputs Σ_c (p_c − target_c)².
//
// The computation here, and how it differs from the prover's (lib/src/proofs/rank_heads_trained.cpp,
// rank_heads::trained_error_of and trained_test_set_of: binary64 intervals first, MPFI per input where those are too
// wide, softmax as exp(S − max)/Σ exp(S − max), V = X·Wv formed for every key and then weighted by the attention,
// targets from rational inner products):
//   * MPFI throughout (mpfi_t, and MPFR on the two ends where an interval operation is written out), from 128 bits,
//     the whole evaluation repeated at twice the precision (up to the cap) while the verdict is undecided;
//   * softmax_j = 1/Σ_k exp(S_k − S_j), the k = j term exactly 1.  The keys are put in increasing order of score, the
//     N − 1 consecutive exponentials g = exp(S_next − S_this) enclosed (one MPFR exponential each: the upper end from
//     the lower one, below) with their reciprocals, and every exp(S_k − S_j) is the product of the g (or of the
//     reciprocals) between j and k — the identity exp(Σ differences) = Π exp(difference), N − 1 exponentials per row
//     instead of N(N − 1)/2;
//   * the attention-weighted key rows first, then the value map: (Σ_j P_j X_j)·Wv rather than Σ_j P_j (X_j Wv);
//   * a product with a weight (an exact binary64 point) or with a probability (P ⊂ [0, 1]) takes only the endpoint
//     products that can be extreme, each rounded outward and added into the accumulator's end;
//   * the target: inner products of the doubles scaled by 2^80 (integers: every nonzero coordinate is ≥ 2^-12 in size,
//     so its last bit is ≥ 2^-64) compared in GMP integers, not rationals.
// What the certificate states: the redraw count (must be equal) and an enclosure of the MSE (must meet the re-derived
// one); the verdict of MSE ≤ value or MSE ≥ value is re-derived from the re-derived enclosure.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "checker.hpp"

namespace attncert::verify::checker {

namespace {

constexpr int content = 8;          // d: the content dimension
constexpr std::uint64_t test_seed = 20261205;


// One point of the test set: an integer point of the ball, rounded to the unit sphere in binary64.
void draw_unit_point(splitmix64& g, double* x) {
  lattice_point p;
  draw_lattice_point(g, content, p);
  const double r = std::sqrt(static_cast<double>(p.norm2));  // |z|² < 2^25: exact as a double; sqrt correctly rounded
  for (int k = 0; k < content; ++k) x[k] = static_cast<double>(p.z[static_cast<std::size_t>(k)]) / r;
}

// GMP integers with their lifetime.
struct zvec {
  std::vector<__mpz_struct> v;
  explicit zvec(std::size_t n) : v(n) {
    for (auto& z : v) mpz_init(&z);
  }
  ~zvec() {
    for (auto& z : v) mpz_clear(&z);
  }
  zvec(const zvec&) = delete;
  zvec& operator=(const zvec&) = delete;
  mpz_ptr operator[](std::size_t i) { return &v[i]; }
};

// x·2^80 as an integer.  A coordinate is 0 or at least 1/4096 = 2^-12 in size (|c_k| ≥ 1 over r ≤ 4096, and rounding
// is monotone), so its last bit is worth at least 2^-64 and x·2^80 is an integer, exact as a double.
void scaled_integer(mpz_ptr out, double x) {
  const double v = std::ldexp(x, 80);
  check(std::trunc(v) == v, "internal: a test coordinate is not a multiple of 2^-80");
  mpz_set_d(out, v);
}

struct test_set {
  long N = 0, M = 0, redrawn = 0;
  std::vector<double> y;     // M × 8
  std::vector<double> keys;  // M × N × 8
  std::vector<int> target;   // M
};

test_set rebuild_test_set(long N, long M) {
  test_set t;
  t.N = N;
  t.M = M;
  splitmix64 g{test_seed + static_cast<std::uint64_t>(N)};
  std::vector<double> y(content), keys(static_cast<std::size_t>(N * content));
  zvec Y(content), dot(2), term(1);  // dot[0]: the running maximum, dot[1]: the current key
  while (static_cast<long>(t.target.size()) < M) {
    poll();
    draw_unit_point(g, y.data());
    for (long i = 0; i < N; ++i) draw_unit_point(g, keys.data() + i * content);
    for (int k = 0; k < content; ++k) scaled_integer(Y[static_cast<std::size_t>(k)], y[static_cast<std::size_t>(k)]);
    int best = -1;
    bool tied = false;
    for (long i = 0; i < N; ++i) {
      mpz_ptr s = dot[best < 0 ? 0 : 1];
      mpz_set_ui(s, 0);
      for (int k = 0; k < content; ++k) {
        scaled_integer(term[0], keys[static_cast<std::size_t>(i * content + k)]);
        mpz_addmul(s, term[0], Y[static_cast<std::size_t>(k)]);
      }
      if (best < 0) {
        best = 0;
        continue;
      }
      const int c = mpz_cmp(s, dot[0]);
      if (c > 0) {
        best = static_cast<int>(i);
        tied = false;
        mpz_swap(dot[0], s);
      } else if (c == 0) {
        tied = true;
      }
    }
    if (tied) {
      ++t.redrawn;
      continue;
    }
    t.y.insert(t.y.end(), y.begin(), y.end());
    t.keys.insert(t.keys.end(), keys.begin(), keys.end());
    t.target.push_back(best);
  }
  return t;
}

// The model as the claim states it.
enum class encoding { none, concatenated, additive };

struct model {
  long N = 0, D = 0, H = 0, r = 0, L = 0;
  encoding enc = encoding::none;
  std::vector<double> w;  // the flat weights, each an exact binary64 number
  // Offsets into w.
  long positions() const { return 0; }
  long head(long layer, long h) const {
    const long start = enc == encoding::none ? 0 : (N + 1) * D;
    return start + (layer * H + h) * (2 * D * r + D * D);
  }
  long readout() const { return head(L, 0); }
  long count() const { return readout() + D * content; }
};

// q as a binary64 number, exactly; malformed when it is not one.
double exact_binary64(const Q& q, mpfr_ptr scratch, const std::string& where) {
  const int inexact = mpfr_set_q(scratch, q.backend().data(), MPFR_RNDN);  // scratch has 53 bits
  const double d = mpfr_get_d(scratch, MPFR_RNDN);
  if (inexact != 0 || !std::isfinite(d) || mpfr_cmp_d(scratch, d) != 0) throw malformed(where + ": not exactly a binary64 number");
  return d;
}

model parse_model(const nlohmann::json& cl, long N) {
  model m;
  m.N = N;
  const nlohmann::json& j = field(cl, "model", "/claim");
  if (!j.is_object()) throw malformed("/claim/model: expected an object");
  const std::string enc = text_field(j, "encoding", "/claim/model");
  if (enc == "none") m.enc = encoding::none;
  else if (enc == "concatenated") m.enc = encoding::concatenated;
  else if (enc == "additive") m.enc = encoding::additive;
  else throw malformed("/claim/model/encoding: expected \"none\", \"concatenated\" or \"additive\"");
  m.D = integer<long>(field(j, "width", "/claim/model"), "/claim/model/width");
  const long D = m.enc == encoding::none ? content + 1 : content + 2 + N;
  if (m.D != D) throw malformed("/claim/model/width: expected " + std::to_string(D) + " for encoding " + enc + " and " + std::to_string(N) + " keys");
  m.H = integer<long>(field(j, "heads", "/claim/model"), "/claim/model/heads");
  if (m.H < 1 || m.H > 16) throw malformed("/claim/model/heads: expected 1 <= heads <= 16");
  m.r = integer<long>(field(j, "rank", "/claim/model"), "/claim/model/rank");
  if (m.r < 1 || m.r > D) throw malformed("/claim/model/rank: expected 1 <= rank <= width");
  m.L = integer<long>(field(j, "layers", "/claim/model"), "/claim/model/layers");
  if (m.L < 1 || m.L > 4) throw malformed("/claim/model/layers: expected 1 <= layers <= 4");
  const nlohmann::json& w = field(j, "weights", "/claim/model");
  if (!w.is_array() || static_cast<long>(w.size()) != m.count())
    throw malformed("/claim/model/weights: expected an array of " + std::to_string(m.count()) + " exact numbers");
  mpfr_t scratch;
  mpfr_init2(scratch, 53);
  try {
    m.w.resize(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      if ((i & 1023) == 0) poll();
      const std::string where = "/claim/model/weights/" + std::to_string(i);
      m.w[i] = exact_binary64(exact_number(w[i], where), scratch, where);
    }
  } catch (...) {
    mpfr_clear(scratch);
    throw;
  }
  mpfr_clear(scratch);
  // The positions' support: the content columns (additive) or the scratch columns after the flag (concatenated).
  if (m.enc != encoding::none)
    for (long row = 0; row <= N; ++row)
      for (long col = 0; col < D; ++col) {
        const bool on = m.enc == encoding::additive ? col < content : col > content;
        if (!on && m.w[static_cast<std::size_t>(row * D + col)] != 0)
          throw malformed("/claim/model/weights/" + std::to_string(row * D + col) + ": the position of row " + std::to_string(row) +
                          " is nonzero in column " + std::to_string(col) + ", off the support of " + enc + " positions");
      }
  return m;
}

// MPFR numbers with their lifetime, allocated once per precision.
struct fpool {
  std::vector<__mpfr_struct> v;
  fpool(std::size_t n, mpfr_prec_t bits) : v(n) {
    for (auto& x : v) mpfr_init2(&x, bits);
  }
  ~fpool() {
    for (auto& x : v) mpfr_clear(&x);
  }
  fpool(const fpool&) = delete;
  fpool& operator=(const fpool&) = delete;
  mpfr_ptr operator[](long i) { return &v[static_cast<std::size_t>(i)]; }
};

// acc += x·w, w an exact point: each end one product and one sum, both rounded outward (w ≥ 0: [xl·w, xr·w], else
// [xr·w, xl·w]); `t` is scratch.  A zero weight adds exactly 0.
inline void add_times_point(mpfi_ptr acc, mpfi_srcptr x, mpfr_srcptr w, mpfr_ptr t) {
  const int s = mpfr_sgn(w);
  if (s == 0) return;
  mpfr_mul(t, s > 0 ? &x->left : &x->right, w, MPFR_RNDD);
  mpfr_add(&acc->left, &acc->left, t, MPFR_RNDD);
  mpfr_mul(t, s > 0 ? &x->right : &x->left, w, MPFR_RNDU);
  mpfr_add(&acc->right, &acc->right, t, MPFR_RNDU);
}

// acc += p·x for p ⊂ [0, ∞): the least product is pl·xl when xl ≥ 0 and pr·xl otherwise, the greatest pr·xr when
// xr ≥ 0 and pl·xr otherwise; rounded outward; `t` is scratch.
inline void add_nonnegative_times(mpfi_ptr acc, mpfi_srcptr p, mpfi_srcptr x, mpfr_ptr t) {
  mpfr_mul(t, mpfr_sgn(&x->left) >= 0 ? &p->left : &p->right, &x->left, MPFR_RNDD);
  mpfr_add(&acc->left, &acc->left, t, MPFR_RNDD);
  mpfr_mul(t, mpfr_sgn(&x->right) >= 0 ? &p->right : &p->left, &x->right, MPFR_RNDU);
  mpfr_add(&acc->right, &acc->right, t, MPFR_RNDU);
}

// out = a·b for a, b ⊂ [0, ∞), rounded outward (out may be a or b).
inline void mul_nonnegative(mpfi_ptr out, mpfi_srcptr a, mpfi_srcptr b) {
  mpfr_mul(&out->left, &a->left, &b->left, MPFR_RNDD);
  mpfr_mul(&out->right, &a->right, &b->right, MPFR_RNDU);
}

// out ⊇ exp([a, b]) with one MPFR exponential: l = exp(a) rounded down, and exp(a) ≤ l⁺ (the number after l when the
// rounding was inexact, else l); exp(b) = exp(a)·exp(δ), δ = b − a ≥ 0, and exp(δ) ≤ 1 + δ + δ² for 0 ≤ δ ≤ 1 (the
// tail Σ_{n≥2} δⁿ/n! ≤ δ²(e − 2)), so the upper end is l⁺·(1 + δ + δ²), every step rounded up.  A wide interval
// (δ > 2^-10) takes the second exponential instead.  out must not be x; `t` and `f` are scratch.
void exp_enclosure(mpfi_ptr out, mpfi_srcptr x, mpfr_ptr t, mpfr_ptr f) {
  const int inexact = mpfr_exp(&out->left, &x->left, MPFR_RNDD);
  mpfr_sub(t, &x->right, &x->left, MPFR_RNDU);  // δ
  if (mpfr_nan_p(t) || mpfr_cmp_si_2exp(t, 1, -10) > 0) {
    mpfr_exp(&out->right, &x->right, MPFR_RNDU);
    return;
  }
  mpfr_set(&out->right, &out->left, MPFR_RNDU);
  if (inexact != 0) mpfr_nextabove(&out->right);
  if (mpfr_zero_p(t)) return;
  mpfr_sqr(f, t, MPFR_RNDU);  // f = 1 + δ + δ², rounded up
  mpfr_add(f, f, t, MPFR_RNDU);
  mpfr_add_ui(f, f, 1, MPFR_RNDU);
  mpfr_mul(&out->right, &out->right, f, MPFR_RNDU);
}

// P = softmax(S) over the N keys, as P_j = 1/(1 + Σ_{k≠j} exp(S_k − S_j)) ⊂ [0, 1].  `order`, G, R and E (N × N) are
// scratch; t0, f0, f1 too.
void softmax_row(long N, interval_pool& S, long* order, interval_pool& G, interval_pool& R, interval_pool& E, interval_pool& P, mpfi_ptr t0,
                 mpfr_ptr f0, mpfr_ptr f1) {
  // E[j][k] = exp(S_k − S_j).  Along the keys in increasing order of score (o), the N − 1 consecutive
  // exponentials g_a = exp(S_o(a+1) − S_o(a)) and their reciprocals; then exp(S_o(b) − S_o(a)) = g_a ⋯ g_(b−1)
  // and exp(S_o(a) − S_o(b)) = its reciprocal factors' product, for a < b.  (Sorted, every g is about ≥ 1 and
  // every reciprocal ≤ 1: no product meets 0·∞.)
  for (long j = 0; j < N; ++j) {  // insertion sort by the lower end (any order would be as sound)
    long a = j;
    for (; a > 0 && mpfr_cmp(&S[order[a - 1]]->left, &S[j]->left) > 0; --a) order[a] = order[a - 1];
    order[a] = j;
  }
  for (long a = 0; a + 1 < N; ++a) {
    mpfi_sub(t0, S[order[a + 1]], S[order[a]]);
    exp_enclosure(G[a], t0, f0, f1);
    mpfi_ui_div(R[a], 1, G[a]);
  }
  for (long a = 0; a + 1 < N; ++a) {
    const long j = order[a];
    for (long b = a + 1; b < N; ++b) {
      const long k = order[b];
      if (b == a + 1) {
        mpfi_set(E[j * N + k], G[a]);
        mpfi_set(E[k * N + j], R[a]);
      } else {
        const long before = order[b - 1];
        mul_nonnegative(E[j * N + k], E[j * N + before], G[b - 1]);
        mul_nonnegative(E[k * N + j], E[before * N + j], R[b - 1]);
      }
    }
  }
  for (long j = 0; j < N; ++j) {
    mpfi_set_ui(t0, 1);
    for (long k = 0; k < N; ++k)
      if (k != j) mpfi_add(t0, t0, E[j * N + k]);
    mpfi_ui_div(P[j], 1, t0);
  }
}

// The MSE of the model on the test set, enclosed in MPFI at `bits` (into mse).
void enclose_mse(const model& m, const test_set& t, mpfr_prec_t bits, mpfi_ptr mse) {
  const long N = m.N, D = m.D, r = m.r, rows = N + 1;
  fpool W(m.w.size(), bits);  // at the working precision (exact: bits ≥ 53), so that MPFR takes its equal-precision paths
  for (std::size_t i = 0; i < m.w.size(); ++i) mpfr_set_d(W[static_cast<long>(i)], m.w[i], MPFR_RNDN);
  interval_pool X(static_cast<std::size_t>(rows * D), bits), U(static_cast<std::size_t>(rows * D), bits), K(static_cast<std::size_t>(N * r), bits),
      q(static_cast<std::size_t>(r), bits), S(static_cast<std::size_t>(N), bits), E(static_cast<std::size_t>(N * N), bits),
      P(static_cast<std::size_t>(N), bits), A(static_cast<std::size_t>(D), bits), G(static_cast<std::size_t>(N), bits),
      R(static_cast<std::size_t>(N), bits), tmp(2, bits);
  std::vector<long> order_of_keys(static_cast<std::size_t>(N));
  long* const order = order_of_keys.data();
  fpool scratch(2, bits);
  mpfr_ptr f0 = scratch[0], f1 = scratch[1];
  mpfi_ptr t0 = tmp[0], sum = tmp[1];
  mpfi_set_ui(sum, 0);
  for (long s = 0; s < t.M; ++s) {
    poll();
    // The tokens.
    for (long i = 0; i < rows; ++i) {
      const double* x = i < N ? &t.keys[static_cast<std::size_t>((s * N + i) * content)] : &t.y[static_cast<std::size_t>(s * content)];
      for (long c = 0; c < D; ++c) {
        mpfi_ptr e = X[i * D + c];
        mpfi_set_d(e, c < content ? x[c] : c == content && i == N ? 1.0 : 0.0);
        if (m.enc != encoding::none) mpfi_add_d(e, e, m.w[static_cast<std::size_t>(m.positions() + i * D + c)]);
      }
    }
    for (long layer = 0; layer < m.L; ++layer) {
      poll();
      const long from = layer + 1 == m.L ? N : 0;  // the last layer: only the query's row is read afterwards
      for (long i = from * D; i < rows * D; ++i) mpfi_set_ui(U[i], 0);
      for (long h = 0; h < m.H; ++h) {
        const long wq = m.head(layer, h), wk = wq + D * r, wv = wk + D * r;
        for (long j = 0; j < N; ++j)
          for (long c = 0; c < r; ++c) {
            mpfi_ptr k = K[j * r + c];
            mpfi_set_ui(k, 0);
            for (long a = 0; a < D; ++a) add_times_point(k, X[j * D + a], W[wk + a * r + c], f0);
          }
        for (long i = from; i < rows; ++i) {
          for (long c = 0; c < r; ++c) {
            mpfi_set_ui(q[c], 0);
            for (long a = 0; a < D; ++a) add_times_point(q[c], X[i * D + a], W[wq + a * r + c], f0);
          }
          for (long j = 0; j < N; ++j) {
            mpfi_set_ui(S[j], 0);
            for (long c = 0; c < r; ++c) {
              mpfi_mul(t0, q[c], K[j * r + c]);
              mpfi_add(S[j], S[j], t0);
            }
          }
          softmax_row(N, S, order, G, R, E, P, t0, f0, f1);
          // A = Σ_j P_j X_j.
          for (long c = 0; c < D; ++c) mpfi_set_ui(A[c], 0);
          for (long j = 0; j < N; ++j)
            for (long c = 0; c < D; ++c) add_nonnegative_times(A[c], P[j], X[j * D + c], f0);
          // U_i += A·Wv.
          for (long c = 0; c < D; ++c)
            for (long a = 0; a < D; ++a) add_times_point(U[i * D + c], A[a], W[wv + a * D + c], f0);
        }
      }
      for (long i = from * D; i < rows * D; ++i) mpfi_add(X[i], X[i], U[i]);
    }
    // The prediction X_query·Wr and its squared error against the target key.
    const double* target = &t.keys[static_cast<std::size_t>((s * N + t.target[static_cast<std::size_t>(s)]) * content)];
    for (long c = 0; c < content; ++c) {
      mpfi_set_ui(t0, 0);
      for (long a = 0; a < D; ++a) add_times_point(t0, X[N * D + a], W[m.readout() + a * content + c], f0);
      mpfi_sub_d(t0, t0, target[c]);
      mpfi_sqr(t0, t0);
      mpfi_add(sum, sum, t0);
    }
  }
  mpfi_div_ui(mse, sum, static_cast<unsigned long>(t.M));
}

std::string decimal(mpfr_srcptr x, bool up) {
  char buf[64];
  mpfr_snprintf(buf, sizeof buf, up ? "%.16RUe" : "%.16RDe", x);
  return buf;
}

const char* encoding_name(encoding e) { return e == encoding::none ? "none" : e == encoding::concatenated ? "concatenated" : "additive"; }

}  // namespace

void verify_nearest_neighbour_model(const nlohmann::json& cert, const nlohmann::json& cl, const note_fn& note) {
  const long N = integer<long>(field(cl, "keys", "/claim"), "/claim/keys");
  if (N < 2 || N > 16) throw malformed("/claim/keys: expected 2 <= keys <= 16");
  const long M = integer<long>(field(cl, "inputs", "/claim"), "/claim/inputs");
  if (M < 1 || M > 1000) throw malformed("/claim/inputs: expected 1 <= inputs <= 1000");
  const model m = parse_model(cl, N);
  const std::string rel = text_field(cl, "relation", "/claim");
  if (rel != "<=" && rel != ">=") throw malformed("/claim/relation: nearest_neighbour_model_mse is '<=' or '>='");
  const Q value = exact_number(field(cl, "value", "/claim"), "/claim/value");
  const nlohmann::json& body = field(cert, "nearest_neighbour_model", "");
  const nlohmann::json& stated = field(body, "mse", "/nearest_neighbour_model");
  if (!stated.is_array() || stated.size() != 2) throw malformed("/nearest_neighbour_model/mse: expected [lower, upper]");
  const Q slo = exact_number(stated[0], "/nearest_neighbour_model/mse/0"), shi = exact_number(stated[1], "/nearest_neighbour_model/mse/1");
  const long stated_redrawn = integer<long>(field(body, "redrawn", "/nearest_neighbour_model"), "/nearest_neighbour_model/redrawn");
  check(!cert.contains("counterexample"), "/counterexample: an MSE certificate states none");

  const test_set t = rebuild_test_set(N, M);
  check(stated_redrawn == t.redrawn, "/nearest_neighbour_model/redrawn: " + std::to_string(t.redrawn) + " inputs are redrawn for a tied nearest key");

  const unsigned cap = precision_cap();
  if (cap < 64) throw beyond_cap("the model is evaluated at 64 bits or more (the weights exactly), above " + precision_cap_text());
  iv mse(static_cast<mpfr_prec_t>(cap));
  for (unsigned bits = std::min(128u, cap);; bits = std::min(2 * bits, cap)) {
    enclose_mse(m, t, static_cast<mpfr_prec_t>(bits), mse.x);
    if (!mpfi_nan_p(mse.x)) {
      check(slo <= shi && mpfr_cmp_q(&mse.x->left, shi.backend().data()) <= 0 && mpfr_cmp_q(&mse.x->right, slo.backend().data()) >= 0,
            "/nearest_neighbour_model/mse: the stated enclosure does not meet the re-derived one");
      const bool holds = rel == "<=" ? q_ge_right(value, mse.x) : q_le_left(value, mse.x);
      const bool fails = rel == "<=" ? mpfr_cmp_q(&mse.x->left, value.backend().data()) > 0 : mpfr_cmp_q(&mse.x->right, value.backend().data()) < 0;
      if (holds || fails) {
        note("MSE of the model (N = " + std::to_string(N) + ", " + std::to_string(m.L) + " layer(s) of " + std::to_string(m.H) + " head(s) of rank " +
             std::to_string(m.r) + ", width " + std::to_string(m.D) + ", positions " + encoding_name(m.enc) + ") on the " + std::to_string(M) +
             " rebuilt test inputs in [" + decimal(&mse.x->left, false) + ", " + decimal(&mse.x->right, true) + "], re-derived in MPFI at " +
             std::to_string(bits) + " bits; " + std::to_string(t.redrawn) + " inputs redrawn");
        check_verdict(cert, holds, note);
        return;
      }
    }
    if (bits >= cap) break;
  }
  throw beyond_cap("the re-derived enclosure of the MSE contains the value at " + precision_cap_text());
}

}  // namespace attncert::verify::checker
