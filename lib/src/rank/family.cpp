// Parameter-family ranks by exact root isolation: see attncert/rank/family.hpp.
#include "attncert/rank/family.hpp"

#include "attncert/number/c_handles.hpp"

#include <flint/flint.h>
#include <flint/fmpq.h>
#include <flint/fmpq_poly.h>
#include <flint/fmpz.h>
#include <flint/fmpz_poly.h>
#include <flint/fmpz_poly_mat.h>
#include <mpfi.h>
#include <mpfr.h>

#include <algorithm>
#include <functional>
#include <sstream>

#include "attncert/number/ziv.hpp"

namespace attncert {

namespace {

// An integer polynomial in FLINT, converted from and to int_poly.
struct zpoly {
  fmpz_poly_var owned;
  fmpz_poly_struct* const p = owned.v;
  zpoly() = default;
  explicit zpoly(const int_poly& v) {
    fmpz_var c;
    for (std::size_t k = 0; k < v.size(); ++k) {
      fmpz_set_mpz(c.v, v[k].backend().data());
      fmpz_poly_set_coeff_fmpz(p, static_cast<slong>(k), c.v);
    }
  }
  int_poly get() const {
    int_poly v(static_cast<std::size_t>(fmpz_poly_length(p)));
    mpz_int t;
    for (slong k = 0; k < fmpz_poly_length(p); ++k) {
      fmpz_get_mpz(t.backend().data(), fmpz_poly_get_coeff_ptr(p, k));
      v[static_cast<std::size_t>(k)] = t;
    }
    return v;
  }
};

using pmat = fmpz_poly_mat_var;

void load(pmat& A, const poly_family& F) {
  for (Eigen::Index i = 0; i < F.rows; ++i)
    for (Eigen::Index j = 0; j < F.cols; ++j) {
      zpoly e(F.at(i, j));
      fmpz_poly_set(fmpz_poly_mat_entry(A.v, i, j), e.p);
    }
}

std::size_t msb_or_zero(const mpz_int& c) { return c == 0 ? 0 : mpz_sizeinbase(c.backend().data(), 2); }

void primitive_positive(zpoly& z) {
  if (fmpz_poly_is_zero(z.p)) return;
  fmpz_poly_primitive_part(z.p, z.p);
  if (fmpz_sgn(fmpz_poly_lead(z.p)) < 0) fmpz_poly_neg(z.p, z.p);
}

// mpfr value -> exact rational
mpq_rational to_rational(const mpfr_t x) {
  mpz_int m;
  const mpfr_exp_t e = mpfr_get_z_2exp(m.backend().data(), x);
  mpq_rational r{m};
  if (e >= 0) {
    mpz_int p2 = 1;
    p2 <<= static_cast<unsigned>(e);  // |e| < 2^15 here: ends are limited to |a/q| <= 10^4
    r *= mpq_rational(p2);
  } else {
    mpz_int den = 1;
    den <<= static_cast<unsigned>(-e);
    r /= mpq_rational(den);
  }
  return r;
}

// Rational enclosure [l, h] of e^{a/q} at `bits` bits (a rational).
std::pair<mpq_rational, mpq_rational> exp_enclosure(const mpq_rational& a, const mpz_int& q, unsigned bits) {
  check_end_magnitude(a, q);
  check_deadline();
  mpfi_var x(bits);
  mpq_rational t = a / mpq_rational(q);
  mpfi_set_q(x.v, t.backend().data());
  mpfi_exp(x.v, x.v);
  mpfr_var lo(bits), hi(bits);
  mpfi_get_left(lo.v, x.v);
  mpfi_get_right(hi.v, x.v);
  return std::make_pair(to_rational(lo.v), to_rational(hi.v));
}

std::string mpfr_decimal(const mpfr_t x, int digits, mpfr_rnd_t rnd) {
  if (mpfr_zero_p(x)) return "0";
  if (mpfr_nan_p(x)) throw std::logic_error("mpfr_decimal: NaN (bug)");
  if (mpfr_inf_p(x)) return mpfr_sgn(x) > 0 ? "inf" : "-inf";  // never "@Inf@" text
  mpfr_exp_t e = 0;
  char* s = mpfr_get_str(nullptr, &e, 10, static_cast<size_t>(digits), x, rnd);
  std::string m(s);
  mpfr_free_str(s);
  std::string sign;
  if (!m.empty() && m[0] == '-') { sign = "-"; m = m.substr(1); }
  // 0.mmmm × 10^e  →  m[0].m[1..] e(e-1)
  return sign + m.substr(0, 1) + "." + m.substr(1) + "e" + std::to_string(static_cast<long>(e) - 1);
}

// Filter (enclosure tier): true only if p certainly has no zero on [lo, hi] — an MPFI Horner
// enclosure of p([lo, hi]) excludes 0.  False means "not shown", never "has a zero".
bool certainly_no_zero_on(const int_poly& p, const mpq_rational& lo, const mpq_rational& hi, unsigned bits) {
  if (p.empty()) return false;
  std::size_t cbits = 0;
  for (const auto& c : p) cbits = std::max(cbits, static_cast<std::size_t>(msb_or_zero(c)));
  const mpfr_prec_t prec = static_cast<mpfr_prec_t>(std::min<std::size_t>(2 * bits + cbits + 64, 1u << 20));
  mpfi_var x(prec), acc(prec);
  mpfi_interv_q(x.v, lo.backend().data(), hi.backend().data());
  mpfi_set_z(acc.v, p.back().backend().data());
  for (std::size_t k = p.size() - 1; k-- > 0;) {
    mpfi_mul(acc.v, acc.v, x.v);
    mpfi_add_z(acc.v, acc.v, p[k].backend().data());
  }
  return !mpfi_nan_p(acc.v) && !mpfi_has_zero(acc.v);
}

void for_each_subset(long n, long k, const std::function<bool(const std::vector<long>&)>& f) {
  std::vector<long> idx(static_cast<std::size_t>(k));
  for (long i = 0; i < k; ++i) idx[static_cast<std::size_t>(i)] = i;
  if (k > n) return;
  while (true) {
    if (!f(idx)) return;
    long i = k - 1;
    while (i >= 0 && idx[static_cast<std::size_t>(i)] == n - k + i) --i;
    if (i < 0) return;
    ++idx[static_cast<std::size_t>(i)];
    for (long j = i + 1; j < k; ++j) idx[static_cast<std::size_t>(j)] = idx[static_cast<std::size_t>(j - 1)] + 1;
  }
}

double binomial(long n, long k) {
  double r = 1;
  for (long i = 1; i <= k; ++i) r = r * static_cast<double>(n - k + i) / static_cast<double>(i);
  return r;
}

// Does the squarefree g have its root of r also as a root of h?  (h | anything; exact.)
bool shares_root(const root_interval& r, const int_poly& g, const int_poly& h) {
  (void)g;
  if (h.empty()) return true;  // the zero polynomial vanishes everywhere
  if (r.exact()) return sign_at(h, r.lo) == 0;
  const int_poly c = poly_gcd(g, h);
  if (c.size() <= 1) return false;
  // c divides the squarefree g: its roots are simple; count them in (lo, hi) (ends are not roots of g).
  const auto s = sturm_sequence(c);
  return sign_variations(s, r.lo) - sign_variations(s, r.hi) > 0;
}

}  // namespace

// ---- building the family -------------------------------------------------------------
namespace {

layer_model as_layer(const family_input& in, layer_object object) { return layer_model{in.S0, in.M, object, in.V, in.X}; }

// The polynomials' degrees are the exponent spreads of the rows: refuse the family when one
// is above 1000 (family_too_large), naming the first entry beyond it.
void check_exponent_spread(const layer_exponents& ex) {
  for (std::size_t i = 0; i < ex.e.size(); ++i)
    for (std::size_t j = 0; j < ex.e[i].size(); ++j) {
      const mpz_int& d = ex.e[i][j];
      if (!ex.on(i, j) || d <= 1000) continue;
      throw family_too_large("the exponent spread q*(max - min) of row " + std::to_string(i) + " is " + (d > mpz_int(1) << 64 ? std::string("above 2^64") : d.str()) +
                             " (q = " + (ex.q > mpz_int(1) << 64 ? std::string("above 2^64") : ex.q.str()) +
                             "), above the limit 1000: the polynomials in u = e^{a/q} would be too large");
    }
}

int_poly dense(const sparse_poly& p) {
  int_poly out;
  if (p.empty()) return out;
  out.resize(p.rbegin()->first.convert_to<std::size_t>() + 1);
  for (const auto& [exponent, coefficient] : p) out[exponent.convert_to<std::size_t>()] = coefficient;
  return out;
}

}  // namespace

poly_family build_family(const family_input& in) {
  if (in.object == layer_object::scores) throw input_error("build_family: the scores object has no exponential family");
  const layer_model layer = as_layer(in, in.object);
  layer.validate();
  const layer_exponents ex = row_normalized_exponents(layer);
  check_exponent_spread(ex);
  const layer_polynomial_matrix P = build_layer_matrix(layer, ex);
  poly_family F;
  F.q = ex.q;
  F.value_scale = P.value_scale;
  F.rows = static_cast<Eigen::Index>(P.rows);
  F.cols = static_cast<Eigen::Index>(P.cols);
  F.entries.reserve(P.entries.size());
  for (const auto& p : P.entries) F.entries.push_back(dense(p));
  return F;
}

std::size_t generic_rank(const poly_family& F) {
  pmat A(F.rows, F.cols);
  load(A, F);
  return static_cast<std::size_t>(fmpz_poly_mat_rank(A.v));
}

int_poly minor_polynomial(const poly_family& F, const std::vector<long>& rows, const std::vector<long>& cols) {
  const slong k = static_cast<slong>(rows.size());
  pmat A(k, k);
  for (slong a = 0; a < k; ++a)
    for (slong b = 0; b < k; ++b) {
      zpoly e(F.at(rows[static_cast<std::size_t>(a)], cols[static_cast<std::size_t>(b)]));
      fmpz_poly_set(fmpz_poly_mat_entry(A.v, a, b), e.p);
    }
  zpoly d;
  fmpz_poly_mat_det(d.p, A.v);
  return d.get();
}

std::vector<std::vector<int_poly>> kernel_basis(const poly_family& F) {
  pmat A(F.rows, F.cols);
  load(A, F);
  pmat N(F.cols, F.cols);
  const slong nullity = fmpz_poly_mat_nullspace(N.v, A.v);
  std::vector<std::vector<int_poly>> out;
  if (nullity == 0) return out;
  pmat K(F.cols, nullity), P(F.rows, nullity);
  for (slong i = 0; i < F.cols; ++i)
    for (slong k = 0; k < nullity; ++k) fmpz_poly_set(fmpz_poly_mat_entry(K.v, i, k), fmpz_poly_mat_entry(N.v, i, k));
  fmpz_poly_mat_mul(P.v, A.v, K.v);
  if (!fmpz_poly_mat_is_zero(P.v) || fmpz_poly_mat_rank(K.v) != nullity)
    throw std::logic_error("kernel_basis: FLINT kernel failed verification (bug)");
  for (slong k = 0; k < nullity; ++k) {
    std::vector<int_poly> v;
    for (slong i = 0; i < F.cols; ++i) {
      zpoly e;
      fmpz_poly_set(e.p, fmpz_poly_mat_entry(K.v, i, k));
      v.push_back(e.get());
    }
    out.push_back(v);
  }
  return out;
}

// ---- polynomials and real roots ------------------------------------------------------
int_poly poly_gcd(const int_poly& a, const int_poly& b) {
  zpoly A(a), B(b), G;
  fmpz_poly_gcd(G.p, A.p, B.p);
  primitive_positive(G);
  return G.get();
}

int_poly squarefree_part(const int_poly& p) {
  zpoly P(p), D, G, Q, R;
  if (fmpz_poly_is_zero(P.p)) return {};
  fmpz_poly_derivative(D.p, P.p);
  fmpz_poly_gcd(G.p, P.p, D.p);
  fmpz_poly_divrem(Q.p, R.p, P.p, G.p);
  if (!fmpz_poly_is_zero(R.p)) throw std::logic_error("squarefree_part: inexact division (bug)");
  primitive_positive(Q);
  return Q.get();
}

std::vector<int_poly> sturm_sequence(const int_poly& p) {
  std::vector<int_poly> s;
  fmpq_poly_var a, b, r;
  {
    zpoly P(p);
    fmpq_poly_set_fmpz_poly(a.v, P.p);
    fmpq_poly_derivative(b.v, a.v);
  }
  auto push = [&](const fmpq_poly_t x) {
    zpoly z;
    fmpq_poly_get_numerator(z.p, x);  // the denominator is > 0: signs preserved
    fmpz_var c;
    fmpz_poly_content(c.v, z.p);  // >= 0 (FLINT's primitive_part would flip the sign)
    if (!fmpz_is_zero(c.v)) fmpz_poly_scalar_divexact_fmpz(z.p, z.p, c.v);
    s.push_back(z.get());
  };
  push(a.v);
  while (!fmpq_poly_is_zero(b.v)) {
    check_deadline();  // throws time_limit_reached; the owners free the polynomials
    push(b.v);
    {
      // continue with the primitive integer version of b: positive rescalings of a Sturm
      // sequence are one, and the coefficients stay small
      zpoly z(s.back());
      fmpq_poly_set_fmpz_poly(b.v, z.p);
    }
    fmpq_poly_rem(r.v, a.v, b.v);
    fmpq_poly_neg(r.v, r.v);
    fmpq_poly_swap(a.v, b.v);
    fmpq_poly_swap(b.v, r.v);
  }
  return s;
}

int sign_at(const int_poly& p, const mpq_rational& x) {
  // x = n/d with d > 0: sign of d^N p(n/d) = Σ c_k n^k d^(N−k) (Horner over ℤ, no gcds).
  if (p.empty()) return 0;
  check_deadline();
  const mpz_int n = numerator(x), d = denominator(x);
  mpz_int acc = p.back(), dk = 1;
  for (std::size_t k = p.size() - 1; k-- > 0;) {
    dk *= d;
    acc = acc * n + p[k] * dk;
  }
  return acc > 0 ? 1 : (acc < 0 ? -1 : 0);
}

int sign_variations(const std::vector<int_poly>& sturm, const std::optional<mpq_rational>& x) {
  int last = 0, n = 0;
  for (const auto& p : sturm) {
    int s = 0;
    if (x) s = sign_at(p, *x);
    else s = p.empty() ? 0 : (p.back() > 0 ? 1 : -1);
    if (s == 0) continue;
    if (last != 0 && s != last) ++n;
    last = s;
  }
  return n;
}

void refine(root_interval& r, const int_poly& p) {
  if (r.exact()) return;
  // The precondition is checked, not assumed: with p(lo) = 0 (e.g. lo = 0 and the factor u in
  // p) the halving below would keep the wrong half and silently lose the root.
  const int slo = sign_at(p, r.lo), shi = sign_at(p, r.hi);
  if (slo == 0 || shi == 0 || slo == shi)
    throw std::logic_error("refine: (" + r.lo.str() + ", " + r.hi.str() + ") does not isolate a sign change (bug)");
  const mpq_rational mid = (r.lo + r.hi) / 2;
  const int sm = sign_at(p, mid);
  if (sm == 0) {
    r.lo = r.hi = mid;
    return;
  }
  if (sm == slo) r.lo = mid;
  else r.hi = mid;
}

std::vector<root_interval> isolate_positive_roots(const int_poly& p0, const std::optional<mpq_rational>& max_width) {
  if (p0.empty()) throw std::invalid_argument("isolate_positive_roots: zero polynomial");
  int_poly p = squarefree_part(p0);
  // drop the factor u (roots at 0 are not positive)
  while (!p.empty() && p.front() == 0) p.erase(p.begin());
  std::vector<root_interval> out;
  if (p.size() <= 1) return out;
  // Cauchy bounds: every root has |u| < 1 + max_k |c_k / c_n| = B, and (the same bound for the
  // reversed polynomial, p(0) ≠ 0 now) |u| > 1 / (1 + max_k |c_k / c_0|) = b0.  Both ends are
  // strictly beyond every root, so p(b0) ≠ 0 ≠ p(B) and every interval below has ends that are
  // not roots of p — nor of the caller's g = u^k·p, which refines with them.
  mpq_rational B = 0, R = 0;
  for (std::size_t k = 0; k + 1 < p.size(); ++k) B = std::max(B, mpq_rational(abs(p[k])) / mpq_rational(abs(p.back())));
  for (std::size_t k = 1; k < p.size(); ++k) R = std::max(R, mpq_rational(abs(p[k])) / mpq_rational(abs(p.front())));
  B += 1;
  const mpq_rational b0 = 1 / (1 + R);
  const auto s = sturm_sequence(p);
  // recursive bisection on (lo, hi) with p(lo) ≠ 0 ≠ p(hi)
  std::function<void(const mpq_rational&, const mpq_rational&, int, int)> go = [&](const mpq_rational& lo, const mpq_rational& hi, int vlo,
                                                                                  int vhi) {
    const int c = vlo - vhi;
    if (c <= 0) return;
    if (c == 1) {
      out.push_back({lo, hi});
      return;
    }
    mpq_rational mid = (lo + hi) / 2;
    if (sign_at(p, mid) == 0) {
      // an exact rational root: record it and step around it (roots are finitely many)
      out.push_back({mid, mid});
      mpq_rational d = (hi - lo) / 4;
      mpq_rational a = mid - d, b = mid + d;
      while (true) {
        const int ca = sign_variations(s, a) - sign_variations(s, mid), cb = sign_variations(s, mid) - sign_variations(s, b);
        // roots in (a, mid] and (mid, b): want exactly the root at mid
        if (sign_at(p, a) != 0 && sign_at(p, b) != 0 && ca == 1 && cb == 0) break;
        d /= 2;
        a = mid - d;
        b = mid + d;
      }
      go(lo, a, vlo, sign_variations(s, a));
      go(b, hi, sign_variations(s, b), vhi);
      return;
    }
    const int vm = sign_variations(s, mid);
    go(lo, mid, vlo, vm);
    go(mid, hi, vm, vhi);
  };
  go(b0, B, sign_variations(s, b0), sign_variations(s, B));
  std::sort(out.begin(), out.end(), [](const root_interval& a, const root_interval& b) { return a.lo < b.lo; });
  if (max_width)
    for (auto& r : out)
      while (r.hi - r.lo > *max_width) refine(r, p);
  return out;
}

void check_end_magnitude(const mpq_rational& a, const mpz_int& q) {
  const mpq_rational t = a / mpq_rational(q);
  if (t > 10000 || t < -10000)
    throw method_limit("a range end has |a/q| = |" + (abs(t) > mpq_rational(mpz_int(1) << 64) ? std::string("beyond 2^64") : a.str()) + " / " +
                       (q > mpz_int(1) << 64 ? std::string("q") : q.str()) + "| > 10^4: e^{a/q} is beyond the supported magnitude");
}

// ---- ranges ---------------------------------------------------------------------------
bool a_range::contains(const mpq_rational& a) const {
  if (lo && (a < *lo || (lo_open && a == *lo))) return false;
  if (hi && (a > *hi || (hi_open && a == *hi))) return false;
  return true;
}

std::string a_range::describe() const {
  std::string s = lo_open ? "(" : "[";
  s += lo ? rational_string(*lo) : "-inf";
  s += ", ";
  s += hi ? rational_string(*hi) : "inf";
  s += hi_open ? ")" : "]";
  return s;
}

a_range parse_a_range(const std::string& text) {
  std::string s;
  for (char c : text)
    if (c != ' ') s += c;
  if (s.size() < 5 || (s.front() != '(' && s.front() != '[') || (s.back() != ')' && s.back() != ']'))
    throw input_error("range '" + text + "': expected (lo, hi) or [lo, hi] with lo, hi rational or -inf/inf");
  const auto comma = s.find(',');
  if (comma == std::string::npos) throw input_error("range '" + text + "': no comma");
  a_range r;
  r.lo_open = s.front() == '(';
  r.hi_open = s.back() == ')';
  const std::string a = s.substr(1, comma - 1), b = s.substr(comma + 1, s.size() - comma - 2);
  auto num = [&](const std::string& x) -> mpq_rational { return number_traits<mpq_rational>::from_string(x); };
  if (a == "-inf" || a == "-infinity") r.lo_open = true;
  else r.lo = num(a);
  if (b == "inf" || b == "+inf" || b == "infinity") r.hi_open = true;
  else r.hi = num(b);
  if (r.lo && r.hi && (*r.lo > *r.hi || (*r.lo == *r.hi && (r.lo_open || r.hi_open))))
    throw input_error("range '" + text + "' is empty");
  return r;
}

placement place_root(root_interval& r, const int_poly& g, const a_range& range, const mpz_int& q, unsigned max_bits) {
  // For each finite end a_e: u_e = e^{a_e/q}; exact 1 when a_e = 0, else transcendental.
  auto side = [&](const std::optional<mpq_rational>& end, bool open, bool is_lo) -> placement {
    if (!end) return placement::inside;
    if (*end == 0) {
      // exact comparison with u = 1
      if (r.exact()) {
        if (r.lo == 1) return open ? placement::outside : placement::inside;
        return (is_lo ? r.lo > 1 : r.lo < 1) ? placement::inside : placement::outside;
      }
      if (r.hi <= 1) return is_lo ? placement::outside : placement::inside;
      if (r.lo >= 1) return is_lo ? placement::inside : placement::outside;
      // 1 inside (lo, hi): g(1) ≠ 0 unless 1 is a root; split there
      if (sign_at(g, mpq_rational(1)) == 0) {
        // the root in (lo, hi) is 1 itself
        r.lo = r.hi = 1;
        return open ? placement::outside : placement::inside;
      }
      if (sign_at(g, mpq_rational(1)) == sign_at(g, r.lo)) r.lo = 1;
      else r.hi = 1;
      return (r.lo >= 1) == is_lo ? placement::inside : placement::outside;
    }
    // u_e = e^{a_e/q} is transcendental (a_e ≠ 0 rational), never a root: refine r until it is
    // no wider than the enclosure of u_e, then raise the precision (the Ziv pattern), up to
    // max_bits.  Separation is then a matter of precision only (no fixed bisection budget).
    const auto out = ziv_escalate(precision_schedule::doubling_within(64, max_bits), [&](unsigned bits) {
      const auto [l, h] = exp_enclosure(*end, q, bits);
      while (true) {
        if (r.hi < l) return ziv_decided(is_lo ? placement::outside : placement::inside);
        if (r.lo > h) return ziv_decided(is_lo ? placement::inside : placement::outside);
        if (r.exact() || r.hi - r.lo <= h - l) return ziv_more(placement::unknown);
        refine(r, g);
      }
    });
    return out.value;
  };
  const placement a = side(range.lo, range.lo_open, true);
  if (a == placement::outside) return a;
  const placement b = side(range.hi, range.hi_open, false);
  if (b == placement::outside) return b;
  return (a == placement::unknown || b == placement::unknown) ? placement::unknown : placement::inside;
}

std::pair<std::string, std::string> a_enclosure(const root_interval& r, const mpz_int& q, unsigned bits, int digits) {
  mpfi_var x(bits);
  mpfi_interv_q(x.v, r.lo.backend().data(), r.hi.backend().data());
  mpfi_log(x.v, x.v);
  mpfi_mul_z(x.v, x.v, q.backend().data());
  mpfr_var lo(bits), hi(bits);
  mpfi_get_left(lo.v, x.v);
  mpfi_get_right(hi.v, x.v);
  return std::make_pair(mpfr_decimal(lo.v, digits, MPFR_RNDD), mpfr_decimal(hi.v, digits, MPFR_RNDU));
}

std::vector<std::string> to_strings(const int_poly& p) {
  std::vector<std::string> v;
  for (const auto& c : p) v.push_back(c.str());
  return v;
}

std::string rational_string(const mpq_rational& x) { return x.str(); }

// ---- the family rank ------------------------------------------------------------------
family_rank_result family_rank(const poly_family& F, const a_range& range, unsigned max_bits, std::size_t max_minors) {
  family_rank_result res;
  const std::size_t r = generic_rank(F);
  res.generic = r;
  if (r == 0) {  // M ≡ 0: rank 0 everywhere
    res.decided = true;
    res.minors_complete = true;
    res.g = {1};
    return res;
  }
  const long m = F.rows, n = F.cols, k = static_cast<long>(r);
  const double total = binomial(m, k) * binomial(n, k);
  // Accumulate the gcd of r×r minors until it has no root in the range (then done), or all
  // minors are used (then its roots in the range are exactly the drops).
  int_poly G;
  bool all = true;
  auto roots_in_range = [&](const int_poly& g, bool& unknown) {
    std::vector<root_interval> in;
    unknown = false;
    for (auto ri : isolate_positive_roots(g)) {
      const placement p = place_root(ri, g, range, F.q, max_bits);
      if (p == placement::inside) in.push_back(ri);
      if (p == placement::unknown) unknown = true;
    }
    return in;
  };
  bool done = false;
  std::size_t used = 0;
  for_each_subset(m, k, [&](const std::vector<long>& rows) {
    for_each_subset(n, k, [&](const std::vector<long>& cols) {
      const int_poly d = minor_polynomial(F, rows, cols);
      if (d.empty()) return true;
      ++used;
      res.minors.push_back({rows, cols});
      const int_poly G2 = G.empty() ? squarefree_part(d) : poly_gcd(G, d);
      if (G2 != G) {
        G = squarefree_part(G2);
        bool unknown = false;
        if (G.size() <= 1 || (roots_in_range(G, unknown).empty() && !unknown)) {
          done = true;
          return false;
        }
      }
      if (used >= max_minors) return false;
      return true;
    });
    return !done && used < max_minors;
  });
  if (!done && used >= max_minors && used < total) {
    all = false;
    res.why_undecided = "the gcd of the first " + std::to_string(used) + " of " + std::to_string(static_cast<long long>(total)) +
                        " nonzero minors of size " + std::to_string(r) + " still has roots in the range; limit reached";
    return res;
  }
  res.g = squarefree_part(G);
  res.minors_complete = !done && all;
  if (done) {
    res.decided = true;
    return res;
  }
  bool unknown = false;
  auto in = roots_in_range(res.g, unknown);
  if (unknown) {
    res.why_undecided = "a root of the minors' gcd could not be separated from a range end at " + std::to_string(max_bits) + " bits";
    return res;
  }
  // Rank at each drop: the largest k < r with some k×k minor nonzero at u*.
  for (auto& ri : in) {
    drop_point dp;
    for (int w = 0; w < 40; ++w) refine(ri, res.g);  // a* to about 12 digits
    dp.u = ri;
    dp.a = a_enclosure(ri, F.q);
    dp.rank = 0;
    for (long kk = k - 1; kk >= 1 && dp.rank == 0; --kk) {
      bool found = false;
      for_each_subset(m, kk, [&](const std::vector<long>& rows) {
        for_each_subset(n, kk, [&](const std::vector<long>& cols) {
          const int_poly d = minor_polynomial(F, rows, cols);
          if (!d.empty() && !shares_root(ri, res.g, d)) {
            found = true;
            dp.witness_rows = rows;
            dp.witness_cols = cols;
            return false;
          }
          return true;
        });
        return !found;
      });
      if (found) dp.rank = static_cast<std::size_t>(kk);
    }
    res.drops.push_back(dp);
  }
  res.decided = true;
  return res;
}

std::vector<int_poly> row_normalizers(const family_input& in) {
  in.M.check_shape(in.S0.rows(), in.S0.cols());
  const layer_exponents ex = row_normalized_exponents(as_layer(in, layer_object::attention));
  std::vector<int_poly> out;
  for (std::size_t i = 0; i < ex.e.size(); ++i) {
    sparse_poly d;
    for (std::size_t j = 0; j < ex.e[i].size(); ++j)
      if (ex.on(i, j)) d[ex.e[i][j]] += 1;
    out.push_back(dense(d));
  }
  return out;
}

namespace {

// The steps of analyze_sign, sharing H, its squarefree part g and g's Sturm sequence.
class sign_analyzer {
 public:
  sign_analyzer(const int_poly& H, const mpz_int& q, unsigned max_bits, sign_analysis& res)
      : H_(H), q_(q), max_bits_(max_bits), res_(res) {}

