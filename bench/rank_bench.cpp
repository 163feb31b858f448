// bench/rank_bench.cpp — the performance targets of the certified-rank work:
//   * exact rank of a 256×256 softmax matrix with integer scores in [−8, 8]   (target < 1 s)
//   * certified singular values of a 64×64 attention matrix at 256 bits, against the
//     uncertified MPFR JacobiSVD at the same precision                      (target ≤ 3×)
// Run: cmake -S . -B build -DATTNCERT_BENCH=ON && cmake --build build --target attncert_bench
//      && ./build/attncert_bench
#include <benchmark/benchmark.h>

#include <random>

#include "attncert/attention/softmax.hpp"
#include "attncert/rank/exact_rank.hpp"
#include "attncert/linalg/certified_svd.hpp"
#include "attncert/linalg/spectra.hpp"

using namespace attncert;

namespace {

matrix<mpq_rational> integer_scores(Eigen::Index n, int lo, int hi, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  matrix<mpq_rational> S(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) S(i, j) = d(g);
  return S;
}

void BM_exact_rank_softmax_256(benchmark::State& state) {
  const auto S = integer_scores(256, -8, 8, 1);
  std::size_t r = 0;
  for (auto _ : state) {
    const auto ri = layer_rank(S, mask::none(), layer_object::attention);
    r = ri.lo;
    if (!ri.exact()) state.SkipWithError("rank not decided");
  }
  state.counters["rank"] = static_cast<double>(r);
}
BENCHMARK(BM_exact_rank_softmax_256)->Unit(benchmark::kMillisecond);

void BM_exact_rank_causal_256(benchmark::State& state) {
  const auto S = integer_scores(256, -8, 8, 2);
  for (auto _ : state) {
    const auto ri = layer_rank(S, mask::causal(), layer_object::attention);
    if (!ri.exact() || ri.lo != 256) state.SkipWithError("causal rank not 256");
  }
}
BENCHMARK(BM_exact_rank_causal_256)->Unit(benchmark::kMillisecond);

matrix<mpq_rational> dyadic_scores(Eigen::Index n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int> d(-8, 8);  // k/4 in [−2, 2]
  matrix<mpq_rational> S(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) S(i, j) = mpq_rational(d(g), 4);
  return S;
}

void BM_mpfr_jacobi_svd_64_256bits(benchmark::State& state) {
  precision_guard g(256);
  const matrix<mpfr_float> A = masked_softmax(from_rational_matrix<mpfr_float>(dyadic_scores(64, 3)));
  for (auto _ : state) benchmark::DoNotOptimize(detail::approx_singular_values_jacobi(A));
}
BENCHMARK(BM_mpfr_jacobi_svd_64_256bits)->Unit(benchmark::kMillisecond);

void BM_certified_svd_64_256bits(benchmark::State& state) {
  precision_guard g(256);
  const matrix<mpfi_float> A = masked_softmax(from_rational_matrix<mpfi_float>(dyadic_scores(64, 3)));
  std::size_t pos = 0;
  for (auto _ : state) pos = certified_singular_values(A).certified_positive;
  state.counters["certified_positive"] = static_cast<double>(pos);
}
BENCHMARK(BM_certified_svd_64_256bits)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
