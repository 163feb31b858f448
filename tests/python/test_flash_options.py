"""FlashAttention's options that its tests use (issue 32, items 8 and 13): sink_token_length, attention_chunk,
key_leftpad, qv, FP8 inputs with descales, and the LSE of fully masked rows under a declared convention.

Each option is checked against a reference written here from FlashAttention's documented semantics (not from
attncert's code): the allowed keys built with NumPy index arithmetic, the attention evaluated in mpmath at 60
digits and rounded once to binary64, so the oracle's binary64 output must equal it bit for bit; the gradients
against torch float64 autograd of the same masked attention.
"""
import fractions
import math

import numpy as np
import pytest

import attncert
from attncert.testing import assert_attention_close

mpmath = pytest.importorskip("mpmath")


def fa_allowed(nq, nk, *, causal=False, window=(-1, -1), sink_tokens=0, chunk=0, leftpad=0, used=None):
    """(n_q, n_k) bool: the keys one sequence's rows may attend, as FlashAttention defines its masks.  Keys before
    `leftpad` or from `used` (its kv-cache length) on are padding; a key's position is j - leftpad and the
    sequence has used - leftpad keys.  causal is bottom-right: a window (left, 0).  A left window spares the first
    sink_tokens positions.  attention_chunk C keeps only the chunk of C positions that holds the row's diagonal."""
    used = nk if used is None else used
    n = used - leftpad
    i = np.arange(nq)[:, None]
    p = np.arange(nk)[None, :] - leftpad
    diag = i + n - nq
    ok = np.broadcast_to((p >= 0) & (p < n), (nq, nk)).copy()
    left, right = window
    if causal:
        right = 0 if right < 0 else min(right, 0)
    if left >= 0:
        ok &= (p >= diag - left) | (p < sink_tokens)
    if right >= 0:
        ok &= p <= diag + right
    if chunk > 0:
        start = (diag // chunk) * chunk  # floor division: diag may be negative
        ok &= (p >= start) & (p < start + chunk)
    return ok


def mp_attention(q, k, v, allowed, scale, qv=None):
    """Rows of softmax(scale (q k^T [+ qv v^T]) masked) v in mpmath (scale a float, or ("isqrt", n) for 1/sqrt(n)), rounded once to binary64; rows without keys
    are NaN here (the caller says what it expects there).  q (n_q, d), k (n_k, d), v (n_k, d_v)."""
    mpmath.mp.dps = 60
    nq, nk, dv = q.shape[0], k.shape[0], v.shape[1]
    out = np.full((nq, dv), np.nan)
    lse = np.full(nq, -np.inf)
    if isinstance(scale, tuple):  # ("isqrt", n): the exact 1/sqrt(n), as the oracle's default scale
        S = 1 / mpmath.sqrt(scale[1])
    else:
        S = mpmath.mpf(fractions.Fraction(scale).numerator) / fractions.Fraction(scale).denominator
    for i in range(nq):
        js = [j for j in range(nk) if allowed[i, j]]
        if not js:
            continue
        s = {}
        for j in js:
            dot = mpmath.fsum(mpmath.mpf(float(a)) * mpmath.mpf(float(b)) for a, b in zip(q[i], k[j]))
            if qv is not None:
                dot += mpmath.fsum(mpmath.mpf(float(a)) * mpmath.mpf(float(b)) for a, b in zip(qv[i], v[j]))
            s[j] = S * dot
        m = max(s.values())
        w = {j: mpmath.exp(s[j] - m) for j in js}
        W = mpmath.fsum(w.values())
        lse[i] = float(m + mpmath.log(W))
        for c in range(dv):
            out[i, c] = float(mpmath.fsum(w[j] * mpmath.mpf(float(v[j, c])) for j in js) / W)
    return out, lse


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("case", [
    dict(window=(2, 0), sink_tokens=2),
    dict(window=(3, -1), sink_tokens=1),
    dict(window=(1, 1), sink_tokens=3, causal=False),
    dict(chunk=4, causal=True),
    dict(chunk=3),
    dict(chunk=4, window=(2, -1)),
    dict(chunk=5, sink_tokens=2, window=(1, 0)),
])
def test_masks_bit_for_bit_against_mpmath(case):
    b, h, nq, nk, d = 2, 2, 6, 11, 4
    q, k, v = rand((b, h, nq, d), 1), rand((b, h, nk, d), 2), rand((b, h, nk, d), 3)
    causal = case.get("causal", False)
    out, lse = attncert.attention(q, k, v, causal="bottom-right" if causal else None, window=case.get("window"),
                                  sink_token_length=case.get("sink_tokens", 0), attention_chunk=case.get("chunk", 0),
                                  return_lse=True, empty_rows="nan", target="float64")
    allowed = fa_allowed(nq, nk, causal=causal, window=case.get("window", (-1, -1)),
                         sink_tokens=case.get("sink_tokens", 0), chunk=case.get("chunk", 0))
    assert allowed.any(axis=1).any() and not allowed.all(), "the case must mask something"
    for bi in range(b):
        for hi in range(h):
            o, l = mp_attention(q[bi, hi], k[bi, hi], v[bi, hi], allowed, 1 / math.sqrt(d))
            np.testing.assert_array_equal(out[bi, hi], o)
            np.testing.assert_array_equal(lse[bi, hi], l)


def test_sink_tokens_change_the_result():
    """sink_token_length is used: the same window with and without sinks gives different outputs (a test of the
    keyword reaching the library, not only of the reference)."""
    q, k, v = rand((1, 1, 6, 4), 4), rand((1, 1, 12, 4), 5), rand((1, 1, 12, 4), 6)
    a = attncert.attention(q, k, v, window=(2, 0), target="float64")
    b = attncert.attention(q, k, v, window=(2, 0), sink_token_length=2, target="float64")
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("causal", [False, True])
def test_key_leftpad_bit_for_bit(causal):
    b, h, nq, nk, d = 3, 2, 4, 10, 4
    q, k, v = rand((b, nq, h, d), 7), rand((b, nk, h, d), 8), rand((b, nk, h, d), 9)  # bshd, as kv caches are
    leftpad = np.array([0, 3, 5], dtype=np.int32)
    seqlens = np.array([10, 9, 8], dtype=np.int32)
    slopes = np.array([0.5, 0.25])
    out = attncert.attention(q, k, v, layout="bshd", key_leftpad=leftpad, seqlens_k=seqlens, alibi_slopes=slopes,
                             causal="bottom-right" if causal else None, window=(3, -1), target="float64",
                             empty_rows="nan")
    for bi in range(b):
        allowed = fa_allowed(nq, nk, causal=causal, window=(3, -1), leftpad=int(leftpad[bi]), used=int(seqlens[bi]))
        for hi in range(h):
            # ALiBi in positions: -slope |i + n' - n_q - (j - pad)| with n' = used - pad, the same as in indices
            n = int(seqlens[bi]) - int(leftpad[bi])
            qq, kk, vv = q[bi, :, hi], k[bi, :, hi], v[bi, :, hi]
            mpmath.mp.dps = 60
            for i in range(nq):
                js = [j for j in range(nk) if allowed[i, j]]
                if not js:  # bottom-right causal with fewer keys than queries: an empty row
                    assert np.isnan(out[bi, i, hi]).all()
                    continue
                s = {j: mpmath.fsum(mpmath.mpf(float(x)) * mpmath.mpf(float(y)) for x, y in zip(qq[i], kk[j])) / 2
                     - mpmath.mpf(float(slopes[hi])) * abs(i + n - nq - (j - int(leftpad[bi]))) for j in js}
                m = max(s.values())
                w = {j: mpmath.exp(s[j] - m) for j in js}
                W = mpmath.fsum(w.values())
                for c in range(d):
                    assert out[bi, i, hi, c] == float(mpmath.fsum(w[j] * mpmath.mpf(float(vv[j, c])) for j in js) / W)


def test_key_leftpad_refusals():
    q, k, v = rand((2, 1, 3, 4), 1), rand((2, 1, 6, 4), 2), rand((2, 1, 6, 4), 3)
    with pytest.raises(ValueError, match=r"key_leftpad.*batch of 2"):
        attncert.attention(q, k, v, key_leftpad=np.array([1], dtype=np.int64))
    with pytest.raises(ValueError, match=r"key_leftpad.*past its 6 keys"):
        attncert.attention(q, k, v, key_leftpad=np.array([1, 7], dtype=np.int64))
    with pytest.raises(ValueError, match=r"alibi.*flash2.*key_leftpad"):
        attncert.attention(q, k, v, key_leftpad=np.array([1, 2], dtype=np.int64), alibi_slopes=np.array([0.5]),
                           alibi="flash2", causal="bottom-right")


def test_qv_bit_for_bit_and_default_scale():
    b, h, nq, nk, d, dv = 1, 2, 5, 7, 4, 3
    q, k, v, qv = rand((b, h, nq, d), 11), rand((b, h, nk, d), 12), rand((b, h, nk, dv), 13), rand((b, h, nq, dv), 14)
    out = attncert.attention(q, k, v, qv=qv, causal="bottom-right", target="float64")
    allowed = fa_allowed(nq, nk, causal=True)
    for hi in range(h):
        o, _ = mp_attention(q[0, hi], k[0, hi], v[0, hi], allowed, ("isqrt", d + dv), qv=qv[0, hi])
        np.testing.assert_array_equal(out[0, hi], o)
    # an explicit scale multiplies both terms
    out2 = attncert.attention(q, k, v, qv=qv, scale=0.5, target="float64")
    o, _ = mp_attention(q[0, 1], k[0, 1], v[0, 1], np.ones((nq, nk), bool), 0.5, qv=qv[0, 1])
    np.testing.assert_array_equal(out2[0, 1], o)


def test_qv_refusals():
    q, k, v = rand((1, 1, 3, 4), 1), rand((1, 1, 6, 4), 2), rand((1, 1, 6, 2), 3)
    with pytest.raises(ValueError, match=r"qv: shape \(1, 1, 3, 4\).*\(1, 1, 3, 2\)"):
        attncert.attention(q, k, v, qv=rand((1, 1, 3, 4), 4))
    # the backward refuses qv (FlashAttention's takes none): the command line says so in one line, exit 2
    import os
    import subprocess
    import tempfile
    cli = os.environ.get("ATTNCERT_CLI")
    if not cli:
        pytest.skip("ATTNCERT_CLI not set")
    with tempfile.TemporaryDirectory() as t:
        for name, a in (("q", q), ("k", k), ("v", v), ("qv", rand((1, 1, 3, 2), 4)), ("do", np.ones((1, 1, 3, 2)))):
            np.save(os.path.join(t, name + ".npy"), a)
        r = subprocess.run([cli, "oracle", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--qv", "qv.npy",
                            "--grad-out", "do.npy", "--write-grad-references", "g"], cwd=t, capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert "--qv has no backward" in r.stderr and r.stderr.count("\n") == 1


def _torch_masked_grads(q, k, v, do, allowed, scale):
    torch = pytest.importorskip("torch")
    t = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v)]
    s = (t[0] @ t[1].transpose(-1, -2)) * scale
    s = s.masked_fill(~torch.tensor(allowed), -math.inf)
    o = torch.softmax(s, -1) @ t[2]
    return [g.numpy() for g in torch.autograd.grad(o, t, torch.tensor(do))]