  // A point range a₀: one sample on the same side of every root as u₀ = e^{a₀/q}.
  void analyze_point(const mpq_rational& a) {
    if (a == 0) {
      res_.samples = {mpq_rational(1)};
      res_.signs = {sign_at(H_, mpq_rational(1))};
    } else {
      std::pair<mpq_rational, mpq_rational> c;
      if (!end_cut(a, c)) {
        res_.why_undecided = "could not separate e^{a/q} from the roots at " + std::to_string(max_bits_) + " bits";
        return;
      }
      res_.samples = {c.first};
      res_.signs = {sign_at(H_, c.first)};
    }
    res_.decided = true;
  }

  // The image of the range is (low, high) (plus u = 1 when an end is a closed 0); each
  // finite end a ≠ 0 is replaced by a rational cut on the same side of every root.
  bool image_cuts(const a_range& range, mpq_rational& low, std::optional<mpq_rational>& high) {
    low = 0;
    std::pair<mpq_rational, mpq_rational> c;
    if (range.lo) {
      if (*range.lo == 0) low = 1;
      else if (!end_cut(*range.lo, c)) return cuts_undecided();
      else low = c.second;
    }
    if (range.hi) {
      if (*range.hi == 0) high = mpq_rational(1);
      else if (!end_cut(*range.hi, c)) return cuts_undecided();
      else high = c.first;
    }
    return true;
  }

