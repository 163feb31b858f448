#!/usr/bin/env bash
# tests/tools/cli_end_to_end.sh ATTNCERT — end-to-end tests of the command line: exit
# codes, JSON keys, bad usage (one line on stderr, exit 2, no partial output file).
set -u
BIN="$1"
. "$(dirname "$0")/harness.sh"

# --- the main job -----------------------------------------------------------
expect_exit 0 "check (default formats)" "$BIN" check
grep -q "^summary: .* 0 fail, 0 undecided" "$TMP/out" && ok || bad "text summary line"
grep -qE "^  two-token +[0-9]+ +[0-9]+ +0 +0 +[0-9]+ +[0-9]+ +[1-9]" "$TMP/out" && ok || bad "text summary: per check, claims and divergences"
[ "$(wc -l < "$TMP/out")" -le 40 ] && ok || bad "text summary fits one screen (40 lines)"
! grep -q "\[PASS\]" "$TMP/out" && ok || bad "per-claim detail only with --verbose"
expect_exit 0 "check --verbose" "$BIN" check two-token --verbose
grep -q "DIVERGES" "$TMP/out" && ok || bad "verbose text report flags divergences"
grep -q "\[PASS\]" "$TMP/out" && ok || bad "verbose text report lists the claims"

expect_exit 0 "check --format json" "$BIN" check --format json --out "$TMP/r.json"
python3 - "$TMP/r.json" <<'PY' && ok || bad "JSON structure"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("tool", "version", "settings", "checks", "summary"):
    assert k in d, k
assert d["tool"] == "attncert"
ids = [c["id"] for c in d["checks"]]
assert ids[:7] == ["two-token", "identical-values", "causal-mask", "output-bound", "log-odds", "residual", "multi-head"], ids
assert ids[7:] == ["nearest-neighbour", "head-size-bottleneck", "rank-collapse", "linear-attention", "random-features",
                  "rank-heads-tradeoff", "permutation-symmetry", "attenuated-direction", "contrast-injection"], ids
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
[ "$(wc -l <"$TMP/out")" = "16" ] && ok || bad "--list prints the seven article checks and the nine further checks"
for id in two-token multi-head nearest-neighbour head-size-bottleneck rank-collapse linear-attention random-features rank-heads-tradeoff permutation-symmetry attenuated-direction contrast-injection; do
  grep -q "^$id	" "$TMP/out" && ok || bad "--list names $id"
done
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

# --- attncert rank -------------------------------------------------------------
cat >"$TMP/S.json" <<'J'
[[0, 1000, 1000], [0, -800, 1000], [0, 0, -800]]
J
expect_exit 0 "rank causal trap" "$BIN" rank --scores "$TMP/S.json" --mask causal --formats binary64,mpfr256 --format json --out "$TMP/rank.json"
python3 - "$TMP/rank.json" <<'PY' && ok || bad "rank JSON (causal trap)"
import json, sys
d = json.load(open(sys.argv[1]))
e = d["exact_rank"]
assert e["lo"] == e["hi"] == 3, e
assert e["lo_witness"] and e["hi_witness"]
assert len(d["singular_values"]) == 3 and all(set(s) == {"lo", "hi"} for s in d["singular_values"])
from decimal import Decimal
assert Decimal(d["singular_values"][2]["lo"]) > 0         # certified positive although ~1e-696
n = d["numerical"]
assert {(x["format"], x["policy"]) for x in n} >= {("binary64", "numpy"), ("mpfr256", "numpy")}
assert all(x["diverges"] == (x["rank"] != 3) for x in n)
assert any(x["diverges"] for x in n if x["format"] == "binary64")   # binary64 too low
PY
# The tiny sigma3 is beyond the binary64 path: the MPFI path decided it (small matrix).
python3 - "$TMP/rank.json" <<'PY' && ok || bad "rank: binary64 undecided escalates to MPFI on a small matrix"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["singular_values_method"] == "mpfi" and d["singular_values_decided"], d["singular_values_method"]
assert d["partial"] is False and set(d["seconds"]) == {"exact rank", "singular values", "numerical ranks"}, d["seconds"]
PY
# --max-seconds: a run that cannot finish in time is PARTIAL, says what it left out, exits 0.
expect_exit 0 "rank max-seconds" "$BIN" rank --scores "$TMP/S.json" --max-seconds 0.000001 --format json --out "$TMP/partial.json"
python3 - "$TMP/partial.json" <<'PY' && ok || bad "rank --max-seconds marks the report partial"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["partial"] is True and d["summary"]["partial"] is True
assert any("not computed" in n for n in d["notes"]), d["notes"]
assert d["numerical"] == [], d["numerical"]
PY
"$BIN" rank --scores "$TMP/S.json" --max-seconds 0.000001 >"$TMP/out" 2>&1
grep -q "^PARTIAL: stopped at --max-seconds" "$TMP/out" && ok || bad "rank --max-seconds: no PARTIAL line in the text report"
expect_usage_error "rank negative max-seconds" "$BIN" rank --scores "$TMP/S.json" --max-seconds -1
# 260 tokens: mpfr256 is left out of the default formats with a time estimate; the binary64 path
# certifies every singular value; naming a format keeps it.
python3 -c "
import json, random
random.seed(7)
for name in ('Q260', 'K260'):
    json.dump([[random.randint(-8, 8) / 8 for _ in range(4)] for _ in range(260)], open('$TMP/' + name + '.json', 'w'))
