// The context-length instance of proofs/L4-rank-heads-tradeoff.md part G: see attncert/proofs/rank_heads.hpp.
// Exact tier (integer counts, every comparison decided in 128-bit integers), except the vote MSE (MPFI).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/proofs/rank_heads.hpp"

namespace attncert::rank_heads {

std::uint64_t splitmix64::next() {
  state += 0x9E3779B97F4A7C15ULL;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

lattice_point lattice_ball_point(splitmix64& g, int d, long K) {
  if (d < 1 || K < 1 || K > lattice_radius_max) throw input_error("lattice_ball_point: need d >= 1 and 1 <= K <= 4096");
  lattice_point p;
  p.z.resize(static_cast<std::size_t>(d));
  const std::uint64_t width = static_cast<std::uint64_t>(2 * K + 1);
  for (;;) {
    std::int64_t n2 = 0;
    for (auto& c : p.z) {
      c = static_cast<std::int64_t>((g.next() >> 32) % width) - K;
      n2 += c * c;
    }
    if (n2 > 0 && n2 <= static_cast<std::int64_t>(K) * K) {
      p.norm2 = n2;
      return p;
    }
  }
}

std::int64_t dot(const lattice_point& a, const lattice_point& b) {
  std::int64_t s = 0;
  for (std::size_t i = 0; i < a.z.size(); ++i) s += a.z[i] * b.z[i];
  return s;
}

// sign(A/√B − C/√D) for B, D > 0.  |A|, |C| ≤ K² and B, D ≤ K² with K ≤ 4096 (Cauchy–Schwarz on points of the
// ball), so A²D and C²B are below 2⁷² and exact in 128-bit integers.
int compare_scaled(std::int64_t A, std::int64_t B, std::int64_t C, std::int64_t D) {
  const int sa = (A > 0) - (A < 0), sc = (C > 0) - (C < 0);
  if (sa != sc) return sa > sc ? 1 : -1;
  if (sa == 0) return 0;
  const __int128 l = static_cast<__int128>(A) * A * D, r = static_cast<__int128>(C) * C * B;
  const int s = (l > r) - (l < r);
  return sa > 0 ? s : -s;
}

// The maximisers of sign·⟨a, z_i⟩/|z_i| over the first n keys (all of them when sign = 0: every score is 0).
std::vector<int> hardmax_set(const std::vector<std::int64_t>& numerators, const std::vector<lattice_point>& keys, int n) {
  std::vector<int> best{0};
  for (int i = 1; i < n; ++i) {
    const int c = compare_scaled(numerators[static_cast<std::size_t>(i)], keys[static_cast<std::size_t>(i)].norm2,
                                 numerators[static_cast<std::size_t>(best[0])], keys[static_cast<std::size_t>(best[0])].norm2);
    if (c > 0) best.assign(1, i);
    else if (c == 0) best.push_back(i);
  }
  return best;
}

namespace {

constexpr std::int64_t credit_unit = 720720;  // lcm(1, …, 16): a tie among k ≤ 16 keys splits a vote exactly

// ‖(1/|W|)Σ_{j∈W} x_j − x_t‖² with x = z/|z|, enclosed.
mpfi_float squared_error(const std::vector<lattice_point>& keys, const std::vector<int>& W, int t) {
  auto inner = [&](int j, int k) {
    const lattice_point& a = keys[static_cast<std::size_t>(j)];
    const lattice_point& b = keys[static_cast<std::size_t>(k)];
    return mpfi_float(mpfi_float(dot(a, b)) / sqrt(mpfi_float(a.norm2) * mpfi_float(b.norm2)));
  };
  const mpfi_float w(static_cast<long>(W.size()));
  mpfi_float s(0), c(0);
  for (int j : W) {
    c += inner(j, t);
    for (int k : W) s += inner(j, k);
  }
  return mpfi_float(s / (w * w) - mpfi_float(2) * c / w + mpfi_float(1));
}

}  // namespace

context_instance context_counts(int d, int inputs, int heads, std::uint64_t seed, const std::vector<int>& vote_sizes) {
  if (d < 2 || d > 8) throw input_error("context_counts: d must be in [2, 8]");
  if (inputs < 2 || heads < 2) throw input_error("context_counts: need at least two inputs and two heads");
  for (std::size_t v = 0; v < vote_sizes.size(); ++v) {
    if (vote_sizes[v] < 1 || vote_sizes[v] > heads) throw input_error("context_counts: every vote size must be in [1, heads]");
    if (v > 0 && vote_sizes[v] <= vote_sizes[v - 1]) throw input_error("context_counts: the vote sizes must be increasing");
  }
  const long K = lattice_radius_max;
  context_instance out;
  out.d = d;
  out.inputs = inputs;
  out.heads = heads;
  out.seed = seed;
  out.vote_sizes = vote_sizes;
  const std::size_t nN = context_sizes.size();
  out.per_n.resize(nN);
  for (auto& r : out.per_n) {
    r.input_credit.assign(static_cast<std::size_t>(inputs), 0);
    r.head_credit.assign(static_cast<std::size_t>(heads), 0);
    r.vote_wrong.assign(vote_sizes.size(), 0);
    r.vote_mse.assign(vote_sizes.size(), mpfi_float(0));
  }
  splitmix64 gh{seed ^ 0x4EADULL};
  std::vector<lattice_point> dirs;
  for (int h = 0; h < heads; ++h) dirs.push_back(lattice_ball_point(gh, d, K));
  splitmix64 gi{seed};
  const int nmax = context_sizes.back();
  std::vector<std::int64_t> num(static_cast<std::size_t>(nmax));
  for (int m = 0; m < inputs; ++m) {
    check_deadline();  // the caller's budget (certify's --max-seconds)
    // One input: the query, then 16 keys; redrawn while the nearest key is tied for some N.
    lattice_point y;
    std::vector<lattice_point> keys;
    std::vector<int> target(nN);
    for (;;) {
      y = lattice_ball_point(gi, d, K);
      keys.clear();
      for (int i = 0; i < nmax; ++i) keys.push_back(lattice_ball_point(gi, d, K));
      for (int i = 0; i < nmax; ++i) num[static_cast<std::size_t>(i)] = dot(y, keys[static_cast<std::size_t>(i)]);
      bool tied = false;
      for (std::size_t k = 0; k < nN; ++k) {
        const std::vector<int> t = hardmax_set(num, keys, context_sizes[k]);
        if (t.size() != 1) tied = true;
        target[k] = t[0];
      }
      if (!tied) break;
      ++out.redrawn;
    }
    std::vector<std::vector<std::int64_t>> tally(nN, std::vector<std::int64_t>(static_cast<std::size_t>(nmax), 0));
    std::size_t next_vote = 0;
    for (int h = 0; h < heads; ++h) {
      const std::int64_t ay = dot(dirs[static_cast<std::size_t>(h)], y);
      const std::int64_t s = (ay > 0) - (ay < 0);
      for (int i = 0; i < nmax; ++i) num[static_cast<std::size_t>(i)] = s * dot(dirs[static_cast<std::size_t>(h)], keys[static_cast<std::size_t>(i)]);
      for (std::size_t k = 0; k < nN; ++k) {
        const std::vector<int> sel = hardmax_set(num, keys, context_sizes[k]);
        if (sel.size() > 1) ++out.per_n[k].head_ties;
        const std::int64_t share = credit_unit / static_cast<std::int64_t>(sel.size());
        for (int j : sel) tally[k][static_cast<std::size_t>(j)] += share;
        if (std::find(sel.begin(), sel.end(), target[k]) != sel.end()) {
          out.per_n[k].input_credit[static_cast<std::size_t>(m)] += share;
          out.per_n[k].head_credit[static_cast<std::size_t>(h)] += share;
        }
      }
      // The second layer reads the tally after the first H heads: the plurality (ties average the tied keys).
      while (next_vote < vote_sizes.size() && vote_sizes[next_vote] == h + 1) {
        for (std::size_t k = 0; k < nN; ++k) {
          const int n = context_sizes[k];
          std::vector<int> win{0};
          for (int j = 1; j < n; ++j) {
            const std::int64_t v = tally[k][static_cast<std::size_t>(j)], b = tally[k][static_cast<std::size_t>(win[0])];
            if (v > b) win.assign(1, j);
            else if (v == b) win.push_back(j);
          }
          if (win.size() != 1 || win[0] != target[k]) {
            ++out.per_n[k].vote_wrong[next_vote];
            out.per_n[k].vote_mse[next_vote] += squared_error(keys, win, target[k]);
          }
        }
        ++next_vote;
      }
    }
  }
  for (auto& r : out.per_n)
    for (auto& e : r.vote_mse) e = mpfi_float(e / mpfi_float(inputs));
  return out;
}

mpq_rational context_instance::per_n_counts::hit_rate(int inputs, int heads) const {
  mpz_int total = 0;
  for (std::int64_t c : input_credit) total += c;
  return mpq_rational(total, mpz_int(credit_unit) * inputs * heads);
}

// Standard error of the two-way mean: var(input means)/M + var(head means)/H (each sample variance also holds
// the interaction's share, so the sum is conservative for a crossed design).  approx_: binary64.
double context_instance::per_n_counts::approx_standard_error() const {
  auto var_of_means = [](const std::vector<std::int64_t>& c, double per) {
    double mean = 0, m2 = 0;
    for (std::int64_t x : c) mean += static_cast<double>(x) / per;
    mean /= static_cast<double>(c.size());
    for (std::int64_t x : c) m2 += (static_cast<double>(x) / per - mean) * (static_cast<double>(x) / per - mean);
    return m2 / static_cast<double>(c.size() - 1) / static_cast<double>(c.size());
  };
  const double u = static_cast<double>(credit_unit);
  return std::sqrt(var_of_means(input_credit, u * static_cast<double>(head_credit.size())) +
                   var_of_means(head_credit, u * static_cast<double>(input_credit.size())));
}

pair_hit_probability pair_hit_probability_of(int d) {
  if (d < 3) throw input_error("pair_hit_probability_of: d must be >= 3");
  // J_n = ∫₀^{π/2} θ cos^n θ dθ = α_n π^k + β_n (k = 2 for even n, 1 for odd n): J₀ = π²/8, J₁ = π/2 − 1,
  // J_n = ((n − 1)/n) J_{n−2} − 1/n² (proofs/L4 part G).
  const int n = d - 2;
  mpq_rational alpha = n % 2 == 0 ? mpq_rational(1, 8) : mpq_rational(1, 2);
  mpq_rational beta = n % 2 == 0 ? mpq_rational(0) : mpq_rational(-1);
  for (int k = n % 2 == 0 ? 2 : 3; k <= n; k += 2) {
    alpha = alpha * mpq_rational(k - 1, k);
    beta = beta * mpq_rational(k - 1, k) - mpq_rational(1, k * k);
  }
  // p₂ = 1/2 + (2c_d/π) J_{d−2}; c_d = r (odd d) or r/π (even d), so p₂ = A + B π^{−k}.
  const density_constant c = density_constant_of(d);
  pair_hit_probability p;
  p.a = mpq_rational(1, 2) + 2 * c.r * alpha;
  p.b = 2 * c.r * beta;
  p.pi_power = n % 2 == 0 ? 2 : 1;
  return p;
}

}  // namespace attncert::rank_heads
