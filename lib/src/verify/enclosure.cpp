// MPFI enclosures of e^{a/q} and q·log u, the range of a and its image under u = e^{a/q}, and the
// sign of a polynomial at the claim's point.  See checker.hpp.
#include <algorithm>

#include "checker.hpp"

namespace attncert::verify::checker {

namespace {
thread_local unsigned precision_cap_bits = 8192;
}  // namespace
unsigned exchange_precision_cap(unsigned bits) {
  const unsigned old = precision_cap_bits;
  precision_cap_bits = bits;
  return old;
}
unsigned precision_cap() { return precision_cap_bits; }
std::string precision_cap_text() { return std::to_string(precision_cap_bits) + " bits"; }

// ---- MPFI helpers --------------------------------------------------------------------
Q from_mpfr(const mpfr_t x) {
  mpz_t m;
  mpz_init(m);
  const mpfr_exp_t e = mpfr_get_z_2exp(m, x);
  Q r{Z(m)};
  mpz_clear(m);
  Z p = 1;
  p <<= static_cast<unsigned>(e < 0 ? -e : e);
  r = e >= 0 ? Q(r * Q(p)) : Q(r / Q(p));
  return r;
}
// Rational [l, h] ∋ e^{a/q}.
std::pair<Q, Q> exp_enclosure(const Q& a, const Z& q, unsigned bits) {
  const Q t0 = a / Q(q);
  if (t0 > 10000 || t0 < -10000) throw beyond_cap("a range end has |a/q| > 10^4 (beyond the checker's magnitude limit)");
  poll();  // every escalation loop goes through here
  mpfi_t x;
  mpfi_init2(x, bits);
  const Q t = a / Q(q);
  mpfi_set_q(x, t.backend().data());
  mpfi_exp(x, x);
  mpfr_t l, h;
  mpfr_init2(l, bits);
  mpfr_init2(h, bits);
  mpfi_get_left(l, x);
  mpfi_get_right(h, x);
  auto r = std::make_pair(from_mpfr(l), from_mpfr(h));
  mpfr_clear(l);
  mpfr_clear(h);
  mpfi_clear(x);
  return r;
}

range_t parse_range(const std::string& text) {
  std::string s;
  for (char c : text)
    if (c != ' ') s += c;
  const auto comma = s.find(',');
  if (s.size() < 5 || comma == std::string::npos || (s.front() != '(' && s.front() != '[') || (s.back() != ')' && s.back() != ']'))
    throw malformed("/claim/range: expected (lo, hi) / [lo, hi]");
  range_t r;
  r.lo_open = s.front() == '(';
  r.hi_open = s.back() == ')';
  const std::string a = s.substr(1, comma - 1), b = s.substr(comma + 1, s.size() - comma - 2);
  if (a != "-inf") r.lo = parse_rational(a, "/claim/range");
  if (b != "inf") r.hi = parse_rational(b, "/claim/range");
  if (r.lo && r.hi && *r.lo >= *r.hi) throw malformed("/claim/range: empty or a point");
  return r;
}

// Does the stated decimal enclosure [alo, ahi] contain q·log u for every u in [ulo, uhi]?
// (MPFI at 256 bits; the stated ends are read exactly.)
bool encloses_q_log(const Q& alo, const Q& ahi, const Q& ulo, const Q& uhi, const Z& q) {
  if (ulo <= 0 || ulo > uhi) return false;
  mpfi_t x;
  mpfi_init2(x, 256);
  mpfi_interv_q(x, ulo.backend().data(), uhi.backend().data());
  mpfi_log(x, x);
  mpfi_mul_z(x, x, q.backend().data());
  mpfr_t l, h;
  mpfr_init2(l, 256);
  mpfr_init2(h, 256);
  mpfi_get_left(l, x);
  mpfi_get_right(h, x);
  const bool inside = mpfr_cmp_q(l, alo.backend().data()) >= 0 && mpfr_cmp_q(h, ahi.backend().data()) <= 0;
  mpfr_clear(l);
  mpfr_clear(h);
  mpfi_clear(x);
  return inside;
}

bool exp_below(const Q& a, const Z& q, const Q& x) {
  for (unsigned bits = 64; bits <= precision_cap_bits; bits *= 2) {
    const auto [l, h] = exp_enclosure(a, q, bits);
    if (h < x) return true;
    if (l > x) return false;
  }
  throw beyond_cap("could not compare a sample with a range end at " + precision_cap_text());
}


// Filter: true only if the MPFI Horner enclosure of g([lo, hi]) excludes 0 (then g has no zero
// on [lo, hi]); false means "not shown".  Saves the Sturm sequence of high-degree polynomials.
bool no_zero_by_interval(const zpoly& g, const Q& lo, const Q& hi, unsigned bits) {
  if (g.empty()) return false;
  std::size_t cbits = 0;
  for (const auto& c : g) cbits = std::max<std::size_t>(cbits, c == 0 ? 0 : mpz_sizeinbase(c.backend().data(), 2));
  const mpfr_prec_t prec = static_cast<mpfr_prec_t>(std::min<std::size_t>(2 * bits + cbits + 64, 1u << 20));
  struct interval {  // cleared however the loop ends (a stop throws from poll())
    mpfi_t v;
    explicit interval(mpfr_prec_t p) { mpfi_init2(v, p); }
    ~interval() { mpfi_clear(v); }
  } x(prec), acc(prec);
  mpfi_interv_q(x.v, lo.backend().data(), hi.backend().data());
  mpfi_set_z(acc.v, g.back().backend().data());
  for (std::size_t k = g.size() - 1; k-- > 0;) {
    if (k % 8 == 0) poll();
    mpfi_mul(acc.v, acc.v, x.v);
    mpfi_add_z(acc.v, acc.v, g[k].backend().data());
  }
  return !mpfi_nan_p(acc.v) && !mpfi_has_zero(acc.v);
}

// Is a zero of the squarefree g certainly between the sample s and u0 ∈ [l, h] (s outside
// [l, h], no zero in [l, h])?  Then the sample is on the wrong side, whatever the precision.
bool zero_between_sample_and_u0(const zpoly& g, const Q& s, const Q& l, const Q& h) {
  if (s >= l && s <= h) return false;
  if (evaluate(g, l) == 0 || evaluate(g, h) == 0 || evaluate(g, s) == 0 || roots_between(g, l, h) != 0) return false;
  return s < l ? roots_between(g, s, l) > 0 : roots_between(g, h, s) > 0;
}

// The sign of H at the point a0 of the claim equals its sign at the sample s: s = 1 when
// a0 = 0; otherwise no zero of H lies between s and the transcendental u0 = e^{a0/q}.
void check_sign_at_point(const zpoly& H, const Q& a0, const Q& s, const Z& q, const std::string& w) {
  check(s > 0, w + ": a sample is a value of u = e^{a/q} > 0");
  if (a0 == 0) {
    check(s == 1, w + ": at a = 0 the sample is u = 1");
    return;
  }
  if (H.size() <= 1) return;
  // Filter: an MPFI enclosure of H itself (squarefree or not) over [min(l, s), max(h, s)]
  // that excludes 0 shows that no zero lies between s and u0; no gcd is needed.
  for (unsigned bits = 64; bits <= precision_cap_bits; bits *= 2) {
    const auto [l, h] = exp_enclosure(a0, q, bits);
    if (no_zero_by_interval(H, std::min(l, s), std::max(h, s), bits)) return;
  }
  const zpoly g = squarefree_part(H);
  if (g.size() <= 1) return;
  for (unsigned bits = 64; bits <= precision_cap_bits; bits *= 2) {
    const auto [l, h] = exp_enclosure(a0, q, bits);
    if (zero_between_sample_and_u0(g, s, l, h)) throw invalid(w + ": a zero lies between the sample and u0 = e^{a/q}");
    const Q lo = std::min(l, s), hi = std::max(h, s);
    if (evaluate(g, lo) != 0 && evaluate(g, hi) != 0 && roots_between(g, lo, hi) == 0) return;
  }
  throw beyond_cap(w + ": could not separate the sample's side from u0 = e^{a/q} at " + precision_cap_text());
}


range_image image_of_range(const range_t& R, const zpoly& g, const Z& q, const std::string& zeros_name) {
  range_image im;
  im.one_is_root = g.size() > 1 && evaluate(g, Q(1)) == 0;
  zpoly g1 = g;
  if (im.one_is_root) g1 = normalized(exact_quotient(to_rational(g), qpoly{Q(-1), Q(1)}));
  while (!g1.empty() && g1.front() == 0) g1.erase(g1.begin());  // roots at u = 0 are not e^{a/q}
  // A rational cut beyond the end e^{a/q} with no zero of g1 between them.
  auto cut = [&](const Q& a, bool low) -> Q {
    for (unsigned bits = 64; bits <= precision_cap_bits; bits *= 2) {
      const auto [l, h] = exp_enclosure(a, q, bits);
      if (g1.size() <= 1 || (evaluate(g1, l) != 0 && evaluate(g1, h) != 0 && roots_between(g1, l, h) == 0)) return low ? h : l;
    }
    throw beyond_cap("/claim/range: could not separate a range end from the " + zeros_name + " at " + precision_cap_text());
  };
  if (R.lo) im.low = *R.lo == 0 ? Q(1) : cut(*R.lo, true);
  if (R.hi) im.high = *R.hi == 0 ? Q(1) : cut(*R.hi, false);
  im.zeros = g1.size() <= 1 ? 0 : roots_between(g1, im.low, im.high);
  if (im.one_is_root && R.contains(Q(0))) ++im.zeros;
  return im;
}

}  // namespace attncert::verify::checker
