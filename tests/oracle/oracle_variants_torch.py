#!/usr/bin/python3
"""The attention variants written in PyTorch (python3-torch, CPU) graded by the oracle under each rule.

Usage: oracle_variants_torch.py ATTNCERT_BINARY
The variants of proofs/P14-oracle-variants.md are written here in torch the way kernel test
suites write their references (FlashAttention's attention_ref): GQA by repeating K/V heads,
bottom-right causal + window masks, softcap C*tanh(s/C), ALiBi -slope*|i + n_k - n_q - j|, a sink
column in the softmax, an additive bias, a dropout keep-mask scaled by 1/(1 - p).  Inputs are
bfloat16 values (stored as float32), so every precision sees the same exact inputs.
Checks (derived, not tuned):
  * torch in float32 (target binary32) passes assert-close with torch.testing's float32
    defaults, and the reported max |c - o| matches the recomputation;
  * torch in float64 agrees with the oracle (target binary64) within 64 ulps on every element
    whose magnitude is at least 1/64 of max|v| (a few roundings per dot product and sum);
  * torch in bfloat16 graded against the truth with the float32 computation rounded to bfloat16
    as the baseline (FlashAttention's upcast reference): the report's max |c - o|, max |b - o|
    and k_needed agree with the same figures recomputed here from the binary64 reference
    (which is within half an ulp of the truth) to a relative 1e-6; the flash and torch-sdpa
    verdicts follow from those figures; exit code 1 exactly when the rule fails;
  * assert-close's violation count equals the count recomputed here with torch.testing's
    default bfloat16 tolerances (rtol 1.6e-2, atol 1e-5) from the reference;
  * negative controls: torch with the window off by one, without the sink, without the softcap,
    with top-left instead of bottom-right causal alignment, and with the GQA heads grouped the
    wrong way (head h using kv head h % h_kv) must each fail --rule ulp --max-ulp 64 in float64.
Exit 0 pass, 1 fail, 77 skip (no NumPy/torch).
"""
import json, os, subprocess, sys, tempfile

try:
    import numpy as np
    import torch
except ImportError as e:
    print("SKIP:", e)
    sys.exit(77)

BIN = sys.argv[1]
SEED = int(os.environ.get("ATTNCERT_SEED", "20261201"))
print("seed", SEED, "(set ATTNCERT_SEED to override)")
rng = np.random.default_rng(SEED)
fails = 0


def check(cond, msg):
    global fails
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        fails += 1


def bf16(a):
    return torch.tensor(a, dtype=torch.float32).bfloat16().float().numpy()


B, HQ, HKV, NQ, NK, D = 2, 4, 2, 24, 40, 16
Q = bf16(rng.standard_normal((B, HQ, NQ, D)))
K = bf16(rng.standard_normal((B, HKV, NK, D)))
V = bf16(rng.standard_normal((B, HKV, NK, D)))
SLOPES = np.array([0.5, 0.25, 0.125, 0.0625])
SINK = bf16(rng.standard_normal(HQ))
BIAS = bf16(0.5 * rng.standard_normal((1, HQ, NQ, NK)))
KEEP = rng.random((B, HQ, NQ, NK)) > 0.25
WINDOW = (7, 0)
SOFTCAP = 5.0
P_DROP = 0.25

COMBOS = {
    # name: (variant keywords of torch_attention, attncert flags)
    "GQA + bottom-right causal + window + softcap + ALiBi + sink":
        (dict(bottom_right=True, window=WINDOW, softcap=SOFTCAP, alibi=True, sink=True),
         ["--mask", "causal-bottom-right", "--window", f"{WINDOW[0]},{WINDOW[1]}", "--softcap", "5",
          "--alibi-slopes", "{slopes}", "--sink", "{sink}"]),
    "GQA + bias (1hss) + dropout 0.25":
        (dict(bias=True, dropout=True), ["--bias", "{bias}", "--dropout-mask", "{keep}", "--dropout-p", "0.25"]),
}


