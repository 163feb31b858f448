"""attncert.testing's defaults (issue 32, items 6, 7, 11 and 14) and the pytest plugin.

 6. the default rule is FlashAttention's ("flash"), with a baseline attncert computes when none is given:
    the plain attention in the candidate's format (testing.default_baseline / default_baseline_grads);
    rule="ulp" stays for correctly rounded kernels; every failure names the rule and the baseline's origin.
 7. the default target is the candidate's dtype, not q's; target= still wins; the message says which.
11. one reference cache, bounded in bytes (LRU), shared by attncert.attention / attention_vjp and the helpers.
14. float16 torch tensors on the CPU (torch 1.13 has no float16 matmul there) are graded by default.
Plugin: attncert.pytest_plugin's attncert_reference fixture and its terminal summary.
"""
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import attncert
from attncert import testing

torch = pytest.importorskip("torch")

SEED = int(os.environ.get("ATTNCERT_SEED", "20261202"))


def rand(*shape, seed=0):
    return np.random.default_rng(SEED + seed).standard_normal(shape)


def tensors(dtype, b=1, hq=2, hkv=2, nq=48, nk=48, d=32, dv=32, seed=0):
    q, k, v = rand(b, hq, nq, d, seed=seed), rand(b, hkv, nk, d, seed=seed + 1), rand(b, hkv, nk, dv, seed=seed + 2)
    return tuple(torch.from_numpy(x).to(dtype) for x in (q, k, v))


def fa_like(q, k, v, scale_factor=1.0):
    """A kernel as FlashAttention computes: scores and softmax in float32, P rounded to the input dtype before
    P @ V (accumulated in float32), the output rounded to the dtype.  Not correctly rounded: it fails 4 ulps."""
    g = q.shape[1] // k.shape[1]
    kk, vv = k.repeat_interleave(g, 1).float(), v.repeat_interleave(g, 1).float()
    s = (q.float() @ kk.transpose(-1, -2)) * (scale_factor / math.sqrt(q.shape[-1]))
    p = torch.softmax(s, -1).to(q.dtype)
    return (p.float() @ vv).to(q.dtype)


def upcast(q, k, v):
    """A kernel that computes in float32 and casts its output once (the float16 kernel of item 14)."""
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, -1) @ v.float()).to(q.dtype)


def autograd(kernel, q, k, v, do):
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    return torch.autograd.grad(kernel(*leaves), leaves, do)


# ---- 6. the default rule: FlashAttention's, with a baseline attncert computes ---------------------------------

def test_a_real_bf16_kernel_passes_the_default_and_fails_4_ulps():
    q, k, v = tensors(torch.bfloat16)
    out = fa_like(q, k, v)
    with pytest.raises(AssertionError, match="rule ulp"):  # the old default: a first test failed
        testing.assert_attention_close(out, q, k, v, rule="ulp")
    g = testing.assert_attention_close(out, q, k, v)
    assert g["rule"]["rule"] == "flash" and g["rule"]["verdict"] == "pass"
    assert g["max_ulp"] > 4, g["max_ulp"]  # the kernel is not within 4 ulps, and passes FlashAttention's test
    # the baseline's error is the yardstick: the default is max |c - o| <= 2 max |b - o| + atol
    assert g["rule"]["k"] == 2 and g["rule"]["baseline_max_abs_error"] > 0
    # max_ulp alone still means rule ulp
    assert testing.assert_attention_close(attncert.attention(q, k, v), q, k, v, max_ulp=0.5)["rule"]["rule"] == "ulp"


