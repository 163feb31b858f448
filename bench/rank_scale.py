"""attncert rank at model scale, side by side with numpy.linalg.svd on the same matrix, in one run.

    /usr/bin/python3 bench/rank_scale.py [--n 1024 4096] [--reps 3] [--cli build/attncert] [--mask none|causal]

For each n: float32 Q and K with standard normal entries (seed 1), d = 64, scale 1/8 (= 1/sqrt(64)).
 * numpy: the attention matrix softmax(Q K^T / 8) in float64, then np.linalg.svd(A, compute_uv=False)
   (values only: what np.linalg.matrix_rank runs), best of --reps;
 * attncert: `attncert rank --q Q.npy --k K.npy --formats binary64 --policies numpy --format json`,
   wall time best of --reps (with --default-options: `attncert rank --q Q.npy --k K.npy --format json`, every default
   format and policy, the mpfr256 numerical rank included up to 256 rows): the exact rank (modular lower bound + structural upper bound), certified
   enclosures of every singular value (binary64 LAPACK SVD + residual bound, proofs/P16) and the numerical
   rank in binary64 under NumPy's policy.
Prints the exact rank, how many singular values are certified > 0, their largest relative width, the
stage times attncert reports, and the ratio of the two wall times.
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np


def attention(q, k, causal):
    s = (q.astype(np.float64) @ k.astype(np.float64).T) / 8.0
    if causal:
        s = np.where(np.tril(np.ones(s.shape, dtype=bool)), s, -np.inf)
    a = np.exp(s - s.max(axis=1, keepdims=True))
    return a / a.sum(axis=1, keepdims=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[1024])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cli", default=os.environ.get("ATTNCERT_CLI", "build/attncert"),
                    help="the attncert binary (made absolute: the runs happen in a temporary folder)")
    ap.add_argument("--mask", choices=["none", "causal"], default="none")
    ap.add_argument("--default-options", action="store_true",
                    help="run attncert rank with its default formats and policies (binary16, bfloat16, binary32, binary64, "
                         "mpfr256 up to 256 rows; five policies) instead of --formats binary64 --policies numpy")
    args = ap.parse_args()
    args.cli = os.path.abspath(args.cli)
    rng = np.random.default_rng(1)
    print("| n | mask | numpy svd (values) | attncert rank | ratio | exact rank | certified > 0 | max rel. width | stages (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.n:
        q = rng.standard_normal((n, 64)).astype(np.float32)
        k = rng.standard_normal((n, 64)).astype(np.float32)
        a = attention(q, k, args.mask == "causal")
        t_np = float("inf")
        for _ in range(args.reps):
            t0 = time.perf_counter()
            np.linalg.svd(a, compute_uv=False)
            t_np = min(t_np, time.perf_counter() - t0)
        with tempfile.TemporaryDirectory() as tmp:
            np.save(os.path.join(tmp, "q.npy"), q)
            np.save(os.path.join(tmp, "k.npy"), k)
            cmd = [args.cli, "rank", "--q", "q.npy", "--k", "k.npy", "--mask", args.mask, "--format", "json", "--out", "r.json"]
            if not args.default_options:
                cmd[-4:-4] = ["--formats", "binary64", "--policies", "numpy"]
            t_ac = float("inf")
            for _ in range(args.reps):
                t0 = time.perf_counter()
                subprocess.run(cmd, cwd=tmp, check=True)
                t_ac = min(t_ac, time.perf_counter() - t0)
            r = json.load(open(os.path.join(tmp, "r.json")))
        e = r["exact_rank"]
        rank = str(e["lo"]) if e["lo"] == e["hi"] else "[%d, %d]" % (e["lo"], e["hi"])
        stages = ", ".join("%s %.2f" % (k, v) for k, v in r["seconds"].items())
        w = r["singular_values_max_relative_width"]  # null when not finite in binary64 (a lower end near 0)
        print("| %d | %s | %.3f s | %.3f s | %.1f | %s | %d of %d | %s | %s |" % (
            n, args.mask, t_np, t_ac, t_ac / t_np, rank, r["singular_values_certified_positive"], len(r["singular_values"]),
            "above 1e308" if w is None else "%.2g" % w, stages))


if __name__ == "__main__":
    main()