@pytest.mark.parametrize("case", [dict(chunk=3, causal=True), dict(window=(2, 0), sink_tokens=2),
                                  dict(leftpad=2, causal=True)])
def test_gradients_against_torch_float64(case):
    """The backward sees the same masks: attncert's correctly rounded binary64 gradients within 1e-12 (relative to
    the largest) of torch float64 autograd of the masked attention."""
    b, h, nq, nk, d = 1, 1, 6, 10, 4
    q, k, v, do = rand((b, h, nq, d), 21), rand((b, h, nk, d), 22), rand((b, h, nk, d), 23), rand((b, h, nq, d), 24)
    lp = case.get("leftpad", 0)
    g = attncert.attention_vjp(q, k, v, do, causal="bottom-right" if case.get("causal") else None,
                               window=case.get("window"), sink_token_length=case.get("sink_tokens", 0),
                               attention_chunk=case.get("chunk", 0), target="float64",
                               key_leftpad=np.array([lp]) if lp else None)
    allowed = fa_allowed(nq, nk, causal=case.get("causal", False), window=case.get("window", (-1, -1)),
                         sink_tokens=case.get("sink_tokens", 0), chunk=case.get("chunk", 0), leftpad=lp)
    ref = _torch_masked_grads(q[0, 0], k[0, 0], v[0, 0], do[0, 0], allowed, 0.5)
    for got, want in zip((g.dq[0, 0], g.dk[0, 0], g.dv[0, 0]), ref):
        assert np.max(np.abs(got - want)) <= 1e-12 * max(1.0, np.max(np.abs(want)))
    if lp:
        assert not g.dk[0, 0, :lp].any() and not g.dv[0, 0, :lp].any()  # padding keys: exact zeros