def test_a_wrong_kernel_fails_the_default_naming_the_rule_and_the_baseline():
    q, k, v = tensors(torch.bfloat16)
    with pytest.raises(AssertionError) as e:
        testing.assert_attention_close(fa_like(q, k, v, scale_factor=1.02), q, k, v)
    msg = str(e.value)
    assert msg.startswith("attention output is not close to the exact attention output under rule flash"), msg
    assert "\n  rule flash: max |c - o| <= k * max |b - o| + atol, FlashAttention's tests (k = 2, atol = " in msg, msg
    assert "the default rule; rule='ulp' grades a correctly rounded kernel" in msg, msg
    assert ("\n  baseline: the default, attncert.testing.default_baseline: the plain attention computed by torch "
            "in bfloat16") in msg, msg
    # a baseline given is said to be given; rule ulp says it needs none
    with pytest.raises(AssertionError) as e:
        testing.assert_attention_close(fa_like(q, k, v, 1.02), q, k, v, rule="flash", baseline=fa_like(q, k, v))
    assert "\n  baseline: given as baseline= (max |b - o| = " in str(e.value), str(e.value)
    assert "the default rule" not in str(e.value)
    with pytest.raises(AssertionError) as e:
        testing.assert_attention_close(fa_like(q, k, v), q, k, v, rule="ulp")
    msg = str(e.value)
    assert "\n  rule ulp: |c - o| <= max_ulp = 4 ulps of o, for a correctly rounded kernel" in msg, msg
    assert "\n  baseline: not used (rule ulp compares with the exact values alone)" in msg, msg


def test_the_gradients_default_to_flash_with_autograd_of_the_plain_attention():
    q, k, v = tensors(torch.bfloat16, hq=4, hkv=2, nq=32, nk=40)
    do = torch.from_numpy(rand(1, 4, 32, 32, seed=9)).to(torch.bfloat16)
    grads = autograd(fa_like, q, k, v, do)
    with pytest.raises(AssertionError, match="rule ulp"):
        testing.assert_attention_grads_close(grads, q, k, v, do, rule="ulp")
    got = testing.assert_attention_grads_close(grads, q, k, v, do)
    assert {n: g["rule"]["rule"] for n, g in got.items()} == {"dq": "flash", "dk": "flash", "dv": "flash"}
    assert got["dq"]["rule"]["k"] == 3  # FlashAttention's gradients: 3 times the baseline's error
    bad = (grads[0] * 1.05, grads[1], grads[2])
    with pytest.raises(AssertionError) as e:
        testing.assert_attention_grads_close(bad, q, k, v, do)
    msg = str(e.value)
    assert msg.startswith("dq is not close to the exact dq under rule flash") and "dk is not close" not in msg, msg
    assert "baseline: the default, attncert.testing.default_baseline_grads: torch.autograd through the plain " \
           "attention computed by torch in bfloat16" in msg, msg


def plain_torch(q, k, v, scale):
    """The documented default baseline for torch float64/float32/bfloat16, written out here."""
    return torch.softmax((q * scale) @ k.transpose(-1, -2), -1) @ v


def test_the_default_baseline_is_the_plain_attention_in_the_format():
    q, k, v = tensors(torch.bfloat16, nq=20, nk=24)
    base = testing.default_baseline(q, k, v)
    assert base.dtype == torch.bfloat16
    assert torch.equal(base, plain_torch(q, k, v, 1 / math.sqrt(32)))
    # the format is dtype= (the helpers pass the target); inputs are rounded to it first
    q32, k32, v32 = tensors(torch.float32, nq=20, nk=24)
    assert torch.equal(testing.default_baseline(q32, k32, v32, dtype=torch.bfloat16), base)
    # NumPy: NumPy in that dtype
    qn, kn, vn = (x.float().numpy() for x in (q32, k32, v32))
    s = (qn * np.float32(1 / math.sqrt(32))) @ kn.swapaxes(-1, -2)
    e = np.exp(s - s.max(-1, keepdims=True))
    want = (e / e.sum(-1, keepdims=True)) @ vn
    got = testing.default_baseline(qn, kn, vn)
    assert got.dtype == np.float32 and np.array_equal(got, want)
    # and it is what the default rule graded against: its error is the grade's baseline error
    ref = attncert.attention(q, k, v)
    g = testing.assert_attention_close(ref, q, k, v)
    exact = attncert.attention(q, k, v, target="float64")  # the exact values, to binary64
    assert g["rule"]["baseline_max_abs_error"] == pytest.approx((base.double() - exact).abs().max().item(), rel=1e-9)


