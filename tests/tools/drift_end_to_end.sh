#!/usr/bin/env bash
# tests/tools/drift_end_to_end.sh ATTNCERT — end-to-end tests of `attncert drift` and
# `attncert figures`: exit codes, the JSON keys and divergence intervals, CSV/text, --plot,
# the figures as valid PNG and SVG files, and bad usage (one line on stderr, exit 2, no
# output file left behind).
set -u
BIN="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
. "$(dirname "$0")/harness.sh"

drift_usage_error() {  # description command...  (expect_usage_error, and no --out / --plot file left behind)
  rm -f "$TMP/never.json"
  expect_usage_error "$@"
  if [ ! -e "$TMP/never.json" ] && [ -z "$(ls -A "$TMP" | grep -E '\.tmp\.|attncert-(plot|tmp|scratch|bak)')" ]; then ok; else bad "$1: left a file"; fi
}

# A PNG (signature, IHDR, CRCs, IEND) or SVG (XML whose root is <svg> with a size) checker.
valid_image() {
  python3 - "$1" <<'PY'
import struct, sys, zlib
import xml.etree.ElementTree as ET
p = sys.argv[1]
data = open(p, "rb").read()
if p.endswith(".png"):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "signature"
    i, chunks = 8, []
    while i < len(data):
        n, = struct.unpack(">I", data[i:i + 4])
        kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        crc, = struct.unpack(">I", data[i + 8 + n:i + 12 + n])
        assert zlib.crc32(kind + body) & 0xffffffff == crc, "crc"
        chunks.append((kind, body))
        i += 12 + n
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND", "chunk order"
    w, h = struct.unpack(">II", chunks[0][1][:8])
    assert w >= 600 and h >= 400, (w, h)
    zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
else:
    root = ET.fromstring(data)
    assert root.tag.endswith("svg"), root.tag
    assert root.get("width") and root.get("height")
    assert len(list(root.iter())) > 50
PY
}

# --- drift: JSON ------------------------------------------------------------
expect_exit 0 "drift two-token json" "$BIN" drift --family two-token --from 1e-20 --to 1 --points 41 --log \
  --recipes fp16,bf16-fp32acc,fp32,fp64,mpfr256 --policies numpy,absolute:1e-6 --format json --per-point --out "$TMP/d.json"
[ ! -s "$TMP/err" ] && ok || bad "no progress output when stderr is not a terminal"
python3 - "$TMP/d.json" <<'PY' && ok || bad "drift JSON structure and divergence intervals"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("tool", "version", "command", "inputs", "settings", "points", "divergence", "summary"):
    assert k in d, k
assert d["tool"] == "attncert" and d["inputs"]["family"] == "two-token"
assert [r["name"] for r in d["settings"]["recipes"]] == ["fp16", "bf16-fp32acc", "fp32", "fp64", "mpfr256"]
P = d["points"]  # --per-point: a columnar table, index i = grid point i
assert len(P["a"]) == 41
assert [r["recipe"] for r in P["recipes"]] == ["fp16", "bf16-fp32acc", "fp32", "fp64", "mpfr256"]
for i in range(41):
    lo, hi = P["exact_rank_lo"][i], P["exact_rank_hi"][i]
    assert lo == hi == 2
    assert float(P["sigma_min_enclosure_lo"][i]) <= float(P["sigma_min_enclosure_hi"][i])
    for m in P["recipes"]:
        ranks = {k: v[i] for k, v in m["numerical_rank"].items()}
        assert set(ranks) == {"numpy", "absolute:1e-06"}, ranks
        assert m["diverges"][i] == any(r is None or not lo <= r <= hi for r in ranks.values())
    assert P["diverges"][i] == any(m["diverges"][i] for m in P["recipes"])
div = {(x["recipe"], x["policy"]): x["intervals"] for x in d["divergence"]}
assert len(div) == 10
(a, b), = div[("fp64", "numpy")]
assert a == 1e-20 and 1e-17 < b < 1e-15, (a, b)
assert div[("mpfr256", "numpy")] == []
for iv in div.values():
    for lo, hi in iv:
        assert 1e-20 <= lo <= hi <= 1
assert d["summary"]["intervals"] == sum(len(v) for v in div.values())
PY

# --- drift: CSV and text --------------------------------------------------------
expect_exit 0 "drift causal csv" "$BIN" drift --family causal --from 0.1 --to 1000 --points 9 --log --recipes fp16,fp64 \
  --policies numpy --format csv --per-point --out "$TMP/d.csv"
python3 - "$TMP/d.csv" <<'PY' && ok || bad "drift CSV"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
pts = [r for r in rows if r["kind"] == "point"]
divs = [r for r in rows if r["kind"] == "divergence"]
assert len(pts) == 9 * 2 and len(divs) >= 2, (len(pts), len(divs))
assert all(r["exact_lo"] == r["exact_hi"] == "4" for r in pts)
for r in divs:
    assert 0.1 <= float(r["from"]) <= float(r["to"]) <= 1000
