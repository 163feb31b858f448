# tests/tools/harness.sh — sourced by the command-line end-to-end scripts: a temporary
# directory ($TMP, removed on exit), pass/fail counters and the expectations they share.
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

expect_exit() {  # expected-code description command...   (stdout -> $TMP/out, stderr -> $TMP/err)
  local want="$1" what="$2"
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  if [ "$got" = "$want" ]; then ok; else bad "$what: exit $got, expected $want; stdout: $(head -c 300 "$TMP/out") stderr: $(head -c 300 "$TMP/err")"; fi
}

expect_in() {  # file text description
  if grep -qF -- "$2" "$1"; then ok; else bad "$3: '$2' not in $(head -c 300 "$1")"; fi
}

expect_usage_error() {  # description command...  (exit 2, exactly one stderr line, nothing on stdout)
  local what="$1"
  shift
  expect_exit 2 "$what" "$@"
  local lines
  lines=$(wc -l <"$TMP/err")
  if [ "$lines" = "1" ]; then ok; else bad "$what: $lines stderr lines, expected 1: $(cat "$TMP/err")"; fi
  if [ ! -s "$TMP/out" ]; then ok; else bad "$what: wrote to stdout on a usage error"; fi
}
