// Integer polynomials in u = e^{a/q} (int_poly, coefficients from degree 0 upwards, no
// trailing zeros): the few operations the provers need to form their polynomials.  Exact.
#include "provers.hpp"

namespace attncert::proofs::detail {

namespace {
void trim(int_poly& p) {
  while (!p.empty() && p.back() == 0) p.pop_back();
}
}  // namespace

int_poly poly_add(const int_poly& a, const int_poly& b) {
  int_poly c(std::max(a.size(), b.size()));
  for (std::size_t i = 0; i < a.size(); ++i) c[i] += a[i];
  for (std::size_t i = 0; i < b.size(); ++i) c[i] += b[i];
  trim(c);
  return c;
}

int_poly poly_mul(const int_poly& a, const int_poly& b) {
  if (a.empty() || b.empty()) return {};
  int_poly c(a.size() + b.size() - 1);
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < b.size(); ++j) c[i + j] += a[i] * b[j];
  trim(c);
  return c;
}

int_poly poly_neg(int_poly a) {
  for (auto& x : a) x = -x;
  return a;
}

int_poly poly_scale(int_poly p, const mpz_int& c) {
  for (auto& x : p) x *= c;
  return p;
}

int_poly monomial(long k) {
  int_poly p(static_cast<std::size_t>(k) + 1);
  p[static_cast<std::size_t>(k)] = 1;
  return p;
}

}  // namespace attncert::proofs::detail
