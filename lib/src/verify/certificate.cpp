// The independent certificate checker: see attncert/verify/certificate.hpp.
// Deliberately self-contained: no attncert header other than its own, no FLINT.
#include "attncert/verify/certificate.hpp"

#include <mpfi.h>
#include <mpfr.h>

#include <algorithm>
#include <boost/multiprecision/gmp.hpp>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <stdexcept>
#include <string>

namespace attncert::proofs {

namespace {

using Z = boost::multiprecision::number<boost::multiprecision::gmp_int, boost::multiprecision::et_off>;
using Q = boost::multiprecision::number<boost::multiprecision::gmp_rational, boost::multiprecision::et_off>;
using P = std::vector<Z>;   // integer polynomial, low → high, no trailing zeros
using PQ = std::vector<Q>;  // rational polynomial

struct malformed : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct invalid : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The certificate may be valid, but checking it needs more than the precision cap.
struct beyond_cap : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The precision cap of the current verify_certificate call (MPFI enclosures of e^{a/q}).
thread_local unsigned cap_bits = 8192;
std::string cap_text() { return std::to_string(cap_bits) + " bits"; }

// ---- parsing -------------------------------------------------------------------------
// The checker's own limits (README "Limits on input"): digits per decimal mantissa and
// |written decimal exponent| as for claims; JSON nesting depth.  Integers (and the two sides of
// p/q) are what the prover writes — a claim's 1e100000 becomes an integer of 100 001 digits,
// and minors multiply entries — so they are bounded only by the file size (64 MiB by default):
// mpz_set_str reads them in subquadratic time.
constexpr std::size_t max_digits = 100000;
constexpr std::size_t max_integer_digits = std::size_t{1} << 26;
constexpr long max_exponent = 100000;
constexpr std::size_t max_depth = 64;

// `s` for a one-line message: control characters escaped, cut after 80 characters.
std::string shown(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (const char ch : s) {
    if (out.size() >= 80) return out + "...";
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    else out += ch;
  }
  return out;
}

// [+-]?digits, at most max_integer_digits digits (read with mpz_set_str: no octal, no hex).
Z parse_integer(const std::string& s, const std::string& where, bool sign_allowed = true) {
  std::size_t i = 0;
  const bool neg = sign_allowed && !s.empty() && (s[0] == '-' || s[0] == '+') ? s[i++] == '-' : false;
  if (i == s.size() || s.find_first_not_of("0123456789", i) != std::string::npos)
    throw malformed(where + ": not an integer '" + shown(s) + "'");
  if (s.size() - i > max_integer_digits) throw malformed(where + ": more than " + std::to_string(max_integer_digits) + " digits");
  Z v;
  mpz_set_str(v.backend().data(), s.c_str() + i, 10);
  return neg ? Z(-v) : v;
}

Q parse_rational(const std::string& s, const std::string& where) {
  // "p", "-p", "p/q" (q > 0), or a decimal "d.ddde±x".
  if (s.empty()) throw malformed(where + ": empty number");
  if (const auto slash = s.find('/'); slash != std::string::npos) {
    const Z p = parse_integer(s.substr(0, slash), where), q = parse_integer(s.substr(slash + 1), where, false);
    if (q == 0) throw malformed(where + ": zero denominator in '" + shown(s) + "'");
    return Q(p) / Q(q);
  }
  if (s.find_first_not_of("+-0123456789") == std::string::npos) return Q(parse_integer(s, where));  // an integer
  std::size_t i = 0;
  bool neg = false;
  if (s[i] == '-' || s[i] == '+') neg = s[i++] == '-';
  std::string digits;
  long frac = 0;
  bool dot = false;
  for (; i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.'); ++i) {
    if (s[i] == '.') {
      if (dot) throw malformed(where + ": bad number '" + shown(s) + "'");
      dot = true;
    } else {
      if (digits.size() >= max_digits) throw malformed(where + ": more than " + std::to_string(max_digits) + " digits");
      digits += s[i];
      if (dot) ++frac;
    }
  }
  long ex = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) eneg = s[i++] == '-';
    const std::size_t first = i;
    for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
      ex = ex * 10 + (s[i] - '0');  // ex <= max_exponent before this step: no overflow
      if (ex > max_exponent) throw malformed(where + ": exponent out of range in '" + shown(s) + "'");
    }
    if (i == first) throw malformed(where + ": bad exponent in '" + shown(s) + "'");
    if (eneg) ex = -ex;
  }
  if (i != s.size() || digits.empty()) throw malformed(where + ": bad number '" + shown(s) + "'");
  Z m;
  mpz_set_str(m.backend().data(), digits.c_str(), 10);
  const long e = ex - frac;  // |e| <= 2 * 10^5
  Z ten;
  mpz_ui_pow_ui(ten.backend().data(), 10, static_cast<unsigned long>(e < 0 ? -e : e));
  Q v = e >= 0 ? Q(m * ten) : Q(m) / Q(ten);
  return neg ? Q(-v) : v;
}

// An integer field: a JSON integer within T's range, else malformed.  (nlohmann's get<long>()
// on a JSON float such as 1.8e105 is an undefined conversion: found by fuzz_verify.)
template <typename T>
T integer(const nlohmann::json& j, const std::string& where) {
  if (j.is_number_unsigned()) {
    const std::uint64_t v = j.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) throw malformed(where + ": integer out of range");
    return static_cast<T>(v);
  }
  if (j.is_number_integer()) {
    const std::int64_t v = j.get<std::int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (v < 0 || static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
        throw malformed(where + ": integer out of range");
    } else {
      if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) || v > static_cast<std::int64_t>(std::numeric_limits<T>::max()))
        throw malformed(where + ": integer out of range");
    }
    return static_cast<T>(v);
  }
  throw malformed(where + ": expected an integer");
}

Q num(const nlohmann::json& j, const std::string& where) {
  if (j.is_string()) return parse_rational(j.get<std::string>(), where);
  if (j.is_number_integer()) return Q(j.dump());
  throw malformed(where + ": expected an exact number (string or integer)");
}

const nlohmann::json& at(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw malformed(where + "/" + key + ": missing");
  return j.at(key);
}

using QM = std::vector<std::vector<Q>>;
QM qmatrix(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array() || j.empty() || !j[0].is_array() || j[0].empty()) throw malformed(where + ": expected a non-empty 2-D array");
  QM m;
  for (std::size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_array() || j[i].size() != j[0].size()) throw malformed(where + ": ragged");
    std::vector<Q> r;
    for (std::size_t k = 0; k < j[i].size(); ++k) r.push_back(num(j[i][k], where + "/" + std::to_string(i) + "/" + std::to_string(k)));
    m.push_back(r);
  }
  return m;
}

P poly(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) throw malformed(where + ": expected a coefficient list");
  P p;
  for (std::size_t k = 0; k < j.size(); ++k) {
    const Q v = num(j[k], where + "/" + std::to_string(k));
    if (denominator(v) != 1) throw malformed(where + ": non-integer coefficient");
    p.push_back(numerator(v));
  }
  if (!p.empty() && p.back() == 0) throw malformed(where + ": trailing zero coefficient");
  return p;
}

std::vector<long> index_list(const nlohmann::json& j, const std::string& where, long bound) {
  if (!j.is_array()) throw malformed(where + ": expected an index list");
  std::vector<long> v;
  for (const auto& e : j) {
    if (!e.is_number_integer()) throw malformed(where + ": expected integers");
    const long x = integer<long>(e, where);
    if (x < 0 || x >= bound || (!v.empty() && x <= v.back())) throw malformed(where + ": indices must be increasing and in range");
    v.push_back(x);
  }
  return v;
}

// ---- polynomial arithmetic over ℤ and ℚ ------------------------------------------------
void trim(P& p) {
  while (!p.empty() && p.back() == 0) p.pop_back();
}
void trimq(PQ& p) {
  while (!p.empty() && p.back() == 0) p.pop_back();
}
P add(const P& a, const P& b) {
  P c(std::max(a.size(), b.size()));
  for (std::size_t i = 0; i < a.size(); ++i) c[i] += a[i];
  for (std::size_t i = 0; i < b.size(); ++i) c[i] += b[i];
  trim(c);
  return c;
}
P mul(const P& a, const P& b) {
  if (a.empty() || b.empty()) return {};
  P c(a.size() + b.size() - 1);
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < b.size(); ++j) c[i + j] += a[i] * b[j];
  trim(c);
  return c;
}
P neg(P a) {
  for (auto& x : a) x = -x;
  return a;
}
Q evalq(const P& p, const Q& x) {
  Q acc = 0;
  for (std::size_t k = p.size(); k-- > 0;) acc = acc * x + Q(p[k]);
  return acc;
}
int sgn(const Q& v) { return v > 0 ? 1 : v < 0 ? -1 : 0; }

PQ toq(const P& p) { return PQ(p.begin(), p.end()); }
// Primitive integer polynomial with the same sign pattern as p (divide by a positive number).
P primitive_same_sign(const PQ& p) {
  Z l = 1;
  for (const auto& c : p) l = boost::multiprecision::lcm(l, denominator(c));
  P z;
  for (const auto& c : p) z.push_back(numerator(Q(c * Q(l))));
  Z g = 0;
  for (const auto& c : z) g = gcd(g, abs(c));
  if (g > 1)
    for (auto& c : z) c /= g;
  trim(z);
  return z;
}
P normalized(const PQ& p) {  // primitive, positive leading coefficient
  P z = primitive_same_sign(p);
  if (!z.empty() && z.back() < 0) z = neg(z);
  return z;
}
PQ remq(PQ a, const PQ& b) {
  trimq(a);
  while (a.size() >= b.size() && !a.empty()) {
    const Q f = a.back() / b.back();
    const std::size_t sh = a.size() - b.size();
    for (std::size_t i = 0; i < b.size(); ++i) a[sh + i] -= f * b[i];
    trimq(a);
  }
  return a;
}
PQ quoq(PQ a, const PQ& b) {
  trimq(a);
  PQ qt(a.size() >= b.size() ? a.size() - b.size() + 1 : 0);
  while (a.size() >= b.size() && !a.empty()) {
    const Q f = a.back() / b.back();
    const std::size_t sh = a.size() - b.size();
    qt[sh] = f;
    for (std::size_t i = 0; i < b.size(); ++i) a[sh + i] -= f * b[i];
    trimq(a);
  }
  if (!a.empty()) throw invalid("internal: inexact polynomial division");
  return qt;
}
P gcdz(const P& a, const P& b) {
  PQ x = toq(a), y = toq(b);
  trimq(x);
  trimq(y);
  while (!y.empty()) {
    PQ r = remq(x, y);
    x = y;
    y = toq(primitive_same_sign(r));  // a positive rescaling keeps coefficients small
  }
  return normalized(x);
}
P deriv(const P& p) {
  P d;
  for (std::size_t k = 1; k < p.size(); ++k) d.push_back(p[k] * Z(static_cast<long>(k)));
  trim(d);
  return d;
}
P sqfree(const P& p) {
  if (p.size() <= 1) return normalized(toq(p));
  const P g = gcdz(p, deriv(p));
  return normalized(quoq(toq(p), toq(g)));
}
std::vector<P> sturm(const P& p) {
  std::vector<P> s;
  PQ a = toq(p), b = toq(deriv(p));
  s.push_back(primitive_same_sign(a));
  while (!b.empty()) {
    const P pb = primitive_same_sign(b);
    s.push_back(pb);
    PQ r = remq(a, toq(pb));  // positive rescalings of a Sturm sequence are one
    for (auto& c : r) c = -c;
    a = toq(pb);
    b = toq(primitive_same_sign(r));
  }
  return s;
}
int variations(const std::vector<P>& s, const std::optional<Q>& x) {
  int last = 0, n = 0;
  for (const auto& p : s) {
    const int v = x ? sgn(evalq(p, *x)) : (p.empty() ? 0 : (p.back() > 0 ? 1 : -1));
    if (v == 0) continue;
    if (last != 0 && v != last) ++n;
    last = v;
  }
  return n;
}
// Number of roots of the squarefree p in (lo, hi) — lo, hi not roots; hi empty = +∞.
// Sturm sequences are cached per polynomial (the checker asks about the same ones often).
int roots_between(const P& p, const Q& lo, const std::optional<Q>& hi) {
  if (p.size() <= 1) return 0;
  static thread_local std::vector<std::pair<P, std::vector<P>>> cache;
  const std::vector<P>* s = nullptr;
  for (const auto& [key, seq] : cache)
    if (key == p) s = &seq;
  if (!s) {
    if (cache.size() > 64) cache.clear();
    cache.emplace_back(p, sturm(p));
    s = &cache.back().second;
  }
  return variations(*s, lo) - variations(*s, hi);
}