def torch_attention(dtype, bottom_right=False, window=None, softcap=None, alibi=False, sink=False, bias=False,
                    dropout=False, mistake=None):
    q, k, v = (torch.tensor(x, dtype=torch.float64).to(dtype) for x in (Q, K, V))
    g = HQ // HKV
    if mistake == "gqa":  # head h uses kv head h % h_kv instead of h // g
        k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)
    else:
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    s = (q @ k.transpose(-1, -2)) * (1.0 / np.sqrt(D))
    if softcap is not None and mistake != "softcap":
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(NQ).view(-1, 1)
    j = torch.arange(NK).view(1, -1)
    shift = 0 if mistake == "topleft" else NK - NQ
    if alibi:
        sl = torch.tensor(SLOPES, dtype=torch.float64).to(dtype).view(1, HQ, 1, 1)
        s = s - sl * (i + NK - NQ - j).abs().to(dtype)
    if bias:
        s = s + torch.tensor(BIAS, dtype=torch.float64).to(dtype)
    allowed = torch.ones(NQ, NK, dtype=torch.bool)
    if bottom_right:
        allowed &= j <= i + shift
    if window is not None:
        left = window[0] + (1 if mistake == "window" else 0)
        allowed &= j >= i + NK - NQ - left
        allowed &= j <= i + NK - NQ + window[1]
    s = s.masked_fill(~allowed, float("-inf"))
    if sink and mistake != "sink":
        col = torch.tensor(SINK, dtype=torch.float64).to(dtype).view(1, HQ, 1, 1).expand(B, HQ, NQ, 1)
        p = torch.softmax(torch.cat([s, col], dim=-1), dim=-1)[..., :NK]
    else:
        p = torch.softmax(s, dim=-1)
    if dropout:
        p = p.masked_fill(~torch.tensor(KEEP), 0.0) / (1 - P_DROP)
    return (p @ v).double().numpy()