PY
expect_exit 0 "drift text" "$BIN" drift --family log-odds --from 0 --to 2 --points 5 --recipes fp32
grep -q "^divergence intervals" "$TMP/out" && ok || bad "text lists the divergence intervals"
grep -q "^summary: 5 points" "$TMP/out" && ok || bad "text summary"
! grep -q "^a = " "$TMP/out" && ok || bad "text: per-point lines only with --per-point"
expect_exit 0 "drift text --per-point" "$BIN" drift --family log-odds --from 0 --to 2 --points 5 --recipes fp32 --per-point
[ "$(grep -c "^a = " "$TMP/out")" = 5 ] && ok || bad "text --per-point: one line per point"
expect_exit 0 "drift json default" "$BIN" drift --family two-token --from 0 --to 1 --points 5 --recipes fp32 --format json
python3 -c "import json; d=json.load(open('$TMP/out')); assert 'points' not in d; assert {'tool','version','command','inputs','settings','divergence','summary'} <= set(d)" \
  && ok || bad "drift JSON without --per-point: every key but points"
expect_exit 0 "drift identical-values (output by default)" "$BIN" drift --family identical-values --from 0.5 --to 4 \
  --points 3 --recipes fp64 --policies numpy --format json --per-point
python3 -c "import json,sys; d=json.load(open('$TMP/out')); assert d['inputs']['object']=='output'; assert d['points']['exact_rank_hi']==[1, 1, 1]" \
  && ok || bad "identical values: output rank 1"
expect_exit 0 "drift random" "$BIN" drift --family random --n 3 --d 2 --seed 7 --from 0.1 --to 10 --points 4 --log --recipes bf16,fp32

# --- drift: plots -----------------------------------------------------------------
for ext in png svg; do
  expect_exit 0 "drift --plot $ext" "$BIN" drift --from 1e-12 --to 1 --points 13 --log --recipes fp32,fp64 --plot "$TMP/p.$ext" --out "$TMP/p.txt"
  valid_image "$TMP/p.$ext" && ok || bad "drift --plot $ext is not a valid image"
done
[ -z "$(ls -A "$TMP" | grep -E 'attncert-(plot|tmp|scratch|bak)')" ] && ok || bad "plot scratch directory left behind"

