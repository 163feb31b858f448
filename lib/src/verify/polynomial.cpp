// Exact polynomial arithmetic over ℤ and ℚ (Euclid, squarefree parts, Sturm sequences) and the
// minors of M(u) by Laplace expansion.  See checker.hpp.
#include <algorithm>

#include "checker.hpp"

namespace attncert::verify::checker {

// ---- polynomial arithmetic over ℤ and ℚ ------------------------------------------------
void trim(zpoly& p) {
  while (!p.empty() && p.back() == 0) p.pop_back();
}
void trim(qpoly& p) {
  while (!p.empty() && p.back() == 0) p.pop_back();
}
zpoly add(const zpoly& a, const zpoly& b) {
  zpoly c(std::max(a.size(), b.size()));
  for (std::size_t i = 0; i < a.size(); ++i) c[i] += a[i];
  for (std::size_t i = 0; i < b.size(); ++i) c[i] += b[i];
  trim(c);
  return c;
}
zpoly mul(const zpoly& a, const zpoly& b) {
  if (a.empty() || b.empty()) return {};
  zpoly c(a.size() + b.size() - 1);
  const bool large = a.size() * b.size() >= 1024;  // small products (most of them) are not worth a poll
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (large) poll();
    for (std::size_t j = 0; j < b.size(); ++j) c[i + j] += a[i] * b[j];
  }
  trim(c);
  return c;
}
zpoly neg(zpoly a) {
  for (auto& x : a) x = -x;
  return a;
}
Q evaluate(const zpoly& p, const Q& x) {
  Q acc = 0;
  for (std::size_t k = p.size(); k-- > 0;) {
    poll();  // one step can be long: acc grows to deg(p) times the size of x
    acc = acc * x + Q(p[k]);
  }
  return acc;
}
int sign_of(const Q& v) { return v > 0 ? 1 : v < 0 ? -1 : 0; }

qpoly to_rational(const zpoly& p) { return qpoly(p.begin(), p.end()); }
// Primitive integer polynomial with the same sign pattern as p (divide by a positive number).
zpoly primitive_same_sign(const qpoly& p) {
  Z l = 1;
  for (const auto& c : p) l = boost::multiprecision::lcm(l, denominator(c));
  zpoly z;
  for (const auto& c : p) z.push_back(numerator(Q(c * Q(l))));
  Z g = 0;
  for (const auto& c : z) g = gcd(g, abs(c));
  if (g > 1)
    for (auto& c : z) c /= g;
  trim(z);
  return z;
}
zpoly normalized(const qpoly& p) {  // primitive, positive leading coefficient
  zpoly z = primitive_same_sign(p);
  if (!z.empty() && z.back() < 0) z = neg(z);
  return z;
}
qpoly poly_remainder(qpoly a, const qpoly& b) {
  trim(a);
  while (a.size() >= b.size() && !a.empty()) {
    poll();
    const Q f = a.back() / b.back();
    const std::size_t sh = a.size() - b.size();
    for (std::size_t i = 0; i < b.size(); ++i) a[sh + i] -= f * b[i];
    trim(a);
  }
  return a;
}
qpoly exact_quotient(qpoly a, const qpoly& b) {
  trim(a);
  qpoly qt(a.size() >= b.size() ? a.size() - b.size() + 1 : 0);
  while (a.size() >= b.size() && !a.empty()) {
    poll();
    const Q f = a.back() / b.back();
    const std::size_t sh = a.size() - b.size();
    qt[sh] = f;
    for (std::size_t i = 0; i < b.size(); ++i) a[sh + i] -= f * b[i];
    trim(a);
  }
  if (!a.empty()) throw invalid("internal: inexact polynomial division");
  return qt;
}
zpoly primitive_gcd(const zpoly& a, const zpoly& b) {
  qpoly x = to_rational(a), y = to_rational(b);
  trim(x);
  trim(y);
  while (!y.empty()) {
    poll();
    qpoly r = poly_remainder(x, y);
    x = y;
    y = to_rational(primitive_same_sign(r));  // a positive rescaling keeps coefficients small
  }
  return normalized(x);
}
zpoly derivative(const zpoly& p) {
  zpoly d;
  for (std::size_t k = 1; k < p.size(); ++k) d.push_back(p[k] * Z(static_cast<long>(k)));
  trim(d);
  return d;
}
zpoly squarefree_part(const zpoly& p) {
  if (p.size() <= 1) return normalized(to_rational(p));
  const zpoly g = primitive_gcd(p, derivative(p));
  return normalized(exact_quotient(to_rational(p), to_rational(g)));
}
std::vector<zpoly> sturm_sequence(const zpoly& p) {
  std::vector<zpoly> s;
  qpoly a = to_rational(p), b = to_rational(derivative(p));
  s.push_back(primitive_same_sign(a));
  while (!b.empty()) {
    poll();
    const zpoly pb = primitive_same_sign(b);
    s.push_back(pb);
    qpoly r = poly_remainder(a, to_rational(pb));  // positive rescalings of a Sturm sequence are one
    for (auto& c : r) c = -c;
    a = to_rational(pb);
    b = to_rational(primitive_same_sign(r));
  }
  return s;
}
int sign_variations(const std::vector<zpoly>& s, const std::optional<Q>& x) {
  int last = 0, n = 0;
  for (const auto& p : s) {
    const int v = x ? sign_of(evaluate(p, *x)) : (p.empty() ? 0 : (p.back() > 0 ? 1 : -1));
    if (v == 0) continue;
    if (last != 0 && v != last) ++n;
    last = v;
  }
  return n;
}
// Number of roots of the squarefree p in (lo, hi) — lo, hi not roots; hi empty = +∞.
// Sturm sequences are cached per polynomial (the checker asks about the same ones often).
int roots_between(const zpoly& p, const Q& lo, const std::optional<Q>& hi) {
  if (p.size() <= 1) return 0;
  static thread_local std::vector<std::pair<zpoly, std::vector<zpoly>>> cache;
  const std::vector<zpoly>* s = nullptr;
  for (const auto& [key, seq] : cache)
    if (key == p) s = &seq;
  if (!s) {
    if (cache.size() > 64) cache.clear();
    cache.emplace_back(p, sturm_sequence(p));
    s = &cache.back().second;
  }
  return sign_variations(*s, lo) - sign_variations(*s, hi);
}

// ---- minors of M(u) and subsets ------------------------------------------------------
zpoly minor_of(const polynomial_matrix& F, const std::vector<long>& rows, const std::vector<long>& cols) {
  // Laplace expansion along the first row (k ≤ 8).
  poll();
  const std::size_t k = rows.size();
  if (k == 0) return {Z(1)};
  if (k == 1) return F.at(rows[0], cols[0]);
  zpoly acc;
  const std::vector<long> rest(rows.begin() + 1, rows.end());
  for (std::size_t j = 0; j < k; ++j) {
    const zpoly& a = F.at(rows[0], cols[j]);
    if (a.empty()) continue;
    std::vector<long> c2;
    for (std::size_t t = 0; t < k; ++t)
      if (t != j) c2.push_back(cols[t]);
    zpoly term = mul(a, minor_of(F, rest, c2));
    acc = add(acc, j % 2 == 0 ? term : neg(term));
  }
  return acc;
}

void for_each_subset(long n, long k, const std::function<void(const std::vector<long>&)>& f) {
  std::vector<long> idx;
  std::function<void(long)> go = [&](long start) {
    if (static_cast<long>(idx.size()) == k) {
      poll();
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


}  // namespace attncert::verify::checker