// ---- the matrix M(u), rebuilt from the claim --------------------------------------------
struct family {
  long rows = 0, cols = 0;
  std::vector<P> e;
  Z q = 1;
  const P& at(long i, long j) const { return e[static_cast<std::size_t>(i * cols + j)]; }
};

P det(const family& F, const std::vector<long>& rows, const std::vector<long>& cols) {
  // Laplace expansion along the first row (k ≤ 8).
  const std::size_t k = rows.size();
  if (k == 0) return {Z(1)};
  if (k == 1) return F.at(rows[0], cols[0]);
  P acc;
  const std::vector<long> rest(rows.begin() + 1, rows.end());
  for (std::size_t j = 0; j < k; ++j) {
    const P& a = F.at(rows[0], cols[j]);
    if (a.empty()) continue;
    std::vector<long> c2;
    for (std::size_t t = 0; t < k; ++t)
      if (t != j) c2.push_back(cols[t]);
    P term = mul(a, det(F, rest, c2));
    acc = add(acc, j % 2 == 0 ? term : neg(term));
  }
  return acc;
}

void subsets(long n, long k, const std::function<void(const std::vector<long>&)>& f) {
  std::vector<long> idx;
  std::function<void(long)> go = [&](long start) {
    if (static_cast<long>(idx.size()) == k) {
      f(idx);
      return;
    }
    for (long i = start; i < n; ++i) {
      idx.push_back(i);
      go(i + 1);
      idx.pop_back();
    }
  };
  go(0);
}

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
std::pair<Q, Q> exp_bounds(const Q& a, const Z& q, unsigned bits) {
  const Q t0 = a / Q(q);
  if (t0 > 10000 || t0 < -10000) throw beyond_cap("a range end has |a/q| > 10^4 (beyond the checker's magnitude limit)");
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

struct range_t {
  std::optional<Q> lo, hi;
  bool lo_open = true, hi_open = true;
  bool contains(const Q& a) const {
    if (lo && (a < *lo || (lo_open && a == *lo))) return false;
    if (hi && (a > *hi || (hi_open && a == *hi))) return false;
    return true;
  }
};

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

void check(bool ok, const std::string& what) {
  if (!ok) throw invalid(what);
}

// Does the stated decimal enclosure [alo, ahi] contain q·log u for every u in [ulo, uhi]?
// (MPFI at 256 bits; the stated ends are read exactly.)
bool encloses_qlog(const Q& alo, const Q& ahi, const Q& ulo, const Q& uhi, const Z& q) {
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

// ---- determinant certificates ----------------------------------------------------------
// Is e^{a/q} < x (true) or > x (false)?  a ≠ 0 rational: e^{a/q} is transcendental, never x.
bool exp_below(const Q& a, const Z& q, const Q& x) {
  for (unsigned bits = 64; bits <= cap_bits; bits *= 2) {
    const auto [l, h] = exp_bounds(a, q, bits);
    if (h < x) return true;
    if (l > x) return false;
  }
  throw beyond_cap("could not compare a sample with a range end at " + cap_text());
}


// Filter: true only if the MPFI Horner enclosure of g([lo, hi]) excludes 0 (then g has no zero
// on [lo, hi]); false means "not shown".  Saves the Sturm sequence of high-degree polynomials.
bool no_zero_by_interval(const P& g, const Q& lo, const Q& hi, unsigned bits) {
  if (g.empty()) return false;
  std::size_t cbits = 0;
  for (const auto& c : g) cbits = std::max<std::size_t>(cbits, c == 0 ? 0 : mpz_sizeinbase(c.backend().data(), 2));
  const mpfr_prec_t prec = static_cast<mpfr_prec_t>(std::min<std::size_t>(2 * bits + cbits + 64, 1u << 20));
  mpfi_t x, acc;
  mpfi_init2(x, prec);
  mpfi_init2(acc, prec);
  mpfi_interv_q(x, lo.backend().data(), hi.backend().data());
  mpfi_set_z(acc, g.back().backend().data());
  for (std::size_t k = g.size() - 1; k-- > 0;) {
    mpfi_mul(acc, acc, x);
    mpfi_add_z(acc, acc, g[k].backend().data());
  }
  const bool ok = !mpfi_nan_p(acc) && !mpfi_has_zero(acc);
  mpfi_clear(x);
  mpfi_clear(acc);
  return ok;
}

// Is a zero of the squarefree g certainly between the sample s and u0 ∈ [l, h] (s outside
// [l, h], no zero in [l, h])?  Then the sample is on the wrong side, whatever the precision.
bool zero_between_sample_and_u0(const P& g, const Q& s, const Q& l, const Q& h) {
  if (s >= l && s <= h) return false;
  if (evalq(g, l) == 0 || evalq(g, h) == 0 || evalq(g, s) == 0 || roots_between(g, l, h) != 0) return false;
  return s < l ? roots_between(g, s, l) > 0 : roots_between(g, h, s) > 0;
}

// ---- singular-value certificates ------------------------------------------------------
// The sign of H at the point a0 of the claim equals its sign at the sample s: s = 1 when
// a0 = 0; otherwise no zero of H lies between s and the transcendental u0 = e^{a0/q}.
void check_point_sample(const P& H, const Q& a0, const Q& s, const Z& q, const std::string& w) {
  if (a0 == 0) {
    check(s == 1, w + ": at a = 0 the sample is u = 1");
    return;
  }
  if (H.size() <= 1) return;
  // Filter: an MPFI enclosure of H itself (squarefree or not) over [min(l, s), max(h, s)]
  // that excludes 0 shows that no zero lies between s and u0; no gcd is needed.
  for (unsigned bits = 64; bits <= cap_bits; bits *= 2) {
    const auto [l, h] = exp_bounds(a0, q, bits);
    if (no_zero_by_interval(H, std::min(l, s), std::max(h, s), bits)) return;
  }
  const P g = sqfree(H);
  if (g.size() <= 1) return;
  for (unsigned bits = 64; bits <= cap_bits; bits *= 2) {
    const auto [l, h] = exp_bounds(a0, q, bits);
    if (zero_between_sample_and_u0(g, s, l, h)) throw invalid(w + ": a zero lies between the sample and u0 = e^{a/q}");
    const Q lo = std::min(l, s), hi = std::max(h, s);
    if (evalq(g, lo) != 0 && evalq(g, hi) != 0 && roots_between(g, lo, hi) == 0) return;
  }
  throw beyond_cap(w + ": could not separate the sample's side from u0 = e^{a/q} at " + cap_text());
}

// det(λI − T) by Laplace expansion with entries in ℤ[u][λ] (λ-coefficient lists) — a different
// algorithm from the prover's (Berkowitz).
using BP = std::vector<P>;
BP bp_add(const BP& a, const BP& b) {
  BP c(std::max(a.size(), b.size()));
  for (std::size_t i = 0; i < a.size(); ++i) c[i] = add(c[i], a[i]);
  for (std::size_t i = 0; i < b.size(); ++i) c[i] = add(c[i], b[i]);
  while (!c.empty() && c.back().empty()) c.pop_back();
  return c;
}
BP bp_mul(const BP& a, const BP& b) {
  if (a.empty() || b.empty()) return {};
  BP c(a.size() + b.size() - 1);
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < b.size(); ++j) c[i + j] = add(c[i + j], mul(a[i], b[j]));
  while (!c.empty() && c.back().empty()) c.pop_back();
  return c;
}
BP bp_det(const std::vector<std::vector<BP>>& A, const std::vector<std::size_t>& rows, const std::vector<std::size_t>& cols) {
  if (rows.empty()) return {P{Z(1)}};
  BP acc;
  const std::vector<std::size_t> rest(rows.begin() + 1, rows.end());
  for (std::size_t j = 0; j < cols.size(); ++j) {
    const BP& a = A[rows[0]][cols[j]];
    if (a.empty()) continue;
    std::vector<std::size_t> c2;
    for (std::size_t t = 0; t < cols.size(); ++t)
      if (t != j) c2.push_back(cols[t]);
    BP term = bp_mul(a, bp_det(A, rest, c2));
    if (j % 2) for (auto& x : term) x = neg(x);
    acc = bp_add(acc, term);
  }
  return acc;
}

void verify_singular_value(const nlohmann::json& cert, const nlohmann::json& cl, const family& F, const std::vector<P>& Ds, const Z& Lv,
                           const std::function<void(const std::string&)>& note) {
  if (!cl.contains("point")) throw malformed("/claim/point: singular-value certificates are for a point");
  const Q a0 = num(cl["point"], "/claim/point");
  const long index = integer<long>(at(cl, "index", "/claim"), "/claim/index");
  if (index < 1 || index > std::min(F.rows, F.cols)) throw malformed("/claim/index: out of range");
  if (F.cols > 6) throw malformed("/claim: the checker handles singular values of at most 6 columns");
  // B = Mᵀ diag(Π_{l≠i} (L D_l)²) M = ρ OᵀO with ρ = Π (L D_l)².
  std::vector<P> LD;
  for (const auto& d : Ds) LD.push_back(mul(P{Lv}, d));
  P rho = {Z(1)};
  for (const auto& x : LD) rho = mul(rho, mul(x, x));
  const std::size_t n = static_cast<std::size_t>(F.cols);
  std::vector<std::vector<P>> B(n, std::vector<P>(n));
  for (long i = 0; i < F.rows; ++i) {
    P w = {Z(1)};
    for (std::size_t l = 0; l < LD.size(); ++l)
      if (static_cast<long>(l) != i) w = mul(w, mul(LD[l], LD[l]));
    for (std::size_t a = 0; a < n; ++a)
      for (std::size_t b = 0; b < n; ++b) B[a][b] = add(B[a][b], mul(w, mul(F.at(i, static_cast<long>(a)), F.at(i, static_cast<long>(b)))));
  }
  const std::string rel = at(cl, "relation", "/claim").get<std::string>();
  const Q c = num(at(cl, "value", "/claim"), "/claim/value");
  std::vector<std::pair<Q, std::string>> want;
  if (rel == "=" || rel == ">=") want.push_back({c, ">="});
  if (rel == "=" || rel == "<=") want.push_back({c, "<="});
  if (rel == "within") {
    const Q t = num(at(cl, "tolerance", "/claim"), "/claim/tolerance");
    if (t < 0) throw malformed("/claim/tolerance: negative");
    want = {{c - t, ">="}, {c + t, "<="}};
  }
  if (want.empty()) throw malformed("/claim/relation: =, <=, >= or within");
  const nlohmann::json& conds = at(at(cert, "singular_value", ""), "conditions", "/singular_value");
  if (!conds.is_array() || conds.size() != want.size()) throw malformed("/singular_value/conditions: expected " + std::to_string(want.size()));
  bool ok = true;
  for (std::size_t t = 0; t < want.size(); ++t) {
    const std::string w = "/singular_value/conditions/" + std::to_string(t);
    const nlohmann::json& e = conds[t];
    const Q cv = want[t].first;
    const std::string sense = want[t].second;
    check(num(at(e, "value", w), w + "/value") == cv && at(e, "sense", w).get<std::string>() == sense, w + ": not the condition the claim needs");
    bool holds;
    if (sense == ">=" && cv <= 0) {
      holds = true;
    } else if (sense == "<=" && cv < 0) {
      holds = false;
    } else {
      // T = den² B − num² ρ I; its eigenvalues have the signs of σ² − c² (and −c² for the
      // structural zeros).  χ(λ) = det(λI − T), all roots real: Descartes' count is exact.
      std::vector<std::vector<BP>> L(n, std::vector<BP>(n));
      const Z dd = denominator(cv) * denominator(cv), nn = numerator(cv) * numerator(cv);
      for (std::size_t a = 0; a < n; ++a)
        for (std::size_t b = 0; b < n; ++b) {
          P tab = mul(P{dd}, B[a][b]);
          if (a == b) tab = add(tab, neg(mul(P{nn}, rho)));
          L[a][b] = tab.empty() ? BP{} : BP{neg(tab)};  // λI − T
          if (a == b) L[a][b] = bp_add(L[a][b], BP{P{}, P{Z(1)}});
        }
      std::vector<std::size_t> all(n);
      for (std::size_t k = 0; k < n; ++k) all[k] = k;
      BP chi = bp_det(L, all, all);
      chi.resize(n + 1);
      const nlohmann::json& co = at(e, "charpoly", w);
      if (!co.is_array() || co.size() != n + 1) throw malformed(w + "/charpoly: expected " + std::to_string(n + 1) + " coefficients");
      int last = 0, positive = 0, zero = 0;
      bool seen = false;
      for (std::size_t j = 0; j <= n; ++j) {
        const std::string wj = w + "/charpoly/" + std::to_string(j);
        check(poly(at(co[j], "poly", wj), wj + "/poly") == chi[j], wj + "/poly: differs from the recomputed coefficient");
        int sg = 0;
        if (!chi[j].empty()) {
          const auto& sj = at(co[j], "sample", wj);
          const Q sample = num(at(sj, "u", wj), wj + "/sample/u");
          sg = integer<int>(at(sj, "sign", wj), wj + "/sign");
          check(sgn(evalq(chi[j], sample)) == sg, wj + "/sample: the sign there is not the stated one");
          check_point_sample(chi[j], a0, sample, F.q, wj);
        }
        if (sg == 0) {
          if (!seen) ++zero;
          continue;
        }
        seen = true;
        if (last != 0 && sg != last) ++positive;
        last = sg;
      }
      check(integer<int>(at(e, "positive", w), w + "/positive") == positive && integer<int>(at(e, "zero", w), w + "/zero") == zero, w + ": the eigenvalue counts differ");
      holds = sense == ">=" ? positive + zero >= index : positive <= index - 1;
      note(w + ": sigma_" + std::to_string(index) + " " + sense + " " + cv.str() + ": characteristic polynomial recomputed (Laplace), " +
           std::to_string(positive) + " eigenvalue(s) above c^2, " + std::to_string(zero) + " at c^2 (Descartes, exact for real roots)");
    }
    ok = ok && holds;
  }
  const std::string verdict = ok ? "CERTIFIED" : "REFUTED";
  check(at(cert, "verdict", "").get<std::string>() == verdict, "/verdict: the re-derived verdict is " + verdict);
  note("verdict re-derived: " + verdict);
}


// ---- output-bound certificates (P04) --------------------------------------------------------
void verify_output_bound(const nlohmann::json& cert, const nlohmann::json& cl, const std::function<void(const std::string&)>& note) {
  const QM S0 = qmatrix(at(cl, "S0", "/claim"), "/claim/S0"), H0 = qmatrix(at(cl, "S_hat0", "/claim"), "/claim/S_hat0"),
           V = qmatrix(at(cl, "V", "/claim"), "/claim/V");
  const std::size_t n = S0[0].size();
  if (H0.size() != S0.size() || H0[0].size() != n || V.size() != n) throw malformed("/claim: shapes");
  const long row = integer<long>(at(cl, "row", "/claim"), "/claim/row");
  if (row < 0 || row >= static_cast<long>(S0.size())) throw malformed("/claim/row: out of range");
  const std::string mk = at(cl, "mask", "/claim").get<std::string>();
  if (mk != "none" && mk != "causal") throw malformed("/claim/mask: none or causal");
  const Q a0 = num(at(cl, "point", "/claim"), "/claim/point");
  if (at(cl, "relation", "/claim").get<std::string>() != "<=" || at(cl, "value", "/claim").get<std::string>() != "bound")
    throw malformed("/claim: output_bound is '<=' 'bound'");
  const auto& r = S0[static_cast<std::size_t>(row)];
  const auto& rh = H0[static_cast<std::size_t>(row)];
  auto allowed = [&](std::size_t j) { return mk == "none" || static_cast<long>(j) <= row; };
  Z q = 1;
  for (std::size_t j = 0; j < n; ++j)
    if (allowed(j)) q = boost::multiprecision::lcm(q, boost::multiprecision::lcm(denominator(r[j]), denominator(rh[j])));
  check(parse_integer(at(cert, "q", "").get<std::string>(), "/q") == q, "/q: the common denominator is " + q.str());
  std::optional<Z> lo;
  for (std::size_t j = 0; j < n; ++j)
    if (allowed(j))
      for (const Q& x : {r[j], rh[j]}) {
        const Z e = numerator(Q(x * Q(q)));
        if (!lo || e < *lo) lo = e;
      }
  auto mono = [&](const Q& x) {
    const Z e = numerator(Q(x * Q(q))) - *lo;
    if (e > 1000) throw malformed("/claim: exponent spread too large (limit 1000)");
    P p(static_cast<std::size_t>(e.convert_to<long>()) + 1);
    p.back() = 1;
    return p;
  };
  P D, Dh;
  for (std::size_t j = 0; j < n; ++j)
    if (allowed(j)) {
      D = add(D, mono(r[j]));
      Dh = add(Dh, mono(rh[j]));
    }
  Z L = 1;
  Q mu = 0;
  for (const auto& vr : V) {
    Q n2 = 0;
    for (const auto& x : vr) {
      L = boost::multiprecision::lcm(L, denominator(x));
      n2 += x * x;
    }
    if (n2 > mu) mu = n2;
  }
  const nlohmann::json& ob = at(cert, "output_bound", "");
  check(num(at(ob, "mu", "/output_bound"), "/output_bound/mu") == mu, "/output_bound/mu: max_j ||v_j||^2 is " + mu.str());
  const nlohmann::json& dj = at(ob, "delta", "/output_bound");
  if (!dj.is_array() || dj.size() != n) throw malformed("/output_bound/delta: one per key");
  // δ_j = N̂_j D − N_j D̂ (Â_ij − A_ij = δ_j / (D D̂)); the sign at u0 from a checked sample
  std::vector<P> delta;
  P l1;
  for (std::size_t j = 0; j < n; ++j) {
    const std::string w = "/output_bound/delta/" + std::to_string(j);
    P d;
    if (allowed(j)) d = add(mul(mono(rh[j]), D), neg(mul(mono(r[j]), Dh)));
    check(poly(at(dj[j], "poly", w), w + "/poly") == d, w + "/poly: differs from the recomputed difference");
    int sg = 0;
    if (!d.empty()) {
      const Q sample = num(at(at(dj[j], "sample", w), "u", w), w + "/sample/u");
      sg = integer<int>(at(at(dj[j], "sample", w), "sign", w), w + "/sign");
      check(sgn(evalq(d, sample)) == sg, w + "/sample: the sign there is not the stated one");
      check_point_sample(d, a0, sample, q, w);
    }
    l1 = add(l1, sg >= 0 ? d : neg(d));
    delta.push_back(d);
  }
  P wsum;
  for (std::size_t k = 0; k < V[0].size(); ++k) {
    P W;
    for (std::size_t j = 0; j < n; ++j) W = add(W, mul(P{numerator(Q(V[j][k] * Q(L)))}, delta[j]));
    wsum = add(wsum, mul(W, W));
  }
  const P G = add(mul(P{Z(L * L * numerator(mu))}, mul(l1, l1)), neg(mul(P{denominator(mu)}, wsum)));
  const nlohmann::json& gj = at(ob, "G", "/output_bound");
  check(poly(at(gj, "poly", "/output_bound/G"), "/output_bound/G/poly") == G, "/output_bound/G/poly: differs from the recomputed bound^2 - error^2");
  int gsign = 0;
  if (!G.empty()) {
    const Q sample = num(at(at(gj, "sample", "/output_bound/G"), "u", "/output_bound/G"), "/output_bound/G/sample/u");
    gsign = integer<int>(at(at(gj, "sample", "/output_bound/G"), "sign", "/output_bound/G"), "/output_bound/G/sign");
    check(sgn(evalq(G, sample)) == gsign, "/output_bound/G/sample: the sign there is not the stated one");
    check_point_sample(G, a0, sample, q, "/output_bound/G");
  }
  note("row " + std::to_string(row) + ": differences, signs, |.|_1, the error and bound^2 - error^2 recomputed; its sign at a = " + a0.str() +
       " is " + std::to_string(gsign));
  const std::string verdict = gsign >= 0 ? "CERTIFIED" : "REFUTED";
  check(at(cert, "verdict", "").get<std::string>() == verdict, "/verdict: the re-derived verdict is " + verdict);
  note("verdict re-derived: " + verdict);
}

// A real quantity P(u)/R(u) with R > 0 for u > 0 (a determinant or an entry), against the claim.
void verify_ratio(const nlohmann::json& cert, const nlohmann::json& cl, const family& F, const P& Pd, const P& R, const std::string& what,
                  const std::function<void(const std::string&)>& note) {
  const nlohmann::json& dj = at(cert, "ratio", "");
  check(poly(at(dj, "P", "/ratio"), "/ratio/P") == Pd, "/ratio/P: differs from the recomputed numerator");
  check(poly(at(dj, "R", "/ratio"), "/ratio/R") == R, "/ratio/R: differs from the recomputed denominator");
  note(what + " = P(u)/R(u), R > 0: P (degree " + std::to_string(Pd.empty() ? 0 : Pd.size() - 1) + ") and R recomputed from the claim");
  const std::string rel = at(cl, "relation", "/claim").get<std::string>();
  const Q c = num(at(cl, "value", "/claim"), "/claim/value");
  std::vector<std::pair<Q, std::string>> want;
  if (rel == "within") {
    const Q t = num(at(cl, "tolerance", "/claim"), "/claim/tolerance");
    if (t < 0) throw malformed("/claim/tolerance: negative");
    want = {{c + t, "<=0"}, {c - t, ">=0"}};
  } else if (rel == "=" || rel == "<=" || rel == ">=") {
    want = {{c, rel == "=" ? "=0" : rel == "<=" ? "<=0" : ">=0"}};
  } else {
    throw malformed("/claim/relation: =, <=, >= or within");
  }
  const nlohmann::json& conds = at(dj, "conditions", "/ratio");
  if (!conds.is_array() || conds.size() != want.size()) throw malformed("/ratio/conditions: expected " + std::to_string(want.size()));
  bool ok = true;
  struct violation {
    Q value, u;
    int sign;
    bool exact_point;  // the claim's point (a stated as "a"), not a sample u
  };
  std::vector<violation> violations;
  for (std::size_t t = 0; t < want.size(); ++t) {
    const std::string w = "/ratio/conditions/" + std::to_string(t);
    const nlohmann::json& e = conds[t];
    check(num(at(e, "value", w), w + "/value") == want[t].first && at(e, "sense", w).get<std::string>() == want[t].second,
          w + ": not the condition the claim needs");
    // H = den(c)·P − num(c)·R: the sign of det − c (R > 0 for u > 0).
    const Q cv = want[t].first;
    P H = add(mul(P{denominator(cv)}, Pd), neg(mul(P{numerator(cv)}, R)));
    check(poly(at(e, "H", w), w + "/H") == H, w + "/H: differs from den(c) P - num(c) R");
    const nlohmann::json& rj = at(e, "roots", w);
    const nlohmann::json& sj = at(e, "samples", w);
    if (!rj.is_array() || !sj.is_array()) throw malformed(w + ": roots and samples are arrays");
    std::vector<std::pair<Q, Q>> roots;
    for (std::size_t k = 0; k < rj.size(); ++k) {
      if (!rj[k].is_array() || rj[k].size() != 2) throw malformed(w + "/roots: [lo, hi] pairs");
      roots.push_back({num(rj[k][0], w + "/roots"), num(rj[k][1], w + "/roots")});
      if (roots.back().first > roots.back().second || roots.back().first <= 0) throw malformed(w + "/roots: need 0 < lo <= hi");
    }
    std::vector<Q> samples;
    std::vector<int> signs;
    for (std::size_t k = 0; k < sj.size(); ++k) {
      samples.push_back(num(at(sj[k], "u", w + "/samples"), w + "/samples/u"));
      signs.push_back(integer<int>(at(sj[k], "sign", w + "/samples"), w + "/samples/sign"));
      check(sgn(evalq(H, samples.back())) == signs.back(), w + "/samples/" + std::to_string(k) + ": the sign of H there is not the stated one");
    }
    bool holds = true;
    if (H.empty()) {
      check(roots.empty() && samples.empty(), w + ": H is identically zero");
      note(w + ": det - " + cv.str() + " is identically zero");
    } else {
      // the squarefree part only where it is needed: at a point the interval filter on H itself
      // usually decides (Euclid over Q on a degree-500 H takes tens of seconds)
      const bool at_point = cl.contains("point");
      const P g = at_point ? P{} : sqfree(H);
      if (e.contains("sturm")) {
        const auto s = sturm(at_point ? sqfree(H) : g);
        check(e["sturm"].is_array() && e["sturm"].size() == s.size(), w + "/sturm: length differs");
        for (std::size_t k = 0; k < s.size(); ++k) check(poly(e["sturm"][k], w + "/sturm") == s[k], w + "/sturm/" + std::to_string(k) + ": differs");
      }
      if (cl.contains("point")) {
        const Q a0 = num(cl["point"], "/claim/point");
        check(roots.empty() && samples.size() == 1, w + ": a point needs exactly one sample and no roots");
        const Q s0 = samples[0];
        if (a0 == 0) {
          check(s0 == 1, w + ": at a = 0 the sample is u = 1");
        } else {
          // no root of H between the sample and the transcendental u0 = e^{a0/q}
          check_point_sample(H, a0, s0, F.q, w);
        }
        note(w + ": at the point, sign(det - " + cv.str() + ") = " + std::to_string(signs[0]));
      } else {
        const range_t Rg = parse_range(at(cl, "range", "/claim").get<std::string>());
        const bool one_root = evalq(g, Q(1)) == 0;
        P g1 = g;
        if (one_root) g1 = normalized(quoq(toq(g), PQ{Q(-1), Q(1)}));
        while (!g1.empty() && g1.front() == 0) g1.erase(g1.begin());
        auto cut = [&](const Q& a, bool low) -> Q {
          for (unsigned bits = 64; bits <= cap_bits; bits *= 2) {
            const auto [l, h] = exp_bounds(a, F.q, bits);
            if (g1.size() <= 1 || (evalq(g1, l) != 0 && evalq(g1, h) != 0 && roots_between(g1, l, h) == 0)) return low ? h : l;
          }
          throw beyond_cap("/claim/range: could not separate a range end from the zeros at " + cap_text());
        };
        Q L = 0;
        std::optional<Q> Hc;
        if (Rg.lo) L = *Rg.lo == 0 ? Q(1) : cut(*Rg.lo, true);
        if (Rg.hi) Hc = *Rg.hi == 0 ? Q(1) : cut(*Rg.hi, false);
        int count = g1.size() <= 1 ? 0 : roots_between(g1, L, Hc);
        const bool one_in = one_root && Rg.contains(Q(0));
        if (one_in) ++count;
        check(static_cast<long>(roots.size()) == count, w + "/roots: the range contains " + std::to_string(count) + " zeros of H, " +
                                                             std::to_string(roots.size()) + " listed");
        for (std::size_t k = 0; k < roots.size(); ++k) {
          const auto& r = roots[k];
          if (k > 0) check(roots[k - 1].second < r.first || (roots[k - 1].second == r.first && roots[k - 1].first != roots[k - 1].second && r.first != r.second),
                           w + "/roots: not increasing and disjoint");
          if (r.first == r.second) {
            // an exact rational zero: u = 1 (a = 0) when the range contains 0, or any other
            // rational zero strictly inside the image (a rational u ≠ 1 is e^{a/q} for the real
            // a = q log u; it never equals a transcendental range end)
            check(evalq(g, r.first) == 0, w + "/roots: a listed exact zero is not a zero of H");
            if (r.first == 1) check(one_in, w + "/roots: u = 1 (a = 0) is not in the range");
            else check(r.first > L && (!Hc || r.first < *Hc), w + "/roots: an exact zero outside the range");
          }
          else {
            check(evalq(g, r.first) != 0 && evalq(g, r.second) != 0 && roots_between(g, r.first, r.second) == 1, w + "/roots: an interval without exactly one zero");
            check(r.first >= L && (!Hc || r.second <= *Hc), w + "/roots: an interval outside the range");
          }
        }
        // samples interleave with the roots, one per open segment, all inside the image
        const bool root_at_low = !roots.empty() && roots.front().first == roots.front().second && Rg.lo && *Rg.lo == 0;
        const bool root_at_high = !roots.empty() && roots.back().first == roots.back().second && Rg.hi && *Rg.hi == 0;
        const std::size_t segments = roots.size() + 1 - (root_at_low ? 1 : 0) - (root_at_high ? 1 : 0);
        check(samples.size() == segments, w + "/samples: expected one per segment (" + std::to_string(segments) + ")");
        std::size_t si = 0;
        auto inside_image = [&](const Q& x) {
          if (x <= 0) return false;
          if (Rg.lo && (*Rg.lo == 0 ? x <= 1 : exp_below(*Rg.lo, F.q, x) == false)) return false;
          if (Rg.hi && (*Rg.hi == 0 ? x >= 1 : exp_below(*Rg.hi, F.q, x) == true)) return false;
          return true;
        };
        for (std::size_t k = 0; k <= roots.size(); ++k) {
          if ((k == 0 && root_at_low) || (k == roots.size() && root_at_high)) continue;
          const Q& x = samples[si];
          check(signs[si] != 0, w + "/samples: a sample at a zero");
          check(inside_image(x), w + "/samples: a sample outside the range");
          if (k > 0) check(x >= roots[k - 1].second, w + "/samples: not after the previous zero");
          if (k < roots.size()) check(x <= roots[k].first, w + "/samples: not before the next zero");
          ++si;
        }
        note(w + ": H has exactly " + std::to_string(count) + " zero(s) in the range (Sturm); signs on the segments re-derived");
      }
    }
    for (std::size_t k = 0; k < signs.size(); ++k) {
      const int sg = signs[k];
      const std::string& sense = want[t].second;
      if (sense == "=0" ? sg != 0 : sense == "<=0" ? sg > 0 : sg < 0) {
        holds = false;
        violations.push_back({cv, samples[k], sg, cl.contains("point")});
      }
    }
    ok = ok && holds;
  }
  // The counterexample must be one of the violations re-derived above (and its a-enclosure
  // must contain q·log u): a REFUTED certificate states nothing unchecked.
  if (!ok) {
    const nlohmann::json& ce = at(cert, "counterexample", "");
    const Q cval = num(at(ce, "value", "/counterexample"), "/counterexample/value");
    const int csign = integer<int>(at(ce, "sign_of_quantity_minus_value", "/counterexample"), "/counterexample/sign_of_quantity_minus_value");
    bool found = false;
    for (const auto& v : violations) {
      if (v.value != cval || v.sign != csign) continue;
      if (v.exact_point) {
        found = num(at(ce, "a", "/counterexample"), "/counterexample/a") == num(cl["point"], "/claim/point");
      } else {
        const Q u = num(at(ce, "u", "/counterexample"), "/counterexample/u");
        const auto& aj = at(ce, "a_enclosure", "/counterexample");
        if (!aj.is_array() || aj.size() != 2) throw malformed("/counterexample/a_enclosure: [lo, hi]");
        found = u == v.u && encloses_qlog(num(aj[0], "/counterexample/a_enclosure/0"), num(aj[1], "/counterexample/a_enclosure/1"), u, u, F.q);
      }
      if (found) break;
    }
    check(found, "/counterexample: not a violation re-derived from the certificate (or its a-enclosure misses q log u)");
    note("counterexample re-derived: sign(quantity - " + cval.str() + ") = " + std::to_string(csign) + " there");
  } else {
    check(!cert.contains("counterexample"), "/counterexample: present although the claim holds");
  }
  const std::string verdict = ok ? "CERTIFIED" : "REFUTED";
  check(at(cert, "verdict", "").get<std::string>() == verdict, "/verdict: the re-derived verdict is " + verdict);
  note("verdict re-derived: " + verdict);
}


}  // namespace

