#!/usr/bin/python3
"""The oracle against an independent reference: mpmath at 300 bits.

Usage: oracle_mpmath.py ATTNCERT_BINARY
Builds small cases with NumPy (random, causal, peaked, cross-attention, multi-head with a
broadcast bool mask, float32/float16 inputs, scale 1e300, exact midpoints, near-midpoints),
runs `attncert oracle --write-reference`, recomputes every element with mpmath at 300 bits,
rounds it to the target format (round to nearest, ties to even, with the format's subnormals)
and requires bit-for-bit equality.  An element whose 300-bit value lies within 2^-280
(relative) of a rounding midpoint cannot be decided by this reference: there the oracle must
report it either correctly rounded to one of the two neighbours or faithful_only.
Seed: ATTNCERT_SEED (printed).  Exit 0 pass, 1 fail, 77 skip (no NumPy/mpmath).
"""
import json, os, subprocess, sys, tempfile

try:
    import numpy as np
    import mpmath
    from mpmath import mpf
except ImportError as e:  # pragma: no cover
    print("SKIP:", e)
    sys.exit(77)

mpmath.mp.prec = 300
BIN = sys.argv[1]
SEED = int(os.environ.get("ATTNCERT_SEED", "20261130"))
print("seed", SEED, "(set ATTNCERT_SEED to override)")
rng = np.random.default_rng(SEED)
FORMATS = {"binary64": (53, -1022), "binary32": (24, -126), "binary16": (11, -14), "bfloat16": (8, -126)}
OVERFLOW = {"binary64": mpf(2)**1024 * (1 - mpf(2)**-54), "binary32": 2.0**128 * (1 - 2.0**-25),
            "binary16": 65520.0, "bfloat16": 2.0**128 * (1 - 2.0**-9)}
failures = 0
checked = 0


def round_to(x, fmt):
    """RN-even of the mpf x in format fmt; returns (value as Python float, near_midpoint)."""
    p, emin = FORMATS[fmt]
    if x == 0:
        return 0.0, False
    if abs(x) >= OVERFLOW[fmt]:
        return float("inf") if x > 0 else float("-inf"), False
    e = max(int(mpmath.floor(mpmath.log(abs(x), 2))), emin)
    # guard against log rounding at binade edges
    while abs(x) >= mpf(2) ** (e + 1) and e + 1 > emin:
        e += 1
    while e > emin and abs(x) < mpf(2) ** e:
        e -= 1
    scale = mpf(2) ** (e - p + 1)
    m = x / scale
    f = mpmath.floor(m)
    r = m - f
    half = mpf(1) / 2
    near = abs(r - half) < mpf(2) ** -280 * abs(m)
    if r > half:
        f += 1
    elif r == half:
        if int(f) % 2 == 1:
            f += 1
    return float(mpmath.ldexp(f, e - p + 1)), near


def exact_attention(Q, K, V, allowed, scale):
    """Q (nq,d), K (nk,d), V (nk,dv) float arrays, allowed (nq,nk) bool, scale mpf -> list of rows of mpf."""
    out = []
    Kmp = [[mpf(float(x)) for x in row] for row in K]
    Vmp = [[mpf(float(x)) for x in row] for row in V]
    for i in range(Q.shape[0]):
        q = [mpf(float(x)) for x in Q[i]]
        js = [j for j in range(K.shape[0]) if allowed[i, j]]
        s = {j: scale * mpmath.fsum(a * b for a, b in zip(q, Kmp[j])) for j in js}
        m = max(s.values())
        w = {j: mpmath.exp(s[j] - m) for j in js}
        W = mpmath.fsum(w.values())
        out.append([mpmath.fsum(w[j] * Vmp[j][k] for j in js) / W for k in range(V.shape[1])])
    return out


def run_case(name, Q, K, V, *, mask="none", mask_array=None, scale=None, target="binary64", expect_faithful=None,
             expect_all_correct=False, expect_values=None):
    global failures, checked
    with tempfile.TemporaryDirectory() as td:
        paths = {}
        for nm, arr in (("q", Q), ("k", K), ("v", V)):
            paths[nm] = os.path.join(td, nm + ".npy")
            np.save(paths[nm], arr)
        cmd = [BIN, "oracle", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"], "--target", target,
               "--write-reference", os.path.join(td, "ref.npy"), "--format", "json"]
        if mask_array is not None:
            np.save(os.path.join(td, "m.npy"), mask_array)
            cmd += ["--mask", os.path.join(td, "m.npy")]
        else:
            cmd += ["--mask", mask]
        if scale is not None:
            cmd += ["--scale", scale]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"FAIL {name}: exit {p.returncode}: {p.stderr.strip()}")
            failures += 1
            return
        rep = json.loads(p.stdout)
        ref = np.load(os.path.join(td, "ref.npy")).astype(np.float64)
    # exact values
    sh = Q.shape
    Q4 = Q.reshape((-1,) * 0 + (1,) * (4 - Q.ndim) + sh)
    K4 = K.reshape((1,) * (4 - K.ndim) + K.shape)
    V4 = V.reshape((1,) * (4 - V.ndim) + V.shape)
    R4 = ref.reshape((1,) * (4 - ref.ndim) + ref.shape)
    nq, nk = Q4.shape[2], K4.shape[2]
    if scale is None:
        sc = 1 / mpmath.sqrt(Q4.shape[3])
    elif "/" in scale:
        a, b = scale.split("/")
        sc = mpf(a) / mpf(b)
    else:
        sc = mpf(scale)
    bad = faithful_seen = near = 0
    for b in range(Q4.shape[0]):
        for h in range(Q4.shape[1]):
            if mask_array is not None:
                M = np.broadcast_to(mask_array, (Q4.shape[0], Q4.shape[1], nq, nk))[b, h]
            elif mask == "causal":
                M = np.tril(np.ones((nq, nk), dtype=bool))
            else:
                M = np.ones((nq, nk), dtype=bool)
            ex = exact_attention(Q4[b, h].astype(np.float64), K4[b, h].astype(np.float64),
                                 V4[b, h].astype(np.float64), M, sc)
            for i in range(nq):
                for k in range(V4.shape[3]):
                    want, is_near = round_to(ex[i][k], target)
                    got = float(R4[b, h, i, k])
                    checked += 1
                    if is_near:
                        near += 1
                        continue
                    if got != want:
                        bad += 1
                        if bad <= 3:
                            print(f"  mismatch {name} at {(b, h, i, k)}: oracle {got!r}, mpmath {want!r}")
    summ = rep["summary"]
    ok = bad == 0
    if expect_values is not None and list(R4.reshape(-1)) != list(expect_values):
        print(f"  {name}: reference {list(R4.reshape(-1))}, expected exactly {list(expect_values)}")
        ok = False
    if expect_faithful is not None and summ["faithful_only"] != expect_faithful:
        print(f"  {name}: faithful_only {summ['faithful_only']}, expected {expect_faithful}")
        ok = False
    if expect_all_correct and summ["correctly_rounded"] != summ["elements"]:
        print(f"  {name}: only {summ['correctly_rounded']} of {summ['elements']} correctly rounded")
        ok = False
    print(("ok  " if ok else "FAIL") + f" {name}: {summ['elements']} elements, decided_by {summ['decided_by']}, "
          f"{near} near-midpoint elements not judged")
    if not ok:
        failures += 1


