// rank_heads_context_hit_rate and rank_heads_pair_hit_probability certificates (proofs/L4-rank-heads-tradeoff.md,
// part G: context length N = 2 … 16 keys).  Every stated number is re-derived here; where the definition leaves a
// choice, by another method than the prover's (lib/src/proofs/rank_heads_context.cpp):
//
// rank_heads_context_hit_rate (exact).  The instance is rebuilt from the claim (d, N, M inputs, H heads, seed S) by the
// definition of part G, written out again here (the generator and the draws are the definition, so they are the same):
//   generator  SplitMix64: state += 0x9E3779B97F4A7C15, z = state, z = (z ^ z>>30)·0xBF58476D1CE4E5B9,
//              z = (z ^ z>>27)·0x94D049BB133111EB, next = z ^ z>>31;
//   points     d coordinates ((next() >> 32) mod 8193) − 4096, the whole point redrawn unless 0 < |z|² ≤ 4096²;
//              z stands for z/|z|;
//   heads      H directions a_h from the generator seeded with S ⊕ 0x4EAD;
//   inputs     from the generator seeded with S: a query y, then 16 keys x_1 … x_16; the input (query and keys) is
//              redrawn while, for some n in {2, 4, 8, 16}, the key maximising ⟨x_i, y⟩/|x_i| among the first n is
//              tied (each redraw counted);
//   selection  a head selects, among the first N keys, the maximisers of s·⟨a, x_i⟩/|x_i|, s = sign⟨a, y⟩ (all N keys
//              when s = 0); a selection of k keys gives each 720720/k; the head's credit on the input is the target's
//              share when the target (the nearest key) is selected; head_ties counts the selections of k > 1 keys;
//   rate       (Σ credits)/(720720·M·H), exact.
// Comparisons of A/√B with C/√D (A, C integer inner products, B, D > 0 squared norms) are decided by ONE signed
// comparison, A|A|·D against C|C|·B in GMP integers (x ↦ x|x| is strictly increasing, so the sign of
// A|A|/B − C|C|/D is that of A/√B − C/√D); the prover compares signs first and then A²D with C²B in 128-bit
// integers.  The four prefix maxima of an input are found in one scan of its 16 keys (the prover scans each prefix),
// and a selection is kept as (size, holds the target) rather than a list of indices.
//
// rank_heads_pair_hit_probability (closed form).  p₂(d) = 1/2 + (2c_d/π) J_{d−2}, J_n = ∫₀^{π/2} θ cos^n θ dθ, for
// d ≥ 3.  J_n is re-derived from the Fourier expansion cos^n θ = 2^{−n} Σ_{k=0}^{n} C(n, k) cos((n − 2k)θ) and
// ∫₀^{π/2} θ cos(mθ) dθ = (π/2) sin(mπ/2)/m + (cos(mπ/2) − 1)/m² (m = |n − 2k| ≠ 0), π²/8 (m = 0); c_d from the same
// expansion, 1/c_d = ∫_{−π/2}^{π/2} cos^n θ dθ = 2^{−n} Σ_k C(n, k)·(2 sin(mπ/2)/m, or π for m = 0).  So p₂ = A + B/π
// for odd d and A + B/π² for even d, A and B rational.  (The prover: the recurrence J_n = ((n − 1)/n) J_{n−2} − 1/n²
// from J₀ = π²/8, J₁ = π/2 − 1, and c_d from its density constant.)  The relation p₂ REL value is decided by MPFI
// enclosures of A + B/π^k − value at 64, 128, … bits up to the precision cap.
#include <array>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "checker.hpp"

namespace attncert::verify::checker {

namespace {

constexpr long lattice_radius = 4096;
constexpr long credit_unit = 720720;  // lcm(1, …, 16)
constexpr int key_count = 16;          // keys drawn per input; the key set for N is the first N


long inner(const lattice_point& a, const lattice_point& b, long d) {
  long s = 0;
  for (long i = 0; i < d; ++i) s += a.z[static_cast<std::size_t>(i)] * b.z[static_cast<std::size_t>(i)];
  return s;
}

// sign(A/√B − C/√D), B, D > 0, as sign(A|A|·D − C|C|·B) in GMP integers (two reused temporaries).
// |A|, |C| ≤ 8·4096² < 2^27 for any inner product of two points (each coordinate ≤ 4096 in size), so A|A| < 2^54
// is exact in a long; the products with D, B are formed in mpz.
class comparer {
 public:
  comparer() {
    mpz_init(l_);
    mpz_init(r_);
  }
  ~comparer() {
    mpz_clear(l_);
    mpz_clear(r_);
  }
  comparer(const comparer&) = delete;
  comparer& operator=(const comparer&) = delete;
  int operator()(long A, long B, long C, long D) {
    mpz_set_si(l_, A * std::labs(A));
    mpz_mul_si(l_, l_, D);
    mpz_set_si(r_, C * std::labs(C));
    mpz_mul_si(r_, r_, B);
    const int c = mpz_cmp(l_, r_);
    return (c > 0) - (c < 0);
  }

