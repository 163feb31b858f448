#!/usr/bin/env bash
# tests/tools/cli_uniform.sh ATTNCERT — the uniform command line: the documented exit codes in
# every --help, shared option validation (bad values are usage errors, exit 2), --out and
# --format json on every subcommand, one-line error messages, and outputs committed together
# (nothing left behind after an error or an interruption: no target, no temporary file).
set -u
BIN="$1"
. "$(dirname "$0")/harness.sh"

# Nothing attncert would leave behind in directory $1: temporaries, scratch directories.
no_leftovers() {  # dir description
  local left
  left=$(ls -A "$1" | grep -E 'attncert-(tmp|bak|scratch)|\.tmp|attncert-plot')
  if [ -z "$left" ]; then ok; else bad "$2: left $left"; fi
}
absent() {  # path description
  if [ ! -e "$1" ]; then ok; else bad "$2: '$1' was left behind"; fi
}

printf '[[1, 2], [3, 4]]\n' >"$TMP/q.json"
printf '[[1, 0], [0, 1]]\n' >"$TMP/k.json"
python3 - "$TMP" <<'PY'
import struct, sys
def npy(path, rows):
    n, d = len(rows), len(rows[0])
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }" % (n, d)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    data = b"".join(struct.pack("<d", float(x)) for r in rows for x in r)
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
npy(sys.argv[1] + "/q.npy", [[1, 2], [3, 4], [-1, 0.5]])
npy(sys.argv[1] + "/k.npy", [[1, 0], [0, 1], [1, 1]])
npy(sys.argv[1] + "/v.npy", [[0.5, -1], [2, 3], [-4, 1]])
PY
printf '{"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"range": "(0, inf)"}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 2}\n' >"$TMP/claim.json"
ORACLE=(oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy")

# --- the exit-code table: top-level help and every subcommand's help ------------------
expect_exit 0 "attncert --help" "$BIN" --help
for code in "0 " "1 " "2 " "3 " "70 " "130 "; do expect_in "$TMP/out" "  $code" "top-level help lists exit code $code"; done
for sub in check rank oracle certify verify-certificate drift figures; do
  expect_exit 0 "$sub --help" "$BIN" $sub --help
  expect_in "$TMP/out" "Exit status:" "$sub --help has the exit-code table"
  expect_in "$TMP/out" "  70   internal error" "$sub --help documents the internal-error code"
  expect_in "$TMP/out" "  130  interrupted" "$sub --help documents the interrupted code"
  expect_in "$TMP/out" "--out" "$sub has --out"
  expect_in "$TMP/out" "--format" "$sub has --format"
done

# --- bad values are usage errors (they were accepted silently) --------------------------
expect_usage_error "check --seed -1" "$BIN" check two-token --seed -1
expect_usage_error "check --seed +1" "$BIN" check two-token --seed +1
expect_usage_error "rank --seed -1" "$BIN" rank --q "$TMP/q.json" --k "$TMP/k.json" --seed -1
expect_usage_error "drift --seed -1" "$BIN" drift --family random --from 0.1 --to 1 --points 2 --seed -1
expect_usage_error "rank --scale ''" "$BIN" rank --q "$TMP/q.json" --k "$TMP/k.json" --scale ''
expect_usage_error "oracle --scale ''" "$BIN" "${ORACLE[@]}" --scale ''
expect_usage_error "rank --mask ''" "$BIN" rank --q "$TMP/q.json" --k "$TMP/k.json" --mask ''
expect_exit 0 "rank --scale default still works" "$BIN" rank --q "$TMP/q.json" --k "$TMP/k.json" --scale default
cp "$TMP/out" "$TMP/scale_default.txt"
expect_exit 0 "rank --scale 1/sqrt(d) still works" "$BIN" rank --q "$TMP/q.json" --k "$TMP/k.json" --scale '1/sqrt(d)'
cmp -s "$TMP/out" "$TMP/scale_default.txt" && ok || bad "--scale default and 1/sqrt(d) differ"
expect_usage_error "drift --n 0 --d 0" "$BIN" drift --family random --n 0 --d 0 --from 0.1 --to 1 --points 2
expect_usage_error "drift --n 0" "$BIN" drift --family causal --n 0 --from 0.1 --to 1 --points 2
expect_usage_error "drift --n 4097" "$BIN" drift --family causal --n 4097 --from 0.1 --to 1 --points 2
expect_usage_error "drift --d -1" "$BIN" drift --family random --d -1 --from 0.1 --to 1 --points 2
expect_usage_error "drift --points -1" "$BIN" drift --from 0.1 --to 1 --points -1
expect_usage_error "oracle --threads 0" "$BIN" "${ORACLE[@]}" --threads 0
expect_usage_error "oracle --threads -1" "$BIN" "${ORACLE[@]}" --threads -1
expect_usage_error "oracle --max-precision 64" "$BIN" "${ORACLE[@]}" --max-precision 64
expect_usage_error "rank --max-precision 127" "$BIN" rank --q "$TMP/q.json" --k "$TMP/k.json" --max-precision 127
expect_usage_error "certify --max-precision 0" "$BIN" certify "$TMP/claim.json" --max-precision 0
echo '{"format": "attncert-certificate/1"}' >"$TMP/some.cert.json"
expect_usage_error "verify-certificate --format xml" "$BIN" verify-certificate "$TMP/some.cert.json" --format xml
expect_usage_error "certify --format xml" "$BIN" certify "$TMP/claim.json" --format xml
expect_usage_error "check --format xml" "$BIN" check two-token --format xml
expect_usage_error "figures --format xml" "$BIN" figures --out "$TMP/never" --format xml
absent "$TMP/never" "figures with a bad --format"

# --- --out and --format json everywhere --------------------------------------------------
expect_exit 0 "certify --out" "$BIN" certify "$TMP/claim.json" --format json --out "$TMP/certify.json"
[ ! -s "$TMP/out" ] && ok || bad "certify --out also wrote to stdout"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["verdict"] == "CERTIFIED"' "$TMP/certify.json" \
  && ok || bad "certify --out holds the JSON report"
expect_exit 0 "certify --certificate" "$BIN" certify "$TMP/claim.json" --certificate "$TMP/c.cert.json"
expect_exit 0 "verify-certificate --out" "$BIN" verify-certificate "$TMP/c.cert.json" --format json --out "$TMP/verify.json"
[ ! -s "$TMP/out" ] && ok || bad "verify-certificate --out also wrote to stdout"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["status"] == "VALID"' "$TMP/verify.json" \
  && ok || bad "verify-certificate --out holds the JSON report"
expect_usage_error "certify --out into a missing directory" "$BIN" certify "$TMP/claim.json" --certificate "$TMP/c2.cert.json" --out "$TMP/nodir/r.json"
absent "$TMP/c2.cert.json" "certify with a bad --out"
no_leftovers "$TMP" "certify with a bad --out"

# --- oracle: the reference and the report are committed together ---------------------
expect_usage_error "oracle --out into a missing directory" "$BIN" "${ORACLE[@]}" --write-reference "$TMP/ref.npy" --out "$TMP/nodir/r.txt"
absent "$TMP/ref.npy" "oracle --write-reference with a bad --out"
# A report that cannot be created after the reference was staged (/proc/self refuses new files).
expect_usage_error "oracle --out unwritable" "$BIN" "${ORACLE[@]}" --write-reference "$TMP/ref.npy" --out /proc/self/attncert-report.txt
absent "$TMP/ref.npy" "oracle --write-reference with an unwritable --out"
no_leftovers "$TMP" "oracle with an unwritable --out"
expect_exit 0 "oracle --write-reference --out" "$BIN" "${ORACLE[@]}" --write-reference "$TMP/ref.npy" --out "$TMP/r.txt"
[ -s "$TMP/ref.npy" ] && [ -s "$TMP/r.txt" ] && ok || bad "oracle wrote the reference and the report"
no_leftovers "$TMP" "oracle success"

# --- drift --plot onto an existing directory: exit 2, one line, nothing left -----------------
mkdir -p "$TMP/plotdir.png"
expect_usage_error "drift --plot onto a directory" "$BIN" drift --from 0.1 --to 1 --points 3 --recipes fp64 --plot "$TMP/plotdir.png" --out "$TMP/drift.txt"
absent "$TMP/drift.txt" "drift --plot onto a directory"
no_leftovers "$TMP" "drift --plot onto a directory"
[ -z "$(ls -A "$TMP/plotdir.png")" ] && ok || bad "drift --plot wrote into the directory"

# --- interruption: SIGINT / SIGTERM leave nothing behind and exit 130 ---------------------
interrupt() {  # signal seconds description dir-to-check target... -- command...
  # The command must still be running when the signal arrives: on an idle machine `figures`
  # takes well under a second, so the delay starts at `seconds` and is shortened (down to
  # 20 ms) while the command finishes first; a command that finished leaves its outputs,
  # which are removed before the next try.
  local sig="$1" secs="$2" what="$3" dir="$4"
  shift 4
  local targets=()
  while [ "$1" != "--" ]; do targets+=("$1"); shift; done
  shift
  local rc=0 delay
  for delay in "$secs" 0.3 0.1 0.05 0.02; do
    "$@" >/dev/null 2>"$TMP/int.err" &
    local pid=$!
    sleep "$delay"
    kill -"$sig" "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    [ "$rc" = 0 ] || break
    for t in "${targets[@]}"; do rm -rf "$t"; done
  done
  [ "$rc" = 130 ] && ok || bad "$what: exit $rc, expected 130 ($(head -c 300 "$TMP/int.err"))"
  [ "$(wc -l <"$TMP/int.err")" = 1 ] && ok || bad "$what: stderr is not one line: $(cat "$TMP/int.err")"
  for t in "${targets[@]}"; do absent "$t" "$what"; done
  no_leftovers "$dir" "$what"
}
mkdir -p "$TMP/int"
interrupt INT 1 "SIGINT during figures" "$TMP/int" "$TMP/int/figs" -- "$BIN" figures --out "$TMP/int/figs"
interrupt TERM 1 "SIGTERM during figures" "$TMP/int" "$TMP/int/figs" -- "$BIN" figures --out "$TMP/int/figs"
interrupt INT 1 "SIGINT during figures into new parents" "$TMP/int" "$TMP/int/a" -- "$BIN" figures --out "$TMP/int/a/b/figs"
interrupt INT 1 "SIGINT during drift --plot" "$TMP/int" "$TMP/int/p.png" "$TMP/int/p.txt" -- \
  "$BIN" drift --from 1e-20 --to 1 --points 20000 --log --recipes fp32,fp64 --plot "$TMP/int/p.png" --out "$TMP/int/p.txt"

# --- messages that echo input stay on one line -----------------------------------------
expect_usage_error "file name with a newline (rank)" "$BIN" rank --scores "$TMP/a
b.json"
expect_in "$TMP/err" '\x0a' "the newline is escaped"
expect_usage_error "file name with a newline (oracle)" "$BIN" oracle --q "$TMP/a
b.npy" --k "$TMP/k.npy" --v "$TMP/v.npy"
expect_usage_error "option value with a newline" "$BIN" check two-token --format "json
xml"
expect_usage_error "seed with a newline" "$BIN" check two-token --seed "1
2"
expect_usage_error "scale with a newline" "$BIN" rank --q "$TMP/q.json" --k "$TMP/k.json" --scale "1/8
x"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
