#!/usr/bin/python3
"""PyTorch's autograd gradients of the attention variants graded by the oracle's backward pass
(`attncert oracle --grad-out dO.npy --candidate-grads PREFIX`), under each rule.

Usage: oracle_backward_torch.py ATTNCERT_BINARY
The variants are written in torch the way kernel test suites write their references
(FlashAttention's attention_ref): plain, causal, GQA (h_q = 4, h_kv = 2, K/V heads repeated),
bottom-right causal + window, softcap C*tanh(s/C), ALiBi, an additive bias (dBias), a sink column
in the softmax (dSink), a dropout keep-mask scaled by 1/(1 - p).  torch.autograd.grad gives dQ,
dK, dV (dBias, dSink) for a random dO, in float64, float32 and bfloat16; inputs and dO are
bfloat16 values (stored as float32), so every precision differentiates the same exact function.
Checks (every threshold measured, see the constants below, none tuned to a seed):
  * torch float64 against the binary64 truth: |c - o| <= 2^-48·max|g| on every element of dq, dk,
    dv (dbias, dsink), graded by --rule assert-close (rtol 0).  No ulp bound holds for gradients:
    exact zeros (cancellation in P∘(dP − D)) come out of float64 arithmetic as ~1e-17;
  * every figure the report gives (max |c - o|, max |b - o|, k needed, fudge needed) agrees with
    the same figure recomputed here from the written binary64 references (within half an ulp of
    the truth) to a relative 1e-6 (1e-5 for the fudge), and each verdict follows from them; the
    exit status is 1 exactly when some gradient fails its rule;
  * float32 under --rule flash (k = 3) against FlashAttention's baseline (the same math in float32
    with the scale applied to K, reorder_ops) and against float64 rounded to float32; bfloat16
    under --rule torch-sdpa (PyTorch's fudge per gradient) against float32 rounded to bfloat16 and
    under --rule flash against bfloat16 reordered; the k and fudge needed stay within their
    measured bounds, and at the default seed the published rules (k = 3, PyTorch's fudge) pass;
  * float32 passes assert-close with float32's defaults; --rerun-grads: a second, identical run
    has spread 0, a run with one dq element moved one ulp reports that element;
  * negative controls that must fail the float64 gate: dS = P∘dP without the D term (dq), the
    GQA reduction over the wrong heads (dk), the softcap derivative left out (dq); for a loss of
    the LSE only (dO = 0, dLSE random) the written dV is exactly 0 and torch's dV (exactly 0)
    passes, while a kernel that ignores dLSE (dq = 0) fails and dV = 1e-30 fails --rule ulp;
  * bad input: a gradient of the wrong shape, a missing file (dv; dsink with --sink),
    --candidate-grads without --grad-out, flash without --baseline-grads, --rerun-grads without
    --candidate-grads: exit 2, one line on stderr, no file written; NaN in a gradient where the
    truth is finite fails the rule (exit 1), it is not bad input.
Exit 0 pass, 1 fail, 77 skip (no NumPy/torch).
"""
import json, os, subprocess, sys, tempfile, time

try:
    import numpy as np
    import torch
except ImportError as e:
    print("SKIP:", e)
    sys.exit(77)

BIN = sys.argv[1]
SEED = int(os.environ.get("ATTNCERT_SEED", "20261203"))
print("seed", SEED, "(set ATTNCERT_SEED to override)")
rng = np.random.default_rng(SEED)
fails = 0
T0 = time.time()