VARIANTS = [
    ("plain", {}),
    ("top-left", dict(causal="top-left")),
    ("bottom-right", dict(causal="bottom-right")),
    ("window", dict(window=(2, 1))),
    ("window-left", dict(window=(3, None), causal="bottom-right")),
    ("softcap", dict(softcap=2.5)),
    ("scale", dict(scale="1/3")),
    ("alibi", dict(alibi_slopes=np.array([0.5, 0.25, 0.125, 0.0625]))),
    ("alibi-per-batch", dict(alibi_slopes=np.abs(rand(2, 4, seed=20)))),
    ("bias", dict(bias=rand(1, 4, 6, 9, seed=21))),
    ("bias-2d", dict(bias=rand(6, 9, seed=22))),
    ("sink", dict(sink=rand(4, seed=23))),
    ("mask", dict(mask=rand(6, 9, seed=24) > -0.5)),
    ("empty-rows-zeros", dict(mask=np.tile(np.arange(6)[:, None] % 3 != 0, (1, 9)), empty_rows="zeros")),
    ("empty-rows-sink", dict(mask=np.tile(np.arange(6)[:, None] % 3 != 0, (1, 9)), sink=rand(4, seed=25))),
    ("dropout", dict(dropout_mask=rand(2, 4, 6, 9, seed=26) > -0.6, dropout_p=0.25)),
    ("seqlens-k", dict(seqlens_k=np.array([5, 9]))),
    ("seqlens-k-causal", dict(seqlens_k=np.array([5, 9]), causal="bottom-right", empty_rows="zeros")),
    ("alibi-flash2", dict(alibi_slopes=np.array([0.5, 0.25, 0.125, 0.0625]), alibi="flash2", causal="bottom-right")),
    ("lse-base-2", dict(lse_base="2")),
    ("everything", dict(causal="bottom-right", softcap=3.0, alibi_slopes=np.array([0.5, 0.25, 0.125, 0.0625]),
                        bias=rand(2, 1, 6, 9, seed=27), sink=rand(4, seed=28),
                        dropout_mask=rand(2, 4, 6, 9, seed=29) > -0.6, dropout_p=0.125)),
]


def variant_inputs(layout="bhsd"):
    q, k, v = rand(2, 4, 6, 8, seed=30), rand(2, 2, 9, 8, seed=31), rand(2, 2, 9, 5, seed=32)
    if layout == "bshd":
        q, k, v = (np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (q, k, v))
    return q, k, v


