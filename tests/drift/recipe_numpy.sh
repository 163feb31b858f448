#!/usr/bin/env bash
# tests/drift/recipe_numpy.sh RECIPE_TOOL — each recipe's rounding against NumPy.
#
# For sampled binary64 values (random magnitudes over every binade of binary16 and binary32,
# exact rounding midpoints of binary16, bfloat16 and binary32 and their neighbours, subnormals,
# overflow thresholds), RECIPE_TOOL prints, for each stage of a recipe, round(x) and the
# sum, product and quotient of two rounded values in the stage's format.  They must equal,
# bit for bit, NumPy's np.float16 / np.float32 / np.float64 conversions and arithmetic
# (NumPy's float16 arithmetic rounds a binary32 result once more, which is correct rounding
# for + - * / since 24 >= 2*11 + 2).  bfloat16, which NumPy lacks, is compared with an exact
# round-to-nearest-even written here with Python's fractions.  Exits 77 when NumPy is missing.
set -u
TOOL="${1:?usage: recipe_numpy.sh RECIPE_TOOL}"
PY=/usr/bin/python3
if ! [ -x "$PY" ] || ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
  echo "SKIPPED: numpy not installed"
  exit 77
fi
exec "$PY" - "$TOOL" <<'PYTHON'
import math
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np

TOOL = sys.argv[1]
seed = int(os.environ.get("ATTNCERT_SEED", "20261129"), 0)
print(f"recipe_numpy: random seed {seed} (override with ATTNCERT_SEED)")
rng = np.random.default_rng(seed)


def bf16(x):
    """x (a Python float) rounded to nearest even in bfloat16 (p = 8, emin = -126, emax = 127)."""
    if math.isnan(x) or math.isinf(x) or x == 0.0:
        return x
    m, e = math.frexp(abs(x))          # |x| = m 2^e, m in [1/2, 1)
    q = max(e - 1, -126) - 7           # quantum 2^q
    f = Fraction(abs(x)) / Fraction(2) ** q
    n = math.floor(f)
    r = f - n
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2 == 1):
        n += 1
    v = float(Fraction(n) * Fraction(2) ** q)
    if v > (2 - 2.0 ** -7) * 2.0 ** 127:
        v = math.inf
    return math.copysign(v, x)


def rnd(fmt, x):
    with np.errstate(all="ignore"):
        return rnd_(fmt, x)


def rnd_(fmt, x):
    if fmt == "binary16":
        return float(np.float16(x))
    if fmt == "binary32":
        return float(np.float32(x))
    if fmt == "binary64":
        return float(x)
    return bf16(x)


def ops(fmt, x, y):
    a, b = rnd(fmt, x), rnd(fmt, y)
    with np.errstate(all="ignore"):
        if fmt == "binary16":
            A, B = np.float16(a), np.float16(b)
            return [a, float(A + B), float(A * B), float(A / B)]
        if fmt == "binary32":
            A, B = np.float32(a), np.float32(b)
            return [a, float(A + B), float(A * B), float(A / B)]
        if fmt == "binary64":
            A, B = np.float64(a), np.float64(b)
            return [a, float(A + B), float(A * B), float(A / B)]
        # bfloat16: the exact rational result, rounded once (IEEE rules for inf and NaN).
        if not (math.isfinite(a) and math.isfinite(b)) or b == 0:
            return [a, bf16(a + b), bf16(a * b), bf16(np.float64(a) / np.float64(b))]
        A, B = Fraction(a), Fraction(b)
        # An exact zero result takes its sign from IEEE binary64 arithmetic, which is exact then.
        return [a, bf16_fraction(A + B) if A + B != 0 else a + b, bf16_fraction(A * B) if A * B != 0 else a * b,
                bf16_fraction(A / B) if A != 0 else a / b]


def bf16_fraction(q):
    """Exact rational q rounded to nearest even in bfloat16."""
    assert q != 0
    sign = -1.0 if q < 0 else 1.0
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    qe = max(e, -126) - 7
    f = q / Fraction(2) ** qe
    n = math.floor(f)
    r = f - n
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2 == 1):
        n += 1
    v = float(Fraction(n) * Fraction(2) ** qe)
    if v > (2 - 2.0 ** -7) * 2.0 ** 127:
        v = math.inf
    return sign * v


STAGES = {
    "fp64": ["binary64"] * 5,
    "fp32": ["binary32"] * 5,
    "fp16": ["binary16"] * 5,
    "bf16": ["bfloat16"] * 5,
    "fp16-fp32acc": ["binary16", "binary32", "binary32", "binary32", "binary16"],
    "bf16-fp32acc": ["bfloat16", "binary32", "binary32", "binary32", "bfloat16"],
}


def samples(n):
    vals = []
    # Random values across binades (both signs), including subnormals of every format.
    for lo, hi in [(-30, 17), (-140, 128), (-1070, 1020)]:
        e = rng.integers(lo, hi, size=n)
        m = rng.random(size=n) + 1.0
        s = rng.choice([-1.0, 1.0], size=n)
        vals += list(s * m * np.exp2(e.astype(float)))
    # Exact rounding midpoints and their binary64 neighbours.
    for p, emin, emax in [(11, -14, 15), (8, -126, 127), (24, -126, 127)]:
        for _ in range(n):
            e = int(rng.integers(emin - p, emax + 1))
            q = max(e, emin) - (p - 1)
            k = int(rng.integers(1 << (p - 1), 1 << p))
            mid = (k + 0.5) * 2.0 ** q
            if math.isinf(mid):
                continue
            vals += [mid, math.nextafter(mid, math.inf), math.nextafter(mid, -math.inf)]
        top = (2 - 2.0 ** (1 - p)) * 2.0 ** emax
        half = 2.0 ** (emax - p)
        vals += [top, top + half, math.nextafter(top + half, 0), math.nextafter(top + half, math.inf)]
    vals += [0.0, -0.0, 1.0, 0.1, 1 / 3, 65504.0, 65520.0, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26]
    return [float(v) for v in vals if math.isfinite(v)]


xs = samples(300)
ys = list(rng.permutation(xs))
ys = [y if y != 0.0 else 1.5 for y in ys]   # keep the quotient finite-or-inf, not 0/0 noise
lines = "".join(f"{x!r} {y!r}\n" for x, y in zip(xs, ys))
passed = failed = 0


def same(a, b):
    if math.isnan(a) and math.isnan(b):
        return True
    return a == b and math.copysign(1, a) == math.copysign(1, b)


for name, stages in STAGES.items():
    out = subprocess.run([TOOL, name], input=lines, capture_output=True, text=True)
    if out.returncode != 0:
        print(f"FAIL: {name}: exit {out.returncode}: {out.stderr.strip()}")
        failed += 1
        continue
    rows = out.stdout.strip().split("\n")
    if len(rows) != len(xs):
        print(f"FAIL: {name}: {len(rows)} rows for {len(xs)} inputs")
        failed += 1
        continue
    bad = 0
    for x, y, row in zip(xs, ys, rows):
        got = [float(v) for v in row.split()]
        want = []
        for fmt in stages:
            want += ops(fmt, x, y)
        c = x
        for fmt in stages:
            c = rnd(fmt, c)
        want.append(c)
        for i, (g, w) in enumerate(zip(got, want)):
            if same(g, w):
                passed += 1
            else:
                failed += 1
                bad += 1
                if bad <= 5:
                    print(f"FAIL: {name} x={x!r} y={y!r} field {i}: tool {g!r}, numpy {w!r}")
    print(f"{name}: {len(xs)} samples, {bad} mismatches")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PYTHON
