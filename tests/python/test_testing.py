"""attncert.testing: the assertion helpers pass what is close, fail what is not with an actionable
message, grade torch's forward and autograd outputs under every rule, and cache references."""
import os

import numpy as np
import pytest

import attncert
from attncert import testing

SEED = int(os.environ.get("ATTNCERT_SEED", "20261202"))


def qkv(dtype=np.float64, b=1, hq=2, hkv=2, n=9, d=8):
    r = np.random.default_rng(SEED)
    return (r.standard_normal((b, hq, n, d)).astype(dtype), r.standard_normal((b, hkv, n, d)).astype(dtype),
            r.standard_normal((b, hkv, n, d)).astype(dtype))


def test_reference_passes_and_perturbation_fails_with_the_worst_index():
    q, k, v = qkv(np.float32)
    out = attncert.attention(q, k, v, causal="top-left")
    g = testing.assert_attention_close(out, q, k, v, max_ulp=0.5, causal="top-left")
    assert g["max_ulp"] <= 0.5
    bad = out.copy()
    bad[0, 1, 4, 2] = np.nextafter(np.nextafter(np.nextafter(bad[0, 1, 4, 2], np.inf, dtype=np.float32), np.inf,
                                                dtype=np.float32), np.inf, dtype=np.float32)
    with pytest.raises(AssertionError) as e:
        testing.assert_attention_close(bad, q, k, v, max_ulp=2, causal="top-left")
    msg = str(e.value)
    assert "rule ulp" in msg
    assert "(b,h,i,k) = (0, 1, 4, 2)" in msg, msg
    assert "beyond 0.5/1/2/4/16 ulps" in msg and "histogram" in msg
    # the 3-ulp element is counted beyond 2 ulps and not beyond 4
    assert "1 / 1 / 1 / 0 / 0" in msg, msg
    # the rule's reason names the bound by its keyword, never by the command line's option or a raw field mark
    assert "ulps exceeds max_ulp=2 (1 elements over it)" in msg, msg
    assert "--max-ulp" not in msg and "\x1e" not in msg and "\x1f" not in msg, msg


def test_nan_fails_every_rule():
    q, k, v = qkv()
    out = attncert.attention(q, k, v)
    out[0, 0, 0, 0] = np.nan
    for rule, extra in (("ulp", {}), ("assert-close", {}), ("flash", {"baseline": attncert.attention(q, k, v)})):
        with pytest.raises(AssertionError, match="NaN/Inf where the exact value is finite: 1"):
            testing.assert_attention_close(out, q, k, v, rule=rule, **extra)


