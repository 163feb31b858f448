#!/usr/bin/env bash
# scripts/function_lengths.sh [N] [DIR...] — the N longest functions (default 15) in lib/ and
# tools/ (or the folders given), in lines from the first line of the signature to the closing
# brace, as Universal Ctags sees them (apt-get install universal-ctags).  Lambdas count as
# functions of their own (ctags names them __anon...).
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-15}"
shift || true
dirs=("$@")
[ "${#dirs[@]}" -gt 0 ] || dirs=(lib tools)
ctags -x --_xformat='%{end} %{line} %N %F' --kinds-c++=f --fields=+e -o - --languages=C++ --map-C++=+.hpp -R "${dirs[@]}" |
  awk '{print $1 - $2 + 1, $3, $4}' | sort -rn | head -n "$n"
