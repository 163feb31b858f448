#!/usr/bin/env python3
"""attncert rank's singular values of a causal attention layer against mpmath (opt-in campaign test).

    /usr/bin/python3 tests/rank/deflated_mpmath.py ATTNCERT_CLI [--n 192] [--bits 450] [--seed 1] [--mask permuted]

float32 N(0, 1) Q and K (d = 64, scale 1/8): binary64 leaves the smallest singular values undecided (they
fall far below 1e-16).  Under --mask permuted (a causal mask with its keys permuted: key j allowed to
query i when pi(j) <= i, pi(j) = (7j + 3) mod n; not triangular) `attncert rank` escalates them on a
deflated subspace (proofs/P16, part D).  Under --mask causal the attention is triangular and its
determinant bounds them from below (part E).  The truth is independent: the attention matrix formed by
mpmath at --bits from the same float32 inputs, and mpmath's own SVD (svd_r) at that precision.  Every
enclosure must contain it; the script prints how many are certified > 0 and the smallest truth.
Exit 77 without numpy/mpmath.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

try:
    import mpmath as mp
    import numpy as np
except ImportError:
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cli")
    ap.add_argument("--n", type=int, default=192)
    ap.add_argument("--bits", type=int, default=450)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mask", choices=["causal", "permuted"], default="causal")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    q = rng.standard_normal((a.n, 64)).astype(np.float32)
    k = rng.standard_normal((a.n, 64)).astype(np.float32)
    pi = (np.arange(a.n) * 7 + 3) % a.n if a.mask == "permuted" else np.arange(a.n)
    allowed = pi[None, :] <= np.arange(a.n)[:, None]
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "q.npy"), q)
        np.save(os.path.join(tmp, "k.npy"), k)
        np.save(os.path.join(tmp, "m.npy"), allowed)
        t0 = time.perf_counter()
        mask = "causal" if a.mask == "causal" else "m.npy"
        subprocess.run([a.cli, "rank", "--q", "q.npy", "--k", "k.npy", "--mask", mask, "--formats", "binary64",
                        "--policies", "numpy", "--format", "json", "--out", "r.json", "--deflate-seconds", "0"],
                       cwd=tmp, check=True)
        t_cli = time.perf_counter() - t0
        r = json.load(open(os.path.join(tmp, "r.json")))
    mp.mp.prec = a.bits
    qd, kd = q.astype(np.float64), k.astype(np.float64)
    A = mp.matrix(a.n, a.n)
    for i in range(a.n):
        keys = [j for j in range(a.n) if allowed[i, j]]
        s = [mp.fsum(mp.mpf(qd[i, t]) * mp.mpf(kd[j, t]) for t in range(64)) / 8 for j in keys]
        m = max(s)
        w = [mp.exp(x - m) for x in s]
        tot = mp.fsum(w)
        for j, x in zip(keys, w):
            A[i, j] = x / tot
    sv = mp.svd_r(A, compute_uv=False)
    truth = sorted((sv[i] for i in range(a.n)), reverse=True)
    bad = 0
    for i, (x, e) in enumerate(zip(truth, r["singular_values"])):
        lo, hi = mp.mpf(e["lo"]), mp.mpf(e["hi"])
        # the report's decimal ends are rounded outward to 21 significant digits
        if not (lo <= x <= hi):
            bad += 1
            print("sigma_%d = %s outside [%s, %s]" % (i + 1, mp.nstr(x, 12), e["lo"], e["hi"]))
    print("n = %d, mask %s: %d of %d certified > 0 (method %s, %.1f s), smallest truth %s; %d outside" % (
        a.n, a.mask, r["singular_values_certified_positive"], a.n, r["singular_values_method"], t_cli, mp.nstr(truth[-1], 6), bad))
    for note in r.get("notes", []):
        print("  note:", note)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