def close(a, b, tol):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(np.isinf(a), np.isinf(b))
    fin = np.isfinite(a)
    assert np.array_equal(a[~fin & ~np.isnan(a)], b[~fin & ~np.isnan(b)])
    assert np.all(np.abs(a[fin] - b[fin]) <= tol * (1 + np.abs(b[fin]))), np.max(np.abs(a[fin] - b[fin]))


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("name,kw", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_the_default_baseline_computes_the_oracles_attention(name, kw, layout):
    """In float64 the default baseline (NumPy, and torch with autograd) is the oracle's attention and gradients to
    ~1e-13: it computes every variant with the oracle's semantics (P14), each backend independently of the other."""
    q, k, v = variant_inputs(layout)
    do = rand(*attncert.attention(q, k, v, layout=layout, **kw).shape, seed=33)
    dlse = rand(*(q.shape[:3] if layout == "bhsd" else (2, 4, 6)), seed=34)
    out, lse = attncert.attention(q, k, v, layout=layout, return_lse=True, **kw)
    exact = attncert.attention_vjp(q, k, v, do, dlse=dlse, layout=layout, **kw)
    for conv in (lambda x: x, torch.from_numpy):
        b_out, b_lse = testing.default_baseline(conv(q), conv(k), conv(v), layout=layout, return_lse=True, **kw)
        close(b_out, out, 1e-12)
        close(b_lse, lse, 1e-12)
        grads = testing.default_baseline_grads(conv(q), conv(k), conv(v), conv(do), dlse=conv(dlse), layout=layout,
                                               **kw)
        assert isinstance(grads, attncert.AttentionGrads)
        for field in grads._fields:
            assert (getattr(grads, field) is None) == (getattr(exact, field) is None), field
            if getattr(exact, field) is not None:
                close(getattr(grads, field), getattr(exact, field), 1e-11)


def test_the_default_baseline_of_packed_sequences():
    q, k, v = rand(11, 4, 8, seed=40), rand(13, 2, 8, seed=41), rand(13, 2, 5, seed=42)
    kw = dict(layout="thd", cu_seqlens_q=np.array([0, 4, 4, 11]), cu_seqlens_k=np.array([0, 6, 7, 13]),
              causal="bottom-right", sink=rand(4, seed=43), softcap=4.0, empty_rows="zeros")
    out, lse = attncert.attention(q, k, v, return_lse=True, **kw)
    do, dlse = rand(*out.shape, seed=44), rand(*lse.shape, seed=45)
    exact = attncert.attention_vjp(q, k, v, do, dlse=dlse, **kw)
    for conv in (lambda x: x, torch.from_numpy):
        b_out, b_lse = testing.default_baseline(conv(q), conv(k), conv(v), return_lse=True, **kw)
        close(b_out, out, 1e-12)
        close(b_lse, lse, 1e-12)
        grads = testing.default_baseline_grads(conv(q), conv(k), conv(v), conv(do), dlse=conv(dlse), **kw)
        for field in ("dq", "dk", "dv", "dsink"):
            close(getattr(grads, field), getattr(exact, field), 1e-11)


def test_the_default_baseline_refuses_what_does_not_fit_naming_the_parameter():
    q, k, v = rand(1, 2, 5, 4), rand(1, 2, 6, 4, seed=1), rand(1, 2, 6, 3, seed=2)
    for kw, msg in ((dict(k=k[..., :3]), "k: feature size 3 is not q's 4"),
                    (dict(v=v[:, :1]), "v: shape (1, 1, 6, 3) does not match k's (1, 2, 6, 4)"),
                    (dict(bias=np.zeros((3, 6))), "bias: shape (3, 6) does not broadcast to (b, h_q, n_q, n_k) = "
                                                  "(1, 2, 5, 6)"),
                    (dict(sink=np.zeros(3)), "sink: 3 values, expected h_q = 2"),
                    (dict(alibi_slopes=np.zeros(5)), "alibi_slopes: shape (5,), expected (h_q,) = (2,) or (b, h_q)"),
                    (dict(dtype="int8"), "dtype: must be float64, float32, float16 or bfloat16, got 'int8'"),
                    (dict(causal=True), "causal: must be None, 'top-left' or 'bottom-right', not True")):
        args = dict(q=q, k=k, v=v)
        args.update(kw)
        with pytest.raises((ValueError, TypeError)) as e:
            testing.default_baseline(**args)
        assert str(e.value).startswith(msg) and "\n" not in str(e.value), (kw, str(e.value))


def test_the_default_covers_rows_lse_and_every_rule():
    q, k, v = tensors(torch.bfloat16, b=2, hq=4, hkv=2, nq=40, nk=40)
    out = fa_like(q, k, v)
    lse = torch.logsumexp((q.float() @ k.repeat_interleave(2, 1).float().transpose(-1, -2)) / math.sqrt(32), -1)
    g = testing.assert_attention_close(out, q, k, v, rows=7, seed=2, lse=lse)
    assert g["compared"] == 7 * 32
    testing.assert_attention_close(out, q, k, v, rule="torch-sdpa")
    with pytest.raises(AssertionError) as e:
        testing.assert_attention_close(out, q, k, v, lse=lse + 0.01)
    assert str(e.value).startswith("LSE is not close to the exact LSE under rule flash"), str(e.value)
    assert "\n  baseline: the default, attncert.testing.default_baseline: " in str(e.value), str(e.value)


# ---- 7. the target: the candidate's dtype ----------------------------------------------------------------------

def test_a_bf16_output_of_float32_inputs_is_graded_in_bf16():
    q, k, v = tensors(torch.float32)
    exact16 = attncert.attention(q, k, v, target="bfloat16")
    assert exact16.dtype == torch.bfloat16
    g = testing.assert_attention_close(exact16, q, k, v, rule="ulp", max_ulp=0.5)  # measured in bfloat16 ulps
    assert g["max_ulp"] <= 0.5
    bad = exact16.clone()
    bad[0, 1, 3, 4] = bad[0, 1, 3, 4] * (1 + 2 ** -6)  # 2 bfloat16 ulps
    with pytest.raises(AssertionError) as e:
        testing.assert_attention_close(bad, q, k, v, max_ulp=1)
    msg = str(e.value)
    assert "\n  target bfloat16: the candidate's dtype (q is float32); target= grades in another format" in msg, msg
    assert "worst ulp error at (b,h,i,k) = (0, 1, 3, 4)" in msg, msg
    # target= still wins: in float32 ulps the bfloat16 output is far off
    with pytest.raises(AssertionError) as e:
        testing.assert_attention_close(exact16, q, k, v, max_ulp=0.5, target="float32")
    assert "\n  target float32: given as target= (the candidate is bfloat16)" in str(e.value), str(e.value)
    # NumPy: a float16 output of float64 inputs is graded in float16
    qn, kn, vn = (x.double().numpy() for x in (q, k, v))
    half = attncert.attention(qn, kn, vn, target="float16")
    assert half.dtype == np.float16
    assert testing.assert_attention_close(half, qn, kn, vn, max_ulp=0.5)["max_ulp"] <= 0.5


def test_bf16_gradients_of_float32_inputs_are_graded_in_bf16():
    q, k, v = tensors(torch.float32, hq=4, hkv=2, nq=16, nk=20)
    do = torch.from_numpy(rand(1, 4, 16, 32, seed=9)).float()
    exact16 = attncert.attention_vjp(q, k, v, do, target="bfloat16")
    assert exact16.dq.dtype == torch.bfloat16
    got = testing.assert_attention_grads_close(exact16, q, k, v, do, max_ulp=0.5)
    assert all(g["max_ulp"] <= 0.5 for g in got.values())
    with pytest.raises(AssertionError, match="target float32: given as target="):
        testing.assert_attention_grads_close(exact16, q, k, v, do, max_ulp=0.5, target="float32")


# ---- 11. one cache for attention() and the helpers, bounded in bytes -------------------------------------------

class Counting:
    """A stand-in for attncert._core.Reference / Gradients that counts its constructions."""

    def __init__(self, real):
        self.real, self.calls = real, 0

    def __call__(self, *a, **kw):
        self.calls += 1
        return self.real(*a, **kw)


@pytest.fixture
def counted(monkeypatch):
    testing.clear_cache()
    ref, grads = Counting(attncert._core.Reference), Counting(attncert._core.Gradients)
    monkeypatch.setattr(attncert._core, "Reference", ref)
    monkeypatch.setattr(attncert._core, "Gradients", grads)
    yield ref, grads
    testing.clear_cache()


def test_attention_and_the_helpers_compute_a_reference_once(counted):
    ref, grads = counted
    q, k, v = (x.numpy() for x in tensors(torch.float64, nq=12, nk=12, d=8, dv=8))
    out = attncert.attention(q, k, v, causal="top-left")
    testing.assert_attention_close(out, q, k, v, causal="top-left", max_ulp=0.5)
    testing.assert_attention_close(out, q, k, v, causal="top-left")  # the default rule: the same reference
    assert ref.calls == 1
    info = testing.cache_info()
    assert info["misses"] == 1 and info["hits"] == 2 and info["size"] == 1 and info["bytes"] > 0, info
    # the helper first, attention() after
    testing.assert_attention_close(out, q, k, v, window=(2, 2), rule="assert-close", atol=1e3)
    attncert.attention(q, k, v, window=(2, 2))
    assert ref.calls == 2
    # a reference with the LSE serves a call without it; torch in, torch out from the same entry
    o2, l2 = attncert.attention(q, k, v, scale=0.5, return_lse=True)
    assert ref.calls == 3
    assert np.array_equal(attncert.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                                             scale=0.5).numpy(), o2)
    testing.assert_attention_close(o2, q, k, v, scale=0.5, max_ulp=0.5, lse=l2)
    assert ref.calls == 3
    # gradients: attention_vjp and assert_attention_grads_close share theirs
    do = rand(*out.shape, seed=5)
    g = attncert.attention_vjp(q, k, v, do, causal="top-left")
    testing.assert_attention_grads_close(g, q, k, v, do, causal="top-left", max_ulp=0.5)
    testing.assert_attention_grads_close(g, q, k, v, do, causal="bottom-right", max_ulp=1e9)
    attncert.attention_vjp(q, k, v, do, causal="bottom-right")
    assert grads.calls == 2 and ref.calls == 3