# Thresholds, measured over seeds 1..20 (9 variants each) with this script's shapes:
#  * torch float64 against the binary64 truth: no ulp bound holds on every element (at seed 15 an
#    exact zero of dq, k_0 = k_1 in a causal row of two keys, comes out as 2.8e-17; cancellation in
#    P∘(dP − D) leaves elements far below their terms: up to 1.2e5 ulps elsewhere), while
#    max |c − o| <= 7.6·2^-53·max|o| and <= 133 ulps where |o| >= max|o|/64.  Graded by assert-close
#    with rtol 0 and atol = 2^-48·max|g| (32 binary64 ulps of the largest gradient element, g the
#    float64 gradients of the call: a factor 4 above the measured 7.6; the largest observed/threshold
#    ratio over the 20 seeds was 0.21);
#  * k needed by float32 / bfloat16 against FlashAttention's baseline (the same math in the same
#    dtype with the scale on K): at most 3.83 (float32 dsink; 5 % of the seeds above 3) and 2.67
#    (bfloat16): bound 8;  against float64 rounded to float32 (a correctly rounded baseline, error
#    <= 0.5 ulp): median 4 to 9, at most 76 (dsink): bound 200;
#  * fudge needed by bfloat16 under torch-sdpa against float32 rounded to bfloat16: at most 4.7
#    (dk, allowed 16), 2.9 for dv (allowed 4): bound 10.
# STRICT (the default seed, no ATTNCERT_SEED): the published rules themselves must pass too: float32
# flash against float32 reordered (failed on 2 of the 20 seeds: seed 9 gqa dk, k needed 3.4; seed 13
# dsink, 3.83), bfloat16 torch-sdpa and flash (passed on all 20).  With another seed only the bounds
# above are required.
RTOL64, ATOL64 = 0.0, 2.0**-48
K_MAX_REORDERED, K_MAX_ROUNDED, FUDGE_MAX = 8, 200, 10
FUDGE = {"dq": 180, "dk": 16, "dv": 4, "dbias": 45, "dsink": 45}
STRICT = "ATTNCERT_SEED" not in os.environ


def check(cond, msg):
    global fails
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        fails += 1


def bf16(a):
    return torch.tensor(a, dtype=torch.float32).bfloat16().float().numpy()


B, HQ, HKV, NQ, NK, D = 2, 4, 2, 12, 20, 12
Q = bf16(rng.standard_normal((B, HQ, NQ, D)))
K4, V4 = bf16(rng.standard_normal((B, HQ, NK, D))), bf16(rng.standard_normal((B, HQ, NK, D)))
K2, V2 = bf16(rng.standard_normal((B, HKV, NK, D))), bf16(rng.standard_normal((B, HKV, NK, D)))
DO = bf16(rng.standard_normal((B, HQ, NQ, D)))
DLSE = bf16(rng.standard_normal((B, HQ, NQ)))
SLOPES = np.array([0.5, 0.25, 0.125, 0.0625])
SINK = bf16(rng.standard_normal(HQ))
BIAS = bf16(0.5 * rng.standard_normal((1, HQ, NQ, NK)))
KEEP = rng.random((B, HQ, NQ, NK)) > 0.25
WINDOW = (5, 0)
SOFTCAP = 2.0  # small enough that tanh saturates on part of the scores (its derivative matters)
P_DROP = 0.25

# name: (torch keywords, attncert flags); "gqa" selects K2/V2
VARIANTS = {
    "plain": (dict(), []),
    "causal": (dict(causal=True), ["--mask", "causal"]),
    "gqa": (dict(gqa=True), []),
    "gqa bottom-right causal + window": (dict(gqa=True, bottom_right=True, window=WINDOW),
                                         ["--mask", "causal-bottom-right", "--window", f"{WINDOW[0]},{WINDOW[1]}"]),
    "softcap": (dict(softcap=SOFTCAP), ["--softcap", "2"]),
    "alibi + causal": (dict(alibi=True, causal=True), ["--alibi-slopes", "{slopes}", "--mask", "causal"]),
    "bias (dbias)": (dict(bias=True), ["--bias", "{bias}"]),
    "sink (dsink)": (dict(sink=True), ["--sink", "{sink}"]),
    "dropout": (dict(dropout=True), ["--dropout-mask", "{keep}", "--dropout-p", "0.25"]),
}


