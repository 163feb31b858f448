#!/usr/bin/env bash
# tests/tools/cli_end_to_end.sh ATTNCERT — end-to-end tests of the command line: exit
# codes, JSON keys, bad usage (one line on stderr, exit 2, no partial output file).
set -u
BIN="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

expect_exit() {  # expected-code description command...
  local want="$1" what="$2"
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  if [ "$got" = "$want" ]; then ok; else bad "$what: exit $got, expected $want; stderr: $(head -c 300 "$TMP/err")"; fi
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

# --- the main job -----------------------------------------------------------
expect_exit 0 "check (default formats)" "$BIN" check
grep -q "^summary: .* 0 fail, 0 undecided" "$TMP/out" && ok || bad "text summary line"
grep -q "DIVERGES" "$TMP/out" && ok || bad "text report flags divergences"

expect_exit 0 "check --format json" "$BIN" check --format json --out "$TMP/r.json"
python3 - "$TMP/r.json" <<'PY' && ok || bad "JSON structure"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("tool", "version", "settings", "checks", "summary"):
    assert k in d, k
assert d["tool"] == "attncert"
ids = [c["id"] for c in d["checks"]]
assert ids == ["two-token", "identical-values", "causal-mask", "output-bound", "log-odds", "residual", "multi-head"], ids
s = d["summary"]
for k in ("claims", "pass", "fail", "undecided"):
    assert isinstance(s[k], int), k
assert s["fail"] == 0 and s["undecided"] == 0 and s["claims"] == s["pass"] > 0
div = {}
for c in d["checks"]:
    assert c["claims"] and isinstance(c["ranks"], list), c["id"]
    for r in c["ranks"]:
        assert isinstance(r["exact_rank"], int)
        assert isinstance(r["diverges"], bool)
        assert isinstance(r["numerical"], list) and r["numerical"]
        assert r["diverges"] == any(n["rank"] != r["exact_rank"] for n in r["numerical"])
        div[(c["id"], r["object"], r["instance"], r["format"])] = r["diverges"]
assert div[("two-token", "A", "a=1e-20", "binary64")]
assert not div[("two-token", "A", "a=1e-20", "mpfr256")]
assert div[("causal-mask", "A", "diagonal-800-below-max", "binary64")]
assert {f["name"] for f in d["settings"]["formats"]} == {"binary64", "mpfr256"}
PY

expect_exit 0 "check --format md" "$BIN" check two-token --format md
grep -q "^#" "$TMP/out" && ok || bad "markdown has headings"
expect_exit 0 "check --format csv" "$BIN" check causal-mask --format csv
head -1 "$TMP/out" | grep -q "^kind,check," && ok || bad "csv header"
expect_exit 0 "check --list" "$BIN" check --list
[ "$(wc -l <"$TMP/out")" = "7" ] && ok || bad "--list prints seven checks"
expect_exit 0 "all formats" "$BIN" check two-token causal-mask --formats binary16,bfloat16,binary32,binary64,mpfr128
expect_exit 0 "--help" "$BIN" check --help
grep -q "Policies:" "$TMP/out" && ok || bad "--help teaches the policies"

# --- bad usage: one line, exit 2, no partial output file ----------------------
expect_usage_error "unknown check" "$BIN" check no-such-check
expect_usage_error "precision too low" "$BIN" check --formats mpfr8
expect_usage_error "unknown format" "$BIN" check --formats binary8
expect_usage_error "unknown policy" "$BIN" check --policies numpy,foo
expect_usage_error "bad policy parameter" "$BIN" check --policies absolute:-1
expect_usage_error "bad report format" "$BIN" check --format xml
expect_usage_error "unknown option" "$BIN" check --bogus
expect_usage_error "no subcommand" "$BIN"
expect_usage_error "bad certify bits" "$BIN" check --certify-bits 8
expect_usage_error "unwritable output" "$BIN" check two-token --out "$TMP/no/such/dir/r.json"
[ -z "$(ls "$TMP/no" 2>/dev/null)" ] && ok || bad "partial output left behind"
"$BIN" check two-token --formats mpfr8 --out "$TMP/never.json" 2>/dev/null
[ ! -e "$TMP/never.json" ] && ok || bad "output file created on a usage error"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