def fp8_value(byte, fmt):
    """An OCP FP8 byte's value from its bit string (written independently of attncert's tables)."""
    bits = format(byte, "08b")
    e_len = 4 if fmt == "e4m3fn" else 5
    sign, e, m = bits[0], int(bits[1:1 + e_len], 2), int(bits[1 + e_len:], 2)
    m_len = 7 - e_len
    bias = 2 ** (e_len - 1) - 1
    if fmt == "e4m3fn" and e == 15 and m == 7:
        return math.nan
    if fmt == "e5m2" and e == 31:
        return math.nan if m else (-math.inf if sign == "1" else math.inf)
    frac = fractions.Fraction(m, 2 ** m_len)
    x = frac * fractions.Fraction(2) ** (1 - bias) if e == 0 else (1 + frac) * fractions.Fraction(2) ** (e - bias)
    return -float(x) if sign == "1" else float(x)


@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2"])
def test_fp8_with_descales_bit_for_bit(fmt):
    rng = np.random.default_rng(31)
    b, hq, hk, n, d = 2, 2, 1, 5, 4
    finite = [x for x in range(256) if math.isfinite(fp8_value(x, fmt)) and abs(fp8_value(x, fmt)) < 8]
    q, k, v = (rng.choice(finite, size=s).astype(np.uint8) for s in ((b, hq, n, d), (b, hk, n, d), (b, hk, n, d)))
    kd = np.array([[0.5], [2.0]])  # (b, h_kv)
    out = attncert.attention(q, k, v, qkv_format=fmt, q_descale=0.25, k_descale=kd, v_descale=3.0, target="float64")
    dec = np.vectorize(lambda x: fp8_value(int(x), fmt))
    for bi in range(b):
        for hi in range(hq):
            o, _ = mp_attention(dec(q[bi, hi]) * 0.25, dec(k[bi, 0]) * kd[bi, 0], dec(v[bi, 0]) * 3.0,
                                np.ones((n, n), bool), 1 / math.sqrt(d))
            np.testing.assert_array_equal(out[bi, hi], o)
    # the default target with FP8 inputs is bfloat16 (FlashAttention 3's FP8 output); NumPy gives float32 holding it
    o16 = attncert.attention(q, k, v, qkv_format=fmt, q_descale=0.25, k_descale=kd, v_descale=3.0)
    assert o16.dtype == np.float32
    assert np.array_equal(o16, (o16.view(np.uint32) & 0xFFFF0000).view(np.float32))
    # the default baseline decodes FP8 too: a correctly rounded candidate passes FlashAttention's rule
    assert_attention_close(o16, q, k, v, qkv_format=fmt, q_descale=0.25, k_descale=kd, v_descale=3.0, target="bfloat16")