def test_the_cache_is_bounded_in_bytes_and_evicts_the_least_recently_used(counted):
    ref, _ = counted
    q, k, v = (x.numpy() for x in tensors(torch.float64, nq=16, nk=16, d=8, dv=8))
    attncert.attention(q, k, v, scale=1.0)
    one = testing.cache_info()["bytes"]
    assert one > 8 * (q.size + k.size + v.size)  # at least the inputs' binary64 copies
    before = testing.set_cache_limit(2 * one + one // 2)  # two entries fit, not three
    try:
        assert before == 1 << 30  # the default limit: 1 GiB
        attncert.attention(q, k, v, scale=2.0)
        attncert.attention(q, k, v, scale=1.0)  # a hit: scale=1.0 is now the most recently used
        attncert.attention(q, k, v, scale=3.0)  # evicts scale=2.0
        info = testing.cache_info()
        assert info["size"] == 2 and info["bytes"] <= info["limit"] == 2 * one + one // 2 and info["evictions"] == 1
        calls = ref.calls
        attncert.attention(q, k, v, scale=1.0)
        attncert.attention(q, k, v, scale=3.0)
        assert ref.calls == calls
        attncert.attention(q, k, v, scale=2.0)
        assert ref.calls == calls + 1
        # an entry larger than the limit is computed and not kept
        testing.set_cache_limit(one // 2)
        assert testing.cache_info()["size"] == 0 and testing.cache_info()["bytes"] == 0
        attncert.attention(q, k, v, scale=1.0)
        attncert.attention(q, k, v, scale=1.0)
        assert ref.calls == calls + 3 and testing.cache_info()["size"] == 0
        with pytest.raises(ValueError, match=r"^nbytes: must be an integer >= 0"):
            testing.set_cache_limit(-1)
        with pytest.raises(TypeError, match=r"^nbytes: must be an integer"):
            testing.set_cache_limit(1.5)
    finally:
        testing.set_cache_limit(before)


# ---- 14. float16 on the CPU -----------------------------------------------------------------------------------

def test_a_float16_kernel_on_the_cpu_is_graded_by_default():
    q, k, v = tensors(torch.float16, hq=4, hkv=4, nq=24, nk=30)
    with pytest.raises(RuntimeError):  # what the default baseline must not do
        q @ k.transpose(-1, -2)
    out = upcast(q, k, v)
    exact = attncert.attention(q, k, v)
    assert exact.dtype == torch.float16
    g = testing.assert_attention_close(out, q, k, v, rule="flash")  # no baseline given: attncert's in float16
    assert g["rule"]["baseline_max_abs_error"] > 0
    testing.assert_attention_close(out, q, k, v)
    with pytest.raises(AssertionError, match="plain attention computed by torch in float16"):
        testing.assert_attention_close(upcast(q * 1.01, k, v), q, k, v)
    # the baseline: float32 arithmetic rounded to float16 after every operation, documented so
    def r(x):
        return x.half().float()
    s = r(r(q.float() * np.float32(1 / math.sqrt(32))) @ k.float().transpose(-1, -2))
    want = r(r(torch.softmax(s, -1)) @ v.float()).half()
    base = testing.default_baseline(q, k, v)
    assert base.dtype == torch.float16 and torch.equal(base, want)
    do = torch.from_numpy(rand(1, 4, 24, 32, seed=3)).half()
    grads = [x.half() for x in autograd(lambda a, b, c: upcast(a.float(), b.float(), c.float()), q, k, v, do)]
    got = testing.assert_attention_grads_close(grads, q, k, v, do, rule="flash")
    assert set(got) == {"dq", "dk", "dv"}
    assert testing.default_baseline_grads(q, k, v, do).dq.dtype == torch.float16


# ---- the pytest plugin -------------------------------------------------------------------------------------------

USER_TESTS = '''
import numpy as np
import pytest
import attncert
from attncert import testing


def qkv(seed):
    r = np.random.default_rng(seed)
    return (r.standard_normal((1, 2, 6, 4)).astype(np.float32), r.standard_normal((1, 2, 7, 4)).astype(np.float32),
            r.standard_normal((1, 2, 7, 4)).astype(np.float32))


def test_fixture_caches(attncert_reference):
    q, k, v = qkv(0)
    a = attncert_reference(q, k, v, causal="bottom-right")
    b = attncert_reference(q, k, v, causal="bottom-right")
    assert np.array_equal(a, b) and np.array_equal(a, attncert.attention(q, k, v, causal="bottom-right"))
    assert testing.cache_info()["misses"] == 1
    testing.assert_attention_close(a, q, k, v, causal="bottom-right", max_ulp=0.5)   # 48 elements, rule ulp


def test_same_inputs_later(attncert_reference):
    q, k, v = qkv(0)
    out = attncert_reference(q, k, v, causal="bottom-right")
    testing.assert_attention_close(out, q, k, v, causal="bottom-right")  # flash, the default
    assert testing.cache_info()["misses"] == 1


def test_failing(attncert_reference):
    q, k, v = qkv(1)
    testing.assert_attention_close(attncert_reference(q, k, v) + 1, q, k, v)
'''


def run_pytest(tmp_path, args, conftest=None):
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    if conftest is not None:
        (tmp_path / "conftest.py").write_text(conftest)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(attncert.__file__)),
                                                   env.get("PYTHONPATH", "")] if p)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts="] + args +
                       [str(tmp_path / "test_user.py")], cwd=str(tmp_path), env=env, capture_output=True, text=True,
                       timeout=600)
    return p.stdout + p.stderr