"
expect_exit 0 "rank 260 tokens" "$BIN" rank --q "$TMP/Q260.json" --k "$TMP/K260.json" --format json --out "$TMP/r260.json"
python3 - "$TMP/r260.json" <<'PY' && ok || bad "rank 260 tokens: mpfr256 left out with an estimate, sigmas by binary64"
import json, sys
d = json.load(open(sys.argv[1]))
assert not any(x["format"] == "mpfr256" for x in d["numerical"]), "mpfr256 ran"
assert any(x["format"] == "binary16" for x in d["numerical"])
assert any("mpfr256 left out" in n and "would take about" in n for n in d["notes"]), d["notes"]
assert d["singular_values_method"] == "binary64", d["singular_values_method"]
assert d["singular_values_certified_positive"] == d["exact_rank"]["lo"], (d["singular_values_certified_positive"], d["exact_rank"])
PY
# --max-seconds holds inside the stages (issue 28, item 5): mpfr256 named at 260 tokens (an SVD of
# minutes in Eigen's Jacobi, which cannot stop inside) does not start past a 4 s budget (the spec: within 1 s of it).
# (One BLAS thread: OpenBLAS's threads spin when CTest keeps both cores busy, which times the load.)
# A sanitizer build runs our own code about five times slower: the budgets and the 1 s allowed past
# them (the work between two polls) scale with it; the release build checks the rule as stated.
slow=1
grep -qa __asan_init "$BIN" && slow=5
budget=$((4 * slow))
t0=$(date +%s%N)
expect_exit 0 "rank --max-seconds $budget with mpfr256 at 260 tokens" env OPENBLAS_NUM_THREADS=1 timeout 300 "$BIN" rank --q "$TMP/Q260.json" --k "$TMP/K260.json" --formats binary64,mpfr256 --max-seconds $budget --format json --out "$TMP/r260t.json"
t1=$(date +%s%N)
[ $(( (t1 - t0) / 1000000 )) -lt $(( (budget + slow) * 1000 )) ] && ok || bad "rank --max-seconds $budget took $(( (t1 - t0) / 1000000 )) ms"
python3 - "$TMP/r260t.json" <<'PY' && ok || bad "rank --max-seconds: PARTIAL, and the note names the stage not started"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["partial"] is True, d["partial"]
assert any("mpfr256: not computed" in n and "--max-seconds" in n for n in d["notes"]), d["notes"]
PY
# drift --max-seconds (issue 28, item 5): 40 points with enclosures take about 50 s; under a 4 s budget (two points at least, under load too) the
# report is PARTIAL and names the part of the grid it covers.
budget=$((4 * slow))
t0=$(date +%s%N)
expect_exit 0 "drift --max-seconds $budget" env OPENBLAS_NUM_THREADS=1 timeout 300 "$BIN" drift --family causal --from 0 --to 5 --points 40 --n 32 --max-seconds $budget --format json --out "$TMP/dpart.json"
t1=$(date +%s%N)
[ $(( (t1 - t0) / 1000000 )) -lt $(( (budget + slow) * 1000 )) ] && ok || bad "drift --max-seconds $budget took $(( (t1 - t0) / 1000000 )) ms"
python3 - "$TMP/dpart.json" <<'PY' && ok || bad "drift --max-seconds: a PARTIAL summary naming what it covers"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["summary"]
assert s["partial"] is True and s["points_planned"] == 40 and 2 <= s["points"] < 40, s
assert "stopped at --max-seconds" in s["not_computed"], s
assert d["settings"]["max_seconds"] in (4, 20)
PY
expect_usage_error "drift --max-seconds -1" "$BIN" drift --from 0 --to 1 --max-seconds -1
# check --max-seconds (issue 28, item 5): a run past its budget is PARTIAL, exit 3, each check not
# finished one undecided "not-computed" claim, and no claim of a half-run check.
budget=0.05
t0=$(date +%s%N)
expect_exit 3 "check --max-seconds $budget" "$BIN" check --max-seconds $budget --format json --out "$TMP/cpart.json"
t1=$(date +%s%N)
[ $(( (t1 - t0) / 1000000 )) -lt $(( slow * 1000 + 50 )) ] && ok || bad "check --max-seconds $budget took $(( (t1 - t0) / 1000000 )) ms"
python3 - "$TMP/cpart.json" <<'PY' && ok || bad "check --max-seconds: PARTIAL, not-computed rows"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["summary"]
assert s["partial"] is True and s["not_computed_checks"] >= 1 and s["fail"] == 0, s
nc = [c for c in d["checks"] if any(r["claim"] == "not-computed" for r in c["claims"])]
assert len(nc) == s["not_computed_checks"] and all(len(c["claims"]) == 1 for c in nc), nc
assert all(c["claims"][0]["verdict"] == "undecided" and "--max-seconds" in c["claims"][0]["note"] for c in nc), nc
PY
"$BIN" check two-token --max-seconds 0.000001 >"$TMP/out" 2>&1
grep -q "^PARTIAL: 1 checks not computed" "$TMP/out" && ok || bad "check --max-seconds: no PARTIAL line in the text report"
expect_usage_error "check --max-seconds -1" "$BIN" check --max-seconds -1
expect_usage_error "check --max-seconds nan" "$BIN" check --max-seconds nan
expect_usage_error "rank --max-seconds nan" "$BIN" rank --scores "$TMP/S.json" --max-seconds nan
expect_usage_error "drift --max-seconds nan" "$BIN" drift --from 0 --to 1 --max-seconds nan
# A bad --scale names the option (rank and oracle).
expect_usage_error "rank --scale x" "$BIN" rank --q "$TMP/Q260.json" --k "$TMP/K260.json" --scale x
expect_in "$TMP/err" "--scale: not a decimal number" "rank --scale x: the message names --scale"
# The enclosure method states what ran: above 64 tokens the binary64 path, not MPFI.
expect_exit 0 "drift --n 66" "$BIN" drift --family causal --from 0 --to 1 --points 2 --n 66 --recipes fp64 --format json
python3 -c "import json,sys; m = json.load(open(sys.argv[1]))['settings']['enclosure_method']; assert m.startswith('binary64 path'), m" "$TMP/out" && ok || bad "drift --n 66: enclosure_method names the binary64 path"
# A note states what ran (issue 28, item 4): binary64 inputs whose scores overflow at --scale 1e308
# are not enclosed because the binary64 bound does not apply, not because they are not binary64.
expect_exit 0 "rank 260 tokens at scale 1e308" "$BIN" rank --q "$TMP/Q260.json" --k "$TMP/K260.json" --scale 1e308 --object scores --formats binary64 --format json --out "$TMP/r260s.json"
python3 - "$TMP/r260s.json" <<'PY' && ok || bad "rank at scale 1e308: the note names the binary64 bound"
import json, sys
d = json.load(open(sys.argv[1]))
notes = " ".join(d["notes"])
assert "not all binary64" not in notes, notes
assert "binary64 bounds do not apply" in notes, notes
PY
# --sigma-rel-width: binary64 widths (~1e-13 relative) cannot meet 1e-30; on a small matrix the MPFI path does.
echo '[[1, 0.5], [-0.75, 1], [0.25, -1.5]]' >"$TMP/Qw.json"
echo '[[1, 0.25], [0.5, 1], [-0.5, 2]]' >"$TMP/Kw.json"
expect_exit 0 "rank sigma-rel-width" "$BIN" rank --q "$TMP/Qw.json" --k "$TMP/Kw.json" --sigma-rel-width 1e-30 --formats binary64 --format json --out "$TMP/rw.json"
python3 - "$TMP/rw.json" <<'PY' && ok || bad "rank --sigma-rel-width escalates to MPFI"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["singular_values_method"] == "mpfi" and d["singular_values_decided"], d
assert 0 < d["singular_values_max_relative_width"] <= 1e-30, d["singular_values_max_relative_width"]
PY
# Equal keys: the exact rank drops; keys equal up to the last bit: it does not.
cat >"$TMP/Q.json" <<'J'
[[1, 0.5], [-0.75, 1], [0.25, -1.5]]
J
cat >"$TMP/K.json" <<'J'
[[1, 0.25], [1, 0.25], [-0.5, 2]]
J
cat >"$TMP/K2.json" <<'J'
[[1, 0.25], ["1.0000000000000002220446049250313080847263336181640625", 0.25], [-0.5, 2]]
J
expect_exit 0 "rank equal keys" "$BIN" rank --q "$TMP/Q.json" --k "$TMP/K.json" --format json --out "$TMP/r1.json"
expect_exit 0 "rank nearly equal keys" "$BIN" rank --q "$TMP/Q.json" --k "$TMP/K2.json" --format json --out "$TMP/r2.json"
python3 - "$TMP/r1.json" "$TMP/r2.json" <<'PY' && ok || bad "rank of equal / nearly equal keys"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["exact_rank"]["lo"] == a["exact_rank"]["hi"] == 2, a["exact_rank"]
assert b["exact_rank"]["lo"] == b["exact_rank"]["hi"] == 3, b["exact_rank"]
assert any(x["diverges"] for x in b["numerical"] if x["format"] == "binary64")  # binary64 calls it deficient
PY
cat >"$TMP/V.json" <<'J'
[[1, 2], [1, 2], [1, 2]]
J
expect_exit 0 "rank output" "$BIN" rank --q "$TMP/Q.json" --k "$TMP/K2.json" --v "$TMP/V.json" --object output
grep -q "exact rank: 1" "$TMP/out" && ok || bad "identical values give output rank 1"
# bad input: one line, exit 2
echo '[[1, 2], [3]]' >"$TMP/ragged.json"
echo '[[1, "nan"]]' >"$TMP/nan.json"
echo '[[1, 2' >"$TMP/trunc.json"
echo '[[true, false], [false, false]]' >"$TMP/empty_row_mask.json"
expect_usage_error "rank ragged matrix" "$BIN" rank --scores "$TMP/ragged.json"
expect_usage_error "rank NaN entry" "$BIN" rank --scores "$TMP/nan.json"
expect_usage_error "rank truncated JSON" "$BIN" rank --scores "$TMP/trunc.json"
expect_usage_error "rank missing file" "$BIN" rank --scores "$TMP/none.json"
expect_usage_error "rank fully masked row" "$BIN" rank --scores "$TMP/S.json" --mask "$TMP/empty_row_mask.json"
echo '[[1, 2], [3, 4]]' >"$TMP/V2.json"
echo '[[0, 100000], [1, 0]]' >"$TMP/Sbig.json"
expect_usage_error "rank shape mismatch" "$BIN" rank --q "$TMP/Q.json" --k "$TMP/K.json" --v "$TMP/V2.json" --object output
expect_usage_error "rank output without V" "$BIN" rank --scores "$TMP/S.json" --object output
expect_usage_error "rank unknown object" "$BIN" rank --scores "$TMP/S.json" --object logits
expect_usage_error "rank --object scores --mask causal (the scores are unmasked)" "$BIN" rank --scores "$TMP/S.json" --mask causal --object scores
expect_in "$TMP/err" "does not apply to the scores" "rank scores + mask: the reason"
expect_usage_error "rank both inputs" "$BIN" rank --scores "$TMP/S.json" --q "$TMP/Q.json" --k "$TMP/K.json"
expect_usage_error "rank precision too low" "$BIN" rank --scores "$TMP/S.json" --max-precision 16
expect_usage_error "rank overflowing scores in binary16" "$BIN" rank --scores "$TMP/Sbig.json" --formats binary16
printf 'garbage' >"$TMP/bad.npy"
expect_usage_error "rank malformed npy" "$BIN" rank --scores "$TMP/bad.npy"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  /usr/bin/python3 -c "import numpy as np; np.save('$TMP/S16.npy', np.array([[0, 1], [1, 0]], dtype=np.float16)); np.save('$TMP/Snan.npy', np.array([[0, np.nan], [1, 0]]))"
  expect_exit 0 "rank from float16 npy" "$BIN" rank --scores "$TMP/S16.npy"
  grep -q "exact rank: 2" "$TMP/out" && ok || bad "rank of a float16 .npy"
  expect_usage_error "rank NaN in npy" "$BIN" rank --scores "$TMP/Snan.npy"