  // The roots of g inside the cuts, isolated strictly inside them (so that every segment has
  // an interior sample point); the root u = 1 exactly when the range contains a = 0.
  bool place_roots(const a_range& range, const mpq_rational& low, const std::optional<mpq_rational>& high) {
    const int_poly& g = res_.sqfree;
    const bool one_is_root = sign_at(g, mpq_rational(1)) == 0;
    for (auto r : isolate_positive_roots(g)) {
      if (one_is_root && r.lo <= 1 && 1 <= r.hi) r.lo = r.hi = 1;  // the root u = 1 (a = 0), exactly
      if (r.exact() && r.lo == 1 && (low == 1 || (high && *high == 1))) {
        if (range.contains(mpq_rational(0))) res_.roots.push_back(r);
        continue;
      }
      // refine until on one side of each cut (cuts are not roots, so this terminates)
      bool placed = false;
      for (int k = 0; k < 20000 && !placed; ++k) {
        const bool below = r.hi <= low, above = high && r.lo >= *high;
        const bool inside = r.lo >= low && (!high || r.hi <= *high);
        if (inside && !below && !above) {
          while (!r.exact() && (r.lo <= low || (high && r.hi >= *high))) refine(r, g);
          res_.roots.push_back(r);
        }
        placed = below || above || inside;
        if (!placed) refine(r, g);
      }
      if (!placed) {
        res_.why_undecided = "a root could not be placed relative to a range end";
        return false;
      }
    }
    return true;
  }

