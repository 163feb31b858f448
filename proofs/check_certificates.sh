#!/usr/bin/env bash
# proofs/check_certificates.sh ATTNCERT [PROOFS_DIR] — re-verify every shipped certificate with
# the independent checker (`attncert verify-certificate`), and re-run `attncert certify` on its
# claim file: the verdict (exit 0 CERTIFIED / 1 REFUTED) must agree with the certificate's.
set -u
BIN="$1"
DIR="${2:-$(dirname "$0")}"
pass=0
fail=0
n=0
for claim in "$DIR"/claims/*.json; do
  name="$(basename "$claim" .json)"
  cert="$DIR/certificates/$name.cert.json"
  n=$((n + 1))
  if [ ! -f "$cert" ]; then echo "FAIL: $name: no certificate $cert"; fail=$((fail + 1)); continue; fi
  "$BIN" verify-certificate "$cert" >/dev/null 2>&1
  rc=$?
  if [ "$rc" = 0 ]; then pass=$((pass + 1)); else echo "FAIL: $name: verify-certificate exit $rc"; "$BIN" verify-certificate "$cert" | tail -1; fail=$((fail + 1)); fi
  want=1
  grep -q '"verdict": "CERTIFIED"' "$cert" && want=0
  "$BIN" certify "$claim" >/dev/null 2>&1
  rc=$?
  if [ "$rc" = "$want" ]; then pass=$((pass + 1)); else echo "FAIL: $name: certify exit $rc, certificate says exit $want"; fail=$((fail + 1)); fi
done
echo "$n claims, $pass checks passed, $fail failed"
[ "$n" -gt 0 ] && [ "$fail" = 0 ]