fi

# --- oracle -------------------------------------------------------------------
# npy writer without NumPy: mknpy FILE DESCR SHAPE VALUES... (descr <f8, <f4, |b1; shape "2,3")
mknpy() {
  python3 - "$@" <<'PY'
import struct, sys
path, descr, shape, vals = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
dims = tuple(int(x) for x in shape.split(",") if x != "")
shp = "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"
header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shp)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
fmt = {"<f8": "<d", "<f4": "<f", "|b1": "<?"}[descr]
data = b"".join(struct.pack(fmt, (v.lower() == "true") if descr == "|b1" else float(v)) for v in vals)
open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
PY
}
mknpy "$TMP/q.npy" "<f8" 3,2  1 2  3 4  -1 0.5
mknpy "$TMP/k.npy" "<f8" 3,2  1 0  0 1  1 1
mknpy "$TMP/v.npy" "<f8" 3,2  0.5 -1  2 3  -4 1
mknpy "$TMP/v4.npy" "<f8" 4,2  0.5 -1  2 3  -4 1  0 0
mknpy "$TMP/q3.npy" "<f8" 3,3  1 2 3  3 4 5  -1 0.5 0
mknpy "$TMP/qnan.npy" "<f8" 3,2  1 2  nan 4  -1 0.5
mknpy "$TMP/mask_empty.npy" "|b1" 3,3  true false false  false false false  true true true
mknpy "$TMP/mask_f8.npy" "<f8" 3,3  1 0 0  1 1 0  1 1 1
mknpy "$TMP/cand_bad.npy" "<f8" 2,2  0 0 0 0
mknpy "$TMP/qe.npy" "<f8" 0,2
expect_exit 0 "oracle" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --write-reference "$TMP/ref.npy" --format json --out "$TMP/o.json"
python3 - "$TMP/o.json" <<'PY' && ok || bad "oracle JSON summary"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["summary"]
assert d["tool"] == "attncert" and "command" in d and "settings" in d and "guarantee" in d
assert s["elements"] == 6 and s["correctly_rounded"] == 6 and s["faithful_only"] == 0, s
assert sum(v for v in s["decided_by"].values()) == 6, s
PY
[ -s "$TMP/ref.npy" ] && ok || bad "oracle wrote no reference"
expect_exit 0 "oracle grades its own reference" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --candidate "$TMP/ref.npy" --max-ulp 0.5
grep -q "max 0" "$TMP/out" && ok || bad "oracle: reference graded at 0 ulps: $(cat "$TMP/out")"
expect_exit 1 "oracle --max-ulp exceeded" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --candidate "$TMP/v.npy" --max-ulp 4
expect_exit 0 "oracle --scale 1e300" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --scale 1e300 --mask causal
expect_exit 0 "oracle --empty-rows zeros" "$BIN" oracle --q "$TMP/q3.npy" --k "$TMP/q3.npy" --v "$TMP/v.npy" --mask "$TMP/mask_empty.npy" --empty-rows zeros
expect_exit 0 "oracle --allow-nonfinite" "$BIN" oracle --q "$TMP/qnan.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --allow-nonfinite --format json
grep -q '"ieee_nonfinite": 2' "$TMP/out" && ok || bad "oracle: NaN row counted as IEEE"
expect_exit 0 "oracle --help" "$BIN" oracle --help
rm -f "$TMP/ref2.npy"
expect_usage_error "oracle shape mismatch" "$BIN" oracle --q "$TMP/q3.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --write-reference "$TMP/ref2.npy"
[ ! -e "$TMP/ref2.npy" ] && ok || bad "oracle left a partial reference on error"
expect_usage_error "oracle K/V length mismatch" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v4.npy"
expect_usage_error "oracle NaN input" "$BIN" oracle --q "$TMP/qnan.npy" --k "$TMP/k.npy" --v "$TMP/v.npy"
expect_usage_error "oracle fully masked row" "$BIN" oracle --q "$TMP/q3.npy" --k "$TMP/q3.npy" --v "$TMP/v.npy" --mask "$TMP/mask_empty.npy" --write-reference "$TMP/ref2.npy"
[ ! -e "$TMP/ref2.npy" ] && ok || bad "oracle left a partial reference on a fully masked row"
expect_usage_error "oracle float mask" "$BIN" oracle --q "$TMP/q3.npy" --k "$TMP/q3.npy" --v "$TMP/v.npy" --mask "$TMP/mask_f8.npy"
expect_usage_error "oracle candidate shape" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --candidate "$TMP/cand_bad.npy"
expect_usage_error "oracle empty tensor" "$BIN" oracle --q "$TMP/qe.npy" --k "$TMP/k.npy" --v "$TMP/v.npy"
expect_usage_error "oracle precision too low" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --max-precision 64
expect_usage_error "oracle bad target" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --target binary8
expect_usage_error "oracle bad scale" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --scale abc
expect_usage_error "oracle malformed npy" "$BIN" oracle --q "$TMP/out" --k "$TMP/k.npy" --v "$TMP/v.npy"
expect_usage_error "oracle missing file" "$BIN" oracle --q "$TMP/none.npy" --k "$TMP/k.npy" --v "$TMP/v.npy"
expect_usage_error "oracle missing --v" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy"