def gauss(*shape):
    return rng.standard_normal(shape)


run_case("random 12x6", gauss(12, 6), gauss(12, 6), gauss(12, 5), expect_all_correct=True)
run_case("causal", gauss(10, 4), gauss(10, 4), gauss(10, 3), mask="causal", expect_all_correct=True)
run_case("peaked (scale 30)", gauss(8, 4), gauss(8, 4), gauss(8, 4), scale="30", expect_all_correct=True)
run_case("cross attention 5x9", gauss(5, 4), gauss(9, 4), gauss(9, 3), expect_all_correct=True)
run_case("cross attention causal 9x5", gauss(9, 4), gauss(5, 4), gauss(5, 3), mask="causal", expect_all_correct=True)
m = rng.random((1, 3, 6, 6)) < 0.6
m[..., 0] = True
run_case("(b,h,n,d) = (2,3,6,4), mask broadcast over batch", gauss(2, 3, 6, 4), gauss(2, 3, 6, 4), gauss(2, 3, 6, 3),
         mask_array=m, expect_all_correct=True)
run_case("(h,n,d) = (2,5,3)", gauss(2, 5, 3), gauss(2, 5, 3), gauss(2, 5, 2), scale="1/3", expect_all_correct=True)
for t in ("binary32", "binary16", "bfloat16"):
    run_case("random, target " + t, gauss(7, 5), gauss(7, 5), gauss(7, 4), target=t)
run_case("float32 inputs", gauss(6, 4).astype(np.float32), gauss(6, 4).astype(np.float32),
         gauss(6, 4).astype(np.float32), expect_all_correct=True)
run_case("float16 inputs, target binary16", gauss(6, 4).astype(np.float16), gauss(6, 4).astype(np.float16),
         gauss(6, 4).astype(np.float16), target="binary16")
run_case("scale 1e300 (binary64 scores overflow)", gauss(6, 3), gauss(6, 3), gauss(6, 2), scale="1e300",
         expect_all_correct=True)
run_case("tiny values 1e-300", gauss(5, 3), gauss(5, 3), gauss(5, 2) * 1e-300, expect_all_correct=True)
# Exact midpoint with equal scores: (1 + (1 + 2^-52)) / 2 = 1 + 2^-53, decided exactly (ties to even: 1).
Kq = np.zeros((2, 2))
run_case("midpoint, equal scores", np.ones((1, 2)), Kq, np.array([[1.0], [1.0 + 2.0**-52]]), expect_all_correct=True,
         expect_values=[1.0])
# Midpoint with unequal scores: every value equals the binary32 midpoint 1 + 2^-24 -> o = 1 + 2^-24 exactly,
# but the weights are irrational: no finite precision decides it; faithful_only.
run_case("binary32 midpoint, unequal scores", np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]),
         np.full((3, 1), 1.0 + 2.0**-24), target="binary32", expect_faithful=1)
# binary64 midpoint with irrational weights: two groups of equal scores, each averaging to 1 + 2^-53.
run_case("binary64 midpoint, two weight groups", np.array([[1.0]]), np.array([[1.0], [1.0], [0.0], [0.0]]),
         np.array([[1.0], [1.0 + 2.0**-52], [1.0], [1.0 + 2.0**-52]]), expect_faithful=1)
# Near-midpoints: scores differ by 2^-40, values 1 and 1 + 2^-52: o - (1 + 2^-53) ~ 2^-95.
run_case("near midpoint (2^-95 away)", np.array([[1.0]]), np.array([[1.0], [1.0 - 2.0**-40]]),
         np.array([[1.0], [1.0 + 2.0**-52]]), scale="1", expect_all_correct=True)
# Cancelling values: outputs near 0 from +/- large values.
Vc = gauss(8, 3)
Vc = np.concatenate([Vc, -Vc]) * 1e8
Kc = gauss(8, 4)
run_case("cancelling values", gauss(6, 4), np.concatenate([Kc, Kc + 2.0**-30]), Vc, expect_all_correct=True)

print(f"{checked} elements checked, {failures} case(s) failed")
sys.exit(1 if failures else 0)
