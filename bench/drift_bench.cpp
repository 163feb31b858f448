// bench/drift_bench.cpp — the performance target of the drift work: a sweep of 10^5 points
// of the two-token family across five recipes (fp16, bf16-fp32acc, fp32, fp64, mpfr256),
// with certified exact ranks and singular-value enclosures at every point and the divergence
// intervals bisected (target < 5 s).  The per-recipe benchmarks break the cost down.
// Run: cmake -S . -B build-bench -DATTNCERT_BENCH=ON && cmake --build build-bench --target
//      attncert_drift_bench && ./build-bench/attncert_drift_bench
#include <benchmark/benchmark.h>

#include "attncert/drift/sweep.hpp"

using namespace attncert;

namespace {

drift_request sweep(std::size_t points, const std::string& recipes, bool enclosures) {
  drift_request r;
  r.family = drift_family::two_token;
  r.from = 1e-20;
  r.to = 10;
  r.log = true;
  r.points = points;
  r.recipes = parse_recipes(recipes);
  r.policies = parse_policies("numpy,absolute:1e-6,relative:1e-3");
  r.enclosures = enclosures;
  return r;
}

void BM_two_token_sweep_1e5_five_recipes(benchmark::State& state) {
  const drift_request r = sweep(100000, "fp16,bf16-fp32acc,fp32,fp64,mpfr256", true);
  std::size_t intervals = 0, diverging = 0;
  for (auto _ : state) {
    const drift_result res = run_drift(r);
    intervals = 0;
    for (const auto& d : res.divergence) intervals += d.intervals.size();
    diverging = 0;
    for (const auto& p : res.points) diverging += p.diverges;
    benchmark::DoNotOptimize(res.points.data());
  }
  state.counters["points"] = 100000;
  state.counters["diverging_points"] = static_cast<double>(diverging);
  state.counters["intervals"] = static_cast<double>(intervals);
}
BENCHMARK(BM_two_token_sweep_1e5_five_recipes)->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(3);

// Cost of one point per recipe (no enclosures), 10^4 points.
void BM_two_token_sweep_1e4_one_recipe(benchmark::State& state, const char* recipe) {
  const drift_request r = sweep(10000, recipe, false);
  for (auto _ : state) benchmark::DoNotOptimize(run_drift(r).points.size());
}
BENCHMARK_CAPTURE(BM_two_token_sweep_1e4_one_recipe, fp16, "fp16")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_two_token_sweep_1e4_one_recipe, bf16_fp32acc, "bf16-fp32acc")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_two_token_sweep_1e4_one_recipe, fp32, "fp32")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_two_token_sweep_1e4_one_recipe, fp64, "fp64")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_two_token_sweep_1e4_one_recipe, mpfr256, "mpfr256")->Unit(benchmark::kMillisecond);

// Enclosures alone: the sweep with the cheapest recipe, with and without them.
void BM_two_token_enclosures_1e4(benchmark::State& state) {
  const drift_request r = sweep(10000, "fp64", true);
  for (auto _ : state) benchmark::DoNotOptimize(run_drift(r).points.size());
}
BENCHMARK(BM_two_token_enclosures_1e4)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