def torch_attention(q, k, v, causal_top_left=False):
    """Attention written in torch (1.13 has no scaled_dot_product_attention): softmax(q k^T / sqrt(d)) v."""
    import torch

    s = (q @ k.transpose(-1, -2)) / np.sqrt(q.shape[-1])
    if causal_top_left:
        nq, nk = q.shape[-2], k.shape[-2]
        s = s.masked_fill(torch.ones(nq, nk, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def test_rules_on_torch_forward():
    torch = pytest.importorskip("torch")
    q, k, v = qkv()
    for dt in (torch.float64, torch.float32, torch.bfloat16):
        tq, tk, tv = (torch.from_numpy(x).to(dt) for x in (q, k, v))
        sdpa = torch_attention(tq, tk, tv, True)
        # baseline: the same math in the dtype (FlashAttention's convention); the candidate upcasts
        base = sdpa
        up = torch_attention(tq.double(), tk.double(), tv.double(), True).to(dt)
        if dt != torch.float64:  # computed in float64, rounded once: within 1 ulp of the target
            testing.assert_attention_close(up, tq, tk, tv, causal="top-left", rule="ulp", max_ulp=1)
        testing.assert_attention_close(up, tq, tk, tv, causal="top-left", rule="assert-close")
        if dt != torch.bfloat16:  # computed in the dtype itself: within torch.testing's defaults for float64/32
            testing.assert_attention_close(sdpa, tq, tk, tv, causal="top-left", rule="assert-close")
        testing.assert_attention_close(up, tq, tk, tv, causal="top-left", rule="flash", baseline=base)
        testing.assert_attention_close(up, tq, tk, tv, causal="top-left", rule="torch-sdpa", baseline=base)
    # negative control: top-left and bottom-right differ when n_q != n_k
    tq = torch.from_numpy(q[:, :, :4].copy())
    tk, tv = torch.from_numpy(k), torch.from_numpy(v)
    top_left = torch_attention(tq, tk, tv, True)
    with pytest.raises(AssertionError, match="worst ulp error"):
        testing.assert_attention_close(top_left, tq, tk, tv, causal="bottom-right", rule="assert-close")


def test_lse_is_graded():
    q, k, v = qkv()
    out, lse = attncert.attention(q, k, v, return_lse=True)
    testing.assert_attention_close(out, q, k, v, max_ulp=0.5, lse=lse)
    with pytest.raises(AssertionError, match="LSE is not close"):
        testing.assert_attention_close(out, q, k, v, max_ulp=0.5, lse=lse + 1e-9)


def test_gradients_of_torch_autograd():
    torch = pytest.importorskip("torch")
    q, k, v = qkv(hq=4, hkv=2)
    do = np.random.default_rng(SEED + 1).standard_normal((1, 4, 9, 8))

    def autograd(dt, scale_dq=1.0):
        tq, tk, tv = (torch.from_numpy(x).to(dt).requires_grad_() for x in (q, k, v))
        out = torch_attention(tq, tk.repeat_interleave(2, 1), tv.repeat_interleave(2, 1), True)
        dq, dk, dv = torch.autograd.grad(out, (tq, tk, tv), torch.from_numpy(do).to(dt))
        return {"dq": dq * scale_dq, "dk": dk, "dv": dv}, (tq, tk, tv)

    g64, (tq, tk, tv) = autograd(torch.float64)
    tdo = torch.from_numpy(do)
    grades = testing.assert_attention_grads_close(g64, tq, tk, tv, tdo, rule="assert-close", causal="top-left")
    assert set(grades) == {"dq", "dk", "dv"}
    g32, (sq, sk, sv) = autograd(torch.float32)
    testing.assert_attention_grads_close(g32, sq, sk, sv, tdo.float(), rule="flash", baseline=g32, causal="top-left")
    testing.assert_attention_grads_close(g32, sq, sk, sv, tdo.float(), rule="torch-sdpa", baseline=g32, causal="top-left")
    # negative control: dq off by 1e-3 relative fails, and the message names dq only
    bad, _ = autograd(torch.float64, scale_dq=1.001)
    with pytest.raises(AssertionError) as e:
        testing.assert_attention_grads_close(bad, tq, tk, tv, tdo, rule="assert-close", causal="top-left")
    assert str(e.value).startswith("dq is not close"), str(e.value)
    assert "dk is not close" not in str(e.value)
    # vjp itself, graded by the helper, passes at 0.5 ulp
    exact = attncert.attention_vjp(q, k, v, do, causal="top-left")
    testing.assert_attention_grads_close(exact, q, k, v, do, max_ulp=0.5, causal="top-left")


def test_cache_reuses_references():
    testing.clear_cache()
    q, k, v = qkv()
    out = attncert.attention(q, k, v, window=(2, 2))
    testing.assert_attention_close(out, q, k, v, max_ulp=0.5, window=(2, 2))
    testing.assert_attention_close(out, q, k, v, max_ulp=0.5, window=(2, 2))
    # attncert.attention's reference is the helpers' (one cache since issue 32, item 11)
    assert testing.cache_info()["hits"] == 2 and testing.cache_info()["misses"] == 1
    # another setting is another reference
    with pytest.raises(AssertionError):
        testing.assert_attention_close(out, q, k, v, max_ulp=0.5, window=(1, 2))
    assert testing.cache_info()["misses"] == 2


def test_helper_errors():
    q, k, v = qkv()
    out = attncert.attention(q, k, v)
    # rule flash without baseline= compares with attncert's default baseline (issue 32, item 6), no longer an error
    assert testing.assert_attention_close(out, q, k, v, rule="flash")["rule"]["baseline_max_abs_error"] > 0
    with pytest.raises(ValueError, match="shape"):
        testing.assert_attention_close(out[:, :1], q, k, v)
    with pytest.raises(ValueError, match="max_ulp belongs"):
        testing.assert_attention_close(out, q, k, v, rule="assert-close", max_ulp=1)


def test_rows_sample_grades_only_the_sampled_rows():
    q, k, v = qkv(b=2, hq=3, hkv=3, n=40)
    out = attncert.attention(q, k, v)
    g = testing.assert_attention_close(out, q, k, v, max_ulp=0.5, rows=5, seed=3)
    assert g["compared"] == 5 * 8 and g["skipped"] == (2 * 3 * 40 - 5) * 8
    # errors in the sampled rows are seen
    bad = out.copy()
    bad += 1e-3
    with pytest.raises(AssertionError):
        testing.assert_attention_close(bad, q, k, v, max_ulp=0.5, rows=5, seed=3)
    # the same seed draws the same rows (a cached reference), another seed other rows
    testing.assert_attention_close(out, q, k, v, max_ulp=0.5, rows=5, seed=3)
    g2 = testing.assert_attention_close(out, q, k, v, max_ulp=0.5, rows=5, seed=4)
    assert g2["compared"] == 40
    with pytest.raises(ValueError, match="rows"):
        testing.assert_attention_close(out, q, k, v, rows=0)


def test_max_seconds_never_passes_a_partial_reference():
    # A reference not finished within max_seconds raises TimeoutError (the rows not computed would be
    # skipped by the grading, so a partial reference could pass anything); nothing partial is cached.
    r = np.random.default_rng(5)
    q = r.standard_normal((1, 4, 2048, 64))
    bad = np.zeros_like(q)
    testing.clear_cache()
    with pytest.raises(TimeoutError, match="max_seconds"):
        testing.assert_attention_close(bad, q, q, q, max_ulp=1, max_seconds=0.05, threads=1)
    assert testing.cache_info()["size"] == 0
    do = r.standard_normal(q.shape)
    with pytest.raises(TimeoutError):
        testing.assert_attention_grads_close({"dq": q, "dk": q, "dv": q}, q, q, q, do, max_ulp=1, max_seconds=0.05,
                                             threads=1)
    with pytest.raises(ValueError, match="max_seconds"):
        testing.assert_attention_close(bad, q, q, q, max_ulp=1, max_seconds=-1)