def test_fp8_refusals():
    q = np.zeros((1, 1, 2, 4), np.uint8)
    with pytest.raises(ValueError, match="q_descale: a descale applies to FP8 inputs"):
        attncert.attention(q.astype(np.float32), q.astype(np.float32), q.astype(np.float32), q_descale=0.5)
    with pytest.raises(ValueError, match="qkv_format"):
        attncert.attention(q, q, q, qkv_format="e3m4")


# ---- item 8: the LSE of fully masked rows, graded under a declared convention -------------------------------------

def _empty_row_case():
    # bottom-right causal with n_q > n_k: the first n_q - n_k rows have no key
    q, k, v = rand((1, 1, 5, 4), 41).astype(np.float32), rand((1, 1, 3, 4), 42).astype(np.float32), \
        rand((1, 1, 3, 4), 43).astype(np.float32)
    return q, k, v


@pytest.mark.parametrize("conv,value", [("-inf", -np.inf), ("+inf", np.inf), ("0", 0.0), ("nan", np.nan)])
def test_empty_lse_conventions(conv, value):
    q, k, v = _empty_row_case()
    out, lse = attncert.attention(q, k, v, causal="bottom-right", empty_rows="zeros", return_lse=True, empty_lse=conv)
    np.testing.assert_array_equal(lse[0, 0, :2], np.full(2, value, np.float32))
    assert np.isfinite(lse[0, 0, 2:]).all()
    # the same LSE passes; each other convention at the empty rows fails, naming empty_lse and the row
    assert_attention_close(out, q, k, v, causal="bottom-right", empty_rows="zeros", lse=lse, empty_lse=conv,
                           rule="ulp", max_ulp=1)
    for other in (-np.inf, np.inf, 0.0, np.nan):
        if other == value or (np.isnan(other) and np.isnan(value)):
            continue
        bad = lse.copy()
        bad[0, 0, 1] = other
        with pytest.raises(AssertionError, match=r"empty_lse") as e:
            assert_attention_close(out, q, k, v, causal="bottom-right", empty_rows="zeros", lse=bad, empty_lse=conv,
                                   rule="ulp", max_ulp=1)
        assert "(0, 0, 1)" in str(e.value)


def test_empty_rows_output_graded_by_equality():
    """The output of a fully masked row is the declared empty_rows value: a candidate with NaN there under
    empty_rows="zeros" fails (it used to be skipped), and so does 0 under empty_rows="nan"."""
    q, k, v = _empty_row_case()
    out = attncert.attention(q, k, v, causal="bottom-right", empty_rows="zeros")
    bad = out.copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(AssertionError, match="empty_rows"):
        assert_attention_close(bad, q, k, v, causal="bottom-right", empty_rows="zeros", rule="ulp", max_ulp=1)
    nan_out = attncert.attention(q, k, v, causal="bottom-right", empty_rows="nan")
    assert_attention_close(nan_out, q, k, v, causal="bottom-right", empty_rows="nan", rule="ulp", max_ulp=1)
    with pytest.raises(AssertionError, match="empty_rows"):
        assert_attention_close(out, q, k, v, causal="bottom-right", empty_rows="nan", rule="ulp", max_ulp=1)


def test_empty_lse_refused_value():
    q, k, v = _empty_row_case()
    with pytest.raises(ValueError, match="empty_lse"):
        attncert.attention(q, k, v, causal="bottom-right", empty_rows="zeros", return_lse=True, empty_lse=1.0)
