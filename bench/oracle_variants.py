"""The oracle's softcap and ALiBi against the plain oracle, side by side in one run.

    /usr/bin/python3 bench/oracle_variants.py [--shape 1 8 1024 64] [--reps 5] [--threads 1] [--cli build/attncert]

Q, K, V float64 N(0, 1) (NumPy seed 1) of shape (b, h, n, d), binary64 target, default scale.
Each repetition runs, interleaved, `attncert oracle --q --k --v --threads T` plain, with
`--softcap 30`, and with `--alibi-slopes` (the h slopes 2^-1 ... 2^-h); the wall time of each
command is taken, best of --reps, and every run must exit 0 with every element correctly rounded
(the report's summary). Prints each time and its ratio to the plain oracle (issue target:
softcap and ALiBi <= 1.3x the plain oracle).
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", type=int, nargs=4, default=[1, 8, 1024, 64], metavar=("B", "H", "N", "D"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cli", default=os.environ.get("ATTNCERT_CLI", "build/attncert"))
    args = ap.parse_args()
    b, h, n, d = args.shape
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name in ("q", "k", "v"):
            paths[name] = os.path.join(tmp, name + ".npy")
            np.save(paths[name], rng.standard_normal((b, h, n, d)))
        slopes = os.path.join(tmp, "slopes.npy")
        np.save(slopes, np.array([2.0 ** -(i + 1) for i in range(h)]))
        base = [args.cli, "oracle", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
                "--threads", str(args.threads), "--format", "json"]
        cases = {"plain": [], "softcap 30": ["--softcap", "30"], "ALiBi": ["--alibi-slopes", slopes]}
        best = {c: float("inf") for c in cases}
        escalated = {}
        for _ in range(args.reps):
            for case, extra in cases.items():
                t0 = time.perf_counter()
                r = subprocess.run(base + extra, capture_output=True, text=True)
                dt = time.perf_counter() - t0
                if r.returncode != 0:
                    raise SystemExit(f"{case}: exit {r.returncode}: {r.stderr.strip()}")
                s = json.loads(r.stdout)["summary"]
                if s["correctly_rounded"] != s["elements"]:
                    raise SystemExit(f"{case}: {s['elements'] - s['correctly_rounded']} elements not correctly rounded")
                escalated[case] = s["rows_escalated"]
                best[case] = min(best[case], dt)
    print(f"shape {tuple(args.shape)}, binary64 target, {args.threads} thread(s), best of {args.reps}, interleaved")
    print("| case | time | ratio to plain | rows escalated |")
    print("|---|---|---|---|")
    for case in cases:
        print(f"| {case} | {best[case]:.3f} s | {best[case] / best['plain']:.2f} | {escalated[case]} |")


if __name__ == "__main__":
    main()