// ---- numerical-rank certificates --------------------------------------------------------------
// Re-forms the matrix the recipe computes with this file's own evaluator (binary64 and binary32
// in hardware with libm's exp, as the recipe specifies; binary16 and bfloat16 with MPFR rounding
// every operation to the format's precision and exponent range), then re-derives the rank from
// eigenvalue counts of the Gram matrix: characteristic polynomial by Faddeev–LeVerrier over ℚ,
// Descartes' rule after an exact Taylor shift (exact for real-rooted polynomials).
namespace nr {

enum class fmt { f64, f32, f16, bf16 };
int prec(fmt f) { return f == fmt::f64 ? 53 : f == fmt::f32 ? 24 : f == fmt::f16 ? 11 : 8; }

// x (exact) rounded to nearest even in a 16-bit format, via MPFR's IEEE emulation.
double emu(fmt f, mpfr_t x) {
  const int p = prec(f);
  const long emin = f == fmt::f16 ? -14 : -126, emax = f == fmt::f16 ? 15 : 127;
  const mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
  mpfr_set_emin(emin - p + 2);  // MPFR exponents: x = 0.1b... × 2^e
  mpfr_set_emax(emax + 1);
  mpfr_t y;
  mpfr_init2(y, p);
  int inex = mpfr_set(y, x, MPFR_RNDN);
  inex = mpfr_check_range(y, inex, MPFR_RNDN);
  mpfr_subnormalize(y, inex, MPFR_RNDN);
  const double r = mpfr_get_d(y, MPFR_RNDN);
  mpfr_clear(y);
  mpfr_set_emin(old_min);
  mpfr_set_emax(old_max);
  return r;
}
enum class op { add, sub, mul, div, exp, conv };
double apply(fmt f, op o, double a, double b = 0) {
  if (f == fmt::f64) {
    switch (o) {
      case op::add: return a + b;
      case op::sub: return a - b;
      case op::mul: return a * b;
      case op::div: return a / b;
      case op::exp: return std::exp(a);
      default: return a;
    }
  }
  if (f == fmt::f32) {
    const float x = static_cast<float>(a), y = static_cast<float>(b);
    switch (o) {
      case op::add: return x + y;
      case op::sub: return x - y;
      case op::mul: return x * y;
      case op::div: return x / y;
      case op::exp: return std::exp(x);
      default: return x;
    }
  }
  mpfr_t x, y;
  mpfr_init2(x, 2200);  // exact for sums, differences and products of two binary64 numbers
  mpfr_init2(y, 64);
  mpfr_set_d(x, a, MPFR_RNDN);
  mpfr_set_d(y, b, MPFR_RNDN);
  double r = 0;
  switch (o) {
    case op::add: mpfr_add(x, x, y, MPFR_RNDN); break;
    case op::sub: mpfr_sub(x, x, y, MPFR_RNDN); break;
    case op::mul: mpfr_mul(x, x, y, MPFR_RNDN); break;
    case op::div:  // at 2200 bits, then one rounding to the format: a quotient of two format numbers that is a
                   // rounding midpoint (<= 12 bits) is exact at 2200 bits, so no double rounding can occur
      mpfr_div_d(x, x, b, MPFR_RNDN);
      break;
    case op::exp:  // e^a (a != 0) is transcendental, never a midpoint: rounding at 2200 bits first is harmless
      mpfr_set_d(y, a, MPFR_RNDN);
      mpfr_exp(x, y, MPFR_RNDN);
      break;
    default: break;
  }
  r = emu(f, x);
  mpfr_clear(x);
  mpfr_clear(y);
  return r;
}

Q exactq(double d) {
  Q r;
  mpq_set_d(r.backend().data(), d);
  return r;
}
double as_double(const Q& v, const std::string& where) {
  const double d = v.convert_to<double>();
  if (!std::isfinite(d) || exactq(d) != v) throw malformed(where + ": not a binary64 number");
  return d;
}
using DM = std::vector<std::vector<double>>;
DM dmatrix(const nlohmann::json& j, const std::string& where) {
  const QM m = qmatrix(j, where);
  DM d(m.size(), std::vector<double>(m[0].size()));
  for (std::size_t i = 0; i < m.size(); ++i)
    for (std::size_t k = 0; k < m[i].size(); ++k) d[i][k] = as_double(m[i][k], where);
  return d;
}

// eigenvalues of the symmetric rational G strictly above t, with multiplicity
std::size_t count_above(const QM& G, const Q& t) {
  const std::size_t n = G.size();
  QM A = G;
  for (std::size_t i = 0; i < n; ++i) A[i][i] -= t;
  // Faddeev–LeVerrier: chi(x) = x^n + c_{n-1} x^{n-1} + ... + c_0
  std::vector<Q> c(n + 1);
  c[n] = 1;
  QM Mk(n, std::vector<Q>(n));  // M_0 = 0
  for (std::size_t k = 1; k <= n; ++k) {
    QM AM(n, std::vector<Q>(n));
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        Q v = 0;
        for (std::size_t l = 0; l < n; ++l) v += A[i][l] * Mk[l][j];
        AM[i][j] = v;
      }
    // M_k = A M_{k-1} + c_{n-k+1} I
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) Mk[i][j] = AM[i][j] + (i == j ? c[n - k + 1] : Q(0));
    Q tr = 0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t l = 0; l < n; ++l) tr += A[i][l] * Mk[l][i];
    c[n - k] = -tr / Q(static_cast<long>(k));
  }
  // all roots real: sign changes of the coefficients = number of positive roots
  std::size_t changes = 0;
  int last = 0;
  for (const Q& v : c) {
    const int sg = v > 0 ? 1 : v < 0 ? -1 : 0;
    if (sg == 0) continue;
    if (last != 0 && sg != last) ++changes;
    last = sg;
  }
  return changes;
}