  // One sample between consecutive boundaries (cuts and roots), and the sign of H there.
  void sample_segments(const mpq_rational& low, const std::optional<mpq_rational>& high) {
    std::vector<std::pair<mpq_rational, mpq_rational>> bounds;  // (left end, right end) of each boundary
    const auto& roots = res_.roots;
    const bool root_at_low = !roots.empty() && roots.front().exact() && roots.front().lo == low;
    if (!root_at_low) bounds.push_back({low, low});
    for (const auto& r : roots) bounds.push_back({r.lo, r.hi});
    const bool root_at_high = high && !roots.empty() && roots.back().exact() && roots.back().lo == *high;
    for (std::size_t k = 0; k + 1 < bounds.size(); ++k) res_.samples.push_back((bounds[k].second + bounds[k + 1].first) / 2);
    if (high && !root_at_high) res_.samples.push_back((bounds.back().second + *high) / 2);
    if (!high) res_.samples.push_back(bounds.back().second + 1);
    for (const auto& x : res_.samples) {
      res_.signs.push_back(sign_at(H_, x));
      if (res_.signs.back() == 0) throw std::logic_error("analyze_sign: a sample is a root (bug)");
    }
    res_.decided = true;
  }

 private:
  bool cuts_undecided() {
    res_.why_undecided = "could not separate a range end from the roots at " + std::to_string(max_bits_) + " bits";
    return false;
  }

