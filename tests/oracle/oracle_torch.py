#!/usr/bin/python3
"""PyTorch's attention graded by the oracle (python3-torch as a real candidate).

Usage: oracle_torch.py ATTNCERT_BINARY
Inputs are float32 values (so float32 and float64 computations see the same exact inputs).
Candidates: torch.nn.functional.scaled_dot_product_attention in float64 and float32, and a
plain PyTorch softmax(QK^T s) V in float32.  Expected ranges (derived, not tuned):
  * float64 candidate, target binary64: at most 64 ulps on every element whose magnitude is
    at least 1/64 of max|v| (a few roundings per dot product of length <= 64, softmax and sum:
    relative error a few times 2^-53 of max|v|);
  * float32 candidates, target binary32: absolute error at most 2^-24 * 64 * max|v|, and not
    suspiciously exact (max error above 0.5 ulp somewhere);
  * the output bound (article section 11) is certified on every row for the float32 attention
    probabilities; their row-L1 error is below 2^-24 * n_k * 4.
Also: REF read back by NumPy has the output's shape and dtype.  Exit 0 / 1 / 77 (no torch).
"""
import json, os, subprocess, sys, tempfile

try:
    import numpy as np
    import torch
except ImportError as e:
    print("SKIP:", e)
    sys.exit(77)

BIN = sys.argv[1]
SEED = int(os.environ.get("ATTNCERT_SEED", "20261130"))
print("seed", SEED, "(set ATTNCERT_SEED to override)")
rng = np.random.default_rng(SEED)
torch.manual_seed(SEED)
fails = 0


def check(cond, msg):
    global fails
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        fails += 1


def sdpa(q, k, v, causal):
    F = torch.nn.functional
    if hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    # PyTorch 1.13 (Debian 12): the same kernel under its private name
    out, _ = F._scaled_dot_product_attention(q, k, v, None, 0.0, False, causal)
    return out


for causal in (False, True):
    b, h, n, d = 2, 2, 48, 16
    Q = rng.standard_normal((b, h, n, d)).astype(np.float32)
    K = rng.standard_normal((b, h, n, d)).astype(np.float32)
    V = rng.standard_normal((b, h, n, d)).astype(np.float32)
    q32, k32, v32 = (torch.from_numpy(x) for x in (Q, K, V))
    o64 = sdpa(q32.double(), k32.double(), v32.double(), causal).numpy()
    o32 = sdpa(q32, k32, v32, causal).numpy()
    s = q32 @ k32.transpose(-1, -2) / np.sqrt(np.float32(d))
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(n, n, dtype=torch.bool)), float("-inf"))
    a32 = torch.softmax(s, dim=-1)
    plain32 = (a32 @ v32).numpy()
    tag = "causal" if causal else "no mask"
    with tempfile.TemporaryDirectory() as td:
        P = lambda nm: os.path.join(td, nm)
        for nm, arr in (("q", Q), ("k", K), ("v", V), ("o64", o64), ("o32", o32), ("p32", plain32), ("a32", a32.numpy())):
            np.save(P(nm + ".npy"), arr)
        common = [BIN, "oracle", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--mask",
                  "causal" if causal else "none", "--format", "json"]
        r64 = subprocess.run(common + ["--candidate", P("o64.npy"), "--write-reference", P("ref.npy")],
                             capture_output=True, text=True)
        check(r64.returncode == 0, f"{tag}: oracle binary64 run exits 0 ({r64.stderr.strip()})")
        rep64 = json.loads(r64.stdout)
        ref = np.load(P("ref.npy"))
        check(ref.shape == (b, h, n, d) and ref.dtype == np.float64, f"{tag}: REF read by NumPy: {ref.shape} {ref.dtype}")
        vmax = np.abs(V).max(axis=(2, 3), keepdims=True)
        # ulp error of the float64 candidate on elements not dominated by cancellation
        big = np.abs(ref) >= np.broadcast_to(vmax[:, :, :, :1], ref.shape) / 64
        ulp = np.spacing(np.abs(ref))
        err_ulp = np.abs(o64 - ref) / ulp  # vs the reference (within 0.5 ulp of the truth)
        check(rep64["summary"]["correctly_rounded"] == b * h * n * d, f"{tag}: all {b*h*n*d} elements correctly rounded")
        check(float(err_ulp[big].max()) <= 64.5,
              f"{tag}: torch float64 within 64 ulps on non-cancelling elements (max {err_ulp[big].max():.2f})")
        c64 = rep64["candidates"][0]
        check(0 < c64["max_ulp"] and abs(c64["max_ulp"] - err_ulp.max()) <= 0.5 + 1e-9,
              f"{tag}: report max_ulp {c64['max_ulp']:.3f} agrees with NumPy's |c - ref|/ulp {err_ulp.max():.3f} within 0.5")
        r32 = subprocess.run(common + ["--target", "binary32", "--candidate", P("o32.npy"), "--candidate", P("p32.npy"),
                                       "--attention-candidate", P("a32.npy")], capture_output=True, text=True)
        check(r32.returncode == 0, f"{tag}: oracle binary32 run exits 0 ({r32.stderr.strip()})")
        rep32 = json.loads(r32.stdout)
        for c in rep32["candidates"]:
            lim = 2.0**-24 * 64 * float(np.abs(V).max())
            check(c["max_abs_error"] <= lim and c["max_ulp"] > 0.5,
                  f"{tag}: float32 candidate {c['name']}: max abs {c['max_abs_error']:.3g} <= {lim:.3g}, "
                  f"max {c['max_ulp']:.2f} ulp, mean {c['mean_ulp']:.3f} ulp")
        cmp = rep32["comparison"]
        expect = "pass" if cmp["candidate_max_ulp"] <= 2 * cmp["baseline_max_ulp"] else "fail"
        check(cmp["verdict"] == expect, f"{tag}: FlashAttention-style verdict {cmp['verdict']} (ratio {cmp['ratio']:.3f})")
        att = rep32["attention"]
        check(att["output_bound"]["certified"] == b * h * n and att["output_bound"]["refuted"] == 0,
              f"{tag}: output bound certified on {att['output_bound']['certified']} of {b*h*n} rows")
        check(0 < att["max_row_l1_error"] <= 2.0**-24 * n * 4,
              f"{tag}: max row-L1 attention error {att['max_row_l1_error']:.3g}")
        # --max-ulp turns the exit code to 1 when exceeded
        r = subprocess.run(common + ["--target", "binary32", "--candidate", P("o32.npy"), "--max-ulp", "0.25"],
                           capture_output=True, text=True)
        check(r.returncode == 1, f"{tag}: --max-ulp 0.25 exits 1 (got {r.returncode})")
        r = subprocess.run(common + ["--target", "binary32", "--candidate", P("o32.npy"), "--max-ulp", "1e6"],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"{tag}: --max-ulp 1e6 exits 0 (got {r.returncode})")

print(f"{fails} failed")
sys.exit(1 if fails else 0)