# --- figures ----------------------------------------------------------------------
expect_exit 0 "figures" "$BIN" figures --out "$TMP/fig"
n=0
for f in "$TMP"/fig/*.png "$TMP"/fig/*.svg; do
  n=$((n + 1))
  valid_image "$f" && ok || bad "figure $f is not a valid image"
done
[ "$n" = 10 ] && ok || bad "figures wrote $n images, expected 10"
for f in fig1-two-token-contrast.exact.dat fig2-saturation.dat fig3-drift-map.two-token.dat fig3-drift-map.causal.dat fig4-sigma-min.dat \
         fig5-rank-heads.d4.one-layer.dat fig5-rank-heads.d8.two-layers.dat fig5-rank-heads.d8.full-rank.dat; do
  [ -s "$TMP/fig/$f" ] && ok || bad "figure data $f missing"
done
# Figure 5 shows depth helping at d = 8: at 4096 rank-one heads the vote's mean (upper end) lies below the bound
# for every one-layer network with a residual path (lower end) — proofs/L4 part F.
awk 'FNR == NR { if (!/^#/) two[$1] = $3; next } !/^#/ && $1 == 4096 { found = (4096 in two); if (!(two[4096] + 0 < $3 + 0)) worse = 1 }
     END { exit !(found && !worse) }' "$TMP/fig/fig5-rank-heads.d8.two-layers.dat" "$TMP/fig/fig5-rank-heads.d8.one-layer.dat" \
  && ok || bad "figure 5: the two-layer mean at H = 4096 is not below one layer's bound"
# The drift map's fp64/numpy two-token bar ends at the bisected boundary of P10.
awk '$1 == 5 { if ($3 > 1e-17 && $3 < 1e-15) found = 1 } END { exit !found }' "$TMP/fig/fig3-drift-map.two-token.dat" \
  && ok || bad "drift map: fp64/numpy boundary"

# A relative output directory works as well.
(cd "$TMP" && "$BIN" figures --out rel/figs --formats svg >/dev/null 2>"$TMP/err") && [ "$(ls "$TMP"/rel/figs/*.svg | wc -l)" = 5 ] \
  && ok || bad "figures into a relative directory: $(cat "$TMP/err")"

# figures --max-seconds: the whole rendering within the budget, or nothing (exit 3, one line on
# stderr, no directory, no temporary left).  The figures take about 2 s on 2 cores: a budget of
# 0.05 s stops them in the first sweep, within 1 s of it (5 s in a sanitizer build, which runs our
# code about five times slower).
slow=1
grep -qa __asan_init "$BIN" && slow=5
no_figures_left() {  # description
  [ ! -e "$TMP/figb" ] && [ -z "$(ls -A "$TMP" | grep -E '^figb|attncert-(tmp|bak|scratch)')" ] && ok || bad "$1: left $(ls -A "$TMP" | grep -E '^figb|attncert-')"
  [ "$(wc -l <"$TMP/err")" = 1 ] && ok || bad "$1: stderr is not one line: $(cat "$TMP/err")"
  [ ! -s "$TMP/out" ] && ok || bad "$1: wrote to stdout"
}
expect_exit 3 "figures --max-seconds 0.000001" "$BIN" figures --out "$TMP/figb" --max-seconds 0.000001
expect_in "$TMP/err" "the figures were not rendered within --max-seconds" "figures budget: the reason"
no_figures_left "figures --max-seconds 0.000001"
t0=$(date +%s%N)
expect_exit 3 "figures --max-seconds 0.05" "$BIN" figures --out "$TMP/figb" --max-seconds 0.05 --format json
t=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$t" -lt $(( slow * 1000 + 50 )) ] && ok || bad "figures --max-seconds 0.05 took $t ms"
no_figures_left "figures --max-seconds 0.05"
# into an existing directory: nothing in it is replaced or added
mkdir -p "$TMP/figold"
echo old >"$TMP/figold/fig2-saturation.dat"
expect_exit 3 "figures --max-seconds 0.05 into an existing directory" "$BIN" figures --out "$TMP/figold" --max-seconds 0.05
[ "$(ls -A "$TMP/figold")" = fig2-saturation.dat ] && [ "$(cat "$TMP/figold/fig2-saturation.dat")" = old ] && ok \
  || bad "figures past the budget changed the existing directory: $(ls -A "$TMP/figold")"
# a budget it does not reach changes nothing: the same files as without one
expect_exit 0 "figures --max-seconds 600" "$BIN" figures --out "$TMP/figc" --max-seconds 600 --format json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['max_seconds'] == 600, d" "$TMP/out" && ok || bad "figures --format json: max_seconds"
[ "$(ls "$TMP/figc")" = "$(ls "$TMP/fig")" ] && ok || bad "figures --max-seconds 600: other files than without a budget"
for f in fig1-two-token-contrast.exact.dat fig2-saturation.dat fig3-drift-map.two-token.dat fig3-drift-map.causal.dat fig4-sigma-min.dat \
         fig5-rank-heads.d4.one-layer.dat fig5-rank-heads.d8.two-layers.dat; do
  cmp -s "$TMP/fig/$f" "$TMP/figc/$f" && ok || bad "figures --max-seconds 600: $f differs from the unbudgeted one"
done
drift_usage_error "figures --max-seconds -1" "$BIN" figures --out "$TMP/figb" --max-seconds -1
drift_usage_error "figures --max-seconds 1e8" "$BIN" figures --out "$TMP/figb" --max-seconds 1e8
drift_usage_error "figures --max-seconds nan" "$BIN" figures --out "$TMP/figb" --max-seconds nan
[ ! -e "$TMP/figb" ] && ok || bad "figures with a bad --max-seconds left a directory"

# --- bad usage ----------------------------------------------------------------------
drift_usage_error "unknown family" "$BIN" drift --family three-token --from 0 --to 1 --out "$TMP/never.json"
drift_usage_error "from >= to" "$BIN" drift --from 1 --to 1 --out "$TMP/never.json"
drift_usage_error "log from 0" "$BIN" drift --from 0 --to 1 --log --out "$TMP/never.json"
drift_usage_error "one point" "$BIN" drift --from 0 --to 1 --points 1 --out "$TMP/never.json"
drift_usage_error "unknown recipe" "$BIN" drift --from 0 --to 1 --recipes fp8 --out "$TMP/never.json"
drift_usage_error "duplicate recipe" "$BIN" drift --from 0 --to 1 --recipes fp16,fp16 --out "$TMP/never.json"
drift_usage_error "unknown policy" "$BIN" drift --from 0 --to 1 --policies numpy,foo --out "$TMP/never.json"
drift_usage_error "unknown object" "$BIN" drift --from 0 --to 1 --object scores --out "$TMP/never.json"
drift_usage_error "unknown param" "$BIN" drift --param b --from 0 --to 1 --out "$TMP/never.json"
drift_usage_error "bad report format" "$BIN" drift --from 0 --to 1 --format xml --out "$TMP/never.json"
drift_usage_error "n for two-token" "$BIN" drift --from 0 --to 1 --n 3 --out "$TMP/never.json"
drift_usage_error "plot extension" "$BIN" drift --from 0 --to 1 --plot "$TMP/p.pdf" --out "$TMP/never.json"
drift_usage_error "missing --to" "$BIN" drift --from 0
drift_usage_error "figures formats" "$BIN" figures --out "$TMP/fig2" --formats pdf
drift_usage_error "plot into a missing directory" "$BIN" drift --from 0 --to 1 --points 2 --plot "$TMP/nodir/p.png" --out "$TMP/never.json"
[ ! -e "$TMP/nodir" ] && ok || bad "plot into a missing directory created it"
drift_usage_error "unwritable output" "$BIN" drift --from 0 --to 1 --points 2 --out "$TMP/no/such/dir/x.json"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