 private:
  mpz_t l_, r_;
};

// The exact counts of the instance for one N.
struct context_counts {
  Z credit = 0;
  long redrawn = 0, head_ties = 0;
};

context_counts count_instance(long d, long N, long M, long H, std::uint64_t seed) {
  context_counts out;
  comparer cmp;
  splitmix64 gh{seed ^ 0x4EADULL};
  std::vector<lattice_point> dirs(static_cast<std::size_t>(H));
  for (lattice_point& a : dirs) draw_lattice_point(gh, d, a);
  splitmix64 gi{seed};
  lattice_point y;
  std::array<lattice_point, key_count> keys;
  std::array<long, key_count> A{};
  long credit = 0;  // ≤ 720720 · 10000 · 4095 < 2^45
  for (long m = 0; m < M; ++m) {
    poll();
    long target = 0;
    for (;;) {
      draw_lattice_point(gi, d, y);
      for (lattice_point& x : keys) draw_lattice_point(gi, d, x);
      for (int i = 0; i < key_count; ++i) A[static_cast<std::size_t>(i)] = inner(keys[static_cast<std::size_t>(i)], y, d);
      // One scan: the maximisers of ⟨x_i, y⟩/|x_i| over each prefix; a prefix of length 2, 4, 8, 16 must have one.
      long best = 0, ties = 1;
      bool tied = false;
      for (long i = 1; i < key_count; ++i) {
        const int c = cmp(A[static_cast<std::size_t>(i)], keys[static_cast<std::size_t>(i)].norm2, A[static_cast<std::size_t>(best)],
                          keys[static_cast<std::size_t>(best)].norm2);
        if (c > 0) {
          best = i;
          ties = 1;
        } else if (c == 0) {
          ++ties;
        }
        const long n = i + 1;
        if ((n & (n - 1)) == 0) {  // n = 2, 4, 8, 16
          if (ties > 1) tied = true;
          if (n == N) target = best;
        }
      }
      if (!tied) break;
      ++out.redrawn;
      poll();
    }
    for (long h = 0; h < H; ++h) {
      const lattice_point& a = dirs[static_cast<std::size_t>(h)];
      const long ay = inner(a, y, d);
      const long s = (ay > 0) - (ay < 0);
      long k = 0;
      bool hit = false;
      if (s == 0) {  // every score is 0: all N keys are selected
        k = N;
        hit = true;
      } else {
        long best = 0, best_score = s * inner(a, keys[0], d);
        k = 1;
        hit = target == 0;
        for (long i = 1; i < N; ++i) {
          const long score = s * inner(a, keys[static_cast<std::size_t>(i)], d);
          const int c = cmp(score, keys[static_cast<std::size_t>(i)].norm2, best_score, keys[static_cast<std::size_t>(best)].norm2);
          if (c > 0) {
            best = i;
            best_score = score;
            k = 1;
            hit = i == target;
          } else if (c == 0) {
            ++k;
            hit = hit || i == target;
          }
        }
      }
      if (k > 1) ++out.head_ties;
      if (hit) credit += credit_unit / k;
    }
  }
  out.credit = credit;
  return out;
}

// x = p/q ≥ 0 as "~0.dddddd" (floor at 6 decimals).
std::string approx_decimal(const Q& x) {
  const Z scaled = Z(numerator(x) * 1000000) / denominator(x);
  std::string frac = Z(scaled % 1000000).str();
  frac.insert(0, 6 - frac.size(), '0');
  return "~" + Z(scaled / 1000000).str() + "." + frac;
}

bool relation_holds(const Q& x, const std::string& rel, const Q& v) { return rel == "=" ? x == v : rel == "<=" ? x <= v : x >= v; }

}  // namespace

void verify_rank_heads_context(const nlohmann::json& cert, const nlohmann::json& cl, const note_fn& note) {
  const long d = integer<long>(field(cl, "d", "/claim"), "/claim/d");
  if (d < 2 || d > 8) throw malformed("/claim/d: expected 2 <= d <= 8");
  const long N = integer<long>(field(cl, "keys", "/claim"), "/claim/keys");
  if (N != 2 && N != 4 && N != 8 && N != 16) throw malformed("/claim/keys: expected 2, 4, 8 or 16");
  const long M = integer<long>(field(cl, "inputs", "/claim"), "/claim/inputs");
  if (M < 2 || M > 10000) throw malformed("/claim/inputs: expected 2 <= inputs <= 10000");
  const long H = integer<long>(field(cl, "heads", "/claim"), "/claim/heads");
  if (H < 2 || H > 4095) throw malformed("/claim/heads: expected 2 <= heads <= 4095");
  const Z seed_z = parse_integer(text_field(cl, "seed", "/claim"), "/claim/seed", false);
  if (seed_z >= Z(Z(1) << 64)) throw malformed("/claim/seed: expected a decimal integer below 2^64");
  const std::uint64_t seed = seed_z.convert_to<std::uint64_t>();
  const std::string rel = text_field(cl, "relation", "/claim");
  if (rel != "=" && rel != "<=" && rel != ">=") throw malformed("/claim/relation: rank_heads_context_hit_rate is '=', '<=' or '>='");
  const Q value = exact_number(field(cl, "value", "/claim"), "/claim/value");
  const nlohmann::json& body = field(cert, "rank_heads_context", "");
  const Q stated_rate = exact_number(field(body, "rate", "/rank_heads_context"), "/rank_heads_context/rate");
  const Z stated_credit = parse_integer(text_field(body, "credit", "/rank_heads_context"), "/rank_heads_context/credit", false);
  const long stated_redrawn = integer<long>(field(body, "redrawn", "/rank_heads_context"), "/rank_heads_context/redrawn");
  const long stated_ties = integer<long>(field(body, "head_ties", "/rank_heads_context"), "/rank_heads_context/head_ties");
  check(!cert.contains("counterexample"), "/counterexample: a hit-rate certificate states none");

  const context_counts c = count_instance(d, N, M, H, seed);
  const Q rate(c.credit, Z(Z(credit_unit) * M * H));
  check(stated_redrawn == c.redrawn, "/rank_heads_context/redrawn: " + std::to_string(c.redrawn) + " inputs are redrawn for a tied nearest key");
  check(stated_ties == c.head_ties, "/rank_heads_context/head_ties: " + std::to_string(c.head_ties) + " (input, head) selections are ties");
  check(stated_credit == c.credit, "/rank_heads_context/credit: the total credit is " + c.credit.str() + " (units of 1/720720)");
  check(stated_rate == rate, "/rank_heads_context/rate: the rate is " + rate.str());
  note("hit rate (d = " + std::to_string(d) + ", N = " + std::to_string(N) + ", " + std::to_string(M) + " inputs x " + std::to_string(H) +
       " heads, seed " + seed_z.str() + ") = " + rate.str() + " " + approx_decimal(rate) + " re-derived from the rebuilt lattice instance; " +
       std::to_string(c.redrawn) + " inputs redrawn, " + std::to_string(c.head_ties) + " tied selections");
  check_verdict(cert, relation_holds(rate, rel, value), note);
}

namespace {

// p₂(d) = A + B·π^{−k} (k = 1 for odd d, 2 for even d) from the Fourier expansion of cos^{d−2} (header comment).
int pair_hit_fourier(long d, Q& A, Q& B) {
  const long n = d - 2;
  Q P2 = 0, P1 = 0, P0 = 0;       // J_n = P2 π² + P1 π + P0
  Q norm_pi = 0, norm_rat = 0;    // 1/c_d = norm_pi π + norm_rat
  const Z two_n = Z(1) << n;
  Z bin;
  for (long k = 0; k <= n; ++k) {
    poll();
    const long m = std::labs(n - 2 * k);
    mpz_bin_uiui(bin.backend().data(), static_cast<unsigned long>(n), static_cast<unsigned long>(k));
    const Q w(bin, two_n);
    if (m == 0) {
      P2 += w / 8;
      norm_pi += w;
      continue;
    }
    const int s = m % 2 == 0 ? 0 : ((m / 2) % 2 == 0 ? 1 : -1);  // sin(mπ/2)
    const int c = m % 2 == 1 ? 0 : ((m / 2) % 2 == 0 ? 1 : -1);  // cos(mπ/2)
    P1 += w * Q(s) / Q(2 * m);
    P0 += w * Q(c - 1) / Q(m * m);
    norm_rat += w * Q(2 * s) / Q(m);
  }
  if (d % 2 == 1) {  // n odd: c_d = ρ rational, p₂ = 1/2 + 2ρ P1 + 2ρ P0/π
    check(P2 == 0 && norm_pi == 0 && norm_rat > 0, "/rank_heads_pair_hit: internal: J_n for odd n has no pi^2 part");
    const Q rho = Q(1) / norm_rat;
    A = Q(1, 2) + 2 * rho * P1;
    B = 2 * rho * P0;
    return 1;
  }
  // n even: c_d = ρ/π, p₂ = 1/2 + 2ρ P2 + 2ρ P0/π²
  check(P1 == 0 && norm_rat == 0 && norm_pi > 0, "/rank_heads_pair_hit: internal: J_n for even n has no pi part");
  const Q rho = Q(1) / norm_pi;
  A = Q(1, 2) + 2 * rho * P2;
  B = 2 * rho * P0;
  return 2;
}

// The sign of A + B/π^k − v (B ≠ 0: never 0) at doubling precision up to the cap; beyond_cap when undecided.
int sign_over_pi_power(const Q& A, const Q& B, int k, const Q& v) {
  const Q av = A - v;
  for (unsigned bits = 64; bits <= precision_cap(); bits *= 2) {
    poll();
    iv pk(bits), x(bits);
    mpfi_const_pi(pk.x);
    if (k == 2) mpfi_sqr(pk.x, pk.x);
    mpfi_q_div(x.x, B.backend().data(), pk.x);
    mpfi_add_q(x.x, x.x, av.backend().data());
    if (mpfi_is_strictly_pos(x.x)) return 1;
    if (mpfi_is_strictly_neg(x.x)) return -1;
  }
  throw beyond_cap("p2 - value not separated from 0 within " + precision_cap_text());
}

}  // namespace

void verify_rank_heads_pair_hit(const nlohmann::json& cert, const nlohmann::json& cl, const note_fn& note) {
  const long d = integer<long>(field(cl, "d", "/claim"), "/claim/d");
  if (d < 3 || d > 64) throw malformed("/claim/d: expected 3 <= d <= 64");
  const std::string rel = text_field(cl, "relation", "/claim");
  if (rel != "<=" && rel != ">=") throw malformed("/claim/relation: rank_heads_pair_hit_probability is '<=' or '>='");
  const Q value = exact_number(field(cl, "value", "/claim"), "/claim/value");
  const nlohmann::json& body = field(cert, "rank_heads_pair_hit", "");
  const Q sa = exact_number(field(body, "rational", "/rank_heads_pair_hit"), "/rank_heads_pair_hit/rational");
  const Q sb = exact_number(field(body, "over_pi_power", "/rank_heads_pair_hit"), "/rank_heads_pair_hit/over_pi_power");
  const long sk = integer<long>(field(body, "pi_power", "/rank_heads_pair_hit"), "/rank_heads_pair_hit/pi_power");
  check(!cert.contains("counterexample"), "/counterexample: a pair-hit certificate states none");
  Q A, B;
  const int k = pair_hit_fourier(d, A, B);
  check(sk == k, "/rank_heads_pair_hit/pi_power: p2 carries pi^-" + std::to_string(k) + (k == 1 ? " (odd d)" : " (even d)"));
  check(sa == A, "/rank_heads_pair_hit/rational: the rational part of p2 is " + A.str());
  check(sb == B, "/rank_heads_pair_hit/over_pi_power: the pi^-" + std::to_string(k) + " part of p2 is " + B.str());
  note("p2(" + std::to_string(d) + ") = " + A.str() + " + (" + B.str() + ")/pi" + (k == 2 ? "^2" : "") +
       " re-derived from the Fourier expansion of cos^" + std::to_string(d - 2));
  const int sign = B == 0 ? (A > value ? 1 : A < value ? -1 : 0) : sign_over_pi_power(A, B, k, value);
  check_verdict(cert, rel == "<=" ? sign <= 0 : sign >= 0, note);
}

void draw_lattice_point(splitmix64& g, long d, lattice_point& p) {
  for (;;) {
    long n2 = 0;
    for (long i = 0; i < d; ++i) {
      const long c = static_cast<long>((g.next() >> 32) % static_cast<std::uint64_t>(2 * lattice_radius + 1)) - lattice_radius;
      p.z[static_cast<std::size_t>(i)] = c;
      n2 += c * c;
    }
    if (n2 > 0 && n2 <= lattice_radius * lattice_radius) {
      p.norm2 = n2;
      return;
    }
  }
}

}  // namespace attncert::verify::checker
