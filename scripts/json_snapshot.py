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


def run_error(binary, args, out_path):
    """A call that must fail: its exit code and its one-line message (the texts a refactor keeps)."""
    p = subprocess.run([binary] + args, capture_output=True, text=True, cwd=os.path.dirname(out_path))
    with open(out_path, "a") as f:
        f.write(json.dumps({"args": args, "exit": p.returncode, "stderr": p.stderr.strip()}, sort_keys=True) + "\n")


def variants(binary, out, data, rng):
    """The oracle's variants (forward, LSE, backward) and the error texts of bad input."""
    d = lambda n: os.path.join("inputs", n)
    qv = rng.standard_normal((1, 2, 5, 4))
    kv = rng.standard_normal((1, 2, 6, 4))
    vv = rng.standard_normal((1, 2, 6, 3))
    go = rng.standard_normal((1, 2, 5, 3))
    keep = rng.random((1, 2, 5, 6)) < 0.7
    for name, arr in dict(qv=qv, kv=kv, vv=vv, go=go, keep=keep, slopes=np.array([0.5, 0.25]),
                          sink=np.array([0.3, -1.0]), bias=rng.standard_normal((5, 6)),
                          cuq=np.array([0, 2, 5], dtype=np.int32), cuk=np.array([0, 3, 6], dtype=np.int32),
                          qt=rng.standard_normal((5, 2, 4)), kt=rng.standard_normal((6, 2, 4)),
                          vt=rng.standard_normal((6, 2, 3)), bad=np.array([[1.0, np.nan]])).items():
        np.save(os.path.join(data, name + ".npy"), arr)
    base = ["oracle", "--q", d("qv.npy"), "--k", d("kv.npy"), "--v", d("vv.npy")]
    cases = {
        "softcap": ["--softcap", "2.5", "--mask", "causal-bottom-right"],
        "window": ["--window", "1,0", "--alibi-slopes", d("slopes.npy")],
        "sink": ["--sink", d("sink.npy"), "--scale", "1/3", "--write-lse", "lse.npy"],
        "dropout": ["--dropout-mask", d("keep.npy"), "--dropout-p", "0.125", "--bias", d("bias.npy")],
        "backward": ["--softcap", "3", "--grad-out", d("go.npy"), "--target", "binary32", "--write-grad-references", "g"],
        "offbyone": ["--sink-off-by-one", "--target", "bfloat16", "--write-lse", "lse.npy", "--lse-base", "2"],
    }
    for name, extra in cases.items():
        run(binary, base + extra + ["--format", "json"], os.path.join(out, "oracle-" + name + ".json"))
    run(binary, ["oracle", "--q", d("qt.npy"), "--k", d("kt.npy"), "--v", d("vt.npy"), "--layout", "thd",
                 "--cu-seqlens-q", d("cuq.npy"), "--cu-seqlens-k", d("cuk.npy"), "--mask", "causal", "--format", "json"],
        os.path.join(out, "oracle-thd.json"))
    errors = os.path.join(out, "errors.jsonl")
    if os.path.exists(errors):
        os.remove(errors)
    bad = [
        ["--softcap", "-1"], ["--softcap", "abc"], ["--softcap", "1e99999"], ["--dropout-p", "1", "--dropout-mask", d("keep.npy")],
        ["--dropout-p", "0.5"], ["--dropout-mask", d("keep.npy")], ["--scale", "abc"], ["--scale", "1e99999"],
        ["--window", "x"], ["--window", "-2,0"], ["--window", "3"], ["--lse-base", "3", "--write-lse", "l.npy"],
        ["--empty-lse", "x", "--write-lse", "l.npy"], ["--sink", d("sink.npy"), "--sink-off-by-one"],
        ["--alibi-slopes", d("bias.npy")], ["--sink", d("bias.npy")], ["--bias", d("keep.npy")],
        ["--max-ulp", "-1", "--candidate", d("go.npy")], ["--rule", "flash", "--candidate", d("go.npy")],
        ["--flash-k", "0", "--candidate", d("go.npy")], ["--fudge", "nan", "--candidate", d("go.npy")],
        ["--layout", "xyz"], ["--layout", "thd"], ["--block-table", d("cuq.npy")], ["--page-size", "4"],
        ["--qkv-format", "e9"], ["--q-descale", "-1"], ["--target", "fp7"], ["--max-precision", "64"],
        ["--mask", d("keep.npy"), "--layout", "thd", "--cu-seqlens-q", d("cuq.npy"), "--cu-seqlens-k", d("cuk.npy")],
        ["--max-seconds", "-1"], ["--empty-rows", "maybe"], ["--window", "0,0", "--mask", "causal", "--scale", "1e400"],
    ]
    for extra in bad:
        run_error(binary, base + extra, errors)
    run_error(binary, ["oracle", "--q", d("bad.npy"), "--k", d("bad.npy"), "--v", d("bad.npy")], errors)
    run_error(binary, ["oracle", "--q", d("qv.npy"), "--k", d("kv.npy"), "--v", d("vv.npy"), "--mask", d("keep.npy"),
                       "--bias", d("bias.npy"), "--dropout-mask", d("keep.npy"), "--dropout-p", "0.5",
                       "--layout", "thd"], errors)
    for extra in (["--from", "1", "--to", "0"], ["--from", "0", "--to", "1", "--points", "1"],
                  ["--log", "--from", "0", "--to", "1"], ["--from", "0", "--to", "1", "--object", "x"],
                  ["--from", "0", "--to", "1", "--resolution", "0.7"], ["--from", "0", "--to", "1", "--n", "100000"],
                  ["--family", "two-token", "--n", "3", "--from", "0", "--to", "1"],
                  ["--family", "log-odds", "--d", "2", "--from", "0", "--to", "1"], ["--from", "nan", "--to", "1"],
                  ["--from", "0", "--to", "1", "--max-seconds", "-1"]):
        fam = [] if "--family" in extra else ["--family", "causal"]
        run_error(binary, ["drift"] + fam + extra, errors)
    for extra in ([], ["--q", d("q2.npy")], ["--q", d("q2.npy"), "--k", d("k2.npy"), "--object", "output"],
                  ["--q", d("q2.npy"), "--k", d("k2.npy"), "--v", d("v2.npy"), "--object", "residual"],
                  ["--scores", d("S.json"), "--q", d("q2.npy")], ["--scores", d("bad.npy")], ["--scores", d("S.json"), "--formats", "x"]):
        run_error(binary, ["rank"] + extra, errors)
    run_error(binary, ["rank", "--max-input-bytes", "0", "--scores", d("S.json")], errors)
    run_error(binary, ["rank", "--max-input-bytes", "10", "--scores", d("S.json")], errors)
    run_error(binary, ["check", "--formats", "nope"], errors)
    run_error(binary, ["check", "no-such-check"], errors)


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
    variants(binary, out, data, rng)
    claims = os.path.join(root, "proofs", "claims")
    for name in sorted(os.listdir(claims)):
        if name.endswith(".json"):
            run(binary, ["certify", os.path.join(claims, name), "--format", "json"],
                os.path.join(out, "certify-" + name))


if __name__ == "__main__":
    main()