// policy text -> (alpha, beta) with threshold max(alpha sigma_1, beta), strict
bool policy_coefficients(const std::string& text, long m, long n, int p, Q& alpha, Q& beta) {
  const Q eps = Q(1) / Q(Z(1) << (p - 1));
  const Q big(std::max(m, n));
  std::vector<std::string> parts;
  std::size_t s = 0;
  for (std::size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == ':') {
      parts.push_back(text.substr(s, i - s));
      s = i + 1;
    }
  auto param = [&](std::size_t k) {  // the binary64 nearest the decimal, as the prover's policy parser reads it
    const char* b = parts[k].c_str();
    char* end = nullptr;
    const double v = parts[k].empty() || std::isspace(static_cast<unsigned char>(*b)) ? NAN : std::strtod(b, &end);
    if (!std::isfinite(v) || end != b + parts[k].size()) throw malformed("/claim/policy: bad parameter '" + shown(parts[k]) + "'");
    return exactq(v);
  };
  if (parts[0] == "numpy" && parts.size() == 1) alpha = big * eps, beta = 0;
  else if (parts[0] == "lapack" && parts.size() <= 2) alpha = parts.size() == 2 ? param(1) : eps, beta = 0;
  else if (parts[0] == "torch" && parts.size() <= 3) {
    beta = parts.size() == 3 ? param(2) : Q(0);
    const bool rtol_given = parts.size() >= 2 && parts[1] != "default";
    alpha = rtol_given ? param(1) : (beta > 0 && parts.size() == 3 ? Q(0) : big * eps);
  } else if (parts[0] == "absolute" && parts.size() == 2) alpha = 0, beta = param(1);
  else if (parts[0] == "relative" && parts.size() == 2) alpha = param(1), beta = 0;
  else return false;
  return true;
}

}  // namespace nr

