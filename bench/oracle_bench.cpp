// bench/oracle_bench.cpp — the oracle's cost against a plain binary64 attention with the same
// loops (the same transposed-key dot products, exp, accumulation; no certification).
// Target (the oracle issue): at n = 1024, d = 64, one head, N(0,1) inputs, CPU time of the
// certified oracle (one thread) / CPU time of the plain binary64 attention <= 10.  Also
// n = 256 and 4096, scores scaled x30 (peaked softmax), and a causal mask.
// Run: cmake -S . -B build-bench -DATTNCERT_BENCH=ON && cmake --build build-bench --target attncert_oracle_bench
//      && ./build-bench/attncert_oracle_bench
#include <benchmark/benchmark.h>

#include <random>

#include "attncert/oracle/oracle.hpp"

using namespace attncert;
using namespace attncert::oracle;

namespace {

// variant: 0 N(0,1) scale 1/sqrt(d); 1 peaked: scale 30/sqrt(d) = 3.75; 2 causal mask
oracle_request make_request(std::size_t n, int variant) {
  const std::size_t d = 64;
  std::mt19937_64 g(7 + n);
  std::normal_distribution<double> N(0, 1);
  oracle_request r;
  for (auto* t : {&r.Q, &r.K, &r.V}) {
    t->n = n;
    t->d = d;
    t->values.resize(n * d);
    for (auto& x : t->values) x = N(g);
  }
  if (variant == 1) {
    r.scale.inv_sqrt_d = false;
    r.scale.rational = "3.75";
  }
  if (variant == 2) r.mask = mask_kind::causal;
  return r;
}

void plain_attention(const oracle_request& r, std::vector<double>& out) {
  const std::size_t n = r.Q.n, nk = r.K.n, d = r.Q.d, dv = r.V.d;
  std::vector<double> KT(d * nk);
  for (std::size_t j = 0; j < nk; ++j)
    for (std::size_t l = 0; l < d; ++l) KT[l * nk + j] = r.K.values[j * d + l];
  const double scale = r.scale.inv_sqrt_d ? 1.0 / std::sqrt(static_cast<double>(d)) : 3.75;
  oracle::detail::row_workspace ws;
  std::vector<std::uint8_t> allowed(nk, 1);
  out.resize(n * dv);
  for (std::size_t i = 0; i < n; ++i) {
    if (r.mask == mask_kind::causal)
      for (std::size_t j = 0; j < nk; ++j) allowed[j] = j <= i;
    oracle::detail::row_inputs in{r.Q.values.data() + i * d, r.K.values.data(), KT.data(), r.V.values.data(), allowed.data(),
                          nk, d, dv, scale, 0, 0};
    oracle::detail::plain_row(in, ws, out.data() + i * dv);
  }
}

void BM_plain_binary64(benchmark::State& state) {
  const auto r = make_request(static_cast<std::size_t>(state.range(0)), static_cast<int>(state.range(1)));
  std::vector<double> out;
  for (auto _ : state) {
    plain_attention(r, out);
    benchmark::DoNotOptimize(out.data());
  }
}

void BM_oracle(benchmark::State& state) {
  auto r = make_request(static_cast<std::size_t>(state.range(0)), static_cast<int>(state.range(1)));
  r.threads = static_cast<unsigned>(state.range(2));
  std::size_t escalated = 0, elements = 0, cr = 0;
  for (auto _ : state) {
    const auto res = run_oracle(r);
    escalated = res.rows_escalated;
    elements = res.elements;
    cr = res.correctly_rounded;
    benchmark::DoNotOptimize(res.reference.data());
  }
  state.counters["rows_escalated"] = static_cast<double>(escalated);
  state.counters["not_correctly_rounded"] = static_cast<double>(elements - cr);
}

void args(benchmark::internal::Benchmark* b, bool threads) {
  for (int v : {0, 1, 2})
    for (long n : {256, 1024, 4096}) {
      if (threads) {
        b->Args({n, v, 1});
        if (n == 1024 && v == 0) b->Args({n, v, 2});
      } else {
        b->Args({n, v});
      }
    }
}

}  // namespace

BENCHMARK(BM_plain_binary64)->Apply([](auto* b) { args(b, false); })->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(BM_oracle)->Apply([](auto* b) { args(b, true); })->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

BENCHMARK_MAIN();
