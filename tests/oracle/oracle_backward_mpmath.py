#!/usr/bin/python3
"""The oracle's backward pass (proofs/P15-oracle-backward.md) against an independent reference:
mpmath at 256 bits, bit for bit.

Usage: oracle_backward_mpmath.py ATTNCERT_BINARY
Each case draws small bhsd inputs with NumPy (seed printed; ATTNCERT_SEED overrides it), runs
`attncert oracle --grad-out dO.npy [--grad-lse dLSE.npy] --write-grad-references P`, recomputes
dQ, dK, dV (dBias, dSink) from the exact inputs in mpmath by the chain rule written out below
(scores, softcap, ALiBi, bias, masks, softmax with sink, dropout, values; dP = dO·Vᵀ,
dS = P∘(dP − D) + P·dLSE, dU = dS·(1 − tanh²) with softcap, dQ = s·dU·K, dK = s·dUᵀ·Q summed
over the query heads of a kv group, dV = (P∘κ)ᵀ·dO, dBias = dS summed over broadcast
dimensions, dSink = −Σ P_sink (D − dLSE)), rounds each to the target (RN-even, subnormals) and
requires bit-for-bit equality.  An element whose 256-bit value is below 2^-200 times the sum of
the magnitudes of its terms is judged only as "attncert gives 0" (the exact value is then 0 in
these cases, or too close to 0 to judge).  Negative controls: references that forget the D term,
reduce GQA over the wrong heads, or leave out the softcap derivative must disagree.  Bad input:
dO / dLSE of the wrong shape, NaN in dO at a used row: exit 2, one line, no files.
Exit 0 pass, 1 fail, 77 skip (no NumPy/mpmath).
"""
import os, subprocess, sys, tempfile
from fractions import Fraction

try:
    import numpy as np
    import mpmath
    from mpmath import mpf
except ImportError as e:  # pragma: no cover
    print("SKIP:", e)
    sys.exit(77)

mpmath.mp.prec = 256
BIN = sys.argv[1]
SEED = int(os.environ.get("ATTNCERT_SEED", "20261202"))
print("seed", SEED, "(set ATTNCERT_SEED to override)")
rng = np.random.default_rng(SEED)
FORMATS = {"binary64": (53, -1022), "binary32": (24, -126), "binary16": (11, -14), "bfloat16": (8, -126)}
TINY = mpf(2) ** -200
failures = 0
checked = 0
zeros_only = 0


def round_to(x, fmt):
    p, emin = FORMATS[fmt]
    if x == 0:
        return 0.0
    e = max(int(mpmath.floor(mpmath.log(abs(x), 2))), emin)
    while abs(x) >= mpf(2) ** (e + 1):
        e += 1
    while e > emin and abs(x) < mpf(2) ** e:
        e -= 1
    m = x / mpf(2) ** (e - p + 1)
    f = mpmath.floor(m)
    r = m - f
    if r > 0.5 or (r == 0.5 and int(f) % 2 == 1):
        f += 1
    return float(mpmath.ldexp(f, e - p + 1))


class Acc:
    """An mpmath sum with the sum of the magnitudes of its terms."""
    def __init__(self):
        self.v = mpf(0)
        self.m = mpf(0)

    def add(self, x, mag=None):
        self.v += x
        self.m += abs(x) if mag is None else mag


