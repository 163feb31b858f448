#!/usr/bin/env bash
# tests/fuzz/run.sh SECONDS — build the five libFuzzer harnesses of tests/fuzz/ with clang
# (ASan + UBSan, -DATTNCERT_FUZZ=ON) in a separate build directory, then run each for SECONDS
# seconds on a temporary copy of its seed corpus tests/fuzz/corpus/<harness>/ (the repository
# is not modified).  A build directory configured with ATTNCERT_FUZZ=ON is reused.  Exits non-zero if any harness finds a crash, a sanitizer error, a leak,
# a timeout (25 s per input) or an out-of-memory (2 GiB); the reproducer is kept in
# BUILD/fuzz-artifacts/ and the log tail printed.
#
#   ATTNCERT_FUZZ_BUILD_DIR  build directory (default: build-fuzz)
#   ATTNCERT_JOBS            parallel build jobs (default: number of cores)
#   ATTNCERT_FUZZ_HARNESSES  the harnesses to run (default: "npy matrix_input certify verify oracle_variants")
#   ATTNCERT_FUZZ_SEED       libFuzzer's -seed (default 0: a random seed, printed in the log);
#                            CI sets 1 so that its smoke explores the same inputs first
#
# Input sizes per harness (-max_len): npy and matrix_input 64 KiB, certify 512 bytes,
# verify 4 KiB, oracle_variants 2 KiB (its tensors stay tiny whatever the length); certify and verify also
# skip large claims (see their header comments).
set -euo pipefail
secs="${1:?usage: tests/fuzz/run.sh SECONDS}"
cd "$(dirname "$0")/../.."
root="$(pwd)"
build="${ATTNCERT_FUZZ_BUILD_DIR:-build-fuzz}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
harnesses=(${ATTNCERT_FUZZ_HARNESSES:-npy matrix_input certify verify oracle_variants})

# clang and its libFuzzer / sanitizer runtimes (Debian 12: clang-14, libclang-rt-14-dev)
missing=()
for p in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "fuzz: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# A build directory already configured with ATTNCERT_FUZZ=ON (CI's clang sanitizer build: bootstrap.sh
# with ATTNCERT_CXX=clang++ ATTNCERT_FUZZ=1) is reused as it is; otherwise one is configured here.
if ! grep -qs '^ATTNCERT_FUZZ:BOOL=ON$' "$build/CMakeCache.txt"; then
  cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTNCERT_FUZZ=ON \
    -DATTNCERT_TESTS=OFF >&2
fi
cmake --build "$build" -j "${ATTNCERT_JOBS:-$(nproc)}" --target "${harnesses[@]/#/fuzz_}" >&2

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/fuzz-artifacts"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
seed="${ATTNCERT_FUZZ_SEED:-0}"
for h in "${harnesses[@]}"; do
  case "$h" in
    certify) len=512 ;;
    verify) len=4096 ;;
    oracle_variants) len=2048 ;;
    *) len=65536 ;;
  esac
  mkdir -p "$work/$h"
  cp "tests/fuzz/corpus/$h/"* "$work/$h/"
  log="$work/$h.log"
  if "$build/fuzz_$h" -max_total_time="$secs" -max_len="$len" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 -seed="$seed" \
       -artifact_prefix="$build/fuzz-artifacts/$h-" "$work/$h" >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz_$h: ok, $runs executions in ${secs} s, corpus $(ls "$work/$h" | wc -l) inputs"
  else
    status=1
    echo "fuzz_$h: FINDING (reproducer in $build/fuzz-artifacts/):"
    tail -n 40 "$log"
  fi
done
exit "$status"