void verify_numerical_rank(const nlohmann::json& cert, const nlohmann::json& cl, const std::function<void(const std::string&)>& note) {
  using namespace nr;
  const std::string recipe = at(cl, "recipe", "/claim").get<std::string>();
  if (cl.contains("point")) (void)num(cl["point"], "/claim/point");  // informational, but an exact number
  fmt st, acc, sm, oacc, res;
  if (recipe == "fp64") st = acc = sm = oacc = res = fmt::f64;
  else if (recipe == "fp32") st = acc = sm = oacc = res = fmt::f32;
  else if (recipe == "fp16") st = acc = sm = oacc = res = fmt::f16;
  else if (recipe == "bf16") st = acc = sm = oacc = res = fmt::bf16;
  else if (recipe == "fp16-fp32acc") st = res = fmt::f16, acc = sm = oacc = fmt::f32;
  else if (recipe == "bf16-fp32acc") st = res = fmt::bf16, acc = sm = oacc = fmt::f32;
  else throw malformed("/claim/recipe: fp64, fp32, fp16, bf16, fp16-fp32acc or bf16-fp32acc");
  const DM Qm = dmatrix(at(cl, "Q", "/claim"), "/claim/Q"), Km = dmatrix(at(cl, "K", "/claim"), "/claim/K");
  const double scale = as_double(num(at(cl, "scale", "/claim"), "/claim/scale"), "/claim/scale");
  const std::string object = at(cl, "object", "/claim").get<std::string>();
  const std::string mk = at(cl, "mask", "/claim").get<std::string>();
  if (mk != "none" && mk != "causal") throw malformed("/claim/mask: none or causal");
  const std::size_t nq = Qm.size(), nk = Km.size(), d = Qm[0].size();
  if (Km[0].size() != d) throw malformed("/claim/K: width differs from Q");
  auto cv = [](fmt f, double x) { return apply(f, op::conv, x); };
  // scores in the accumulation format
  const double sc = cv(acc, scale);
  DM S(nq, std::vector<double>(nk));
  for (std::size_t i = 0; i < nq; ++i)
    for (std::size_t j = 0; j < nk; ++j) {
      double s = 0;
      for (std::size_t k = 0; k < d; ++k)
        s = apply(acc, op::add, s, apply(acc, op::mul, cv(acc, cv(st, Qm[i][k])), cv(acc, cv(st, Km[j][k]))));
      S[i][j] = apply(acc, op::mul, sc, s);
    }
  DM out = S;
  if (object != "scores") {
    DM A(nq, std::vector<double>(nk, 0.0));
    for (std::size_t i = 0; i < nq; ++i) {
      double shift = 0;
      bool any = false;
      for (std::size_t j = 0; j < nk; ++j)
        if (mk == "none" || j <= i) {
          const double x = cv(sm, S[i][j]);
          shift = any ? std::max(shift, x) : x;
          any = true;
        }
      if (!any) throw malformed("/claim/mask: a fully masked row");
      double z = 0;
      for (std::size_t j = 0; j < nk; ++j)
        if (mk == "none" || j <= i) {
          A[i][j] = apply(sm, op::exp, apply(sm, op::sub, cv(sm, S[i][j]), shift));
          z = apply(sm, op::add, z, A[i][j]);
        }
      for (std::size_t j = 0; j < nk; ++j)
        if (mk == "none" || j <= i) A[i][j] = apply(sm, op::div, A[i][j], z);
    }
    out = A;
    if (object == "output") {
      const DM Vm = dmatrix(at(cl, "V", "/claim"), "/claim/V");
      if (Vm.size() != nk) throw malformed("/claim/V: one row per key");
      DM O(nq, std::vector<double>(Vm[0].size()));
      for (std::size_t i = 0; i < nq; ++i)
        for (std::size_t c = 0; c < Vm[0].size(); ++c) {
          double s = 0;
          for (std::size_t k = 0; k < nk; ++k)
            s = apply(oacc, op::add, s, apply(oacc, op::mul, cv(oacc, A[i][k]), cv(oacc, cv(st, Vm[k][c]))));
          O[i][c] = s;
        }
      out = O;
    } else if (object != "attention") {
      throw malformed("/claim/object: scores, attention or output");
    }
  }
  const std::size_t m = out.size(), n = out[0].size();
  QM Mh(m, std::vector<Q>(n));
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const double v = cv(res, out[i][j]);
      if (!std::isfinite(v)) throw invalid("the recipe forms a non-finite entry");
      Mh[i][j] = exactq(v);
    }
  const nlohmann::json& nrj = at(cert, "numerical_rank", "");
  check(qmatrix(at(nrj, "formed", "/numerical_rank"), "/numerical_rank/formed") == Mh,
        "/numerical_rank/formed: differs from the matrix re-formed by the recipe");
  note("re-formed the " + object + " with recipe " + recipe + " (own evaluator): equal to the certificate's matrix");
  Q alpha, beta;
  if (!policy_coefficients(at(cl, "policy", "/claim").get<std::string>(), static_cast<long>(m), static_cast<long>(n), prec(res), alpha, beta))
    throw malformed("/claim/policy: numpy, lapack[:R], torch[:R[:A]], absolute:T or relative:T");
  check(num(at(nrj, "alpha", "/numerical_rank"), "/numerical_rank/alpha") == alpha &&
            num(at(nrj, "beta", "/numerical_rank"), "/numerical_rank/beta") == beta,
        "/numerical_rank: alpha, beta differ from the policy's");
  // Gram matrix (the smaller side)
  const bool rows = m <= n;
  const std::size_t g = rows ? m : n;
  QM G(g, std::vector<Q>(g));
  for (std::size_t a = 0; a < g; ++a)
    for (std::size_t b = 0; b < g; ++b) {
      Q v = 0;
      for (std::size_t k = 0; k < (rows ? n : m); ++k) v += rows ? Mh[a][k] * Mh[b][k] : Mh[k][a] * Mh[k][b];
      G[a][b] = v;
    }
  std::size_t rank = 0;
  if (count_above(G, 0) > 0) {
    const Q l = num(at(nrj, "sigma1_squared_above", "/numerical_rank"), "/numerical_rank/sigma1_squared_above");
    const Q u = num(at(nrj, "sigma1_squared_at_most", "/numerical_rank"), "/numerical_rank/sigma1_squared_at_most");
    check(count_above(G, l) >= 1 && count_above(G, u) == 0, "/numerical_rank: sigma_1^2 is not in (l, u]");
    const Q tlo = std::max(Q(alpha * alpha * l), Q(beta * beta)), thi = std::max(Q(alpha * alpha * u), Q(beta * beta));
    rank = count_above(G, tlo);
    check(count_above(G, thi) == rank, "/numerical_rank: the threshold's enclosure does not decide the rank");
  }
  check(integer<std::size_t>(at(nrj, "rank", "/numerical_rank"), "/numerical_rank/rank") == rank, "/numerical_rank/rank: the re-derived rank is " + std::to_string(rank));
  const std::string rel = at(cl, "relation", "/claim").get<std::string>();
  const std::size_t value = integer<std::size_t>(at(cl, "value", "/claim"), "/claim/value");
  const bool ok = rel == "=" ? rank == value : rel == "<=" ? rank <= value : rel == ">=" ? rank >= value : throw malformed("/claim/relation");
  const std::string verdict = ok ? "CERTIFIED" : "REFUTED";
  check(at(cert, "verdict", "").get<std::string>() == verdict, "/verdict: the re-derived verdict is " + verdict);
  note("numerical rank " + std::to_string(rank) + " re-derived from eigenvalue counts of the Gram matrix (Faddeev-LeVerrier, "
       "Descartes); verdict re-derived: " + verdict);
}