def reference(c, mistake=None):
    """The gradients of case c in mpmath: dict name -> (values as Acc array, shape)."""
    q, k, v, do = c["q"], c["k"], c["v"], c["do"]
    B, H, nq, d = q.shape
    Hkv, nk, dv = k.shape[1], k.shape[2], v.shape[3]
    grp = H // Hkv
    scale = mpf(1) / mpmath.sqrt(d) if c.get("scale") is None else mpf(Fraction(c["scale"]).numerator) / Fraction(c["scale"]).denominator
    C = mpf(c["softcap"]) if c.get("softcap") else None
    bias = c.get("bias")
    bfull = None if bias is None else np.broadcast_to(bias, (B, H, nq, nk))
    sink = c.get("sink")
    keep = c.get("keep")
    kf = 1 / (1 - mpf(Fraction(c["p"]).numerator) / Fraction(c["p"]).denominator) if keep is not None else mpf(1)
    dlse = c.get("dlse")
    base2 = c.get("lse_base") == "2"
    G = {"dq": np.empty(q.shape, object), "dk": np.empty(k.shape, object), "dv": np.empty(v.shape, object)}
    for a in G.values():
        for idx in np.ndindex(a.shape):
            a[idx] = Acc()
    if bias is not None:
        G["dbias"] = np.empty(bias.shape, object)
        for idx in np.ndindex(bias.shape):
            G["dbias"][idx] = Acc()
    if sink is not None:
        G["dsink"] = np.empty((H,), object)
        for h in range(H):
            G["dsink"][h] = Acc()
    for b in range(B):
        for h in range(H):
            hk = h // grp if mistake != "gqa" else h % Hkv
            for i in range(nq):
                allowed = [allowed_key(c, i, j, nq, nk) and (bfull is None or bfull[b, h, i, j] != -np.inf) for j in range(nk)]
                if not any(allowed) and sink is None:
                    continue
                x, th = {}, {}
                for j in range(nk):
                    if not allowed[j]:
                        continue
                    u = scale * mpmath.fsum(mpf(q[b, h, i, l]) * mpf(k[b, hk, j, l]) for l in range(d))
                    if C is not None:
                        th[j] = mpmath.tanh(u / C)
                        u = C * th[j]
                    if c.get("alibi") is not None:
                        u -= mpf(c["alibi"][h]) * abs(i + nk - nq - j)
                    if bfull is not None:
                        u += mpf(bfull[b, h, i, j])
                    x[j] = u
                m = max(list(x.values()) + ([mpf(sink[h])] if sink is not None else []))
                w = {j: mpmath.exp(x[j] - m) for j in x}
                ws = mpmath.exp(mpf(sink[h]) - m) if sink is not None else mpf(0)
                W = mpmath.fsum(list(w.values())) + ws
                P = {j: w[j] / W for j in w}
                Ps = ws / W
                kap = {j: (kf if keep is None or keep[b, h, i, j] else mpf(0)) for j in P}
                dP = {j: kap[j] * mpmath.fsum(mpf(do[b, h, i, l]) * mpf(v[b, hk, j, l]) for l in range(dv)) for j in P}
                D = mpmath.fsum(P[j] * dP[j] for j in P) if mistake != "no_D" else mpf(0)
                g = mpf(0)
                if dlse is not None:
                    g = mpf(dlse[b, h, i]) / (mpmath.log(2) if base2 else 1)
                for j in P:
                    dS = P[j] * (dP[j] - D) + P[j] * g
                    dSm = P[j] * (abs(dP[j]) + abs(D) + abs(g))  # the magnitude before cancellation
                    if bias is not None:
                        bi = tuple(0 if bias.shape[t - (4 - bias.ndim)] == 1 else (b, h, i, j)[t] for t in range(4 - bias.ndim, 4))
                        G["dbias"][bi].add(dS, dSm)
                    dU = dS * (1 - th[j] ** 2) if (C is not None and mistake != "no_softcap") else dS
                    for l in range(d):
                        G["dq"][b, h, i, l].add(scale * dU * mpf(k[b, hk, j, l]), abs(scale * dSm * mpf(k[b, hk, j, l])))
                        G["dk"][b, hk, j, l].add(scale * dU * mpf(q[b, h, i, l]), abs(scale * dSm * mpf(q[b, h, i, l])))
                    for l in range(dv):
                        G["dv"][b, hk, j, l].add(P[j] * kap[j] * mpf(do[b, h, i, l]))
                if sink is not None:
                    G["dsink"][h].add(Ps * (g - D), Ps * (abs(g) + abs(D)))
    return G


def allowed_key(c, i, j, nq, nk):
    diag = i + nk - nq
    ok = True
    if c.get("causal") == "top-left":
        ok = j <= i
    if c.get("causal") == "bottom-right":
        ok = ok and j <= diag
    wl, wr = c.get("window", (-1, -1))
    if wl >= 0:
        ok = ok and j >= diag - wl
    if wr >= 0:
        ok = ok and j <= diag + wr
    return ok