def torch_grads(dtype, gqa=False, causal=False, bottom_right=False, window=None, softcap=None, alibi=False,
                bias=False, sink=False, dropout=False, mistake=None, lse_only=False, reorder=False):
    """torch.autograd.grad of the variant in `dtype`: dict name -> float64 numpy array.  reorder: the
    scale is applied to K instead of the scores (FlashAttention's reorder_ops, "to estimate the
    numerical error from operation reordering")."""
    kk, vv = (K2, V2) if gqa else (K4, V4)
    leaf = lambda x: torch.tensor(x, dtype=torch.float64).to(dtype).requires_grad_()
    q, k, v = leaf(Q), leaf(kk), leaf(vv)
    ins = {"dq": q, "dk": k, "dv": v}
    g = HQ // k.shape[1]
    kr, vr = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    if mistake == "gqa":  # dK reduced over the wrong heads: dk_h = sum of the query heads h' with h' % h_kv == h
        kr = kr.detach().requires_grad_()
    if reorder:
        s = q @ (kr * (1.0 / np.sqrt(D))).transpose(-1, -2)
    else:
        s = (q @ kr.transpose(-1, -2)) * (1.0 / np.sqrt(D))
    if softcap is not None:
        t = softcap * torch.tanh(s / softcap)
        s = s + (t - s).detach() if mistake == "softcap" else t  # straight-through: derivative 1 instead of 1 - tanh²
    i, j = torch.arange(NQ).view(-1, 1), torch.arange(NK).view(1, -1)
    if alibi:
        s = s - torch.tensor(SLOPES, dtype=torch.float64).to(dtype).view(1, HQ, 1, 1) * (i + NK - NQ - j).abs().to(dtype)
    if bias:
        bt = leaf(BIAS)
        ins["dbias"] = bt
        s = s + bt
    allowed = torch.ones(NQ, NK, dtype=torch.bool)
    if causal:
        allowed &= j <= i
    if bottom_right:
        allowed &= j <= i + NK - NQ
    if window is not None:
        allowed &= (j >= i + NK - NQ - window[0]) & (j <= i + NK - NQ + window[1])
    s = s.masked_fill(~allowed, float("-inf"))
    if sink:
        st = leaf(SINK)
        ins["dsink"] = st
        col = st.view(1, HQ, 1, 1).expand(B, HQ, NQ, 1)
        full = torch.cat([s, col], dim=-1)
        lse = torch.logsumexp(full, dim=-1)
        p = torch.softmax(full, dim=-1)[..., :NK]
    else:
        lse = torch.logsumexp(s, dim=-1)
        p = torch.softmax(s, dim=-1)
    if mistake == "no_d":  # dS = P∘dP: the softmax's Jacobian without its -P·Pᵀ part
        p = p.detach() * torch.exp(s - s.detach())
    if dropout:
        p = p.masked_fill(~torch.tensor(KEEP), 0.0) / (1 - P_DROP)
    out = p @ vr
    if mistake == "gqa":
        ins["dk_rep"] = kr
    if lse_only:
        loss = (out * 0).sum() + (lse * torch.tensor(DLSE, dtype=torch.float64).to(dtype)).sum()
        grads = torch.autograd.grad(loss, list(ins.values()), allow_unused=True)
    else:
        grads = torch.autograd.grad(out, list(ins.values()), torch.tensor(DO, dtype=torch.float64).to(dtype),
                                    allow_unused=True)
    res = {n: gr.double().numpy() for n, gr in zip(ins, grads) if gr is not None}
    if mistake == "gqa":  # query head h belongs to kv head h // g; sum instead over the heads h with h % h_kv == kv
        res["dk"] = res.pop("dk_rep").reshape(B, g, HQ // g, NK, D).sum(axis=1)
    return res


def save_set(prefix, grads, dtype):
    for n, a in grads.items():
        np.save(f"{prefix}.{n}.npy", a.astype(dtype))


def run(args):
    r = subprocess.run([BIN, "oracle"] + args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def rel_close(a, b, tol=1e-6):
    return abs(a - b) <= tol * max(abs(a), abs(b)) or a == b


def grads_of(rep, cand=0):
    return rep["backward_grading"]["candidates"][cand]["gradients"]


with tempfile.TemporaryDirectory() as td:
    f = lambda name: os.path.join(td, name)
    for name, arr in [("q", Q), ("k4", K4), ("v4", V4), ("k2", K2), ("v2", V2), ("do", DO), ("dlse", DLSE),
                      ("sink", SINK), ("bias", BIAS)]:
        np.save(f(name + ".npy"), arr.astype(np.float32))
    np.save(f("slopes.npy"), SLOPES)
    np.save(f("keep.npy"), KEEP)
    np.save(f("zeros.npy"), np.zeros_like(DO, dtype=np.float32))
    worst64, worst64_ratio = {}, {}

    def base_args(kw, flags, grad_out="do.npy"):
        kv = ("k2.npy", "v2.npy") if kw.get("gqa") else ("k4.npy", "v4.npy")
        flags = [x.format(slopes=f("slopes.npy"), sink=f("sink.npy"), bias=f("bias.npy"), keep=f("keep.npy")) for x in flags]
        return ["--q", f("q.npy"), "--k", f(kv[0]), "--v", f(kv[1]), "--grad-out", f(grad_out)] + flags

    def tol64(grads):
        """The float64 gate: |c - o| <= 2^-48 max|g| for every element of every gradient."""
        M = max(float(np.abs(a).max()) for a in grads.values())
        return ["--rule", "assert-close", "--rtol", repr(RTOL64), "--atol", repr(ATOL64 * M)]

    def flash_call(label, args, target, cand, base, k_max):
        """--rule flash (k = 3) of `cand` with baseline `base`: figures and verdicts checked against the
        recomputation from the binary64 references `ref`; k needed <= k_max (measured).  The verdicts."""
        save_set(f("c"), cand, np.float32)
        save_set(f("b"), base, np.float32)
        rc, out, err = run(args + ["--target", target, "--candidate-grads", f("c"), "--rule", "flash", "--baseline-grads",
                                   f("b"), "--format", "json"])
        if rc not in (0, 1):
            check(False, f"{label}: exit {rc} {err.strip()}")
            return {}
        verdicts = {}
        for n, g in grads_of(json.loads(out)).items():
            c_err, b_err = float(np.abs(cand[n] - ref[n]).max()), float(np.abs(base[n] - ref[n]).max())
            v = g["rule"]
            decided = abs(c_err - 3 * b_err) > 1e-6 * c_err
            check(rel_close(g["max_abs_error"], c_err) and rel_close(v["baseline_max_abs_error"], b_err) and v["k"] == 3
                  and (not decided or (v["verdict"] == "pass") == (c_err <= 3 * b_err)) and v["k_needed"] <= k_max,
                  f"{label} {n}: max |c - o| {c_err:.3g} (reported {g['max_abs_error']:.3g}), max |b - o| {b_err:.3g}, "
                  f"k needed {v['k_needed']:.3g} (<= {k_max}): {v['verdict']}")
            verdicts[n] = v["verdict"]
        check((rc == 1) == ("fail" in verdicts.values()), f"{label}: exit {rc} follows the verdicts")
        return verdicts

    def sdpa_call(label, args, cand, base, fudge_max):
        """--rule torch-sdpa in bfloat16: fudge per gradient, fudge needed recomputed, <= fudge_max (measured)."""
        save_set(f("c"), cand, np.float32)
        save_set(f("b"), base, np.float32)
        rc, out, err = run(args + ["--target", "bfloat16", "--candidate-grads", f("c"), "--rule", "torch-sdpa",
                                   "--baseline-grads", f("b"), "--format", "json"])
        if rc not in (0, 1):
            check(False, f"{label}: exit {rc} {err.strip()}")
            return {}
        verdicts = {}
        for n, g in grads_of(json.loads(out)).items():
            v, o = g["rule"], np.abs(ref[n])
            d, db = np.abs(cand[n] - ref[n]), np.abs(base[n] - ref[n])
            A = max(float(db.max()), 1e-3)  # test_transformers.py default_atol / default_rtol for bfloat16
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = np.where(o > 0, db / o, np.where(db == 0, 1.6e-2, np.finfo(np.float64).max))
            R = max(float(rel.max()), 1.6e-2)
            with np.errstate(over="ignore"):
                f1 = float((d / (A + R * o)).max())
            check(v["fudge"] == FUDGE[n] and (R * FUDGE[n] > 1e30 or rel_close(v["fudge_needed"], f1, 1e-5))
                  and v["fudge_needed"] <= fudge_max,
                  f"{label} {n}: fudge {v['fudge']:g}, fudge needed {v['fudge_needed']:.3g} (recomputed {f1:.3g}, "
                  f"<= {fudge_max}): {v['verdict']}")
            verdicts[n] = v["verdict"]
        check((rc == 1) == ("fail" in verdicts.values()), f"{label}: exit {rc} follows the verdicts")
        return verdicts

    for variant, (kw, flags) in VARIANTS.items():
        args = base_args(kw, flags)
        g64, g32, gbf = (torch_grads(dt, **kw) for dt in (torch.float64, torch.float32, torch.bfloat16))
        g32r, gbfr = (torch_grads(dt, reorder=True, **kw) for dt in (torch.float32, torch.bfloat16))
        # float64 autograd against the binary64 truth (the references are written for the checks below):
        # assert-close with rtol 0 and atol 2^-48 max|g| (the measurement above).
        save_set(f("t64"), g64, np.float64)
        rc, out, err = run(args + ["--target", "binary64", "--write-grad-references", f("ref"), "--candidate-grads",
                                   f("t64"), "--format", "json"] + tol64(g64))
        if rc not in (0, 1):
            check(False, f"{variant}: binary64 call: exit {rc} {err.strip()}")
            continue
        gr = grads_of(json.loads(out))
        check(set(gr) == set(g64), f"{variant}: graded gradients {sorted(gr)}")
        for n in gr:
            worst64[n] = max(worst64.get(n, 0), gr[n]["max_ulp"])
            worst64_ratio[n] = max(worst64_ratio.get(n, 0), gr[n]["rule"]["ratio"])
        check(rc == 0 and all(gr[n]["rule"]["verdict"] == "pass" for n in gr),
              f"{variant}: torch float64 passes assert-close (rtol 0, atol 2^-48 max|g|): ratio " +
              ", ".join(f"{n} {gr[n]['rule']['ratio']:.3g}" for n in gr) + "; max ulp " +
              ", ".join(f"{n} {gr[n]['max_ulp']:.3g}" for n in gr))
        ref = {n: np.load(f"{f('ref')}.{n}.npy") for n in g64}
        r32 = lambda g: {n: a.astype(np.float32).astype(np.float64) for n, a in g.items()}
        rbf = lambda g: {n: bf16(a).astype(np.float64) for n, a in g.items()}
        # float32: flash against the float64 gradients rounded to float32 (a correctly rounded baseline),
        # and against FlashAttention's own baseline, the same math in float32 reordered.
        flash_call(f"{variant}: float32 vs float64 rounded", args, "binary32", g32, r32(g64), K_MAX_ROUNDED)
        v = flash_call(f"{variant}: float32 vs float32 reordered", args, "binary32", g32, g32r, K_MAX_REORDERED)
        if STRICT:
            check(all(x == "pass" for x in v.values()), f"{variant}: float32 passes flash against float32 reordered")
        # bfloat16: torch-sdpa against float32 rounded to bfloat16, flash against bfloat16 reordered.
        v = sdpa_call(f"{variant}: bfloat16 torch-sdpa vs float32 rounded", args, gbf, rbf(g32), FUDGE_MAX)
        v2 = flash_call(f"{variant}: bfloat16 vs bfloat16 reordered", args, "bfloat16", gbf, gbfr, K_MAX_REORDERED)
        if STRICT:
            check(all(x == "pass" for x in list(v.values()) + list(v2.values())),
                  f"{variant}: bfloat16 passes torch-sdpa and flash")

    print("torch float64, max ulps over the variants:", {n: float(f"{u:.3g}") for n, u in worst64.items()},
          "assert-close ratios:", {n: float(f"{u:.3g}") for n, u in worst64_ratio.items()})

    # ---- assert-close on float32, --rerun-grads and the text report (plain) --------------------------------
    kw, flags = VARIANTS["plain"]
    args = base_args(kw, flags)
    g32 = torch_grads(torch.float32, **kw)
    save_set(f("t32"), g32, np.float32)
    save_set(f("t32b"), g32, np.float32)
    rc, out, err = run(args + ["--target", "binary32", "--candidate-grads", f("t32"), "--rule", "assert-close",
                               "--rerun-grads", f("t32b"), "--format", "json"])
    rep = json.loads(out) if rc in (0, 1) else {}
    gr = grads_of(rep) if rep else {}
    check(rc == 0 and all(g["rule"]["verdict"] == "pass" and g["rule"]["rtol"] == 1.3e-6 for g in gr.values()),
          f"plain: float32 passes assert-close with float32's defaults (exit {rc})")
    check(all(g["rerun"]["differing"] == 0 for g in gr.values()) and len(gr) == 3,
          "plain: an identical second run (--rerun-grads) has spread 0 on dq, dk, dv")
    g32b = {n: a.copy() for n, a in g32.items()}
    g32b["dq"][1, 2, 3, 4] = np.nextafter(np.float32(g32b["dq"][1, 2, 3, 4]), np.float32(np.inf))
    save_set(f("t32b"), g32b, np.float32)
    rc, out, err = run(args + ["--target", "binary32", "--candidate-grads", f("t32"), "--rerun-grads", f("t32b"),
                               "--format", "json"])
    gr = grads_of(json.loads(out)) if rc == 0 else {}
    check(rc == 0 and gr["dq"]["rerun"]["differing"] == 1 and gr["dq"]["rerun"]["index"] == [1, 2, 3, 4]
          and gr["dk"]["rerun"]["differing"] == 0, "plain: a rerun with one dq element moved one ulp reports it")
    rc, out, err = run(args + ["--target", "binary32", "--candidate-grads", f("t32"), "--rerun-grads", f("t32b")])
    check(rc == 0 and "gradient candidate g1.dq" in out and "rerun (" in out and "backward grading rule ulp" in out,
          "plain: the text report has the backward grading section")

    # ---- negative controls: must fail the float64 gate the correct gradients pass ---------------------------
    for variant, mistake, name in [("plain", "no_d", "dq"), ("gqa", "gqa", "dk"), ("softcap", "softcap", "dq")]:
        kw, flags = VARIANTS[variant]
        bad = torch_grads(torch.float64, mistake=mistake, **kw)
        save_set(f("bad"), bad, np.float64)
        rc, out, err = run(base_args(kw, flags) + ["--target", "binary64", "--candidate-grads", f("bad"), "--format", "json"]
                           + tol64(torch_grads(torch.float64, **kw)))
        g = grads_of(json.loads(out))[name] if rc in (0, 1) else None
        check(rc == 1 and g is not None and g["rule"]["verdict"] == "fail",
              f"negative control {mistake} ({variant}): exit {rc}, {name} fails, ratio {g['rule']['ratio'] if g else '?':.3g}")

    # ---- a loss of the LSE only: dV is exactly 0 -----------------------------------------------------------
    kw, flags = VARIANTS["plain"]
    args = base_args(kw, flags, grad_out="zeros.npy") + ["--grad-lse", f("dlse.npy"), "--target", "binary64"]
    glse = torch_grads(torch.float64, lse_only=True, **kw)
    save_set(f("tl"), glse, np.float64)
    rc, out, err = run(args + ["--write-grad-references", f("refl"), "--candidate-grads", f("tl"), "--format", "json"]
                       + tol64(glse))
    gr = grads_of(json.loads(out)) if rc in (0, 1) else {}
    dv_ref = np.load(f("refl.dv.npy")) if rc in (0, 1) else None
    check(dv_ref is not None and np.all(dv_ref == 0) and np.all(glse["dv"] == 0),
          "LSE-only loss: the reference dV and torch's dV are exactly 0")
    check(rc == 0 and gr["dv"]["max_abs_error"] == 0 and gr["dv"]["max_ulp"] == 0 and
          all(g["rule"]["verdict"] == "pass" for g in gr.values()),
          f"LSE-only loss: torch float64 passes, its dV exactly (dq max {gr['dq']['max_ulp'] if gr else '?':.3g} ulp)")
    save_set(f("tl"), {**glse, "dq": 0 * glse["dq"], "dk": 0 * glse["dk"]}, np.float64)
    rc, out, err = run(args + ["--candidate-grads", f("tl"), "--format", "json"] + tol64(glse))
    gr = grads_of(json.loads(out)) if rc in (0, 1) else {}
    check(rc == 1 and gr["dq"]["rule"]["verdict"] == "fail", f"LSE-only loss: a kernel that ignores dLSE fails (exit {rc})")
    # dV = 1e-30 where the truth is exactly 0: an abs/rel tolerance cannot see it, ulps of 0 do
    save_set(f("tl"), {**glse, "dv": glse["dv"] + 1e-30}, np.float64)
    rc, out, err = run(args + ["--candidate-grads", f("tl"), "--max-ulp", "1e6", "--format", "json"])
    gr = grads_of(json.loads(out)) if rc in (0, 1) else {}
    check(rc == 1 and gr["dv"]["rule"]["verdict"] == "fail" and gr["dv"]["max_abs_error"] == 1e-30,
          f"LSE-only loss: dV = 1e-30 instead of 0 fails --rule ulp (exit {rc}, {gr['dv']['max_ulp'] if gr else '?':.3g} ulp)")

    # ---- bad input: exit 2, one line, nothing written; NaN is a failing grade -------------------------------
    kw, flags = VARIANTS["plain"]
    args = base_args(kw, flags)
    g64 = torch_grads(torch.float64, **kw)
    save_set(f("good"), g64, np.float64)
    save_set(f("wrong"), {**g64, "dk": g64["dk"][..., :-1]}, np.float64)
    save_set(f("part"), {"dq": g64["dq"], "dk": g64["dk"]}, np.float64)
    outs = ["--write-grad-references", f("w"), "--out", f("w.json")]
    cases = [
        ("a gradient of the wrong shape", args + ["--candidate-grads", f("wrong")] + outs, "wrong.dk.npy"),
        ("a missing gradient file", args + ["--candidate-grads", f("part")] + outs, "part.dv.npy is missing"),
        ("--candidate-grads without --grad-out",
         [x for x in args if x not in ("--grad-out", f("do.npy"))] + ["--candidate-grads", f("good"), "--out", f("w.json")],
         "--grad-out"),
        ("flash without --baseline-grads", args + ["--candidate-grads", f("good"), "--rule", "flash"] + outs,
         "--baseline-grads"),
        ("--rerun-grads without --candidate-grads", args + ["--rerun-grads", f("good")] + outs, "--candidate-grads"),
        ("a sink's gradient missing", args + ["--sink", f("sink.npy"), "--candidate-grads", f("good")] + outs,
         "good.dsink.npy is missing"),
    ]
    for what, a, needle in cases:
        rc, out, err = run(a)
        left = [p for p in os.listdir(td) if p.startswith("w.") or p.startswith(".w.")]
        check(rc == 2 and len(err.strip().splitlines()) == 1 and needle in err and not left,
              f"bad input, {what}: exit {rc}, '{err.strip()}'" + (f", left {left}" if left else ""))
    nan = {**g64, "dq": g64["dq"].copy()}
    nan["dq"][0, 0, 0, 0] = np.nan
    save_set(f("nan"), nan, np.float64)
    rc, out, err = run(args + ["--candidate-grads", f("nan"), "--format", "json"] + tol64(g64))
    g = grads_of(json.loads(out))["dq"] if rc in (0, 1) else None
    check(rc == 1 and g["nonfinite_where_truth_finite"] == 1 and g["rule"]["verdict"] == "fail",
          f"NaN in dq where the truth is finite fails the rule (exit {rc})")

print(f"{time.time() - T0:.1f} s")
print("FAILED" if fails else "PASSED", fails)
sys.exit(1 if fails else 0)