# Two outputs on one file, devices and a gradient directory (issue 28, item 4).
expect_usage_error "oracle --out = --write-reference" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --write-reference "$TMP/same.npy" --out "$TMP/same.npy"
[ ! -e "$TMP/same.npy" ] && ok || bad "oracle: two outputs on one file left a file"
expect_usage_error "oracle --write-lse = --write-reference" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --write-reference "$TMP/same.npy" --write-lse "$TMP/./same.npy"
ln -s /dev/null "$TMP/null.json"
expect_exit 0 "oracle --out a link to /dev/null" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --format json --out "$TMP/null.json"
[ -L "$TMP/null.json" ] && [ -c "$TMP/null.json" ] && ok || bad "--out through a link to /dev/null replaced the link"
expect_exit 0 "oracle --out /dev/stdout" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --format json --out /dev/stdout
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$TMP/out" && ok || bad "--out /dev/stdout: the report did not reach stdout"
mknpy "$TMP/dout.npy" "<f8" 3,2  1 0  0 1  0.5 -0.5
mkdir -p "$TMP/gdir"
expect_exit 0 "oracle --write-grad-references DIR/" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --grad-out "$TMP/dout.npy" --write-grad-references "$TMP/gdir/"
[ -s "$TMP/gdir/dq.npy" ] && [ -s "$TMP/gdir/dk.npy" ] && [ -s "$TMP/gdir/dv.npy" ] && [ ! -e "$TMP/gdir/.dq.npy" ] && ok || bad "--write-grad-references DIR/ wrote $(ls -A "$TMP/gdir")"
expect_exit 0 "oracle --candidate-grads DIR/" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --grad-out "$TMP/dout.npy" --candidate-grads "$TMP/gdir/"