  // Filter, then exact: g has no root in [l, h].  The Sturm sequence is built only when the
  // interval filter cannot decide (it costs O(deg^2) big polynomials; a point claim of degree
  // 4000 is then decided by the filter alone).
  bool no_root_in(const mpq_rational& l, const mpq_rational& h, unsigned bits) {
    const int_poly& g = res_.sqfree;
    if (g.size() <= 1) return true;
    if (certainly_no_zero_on(g, l, h, bits)) return true;
    if (sign_at(g, l) == 0 || sign_at(g, h) == 0) return false;
    if (!sturm_) sturm_ = sturm_sequence(g);
    return sign_variations(*sturm_, l) - sign_variations(*sturm_, h) == 0;
  }

  // Enclosure [l, h] of e^{a/q} (a ≠ 0) with no root of H in it.
  bool end_cut(const mpq_rational& a, std::pair<mpq_rational, mpq_rational>& out) {
    return ziv_escalate(precision_schedule::doubling_within(64, max_bits_), [&](unsigned bits) {
             out = exp_enclosure(a, q_, bits);
             return no_root_in(out.first, out.second, bits) ? ziv_decided(true) : ziv_more(false);
           })
        .decided;
  }

  const int_poly& H_;
  const mpz_int& q_;
  const unsigned max_bits_;
  sign_analysis& res_;
  std::optional<std::vector<int_poly>> sturm_;
};

}  // namespace

sign_analysis analyze_sign(const int_poly& H, const a_range& range, const mpz_int& q, unsigned max_bits) {
  sign_analysis res;
  if (H.empty()) {
    res.decided = res.identically_zero = true;
    return res;
  }
  res.sqfree = squarefree_part(H);
  sign_analyzer step(H, q, max_bits, res);
  if (range.is_point()) {
    step.analyze_point(*range.lo);
    return res;
  }
  mpq_rational low;
  std::optional<mpq_rational> high;
  if (step.image_cuts(range, low, high) && step.place_roots(range, low, high)) step.sample_segments(low, high);
  return res;
}

}  // namespace attncert