def run(c, tmp, extra=(), expect=0):
    files = {}
    for name in ("q", "k", "v", "do"):
        files[name] = os.path.join(tmp, name + ".npy")
        np.save(files[name], c[name])
    args = [BIN, "oracle", "--q", files["q"], "--k", files["k"], "--v", files["v"], "--grad-out", files["do"],
            "--write-grad-references", os.path.join(tmp, "g"), "--target", c.get("target", "binary64")]
    if c.get("causal") == "top-left":
        args += ["--mask", "causal"]
    if c.get("causal") == "bottom-right":
        args += ["--mask", "causal-bottom-right"]
    if "window" in c:
        args += ["--window", "%d,%d" % c["window"]]
    if c.get("softcap"):
        args += ["--softcap", c["softcap"]]
    if c.get("scale"):
        args += ["--scale", c["scale"]]
    for key, opt in (("alibi", "--alibi-slopes"), ("bias", "--bias"), ("sink", "--sink"), ("dlse", "--grad-lse")):
        if c.get(key) is not None:
            f = os.path.join(tmp, key + ".npy")
            np.save(f, c[key])
            args += [opt, f]
    if c.get("keep") is not None:
        f = os.path.join(tmp, "keep.npy")
        np.save(f, c["keep"])
        args += ["--dropout-mask", f, "--dropout-p", c["p"]]
    if c.get("lse_base"):
        args += ["--lse-base", c["lse_base"]]
    if c.get("empty_rows"):
        args += ["--empty-rows", c["empty_rows"]]
    r = subprocess.run(args + list(extra), capture_output=True, text=True)
    if r.returncode != expect:
        raise RuntimeError("exit %d (expected %d): %s" % (r.returncode, expect, r.stderr.strip()))
    return r


def compare(name, c, G, tmp, quiet=False):
    """Number of elements that differ (and counts checked ones)."""
    global checked, zeros_only
    bad = 0
    fmt = c.get("target", "binary64")
    for g, acc in G.items():
        got = np.load(os.path.join(tmp, "g.%s.npy" % g)).astype(np.float64)
        if got.shape != acc.shape:
            print("  %s: %s has shape %s, expected %s" % (name, g, got.shape, acc.shape))
            return 1 + bad
        for idx in np.ndindex(acc.shape):
            a = acc[idx]
            if abs(a.v) <= TINY * a.m:
                ok = got[idx] == 0
                if not quiet:
                    zeros_only += 1
            else:
                ok = got[idx] == round_to(a.v, fmt)
                if not quiet:
                    checked += 1
            if not ok:
                bad += 1
                if not quiet and bad <= 3:
                    print("  %s: %s%s = %r, mpmath %s" % (name, g, idx, got[idx], mpmath.nstr(a.v, 20)))
    return bad


def case(name, c, negative=()):
    global failures
    with tempfile.TemporaryDirectory() as tmp:
        try:
            run(c, tmp)
        except RuntimeError as e:
            print("FAIL", name, e)
            failures += 1
            return
        bad = compare(name, c, reference(c), tmp)
        if bad:
            failures += 1
            print("FAIL", name, bad, "elements differ")
        else:
            print("ok  ", name)
        for mistake in negative:
            if compare(name, c, reference(c, mistake), tmp, quiet=True) == 0:
                failures += 1
                print("FAIL negative control", name, mistake, "was not told apart")
            else:
                print("ok   negative control", name, mistake, "told apart")


def randn(*shape):
    return rng.standard_normal(shape)


B, H, n, d = 1, 2, 5, 4
case("plain causal binary64", dict(q=randn(B, H, n, d), k=randn(B, H, n, d), v=randn(B, H, n, d), do=randn(B, H, n, d),
                                   causal="top-left"), negative=("no_D",))
case("GQA 4/2 + bottom-right + window + softcap + ALiBi + sink + dLSE, binary32",
     dict(q=randn(1, 4, 4, 3), k=randn(1, 2, 6, 3), v=randn(1, 2, 6, 5), do=randn(1, 4, 4, 5), causal="bottom-right",
          window=(3, 0), softcap="2.5", alibi=np.array([0.5, 0.25, 0.125, 0.0625]), sink=randn(4), dlse=randn(1, 4, 4),
          target="binary32"), negative=("gqa", "no_softcap", "no_D"))