def run(args):
    r = subprocess.run([BIN, "oracle"] + args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


with tempfile.TemporaryDirectory() as td:
    f = lambda name: os.path.join(td, name)
    for name, arr in [("q", Q), ("k", K), ("v", V), ("sink", SINK), ("bias", BIAS)]:
        np.save(f(name + ".npy"), arr.astype(np.float32))
    np.save(f("slopes.npy"), SLOPES)
    np.save(f("keep.npy"), KEEP)
    base = ["--q", f("q.npy"), "--k", f("k.npy"), "--v", f("v.npy")]

    for combo, (kw, flags) in COMBOS.items():
        flags = [x.format(slopes=f("slopes.npy"), sink=f("sink.npy"), bias=f("bias.npy"), keep=f("keep.npy"))
                 for x in flags]
        # The truth to binary64 (within half an ulp of the exact value).
        rc, out, err = run(base + flags + ["--target", "binary64", "--write-reference", f("ref.npy")])
        check(rc == 0, f"{combo}: reference: exit {rc} {err.strip()}")
        if rc != 0:
            continue
        ref = np.load(f("ref.npy"))
        # float64 torch: agreement within 64 ulps where |o| >= max|v|/64.
        c64 = torch_attention(torch.float64, **kw)
        np.save(f("c64.npy"), c64)
        rc, out, err = run(base + flags + ["--target", "binary64", "--candidate", f("c64.npy"), "--format", "json"])
        rep = json.loads(out) if rc == 0 else None
        big = np.abs(ref) >= np.abs(V).max() / 64
        ulp = np.abs(c64 - ref) / np.spacing(np.abs(ref))
        check(rc == 0 and float(ulp[big].max()) <= 64,
              f"{combo}: torch float64 within 64 ulps where |o| >= max|v|/64 (max {ulp[big].max():.1f} ulp, "
              f"oracle says max {rep['candidates'][0]['max_ulp'] if rep else '?'} ulp over all)")
        for mistake in ["window", "sink", "softcap", "topleft", "gqa"]:
            if mistake == "window" and "window" not in kw: continue
            if mistake in ("sink", "softcap", "topleft") and not kw.get(mistake if mistake != "topleft" else "bottom_right"):
                continue
            bad = torch_attention(torch.float64, mistake=mistake, **kw)
            np.save(f("bad.npy"), bad)
            rc, out, err = run(base + flags + ["--target", "binary64", "--candidate", f("bad.npy"), "--rule", "ulp",
                                               "--max-ulp", "64", "--format", "json"])
            mu = json.loads(out)["candidates"][0]["max_ulp"] if out else "?"
            check(rc == 1, f"{combo}: control '{mistake}' caught: exit {rc}, max {mu} ulp")
        # float32 torch, target binary32: torch.testing's float32 tolerances (rtol 1.3e-6, atol 1e-5)
        # hold for a float32 computation whose error is a few float32 roundings of O(max|v|) values.
        c32 = torch_attention(torch.float32, **kw)
        np.save(f("c32.npy"), c32.astype(np.float32))
        rc, out, err = run(base + flags + ["--target", "binary32", "--candidate", f("c32.npy"), "--rule", "assert-close",
                                           "--format", "json"])
        c = json.loads(out)["candidates"][0] if rc in (0, 1) else None
        e32 = float(np.abs(c32 - ref).max())
        check(rc == 0 and abs(c["max_abs_error"] - e32) <= 1e-6 * e32,
              f"{combo}: torch float32 passes assert-close (exit {rc}), max |c - o| "
              f"{c['max_abs_error'] if c else '?'} = recomputed {e32:.6g}")
        # bfloat16 torch against the truth, baseline = float32 rounded to bfloat16.
        cb = torch_attention(torch.bfloat16, **kw)
        b32 = torch.tensor(torch_attention(torch.float32, **kw)).bfloat16().double().numpy()
        np.save(f("cb.npy"), cb.astype(np.float32))
        np.save(f("b.npy"), b32.astype(np.float32))
        err_c, err_b = np.abs(cb - ref), np.abs(b32 - ref)
        for rule in ["flash", "torch-sdpa", "assert-close", "ulp"]:
            extra = ["--baseline", f("b.npy")] if rule in ("flash", "torch-sdpa") else []
            if rule == "ulp":
                extra = ["--max-ulp", "16"]
            rc, out, err = run(base + flags + ["--target", "bfloat16", "--candidate", f("cb.npy"), "--rule", rule,
                                               "--format", "json"] + extra)
            if rc not in (0, 1):
                check(False, f"{combo}: bf16 --rule {rule}: exit {rc} {err.strip()}")
                continue
            c = json.loads(out)["candidates"][0]
            v = c["rule"]
            close = lambda a, b: abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-300)
            check(close(c["max_abs_error"], float(err_c.max())),
                  f"{combo}: bf16 max |c - o| {c['max_abs_error']:.6g} = recomputed {err_c.max():.6g}")
            if rule == "flash":
                k_needed = float(err_c.max() / err_b.max())
                check(close(v["baseline_max_abs_error"], float(err_b.max())) and close(v["k_needed"], k_needed),
                      f"{combo}: flash: max |b - o| {v['baseline_max_abs_error']:.6g}, k needed {v['k_needed']:.4g} "
                      f"(recomputed {k_needed:.4g})")
                want = err_c.max() <= 2 * err_b.max()
                check((v["verdict"] == "pass") == want and rc == (0 if want else 1),
                      f"{combo}: flash verdict {v['verdict']} (exit {rc}), margin {v['margin']:.3g}")
            if rule == "torch-sdpa":
                check(v["fudge_needed"] > 0 and (v["verdict"] == "pass") == (v["fudge_needed"] <= 4) and
                      rc == (0 if v["verdict"] == "pass" else 1),
                      f"{combo}: torch-sdpa verdict {v['verdict']}, fudge needed {v['fudge_needed']:.4g}")
            if rule == "assert-close":
                viol = int(np.sum(err_c > 1e-5 + 1.6e-2 * np.abs(ref)))
                check(v["violations"] == viol and (rc == 1) == (viol > 0),
                      f"{combo}: assert-close violations {v['violations']} = recomputed {viol} (exit {rc})")
            if rule == "ulp":
                check((v["verdict"] == "pass") == (c["max_ulp"] <= 16) and rc == (0 if c["max_ulp"] <= 16 else 1),
                      f"{combo}: ulp verdict {v['verdict']} at max {c['max_ulp']:.4g} ulp (bound 16)")

print(f"{fails} failure(s)")
sys.exit(1 if fails else 0)