nlohmann::json parse_certificate_text(const std::string& text) {
  // nlohmann's parser is iterative; the depth check keeps every later (recursive) copy,
  // comparison or dump of the document shallow.
  const auto depth_check = [](int depth, nlohmann::json::parse_event_t ev, nlohmann::json&) {
    if ((ev == nlohmann::json::parse_event_t::object_start || ev == nlohmann::json::parse_event_t::array_start) &&
        depth >= static_cast<int>(max_depth))
      throw std::invalid_argument("malformed certificate: JSON nested deeper than " + std::to_string(max_depth) + " levels");
    return true;
  };
  try {
    return nlohmann::json::parse(text, depth_check);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument("malformed JSON: " + shown(std::string(e.what()).substr(0, 160)));
  }
}

verification verify_certificate(const nlohmann::json& cert, const verify_options& options) {
  verification out;
  struct cap_scope {  // the cap of this call, restored afterwards
    unsigned saved;
    explicit cap_scope(unsigned b) : saved(cap_bits) { cap_bits = std::max(64u, b); }
    ~cap_scope() { cap_bits = saved; }
  } cap_guard(options.max_precision_bits);
  auto note = [&](const std::string& s) { out.notes.push_back(s); };
  try {
    if (!cert.is_object() || cert.value("format", "") != "attncert-certificate/1")
      throw malformed("/format: expected \"attncert-certificate/1\"");
    const nlohmann::json& cl = at(cert, "claim", "");
    if (cl.is_object() && cl.value("quantity", "") == "output_bound") {
      verify_output_bound(cert, cl, note);
      out.result = verification::status::valid;
      return out;
    }
    if (cl.is_object() && cl.value("quantity", "") == "numerical_rank") {
      verify_numerical_rank(cert, cl, note);
      out.result = verification::status::valid;
      return out;
    }
    const QM S0 = qmatrix(at(cl, "S0", "/claim"), "/claim/S0");
    const long m = static_cast<long>(S0.size()), n = static_cast<long>(S0[0].size());
    // mask
    std::vector<std::vector<bool>> allow(static_cast<std::size_t>(m), std::vector<bool>(static_cast<std::size_t>(n), true));
    const nlohmann::json& mk = at(cl, "mask", "/claim");
    if (mk.is_string() && mk.get<std::string>() == "causal") {
      for (long i = 0; i < m; ++i)
        for (long j = 0; j < n; ++j) allow[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = j <= i;
    } else if (mk.is_array()) {
      if (static_cast<long>(mk.size()) != m) throw malformed("/claim/mask: shape");
      for (long i = 0; i < m; ++i) {
        if (!mk[static_cast<std::size_t>(i)].is_array() || static_cast<long>(mk[static_cast<std::size_t>(i)].size()) != n) throw malformed("/claim/mask: shape");
        for (long j = 0; j < n; ++j) {
          const auto& e = mk[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
          if (!e.is_number_integer() || (e != 0 && e != 1)) throw malformed("/claim/mask: 0/1 entries");
          allow[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = e == 1;
        }
      }
    } else if (!(mk.is_string() && mk.get<std::string>() == "none")) {
      throw malformed("/claim/mask: none, causal or a 0/1 matrix");
    }
    const std::string object = at(cl, "object", "/claim").get<std::string>();
    std::optional<QM> V, X;
    if (cl.contains("V")) V = qmatrix(cl["V"], "/claim/V");
    if (cl.contains("X")) X = qmatrix(cl["X"], "/claim/X");
    // ---- M(u)
    family F;
    F.rows = m;
    auto setc = [](P& p, long k, const Z& c) {
      if (static_cast<long>(p.size()) <= k) p.resize(static_cast<std::size_t>(k + 1));
      p[static_cast<std::size_t>(k)] += c;
    };
    const bool scores = object == "scores";
    std::vector<P> Ds;  // D_i(u) = row sums of the row-normalized E (non-scores)
    Z Lv = 1;           // the integer scale of V (and X for the residual) in M
    if (scores) {
      Z L = 1;
      for (const auto& r : S0)
        for (const auto& x : r) L = boost::multiprecision::lcm(L, denominator(x));
      F.cols = n;
      for (const auto& r : S0)
        for (const auto& x : r) {
          const Z c = numerator(Q(x * Q(L)));
          F.e.push_back(c == 0 ? P{} : P{c});
        }
    } else {
      if (object != "attention" && object != "output" && object != "residual") throw malformed("/claim/object: unknown");
      Z qd = 1;
      for (long i = 0; i < m; ++i)
        for (long j = 0; j < n; ++j)
          if (allow[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]) qd = boost::multiprecision::lcm(qd, denominator(S0[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]));
      F.q = qd;
      std::vector<std::vector<long>> ex(static_cast<std::size_t>(m), std::vector<long>(static_cast<std::size_t>(n), 0));
      for (long i = 0; i < m; ++i) {
        std::optional<Z> lo;
        for (long j = 0; j < n; ++j)
          if (allow[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]) {
            const Z e = numerator(Q(S0[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] * Q(qd)));
            if (!lo || e < *lo) lo = e;
          }
        if (!lo) throw malformed("/claim/mask: a fully masked row");
        for (long j = 0; j < n; ++j)
          if (allow[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]) {
            const Z d = numerator(Q(S0[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] * Q(qd))) - *lo;
            if (d > 1000) throw malformed("/claim/S0: exponent spread too large (limit 1000)");
            ex[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = d.convert_to<long>();
          }
        P Di;
        for (long j = 0; j < n; ++j)
          if (allow[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]) setc(Di, ex[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)], Z(1));
        Ds.push_back(Di);
      }
      if (object == "attention") {
        F.cols = n;
        F.e.assign(static_cast<std::size_t>(m * n), {});
        for (long i = 0; i < m; ++i)
          for (long j = 0; j < n; ++j)
            if (allow[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]) setc(F.e[static_cast<std::size_t>(i * n + j)], ex[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)], Z(1));
      } else {
        if (!V || static_cast<long>(V->size()) != n) throw malformed("/claim/V: needed, with one row per key");
        const long d = static_cast<long>((*V)[0].size());
        if (object == "residual" && (!X || static_cast<long>(X->size()) != m || static_cast<long>((*X)[0].size()) != d))
          throw malformed("/claim/X: needed, shape (queries, value width)");
        Z L = 1;
        for (const auto& r : *V)
          for (const auto& x : r) L = boost::multiprecision::lcm(L, denominator(x));
        if (object == "residual")
          for (const auto& r : *X)
            for (const auto& x : r) L = boost::multiprecision::lcm(L, denominator(x));
        Lv = L;
        F.cols = d;
        F.e.assign(static_cast<std::size_t>(m * d), {});
        for (long i = 0; i < m; ++i)
          for (long k = 0; k < d; ++k)
            for (long j = 0; j < n; ++j) {
              if (!allow[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]) continue;
              Q c = (*V)[static_cast<std::size_t>(j)][static_cast<std::size_t>(k)];
              if (object == "residual") c += (*X)[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)];
              setc(F.e[static_cast<std::size_t>(i * d + k)], ex[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)], numerator(Q(c * Q(L))));
            }
        for (auto& p : F.e) trim(p);
      }
    }
    if (std::min(F.rows, F.cols) > 8) throw malformed("/claim: the checker handles matrices with min(rows, cols) <= 8");
    check(parse_integer(at(cert, "q", "").get<std::string>(), "/q") == F.q, "/q: the common denominator is " + F.q.str());
    note("rebuilt M(u) (" + std::to_string(F.rows) + "x" + std::to_string(F.cols) + ", " + object + ") from the claim; q = " + F.q.str());
    const std::string quantity = cl.value("quantity", "rank");
    if (quantity == "determinant" || quantity == "output_value") {
      if (scores) throw malformed("/claim/object: no determinant or value certificates for scores");
      P Pn, Rd;
      std::string what;
      if (quantity == "determinant") {
        check(F.rows == F.cols, "/claim: the determinant needs a square matrix");
        std::vector<long> all;
        for (long i = 0; i < F.rows; ++i) all.push_back(i);
        Pn = det(F, all, all);  // det(object) = det M / (L^n Π D_i)
        Rd = {Z(1)};
        for (const auto& d : Ds) Rd = mul(Rd, mul(P{Lv}, d));
        what = "det(" + object + ")";
      } else {
        const long i = integer<long>(at(cl, "row", "/claim"), "/claim/row"), k = integer<long>(at(cl, "col", "/claim"), "/claim/col");
        if (i < 0 || k < 0 || i >= F.rows || k >= F.cols) throw malformed("/claim/row: entry outside the matrix");
        Pn = F.at(i, k);  // entry = M_ik / (L D_i)
        Rd = mul(P{Lv}, Ds[static_cast<std::size_t>(i)]);
        what = object + "[" + std::to_string(i) + "][" + std::to_string(k) + "]";
      }
      verify_ratio(cert, cl, F, Pn, Rd, what, note);
      out.result = verification::status::valid;
      return out;
    }
    if (quantity == "singular_value") {
      if (scores) throw malformed("/claim/object: no singular-value certificates for scores");
      verify_singular_value(cert, cl, F, Ds, Lv, note);
      out.result = verification::status::valid;
      return out;
    }
    if (quantity != "rank") throw malformed("/claim/quantity: rank, determinant, output_value or singular_value");
    // ---- generic rank: upper bound
    const nlohmann::json& grj = at(cert, "generic_rank", "");
    if (!grj.is_number_unsigned()) throw malformed("/generic_rank: expected a non-negative integer");
    const long r = integer<long>(grj, "/generic_rank");
    const nlohmann::json& ub = at(cert, "upper_bound", "");
    const std::string method = at(ub, "method", "/upper_bound").get<std::string>();
    if (method == "dimensions") {
      check(r == std::min(F.rows, F.cols), "/upper_bound: rank " + std::to_string(r) + " is not min(rows, cols)");
      note("rank <= min(rows, cols) = " + std::to_string(r));
    } else if (method == "kernel") {
      const nlohmann::json& vs = at(ub, "vectors", "/upper_bound");
      if (!vs.is_array()) throw malformed("/upper_bound/vectors: expected an array");
      check(static_cast<long>(vs.size()) == F.cols - r, "/upper_bound/vectors: need cols - rank = " + std::to_string(F.cols - r) + " vectors");
      std::vector<std::vector<P>> N;
      for (std::size_t t = 0; t < vs.size(); ++t) {
        if (!vs[t].is_array() || static_cast<long>(vs[t].size()) != F.cols) throw malformed("/upper_bound/vectors/" + std::to_string(t) + ": length");
        std::vector<P> v;
        for (long i = 0; i < F.cols; ++i) v.push_back(poly(vs[t][static_cast<std::size_t>(i)], "/upper_bound/vectors/" + std::to_string(t) + "/" + std::to_string(i)));
        for (long i = 0; i < F.rows; ++i) {
          P acc;
          for (long j = 0; j < F.cols; ++j) acc = add(acc, mul(F.at(i, j), v[static_cast<std::size_t>(j)]));
          check(acc.empty(), "/upper_bound/vectors/" + std::to_string(t) + ": M(u) v(u) is not identically zero (row " + std::to_string(i) + ")");
        }
        N.push_back(v);
      }
      // independence: rank of N(u0) over ℚ at u0 = 2, 3, 5, 7 (one suffices)
      bool independent = N.empty();
      for (int u0 : {2, 3, 5, 7, 11}) {
        if (independent) break;
        std::vector<std::vector<Q>> A;
        for (const auto& v : N) {
          std::vector<Q> row;
          for (const auto& p : v) row.push_back(evalq(p, Q(u0)));
          A.push_back(row);
        }
        std::size_t rk = 0;
        for (std::size_t c = 0; c < static_cast<std::size_t>(F.cols) && rk < A.size(); ++c) {
          std::size_t piv = rk;
          while (piv < A.size() && A[piv][c] == 0) ++piv;
          if (piv == A.size()) continue;
          std::swap(A[piv], A[rk]);
          for (std::size_t i2 = rk + 1; i2 < A.size(); ++i2) {
            const Q f = A[i2][c] / A[rk][c];
            for (std::size_t c2 = c; c2 < static_cast<std::size_t>(F.cols); ++c2) A[i2][c2] -= f * A[rk][c2];
          }
          ++rk;
        }
        independent = rk == A.size();
      }
      check(independent, "/upper_bound/vectors: not shown independent");
      note("rank over Q(u) <= " + std::to_string(r) + ": " + std::to_string(N.size()) + " kernel vectors, M N = 0 identically, independent");
    } else {
      throw malformed("/upper_bound/method: dimensions or kernel");
    }
    // ---- generic rank: lower bound, gcd, Sturm
    const nlohmann::json& ms = at(cert, "minors", "");
    if (!ms.is_array()) throw malformed("/minors: expected an array");
    P g;
    if (r == 0) {
      for (const auto& p : F.e) check(p.empty(), "/generic_rank: 0 but M(u) has a nonzero entry");
      g = {Z(1)};
    }
    for (std::size_t t = 0; t < ms.size(); ++t) {
      const std::string w = "/minors/" + std::to_string(t);
      const auto rows = index_list(at(ms[t], "rows", w), w + "/rows", F.rows), cols = index_list(at(ms[t], "cols", w), w + "/cols", F.cols);
      if (static_cast<long>(rows.size()) != r || static_cast<long>(cols.size()) != r) throw malformed(w + ": not an r x r minor");
      const P stated = poly(at(ms[t], "poly", w), w + "/poly");
      const P d = det(F, rows, cols);
      check(d == stated, w + "/poly: differs from the recomputed minor");
      check(!d.empty(), w + ": the minor is identically zero");
      g = g.empty() ? d : gcdz(g, d);
    }
    if (r > 0) check(!g.empty(), "/minors: no nonzero r x r minor given");
    g = sqfree(g);
    check(g == poly(at(cert, "gcd", ""), "/gcd"), "/gcd: differs from the squarefree gcd of the listed minors");
    if (cert.contains("sturm")) {
      const auto s = sturm(g);
      const nlohmann::json& sj = cert["sturm"];
      check(sj.is_array() && sj.size() == s.size(), "/sturm: length differs from the recomputed Sturm sequence");
      for (std::size_t t = 0; t < s.size(); ++t) check(poly(sj[t], "/sturm/" + std::to_string(t)) == s[t], "/sturm/" + std::to_string(t) + ": differs");
    }
    note("rank over Q(u) >= " + std::to_string(r) + ": " + std::to_string(ms.size()) + " recomputed nonzero minors; their gcd g has degree " +
         std::to_string(g.empty() ? 0 : g.size() - 1));
    // ---- the parameter set and the drops
    const nlohmann::json& dj = at(cert, "drops", "");
    if (!dj.is_array()) throw malformed("/drops: expected an array");
    struct drop {
      Q lo, hi;
      long rank;
    };
    std::vector<drop> drops;
    for (std::size_t t = 0; t < dj.size(); ++t) {
      const std::string w = "/drops/" + std::to_string(t);
      const auto& u = at(dj[t], "u", w);
      if (!u.is_array() || u.size() != 2) throw malformed(w + "/u: [lo, hi]");
      drop d{num(u[0], w + "/u/0"), num(u[1], w + "/u/1"), integer<long>(at(dj[t], "rank", w), w + "/rank")};
      if (d.lo > d.hi || d.lo <= 0) throw malformed(w + "/u: need 0 < lo <= hi");
      check(d.rank < r && d.rank >= 0, w + "/rank: must be below the generic rank");
      drops.push_back(d);
    }
    bool point = false, generic_present = true;
    if (cl.contains("point_algebraic_nonzero")) {
      point = true;
      // only the form the prover emits: a = 1/sqrt(d), d a positive integer (algebraic, nonzero)
      const std::string ap = cl["point_algebraic_nonzero"].get<std::string>();
      const bool form = ap.size() > 8 && ap.rfind("1/sqrt(", 0) == 0 && ap.back() == ')' &&
                        ap.substr(7, ap.size() - 8).find_first_not_of("0123456789") == std::string::npos && ap[7] != '0';
      if (!form) throw malformed("/claim/point_algebraic_nonzero: expected 1/sqrt(d) with d a positive integer");
      check(drops.empty(), "/drops: at an algebraic a != 0, u = e^{a/q} is transcendental and no polynomial minor vanishes");
      note("a is algebraic and nonzero: u transcendental (Hermite-Lindemann), rank = generic rank");
    } else if (cl.contains("point")) {
      point = true;
      const Q a0 = num(cl["point"], "/claim/point");
      if (a0 != 0) {
        check(drops.empty(), "/drops: at a rational a != 0, u = e^{a/q} is transcendental (Hermite-Lindemann): no drop");
        note("a = " + a0.str() + " != 0: u transcendental (Hermite-Lindemann), rank = generic rank");
      } else if (scores) {
        check(r == 0 ? drops.empty() : (drops.size() == 1 && drops[0].rank == 0 && drops[0].lo == 1 && drops[0].hi == 1), "/drops: S(0) = 0 has rank 0");
      } else {
        const bool root = g.size() > 1 && evalq(g, Q(1)) == 0;
        check(root ? (drops.size() == 1 && drops[0].lo == 1 && drops[0].hi == 1) : drops.empty(), "/drops: g(1) " + std::string(root ? "= 0" : "!= 0"));
        note(std::string("a = 0: u = 1, g(1) ") + (root ? "= 0" : "!= 0"));
      }
      generic_present = drops.empty();
    } else {
      const range_t R = parse_range(at(cl, "range", "/claim").get<std::string>());
      if (scores) {
        const bool z = R.contains(Q(0)) && r > 0;
        check(z ? (drops.size() == 1 && drops[0].rank == 0 && drops[0].lo == 1 && drops[0].hi == 1) : drops.empty(),
              "/drops: the scores a*S0 drop (to 0) exactly at a = 0");
      } else {
        // The image of the range under u = e^{a/q}: cuts L < H (rational) and the point u = 1.
        const bool one_root = g.size() > 1 && evalq(g, Q(1)) == 0;
        P g1 = g;
        if (one_root) g1 = normalized(quoq(toq(g), PQ{Q(-1), Q(1)}));
        while (!g1.empty() && g1.front() == 0) g1.erase(g1.begin());  // roots at u = 0 are not e^{a/q}
        auto cut = [&](const Q& a, bool low) -> Q {
          for (unsigned bits = 64; bits <= cap_bits; bits *= 2) {
            const auto [l, h] = exp_bounds(a, F.q, bits);
            if (g1.size() <= 1 || (evalq(g1, l) != 0 && evalq(g1, h) != 0 && roots_between(g1, l, h) == 0)) return low ? h : l;
          }
          throw beyond_cap("/claim/range: could not separate a range end from the roots of g at " + cap_text());
        };
        Q L = 0;
        std::optional<Q> H;
        if (R.lo) L = *R.lo == 0 ? Q(1) : cut(*R.lo, true);
        if (R.hi) H = *R.hi == 0 ? Q(1) : cut(*R.hi, false);
        int count = (g1.size() <= 1) ? 0 : roots_between(g1, L, H);
        const bool one_in = R.contains(Q(0));
        if (one_root && one_in) ++count;
        check(static_cast<long>(drops.size()) == count, "/drops: the range contains " + std::to_string(count) + " roots of g, " +
                                                          std::to_string(drops.size()) + " listed");
        std::sort(drops.begin(), drops.end(), [](const drop& a, const drop& b) { return a.lo < b.lo; });
        for (std::size_t t = 0; t < drops.size(); ++t) {
          const drop& d = drops[t];
          if (t > 0) check(drops[t - 1].hi <= d.lo && !(drops[t - 1].hi == d.lo && (drops[t - 1].lo == drops[t - 1].hi || d.lo == d.hi)), "/drops: overlapping intervals");
          if (d.lo == d.hi) {
            // an exact rational root: u = 1 (a = 0) when the range contains 0, or any other rational
            // root of g strictly inside the image of the range
            check(evalq(g, d.lo) == 0, "/drops: a listed exact root is not a root of g");
            if (d.lo == 1) check(one_root && one_in, "/drops: u = 1 (a = 0) is not in the range");
            else check(d.lo > L && (!H || d.lo < *H), "/drops: an exact root outside the range's image");
          } else {
            check(evalq(g, d.lo) != 0 && evalq(g, d.hi) != 0 && roots_between(g, d.lo, d.hi) == 1, "/drops: an interval without exactly one root of g");
            check(d.lo >= L && (!H || d.hi <= *H), "/drops: an isolating interval not inside the range's image");
          }
        }
        note("Sturm: g has exactly " + std::to_string(count) + " root(s) u = e^{a/q} with a in " + at(cl, "range", "/claim").get<std::string>() +
             ", each isolated by a listed interval");
      }
      generic_present = true;
    }
    // ---- rank at each drop (non-scores): all (k+1)-minors vanish at u*, a listed k-minor does not
    auto has_root_in = [&](const P& h, const drop& d) {
      if (h.empty()) return true;
      if (d.lo == d.hi) return evalq(h, d.lo) == 0;
      const P c = gcdz(g, h);
      return c.size() > 1 && roots_between(c, d.lo, d.hi) > 0;
    };
    for (std::size_t t = 0; t < drops.size() && !scores; ++t) {
      const drop& d = drops[t];
      // find the certificate entry again (sorted copy): match by interval
      const nlohmann::json* e = nullptr;
      for (const auto& x : dj)
        if (num(x["u"][0], "/drops") == d.lo && num(x["u"][1], "/drops") == d.hi) e = &x;
      const std::string w = "/drops (u in [" + d.lo.str() + ", " + d.hi.str() + "])";
      bool all_vanish = true;
      subsets(F.rows, d.rank + 1, [&](const std::vector<long>& rows) {
        if (!all_vanish) return;
        subsets(F.cols, d.rank + 1, [&](const std::vector<long>& cols) {
          if (all_vanish && !has_root_in(det(F, rows, cols), d)) all_vanish = false;
        });
      });
      check(all_vanish, w + ": some " + std::to_string(d.rank + 1) + "-minor is nonzero there: the rank is higher");
      if (d.rank > 0) {
        if (!e->contains("witness")) throw malformed(w + ": missing witness minor");
        const auto& wj = (*e)["witness"];
        const auto rows = index_list(at(wj, "rows", w), w + "/witness/rows", F.rows), cols = index_list(at(wj, "cols", w), w + "/witness/cols", F.cols);
        check(static_cast<long>(rows.size()) == d.rank && static_cast<long>(cols.size()) == d.rank, w + "/witness: wrong size");
        const P wd = det(F, rows, cols);
        check(wd == poly(at(wj, "poly", w), w + "/witness/poly"), w + "/witness/poly: differs from the recomputed minor");
        check(!has_root_in(wd, d), w + "/witness: vanishes at the drop");
      }
      // the stated a-enclosure must contain q·log u*
      const auto& aj = at(*e, "a", w);
      if (!aj.is_array() || aj.size() != 2) throw malformed(w + "/a: [lo, hi]");
      const Q alo = num(aj[0], w + "/a/0"), ahi = num(aj[1], w + "/a/1");
      if (scores) check(d.lo == 1 && d.hi == 1 && alo == 0 && ahi == 0, w + "/a: the scores drop is exactly a = 0");
      else check(encloses_qlog(alo, ahi, d.lo, d.hi, F.q), w + "/a: the stated enclosure does not contain q log u");
      note("drop at a in [" + aj[0].get<std::string>() + ", " + aj[1].get<std::string>() + "]: rank exactly " + std::to_string(d.rank));
    }
    // ---- the verdict
    const std::string rel = at(cl, "relation", "/claim").get<std::string>();
    const long value = integer<long>(at(cl, "value", "/claim"), "/claim/value");
    auto holds = [&](long x) {
      if (rel == "=") return x == value;
      if (rel == "<=") return x <= value;
      if (rel == ">=") return x >= value;
      throw malformed("/claim/relation: =, <= or >=");
    };
    bool ok = true;
    if (generic_present && !holds(r)) ok = false;
    for (const auto& d : drops)
      if (!holds(d.rank)) ok = false;
    // The counterexample must be a rank re-derived above: a listed drop (same a-enclosure and
    // rank) or a generic point of the claim (rank r).
    if (!ok) {
      const nlohmann::json& ce = at(cert, "counterexample", "");
      const long crank = integer<long>(at(ce, "rank", "/counterexample"), "/counterexample/rank");
      check(!holds(crank), "/counterexample/rank: satisfies the claim");
      if (ce.contains("a_enclosure")) {
        bool found = false;
        for (const auto& x : dj)
          if (x.contains("a") && x["a"] == ce["a_enclosure"] && x["rank"] == ce["rank"]) found = true;
        check(found, "/counterexample/a_enclosure: not a listed drop with that rank");
      } else {
        const nlohmann::json& aj = at(ce, "a", "/counterexample");
        check(generic_present && crank == r, "/counterexample: a generic point has the generic rank, and none is in the claim here");
        if (cl.contains("point_algebraic_nonzero")) {
          check(aj == cl["point_algebraic_nonzero"], "/counterexample/a: not the claim's point");
        } else {
          const Q a = num(aj, "/counterexample/a");
          if (point) check(a == num(cl["point"], "/claim/point"), "/counterexample/a: not the claim's point");
          else check(parse_range(at(cl, "range", "/claim").get<std::string>()).contains(a), "/counterexample/a: outside the range");
          // a rational a ≠ 0 gives a transcendental u (no drop); a = 0 gives u = 1, a drop iff g(1) = 0
          if (a == 0) check(!scores && (g.size() <= 1 || evalq(g, Q(1)) != 0), "/counterexample/a: a = 0 is a drop, not a generic point");
        }
      }
      note("counterexample re-derived: rank " + std::to_string(crank));
    } else {
      check(!cert.contains("counterexample"), "/counterexample: present although the claim holds");
    }
    const std::string verdict = ok ? "CERTIFIED" : "REFUTED";
    check(at(cert, "verdict", "").get<std::string>() == verdict, "/verdict: the re-derived verdict is " + verdict);
    note("verdict re-derived: " + verdict);
    out.result = verification::status::valid;
  } catch (const malformed& e) {
    out.result = verification::status::malformed;
    out.notes.push_back(e.what());
  } catch (const invalid& e) {
    out.result = verification::status::invalid;
    out.notes.push_back(e.what());
  } catch (const beyond_cap& e) {
    out.result = verification::status::unchecked;
    out.notes.push_back(std::string("cannot check within the cap: ") + e.what());
  } catch (const nlohmann::json::exception& e) {
    out.result = verification::status::malformed;
    out.notes.push_back(std::string("malformed certificate: ") + e.what());
  } catch (const std::runtime_error& e) {  // e.g. Boost rejecting a number's text
    out.result = verification::status::malformed;
    out.notes.push_back(std::string("malformed certificate: ") + e.what());
  }
  return out;
}

}  // namespace attncert::proofs