case("bias 1hss + dropout 0.25, binary64",
     dict(q=randn(2, 2, 4, 3), k=randn(2, 2, 5, 3), v=randn(2, 2, 5, 2), do=randn(2, 2, 4, 2), bias=randn(1, 2, 4, 5),
          keep=rng.random((2, 2, 4, 5)) > 0.25, p="0.25"))
case("bias ss broadcast over b and h + softcap, bfloat16",
     dict(q=randn(2, 2, 3, 4), k=randn(2, 2, 4, 4), v=randn(2, 2, 4, 4), do=randn(2, 2, 3, 4), bias=randn(3, 4),
          softcap="3", target="bfloat16"), negative=("no_softcap",))
same_v = np.tile(randn(1, 1, 1, 3), (1, 1, 4, 1))
case("identical values: dQ and dK exactly 0; keys never attended: exact zeros",
     dict(q=randn(1, 1, 4, 2), k=randn(1, 1, 4, 2), v=same_v, do=randn(1, 1, 4, 3), causal="top-left"))
case("LSE-only loss (dO = 0): dV exactly 0; sink off the shelf, LSE base 2, binary16",
     dict(q=randn(1, 2, 3, 2), k=randn(1, 2, 3, 2), v=randn(1, 2, 3, 2), do=np.zeros((1, 2, 3, 2)), dlse=randn(1, 2, 3),
          sink=np.array([0.0, 1.5]), lse_base="2", target="binary16"))
case("fully masked rows (window), zeros policy; scale 1/2, integer inputs",
     dict(q=rng.integers(-3, 4, (1, 1, 4, 2)).astype(float), k=rng.integers(-3, 4, (1, 1, 4, 2)).astype(float),
          v=rng.integers(-3, 4, (1, 1, 4, 2)).astype(float), do=rng.integers(-3, 4, (1, 1, 4, 2)).astype(float),
          causal="bottom-right", window=(0, 0), scale="1/2", empty_rows="zeros"))

# exact zeros must be exact: check the two structural cases directly
with tempfile.TemporaryDirectory() as tmp:
    c = dict(q=randn(1, 1, 4, 2), k=randn(1, 1, 4, 2), v=same_v, do=randn(1, 1, 4, 3), causal="top-left")
    run(c, tmp)
    dq = np.load(os.path.join(tmp, "g.dq.npy"))
    c2 = dict(q=randn(1, 1, 3, 2), k=randn(1, 1, 3, 2), v=randn(1, 1, 3, 2), do=np.zeros((1, 1, 3, 2)), dlse=randn(1, 1, 3))
    with tempfile.TemporaryDirectory() as tmp2:
        run(c2, tmp2)
        dvv = np.load(os.path.join(tmp2, "g.dv.npy"))
    if np.any(dq != 0) or np.any(dvv != 0):
        failures += 1
        print("FAIL exact zeros: dq", dq.ravel()[:4], "dv", dvv.ravel()[:4])
    else:
        print("ok   exact zeros (identical values: dQ = 0; LSE-only loss: dV = 0)")

