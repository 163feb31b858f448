#!/usr/bin/env bash
# scripts/bootstrap.sh — install the Debian 12 packages attncert needs (only those
# missing), then configure and build.  Used by both README quick-start commands and CI.
#
#   ATTNCERT_BUILD_DIR   build directory (default: build)
#   ATTNCERT_SANITIZE=1  build with AddressSanitizer + UndefinedBehaviorSanitizer
#   ATTNCERT_WERROR=1    treat compiler warnings as errors
#   ATTNCERT_JOBS        parallel build jobs (default: number of cores)
#   ATTNCERT_CXX=clang++ build with clang (installs clang and its sanitizer/libFuzzer runtimes)
#   ATTNCERT_FUZZ=1      also build the libFuzzer harnesses of tests/fuzz/ (needs ATTNCERT_CXX=clang++;
#                        CI's sanitizer build does this, so that tests/fuzz/run.sh reuses its objects)
#   ATTNCERT_UNIT_TIMES=FILE  time every compilation (scripts/unit_timer.sh appends "seconds object"
#                        to FILE) and print the ten heaviest units after the build; check a new unit
#                        with it before adding one (CI's 90 minutes are shared by two full builds)
set -euo pipefail
if [ -n "${ATTNCERT_UNIT_TIMES:-}" ]; then  # resolved against the caller's directory
  mkdir -p "$(dirname "$ATTNCERT_UNIT_TIMES")"
  ATTNCERT_UNIT_TIMES="$(cd "$(dirname "$ATTNCERT_UNIT_TIMES")" && pwd)/$(basename "$ATTNCERT_UNIT_TIMES")"
  export ATTNCERT_UNIT_TIMES
fi
cd "$(dirname "$0")/.."

packages=(build-essential cmake libgmp-dev libmpfr-dev libmpfi-dev libboost-dev libboost-test-dev
          libeigen3-dev nlohmann-json3-dev libcli11-dev libflint-dev nettle-dev liblapacke-dev libopenblas-dev libbenchmark-dev pybind11-dev python3-dev python3-pytest python3-distributed python3 python3-numpy python3-mpmath python3-torch python3-sympy
          gnuplot-nox chromium)
if [ "${ATTNCERT_CXX:-}" = clang++ ]; then packages+=(clang libclang-rt-14-dev); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

build="${ATTNCERT_BUILD_DIR:-build}"
sanitize=OFF; [ "${ATTNCERT_SANITIZE:-0}" = 1 ] && sanitize=ON
werror=OFF; [ "${ATTNCERT_WERROR:-0}" = 1 ] && werror=ON
fuzz=OFF; [ "${ATTNCERT_FUZZ:-0}" = 1 ] && fuzz=ON
compiler=(); [ -n "${ATTNCERT_CXX:-}" ] && compiler=(-DCMAKE_CXX_COMPILER="$ATTNCERT_CXX")
build_type=Release; [ "$sanitize" = ON ] && build_type=RelWithDebInfo
# ccache, when installed, makes rebuilds cheap; the build does not need it.
launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=); command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ -n "${ATTNCERT_UNIT_TIMES:-}" ]; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER="$PWD/scripts/unit_timer.sh")
fi
cmake -S . -B "$build" "${launcher[@]}" "${compiler[@]}" -DCMAKE_BUILD_TYPE="$build_type" -DATTNCERT_SANITIZE="$sanitize" \
  -DATTNCERT_WERROR="$werror" -DATTNCERT_FUZZ="$fuzz" >&2
cmake --build "$build" -j "${ATTNCERT_JOBS:-$(nproc)}" >&2
if [ -n "${ATTNCERT_UNIT_TIMES:-}" ] && [ -s "$ATTNCERT_UNIT_TIMES" ]; then
  echo "bootstrap: the ten heaviest units (seconds; all units in $ATTNCERT_UNIT_TIMES):" >&2
  sort -rn "$ATTNCERT_UNIT_TIMES" | head -10 >&2
fi
# The Python package (plain builds only: <build>/python/attncert): Debian's /usr/bin/python3 finds it
# without PYTHONPATH through attncert.pth in its site-packages (a path-configuration file naming the
# build tree's python/ folder, as an editable install does).  The last plain build made here wins.
if [ "$sanitize" = OFF ] && [ "$fuzz" = OFF ] && compgen -G "$build/python/attncert/_core*.so" >/dev/null; then
  site="$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO mkdir -p "$site"
  echo "$(cd "$build/python" && pwd)" | $SUDO tee "$site/attncert.pth" >/dev/null
  echo "bootstrap: /usr/bin/python3 imports attncert from $(cd "$build/python" && pwd) ($site/attncert.pth)" >&2
fi