def check_summary(out):
    assert "2 passed" in out and "1 failed" in out, out
    lines = [line for line in out.splitlines() if line.startswith("attncert: ")]
    assert len(lines) == 3, out
    assert lines[0] == "attncert: 144 elements graded in 3 calls (1 failed)", (lines, out)
    assert lines[1].startswith("attncert: worst ulp per rule: "), (lines, out)
    worst = dict(item.split(" ") for item in lines[1][len("attncert: worst ulp per rule: "):].split(", "))
    assert sorted(worst) == ["flash", "ulp"], lines
    assert float(worst["ulp"]) <= 0.5 and float(worst["flash"]) > 1e5, lines  # the failing output is off by 1
    assert lines[2].startswith("attncert: ") and lines[2].endswith(
        " s in the oracle (2 references computed, 6 reused from the cache)"), (lines, out)
    assert float(lines[2].split(" ")[1]) > 0, lines


def test_the_plugin_summary_with_dash_p(tmp_path):
    check_summary(run_pytest(tmp_path, ["-p", "attncert.pytest_plugin"]))


def test_the_plugin_from_conftest(tmp_path):
    check_summary(run_pytest(tmp_path, [], conftest='pytest_plugins = ["attncert.pytest_plugin"]\n'))


def test_no_summary_without_the_plugin(tmp_path):
    out = run_pytest(tmp_path, [])
    assert "fixture 'attncert_reference' not found" in out and "attncert: " not in out, out