# paged K/V: dK and dV come back in the pages' layout, equal to the unpaged run's gradients at the
# slots the block table uses (checked against mpmath there) and exactly 0 in the slots no one uses;
# a page slot used twice (a shared page) is refused with one line, exit 2.
def paged_case():
    global failures
    P, pages, Hkv = 3, 5, 2
    table = np.array([[3, 0], [1, 4]], dtype=np.int32)  # page 2 unused; sequence 1 uses 5 of its 6 slots
    seqlens = np.array([6, 5], dtype=np.int32)
    kp, vp = randn(pages, P, Hkv, 3), randn(pages, P, Hkv, 2)
    c = dict(q=randn(2, 4, 4, 3), do=randn(2, 4, 4, 2), causal="bottom-right")
    c["k"] = np.stack([np.concatenate([kp[t] for t in row]).transpose(1, 0, 2) for row in table])  # (b, h, 6, d)
    c["v"] = np.stack([np.concatenate([vp[t] for t in row]).transpose(1, 0, 2) for row in table])
    cp = dict(c, k=kp, v=vp)
    with tempfile.TemporaryDirectory() as flat_dir, tempfile.TemporaryDirectory() as page_dir:
        sl = os.path.join(flat_dir, "seqlens.npy")
        tf = os.path.join(page_dir, "table.npy")
        np.save(sl, seqlens)
        np.save(tf, table)
        paged = ["--block-table", tf, "--page-size", str(P), "--seqlens-k", sl]
        try:
            run(c, flat_dir, ["--seqlens-k", sl])
            run(cp, page_dir, paged)
        except RuntimeError as e:
            failures += 1
            print("FAIL paged K/V:", e)
            return
        bad = 0
        for g in ("dk", "dv"):
            flat, pg = np.load(os.path.join(flat_dir, "g.%s.npy" % g)), np.load(os.path.join(page_dir, "g.%s.npy" % g))
            want = np.zeros_like(pg)
            for b in range(2):
                for j in range(seqlens[b]):
                    want[table[b, j // P], j % P] = flat[b, :, j]
            bad += int(np.sum(want != pg)) if want.shape == pg.shape else want.size
        if bad or not np.any(want != 0):
            failures += 1
            print("FAIL paged K/V:", bad, "elements differ from the unpaged run scattered into pages")
        else:
            print("ok   paged K/V: dK, dV in pages equal the unpaged gradients; unused slots exactly 0")
        np.save(tf, np.array([[3, 0], [0, 4]], dtype=np.int32))  # page 0 shared by both sequences
        for f in os.listdir(page_dir):
            if f.startswith("g."):
                os.remove(os.path.join(page_dir, f))
        try:
            r = run(cp, page_dir, paged, expect=2)
            left = [f for f in os.listdir(page_dir) if f.startswith("g.")]
            ok = len(r.stderr.strip().splitlines()) == 1 and "used twice" in r.stderr and not left
            print(("ok  " if ok else "FAIL"), "paged K/V with a shared page:", r.stderr.strip())
            failures += not ok
        except RuntimeError as e:
            failures += 1
            print("FAIL paged K/V with a shared page:", e)


paged_case()

# bad input: one line on stderr, exit 2, no files
bad_cases = [
    ("dO of the wrong shape", dict(do=randn(1, 1, 4, 3)), ()),
    ("NaN in dO at a used row", dict(do=np.where(np.arange(8).reshape(1, 1, 4, 2) == 5, np.nan, 1.0)), ()),
    ("dLSE of the wrong shape", dict(dlse=randn(1, 1, 3)), ()),
]
for name, over, extra in bad_cases:
    with tempfile.TemporaryDirectory() as tmp:
        c = dict(q=randn(1, 1, 4, 2), k=randn(1, 1, 4, 2), v=randn(1, 1, 4, 2), do=randn(1, 1, 4, 2))
        c.update(over)
        try:
            r = run(c, tmp, extra, expect=2)
            lines = r.stderr.strip().splitlines()
            leftovers = [f for f in os.listdir(tmp) if f.startswith("g.")]
            if len(lines) != 1 or leftovers:
                raise RuntimeError("stderr %r, files %r" % (lines, leftovers))
            print("ok   bad input:", name, "->", lines[0])
        except RuntimeError as e:
            failures += 1
            print("FAIL bad input:", name, e)
# NaN in dO at a padding-free but fully masked row is not used: no error
with tempfile.TemporaryDirectory() as tmp:
    do = randn(1, 1, 4, 2)
    do[0, 0, 0, :] = np.nan  # row 0 has no key under bottom-right causal with n_q > n_k
    c = dict(q=randn(1, 1, 4, 2), k=randn(1, 1, 3, 2), v=randn(1, 1, 3, 2), do=do, causal="bottom-right", empty_rows="zeros")
    try:
        run(c, tmp)
        bad = compare("NaN in dO of an unused row", c, reference(c), tmp)
        print(("FAIL" if bad else "ok  "), "NaN in dO of a fully masked row is not used")
        failures += bool(bad)
    except RuntimeError as e:
        failures += 1
        print("FAIL NaN in dO of a fully masked row:", e)

print("%d elements bit for bit, %d judged as exact zeros, %d failures" % (checked, zeros_only, failures))
sys.exit(1 if failures else 0)