# --- hostile input (issue 11): one stderr line, exit 2, within seconds ----------
ln -s /dev/zero "$TMP/zero.npy"
ln -s /dev/zero "$TMP/zero.json"
expect_usage_error "rank --scores /dev/zero (.npy)" timeout 20 "$BIN" rank --scores "$TMP/zero.npy"
expect_in "$TMP/err" "larger than the input limit of 67108864 bytes" "rank --scores /dev/zero message"
expect_usage_error "rank --scores /dev/zero (.json)" timeout 20 "$BIN" rank --scores "$TMP/zero.json"
expect_usage_error "oracle --q /dev/zero" timeout 20 "$BIN" oracle --q "$TMP/zero.npy" --k "$TMP/k.npy" --v "$TMP/v.npy"
expect_usage_error "oracle below --max-input-bytes" "$BIN" oracle --q "$TMP/q.npy" --k "$TMP/k.npy" --v "$TMP/v.npy" --max-input-bytes 16
expect_in "$TMP/err" "input limit of 16 bytes" "--max-input-bytes named in the message"
mkfifo "$TMP/fifo.npy"
expect_usage_error "rank --scores FIFO without writer" timeout 20 "$BIN" rank --scores "$TMP/fifo.npy"

# Issue 28, item 2: Q = K of 200000x16 float16 (6.4 MB) needs about 1.2 TB for the exact rank's
# matrices mod p: refused in one line before any stage allocates (FLINT used to abort, SIGABRT).
python3 - "$TMP/Qbig.npy" <<'PY'
import struct, sys, random
rows, cols = 200000, 16
header = "{'descr': '<f2', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
r = random.Random(1)
data = struct.pack("<%de" % (rows * cols), *(r.uniform(-2, 2) for _ in range(rows * cols)))
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
PY
expect_usage_error "rank 200000x16: memory refused before allocating" timeout 60 "$BIN" rank --q "$TMP/Qbig.npy" --k "$TMP/Qbig.npy" --format json --out "$TMP/rbig.json"
expect_in "$TMP/err" "the exact rank (matrices mod p) needs about" "rank 200000x16: the stage and its size named"
[ ! -e "$TMP/rbig.json" ] && ok || bad "rank 200000x16 left an output file"

