#!/usr/bin/python3
"""Write the JSON reports of check, rank, oracle, drift and certify on the shipped examples
into a folder, with wall-clock timings removed, so that two builds can be compared:

    /usr/bin/python3 scripts/json_snapshot.py OLD/attncert /tmp/before
    /usr/bin/python3 scripts/json_snapshot.py build/attncert /tmp/after
    diff -r /tmp/before /tmp/after

Inputs are made here from fixed seeds (NumPy), and every claim of proofs/claims/ is
certified.  Needs Debian's python3-numpy.  `--quick` skips the full `attncert check` (minutes).
"""
import json
import os
import subprocess
import sys

import numpy as np

TIMING_KEYS = {"seconds", "wall_seconds", "elapsed_seconds", "time_seconds"}


def strip_timings(x):
    if isinstance(x, dict):
        return {k: strip_timings(v) for k, v in x.items() if k not in TIMING_KEYS}
    if isinstance(x, list):
        return [strip_timings(v) for v in x]
    return x


def run(binary, args, out_path, allowed=(0, 1, 3)):
    p = subprocess.run([binary] + args, capture_output=True, text=True, cwd=os.path.dirname(out_path))
    if p.returncode not in allowed:
        sys.exit(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    data = json.loads(p.stdout)
    if isinstance(data, dict):
        data.pop("command", None)  # contains the binary's path
    with open(out_path, "w") as f:
        json.dump({"exit": p.returncode, "report": strip_timings(data)}, f, indent=1, sort_keys=True)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    quick = "--quick" in sys.argv
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(out, exist_ok=True)
    data = os.path.join(out, "inputs")
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(20261201)
    q = rng.standard_normal((2, 2, 12, 8)).astype(np.float32)
    k = rng.standard_normal((2, 2, 16, 8)).astype(np.float32)
    v = rng.standard_normal((2, 2, 16, 8)).astype(np.float32)
    cand = rng.standard_normal((2, 2, 12, 8)).astype(np.float32)
    for name, arr in dict(q=q, k=k, v=v, cand=cand).items():
        np.save(os.path.join(data, name + ".npy"), arr)
    q2 = rng.integers(-3, 4, (6, 4)).astype(np.float64)
    k2 = rng.integers(-3, 4, (6, 4)).astype(np.float64)
    v2 = rng.integers(-3, 4, (6, 3)).astype(np.float64)
    x2 = rng.integers(-3, 4, (6, 3)).astype(np.float64)
    for name, arr in dict(q2=q2, k2=k2, v2=v2, x2=x2).items():
        np.save(os.path.join(data, name + ".npy"), arr)
    with open(os.path.join(data, "S.json"), "w") as f:
        json.dump([["1", "-1", "1/2"], ["0", "2", "3/7"], ["1/3", "1", "-2"]], f)
    d = lambda n: os.path.join("inputs", n)  # relative to `out`: reports name files as given

    if not quick:
        run(binary, ["check", "--format", "json"], os.path.join(out, "check.json"))
    run(binary, ["check", "two-token", "causal-mask", "--formats", "binary16,binary64,mpfr128", "--format", "json"],
        os.path.join(out, "check-two.json"))
    run(binary, ["rank", "--scores", d("S.json"), "--mask", "causal", "--format", "json"], os.path.join(out, "rank-scores.json"))
    run(binary, ["rank", "--q", d("q2.npy"), "--k", d("k2.npy"), "--v", d("v2.npy"), "--object", "output", "--format", "json"],
        os.path.join(out, "rank-output.json"))
    run(binary, ["rank", "--q", d("q2.npy"), "--k", d("k2.npy"), "--v", d("v2.npy"), "--x", d("x2.npy"), "--object",
                 "residual", "--scale", "1/2", "--formats", "binary16,bfloat16,binary32,binary64", "--format", "json"],
        os.path.join(out, "rank-residual.json"))
    run(binary, ["oracle", "--q", d("q.npy"), "--k", d("k.npy"), "--v", d("v.npy"), "--mask", "causal", "--target",
                 "binary32", "--candidate", d("cand.npy"), "--format", "json"], os.path.join(out, "oracle.json"))
    run(binary, ["oracle", "--q", d("q.npy"), "--k", d("k.npy"), "--v", d("v.npy"), "--scale", "1e3", "--target",
                 "bfloat16", "--format", "json"], os.path.join(out, "oracle-peaked.json"))
    run(binary, ["drift", "--family", "two-token", "--from", "1e-20", "--to", "1", "--points", "21", "--log", "--format",
                 "json"], os.path.join(out, "drift-two-token.json"))
    run(binary, ["drift", "--family", "causal", "--from", "0", "--to", "30", "--points", "7", "--format", "json"],
        os.path.join(out, "drift-causal.json"))
    claims = os.path.join(root, "proofs", "claims")
    for name in sorted(os.listdir(claims)):
        if name.endswith(".json"):
            run(binary, ["certify", os.path.join(claims, name), "--format", "json"],
                os.path.join(out, "certify-" + name))


if __name__ == "__main__":
    main()
