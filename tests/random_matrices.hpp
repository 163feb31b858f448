// tests/random_matrices.hpp — random exact matrices shared by the linalg tests.
#pragma once

#include <random>

#include "attncert/linalg/matrix.hpp"

/// Integers in [−k, k].
inline attncert::matrix<attncert::mpq_rational> random_int(std::mt19937_64& rng, Eigen::Index r, Eigen::Index c, int k = 3) {
  std::uniform_int_distribution<int> d(-k, k);
  attncert::matrix<attncert::mpq_rational> m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = d(rng);
  return m;
}

/// Rationals p/q with q in {1, 3, 5, 7}: mostly not dyadic, so their enclosures are thick.
inline attncert::matrix<attncert::mpq_rational> random_rational(std::mt19937_64& rng, Eigen::Index r, Eigen::Index c) {
  std::uniform_int_distribution<int> num(-9, 9), den(0, 3);
  const int dens[4] = {1, 3, 5, 7};
  attncert::matrix<attncert::mpq_rational> m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = attncert::mpq_rational(num(rng), dens[den(rng)]);
  return m;
}