# Issue 28, item 3: --layout thd in memory O(total tokens).  100 001 sequences over 200 000 tokens
# (100 000 of one token, one of 100 000) used to be padded to 100 001 x 100 000 rows (640 GB: exit 2
# "out of memory"); packed, the run needs about 160 MB.  The long sequence takes minutes (10^10
# scores), so a 2 s budget stops it: exit 3, PARTIAL, the one-token sequences computed.
python3 - "$TMP/thdq.npy" "$TMP/thdcu.npy" <<'PY'
import struct, sys, random
def save(path, descr, shape, fmt, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    data = struct.pack("<%d%s" % (len(values), fmt), *values)
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
r = random.Random(3)
t, d = 200000, 8
save(sys.argv[1], "<f2", "(%d, 1, %d)" % (t, d), "e", [r.uniform(-2, 2) for _ in range(t * d)])
cu = list(range(100001)) + [200000]
save(sys.argv[2], "<i8", "(%d,)" % len(cu), "q", cu)
PY
budget=$((2 * slow))
t0=$(date +%s%N)
expect_exit 3 "oracle thd 100001 sequences" env OPENBLAS_NUM_THREADS=1 timeout 300 "$BIN" oracle --q "$TMP/thdq.npy" --k "$TMP/thdq.npy" --v "$TMP/thdq.npy" --layout thd --cu-seqlens-q "$TMP/thdcu.npy" --cu-seqlens-k "$TMP/thdcu.npy" --mask causal-bottom-right --max-seconds $budget --format json --out "$TMP/thd.json"
t1=$(date +%s%N)
[ $(( (t1 - t0) / 1000000 )) -lt $(( (budget + slow + 1) * 1000 )) ] && ok || bad "oracle thd --max-seconds $budget took $(( (t1 - t0) / 1000000 )) ms"
python3 - "$TMP/thd.json" <<'PY' && ok || bad "oracle thd: packed (1, 1, 200000, 8), the one-token sequences decided"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["summary"]
assert d["output_shape"] == [1, 1, 200000, 8], d["output_shape"]
assert s["partial"] is True and s["elements"] == 1600000, s
assert 100000 * 8 <= s["correctly_rounded"] < 1600000 and s["undecided_rows"] <= 100000, s
PY

# --- the LSE of fully masked rows, graded by equality with --empty-lse (issue 32, item 8) ---
mknpy "$TMP/eq.npy" '<f4' 1,1,5,2 0.5 -1 2 0.25 -0.5 1 1.5 -2 0.75 0.125
mknpy "$TMP/ek.npy" '<f4' 1,1,3,2 1 0 0 1 -1 1
mknpy "$TMP/ev.npy" '<f4' 1,1,3,2 1 2 3 4 5 6
expect_exit 0 "oracle: LSE with empty rows" "$BIN" oracle --q "$TMP/eq.npy" --k "$TMP/ek.npy" --v "$TMP/ev.npy" --mask causal-bottom-right --empty-rows zeros --target binary32 --write-reference "$TMP/eo.npy" --write-lse "$TMP/el.npy" --empty-lse +inf
expect_exit 0 "oracle: the LSE graded under its convention" "$BIN" oracle --q "$TMP/eq.npy" --k "$TMP/ek.npy" --v "$TMP/ev.npy" --mask causal-bottom-right --empty-rows zeros --target binary32 --candidate "$TMP/eo.npy" --candidate-lse "$TMP/el.npy" --empty-lse +inf --rule ulp --max-ulp 1
expect_exit 1 "oracle: the same LSE under -inf" "$BIN" oracle --q "$TMP/eq.npy" --k "$TMP/ek.npy" --v "$TMP/ev.npy" --mask causal-bottom-right --empty-rows zeros --target binary32 --candidate "$TMP/eo.npy" --candidate-lse "$TMP/el.npy" --rule ulp --max-ulp 1
grep -q "fully masked rows: 2 of 2 elements differ from --empty-lse -inf; the first at (b, h, i) \[0,0,0\]: inf" "$TMP/out" && ok || bad "oracle: empty-row LSE mismatch line: $(grep -i masked "$TMP/out")"
expect_usage_error "oracle: --empty-lse 1" "$BIN" oracle --q "$TMP/eq.npy" --k "$TMP/ek.npy" --v "$TMP/ev.npy" --mask causal-bottom-right --empty-rows zeros --write-lse "$TMP/el2.npy" --empty-lse 1

# --- block-bound (issue 33, §11): the report, the figure, the dump, bad input ---
expect_exit 0 "block-bound (small test model)" "$BIN" block-bound --blocks 2 --width 16 --heads 2 --tokens 12 --approx float32,top-k:3 --format json --out "$TMP/bb.json" --dump "$TMP/bbdump"
/usr/bin/python3 - "$TMP/bb.json" <<'PY' && ok || bad "block-bound: report"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["settings"]["depth"] == 2 and d["settings"]["tokens"] == 12, d["settings"]
for a in d["approximations"]:
    assert len(a["stages"]) == 14, len(a["stages"])
    for s in a["stages"]:
        for k in ("bound_article", "bound_direct", "stage_bound"):
            assert s[k] is None or s[k] >= s["measured_lo"], (a["approximation"], s)
PY
[ -f "$TMP/bbdump/exact.b1.block-out.rad.npy" ] && [ -f "$TMP/bbdump/top-k:3.b0.h1.out.npy" ] && ok || bad "block-bound: --dump files"
expect_exit 0 "block-bound md" "$BIN" block-bound --blocks 1 --width 8 --heads 2 --tokens 6 --approx bfloat16 --format md
grep -q "| 1 | block-out |" "$TMP/out" && ok || bad "block-bound: Markdown table"
if command -v gnuplot > /dev/null; then
  expect_exit 0 "block-bound --plot" "$BIN" block-bound --blocks 2 --width 8 --heads 2 --tokens 6 --approx float32,bfloat16 --plot "$TMP/bb.png"
  [ -s "$TMP/bb.png" ] && ok || bad "block-bound: no figure"
fi
expect_usage_error "block-bound: unknown approximation" "$BIN" block-bound --approx float64
expect_usage_error "block-bound: top-k without K" "$BIN" block-bound --approx top-k
expect_usage_error "block-bound: heads not dividing" "$BIN" block-bound --width 10 --heads 4
expect_usage_error "block-bound: depth too large" "$BIN" block-bound --blocks 2 --depth 3
expect_usage_error "block-bound: no model directory" "$BIN" block-bound --model "$TMP/no-such-dir"
mkdir -p "$TMP/bbm" && echo '{"heads": 2, "blocks": 1, "colour": 1}' > "$TMP/bbm/model.json"
expect_usage_error "block-bound: unknown model key" "$BIN" block-bound --model "$TMP/bbm"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
