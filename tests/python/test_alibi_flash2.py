"""alibi="flash2": ALiBi as FlashAttention 2's kernel and its reference add it under a causal mask (+slope·j).
Against an independent mpmath evaluation at 60 digits: the LSE is the correctly rounded log of the sum over allowed
keys of exp(scale q·k_j + slope·j); the output (and every gradient) is bit for bit the distance form's, the LSE
larger by slope·(i + n_k − n_q); without a causal mask the form is refused."""
import numpy as np
import pytest

import attncert

mpmath = pytest.importorskip("mpmath")


def problem(seed=3, B=2, H=3, nq=5, nk=7, d=4):
    r = np.random.default_rng(seed)
    q, k, v = r.standard_normal((B, H, nq, d)), r.standard_normal((B, H, nk, d)), r.standard_normal((B, H, nk, d))
    return q, k, v, np.array([0.5, 0.25, 0.125])[:H]


def mp_lse(q, k, slopes, flash2):
    mpmath.mp.dps = 60
    B, H, nq, d = q.shape
    nk = k.shape[2]
    out = np.empty((B, H, nq))
    for b in range(B):
        for h in range(H):
            for i in range(nq):
                pos = i + nk - nq  # bottom-right causal: keys j <= pos
                terms = []
                for j in range(pos + 1):
                    s = mpmath.fsum(mpmath.mpf(q[b, h, i, t]) * mpmath.mpf(k[b, h, j, t]) for t in range(d)) / 2
                    a = slopes[h] * j if flash2 else -slopes[h] * (pos - j)
                    terms.append(mpmath.exp(s + mpmath.mpf(a)))
                out[b, h, i] = float(mpmath.log(mpmath.fsum(terms)))  # rounded to nearest binary64
    return out


def test_flash2_lse_is_the_correctly_rounded_kernel_form():
    q, k, v, sl = problem()
    o1, l1 = attncert.attention(q, k, v, alibi_slopes=sl, causal="bottom-right", return_lse=True)
    o2, l2 = attncert.attention(q, k, v, alibi_slopes=sl, alibi="flash2", causal="bottom-right", return_lse=True)
    np.testing.assert_array_equal(o1, o2)  # the same exact output, rounded the same way
    np.testing.assert_array_equal(l2, mp_lse(q, k, sl, True))
    np.testing.assert_array_equal(l1, mp_lse(q, k, sl, False))
    shift = sl[None, :, None] * (np.arange(5) + 2)[None, None, :]
    assert np.all(np.abs(l2 - l1 - shift) <= 4 * np.spacing(np.abs(l2)))  # larger by slope (i + n_k - n_q)
    assert np.min(l2 - l1) >= 0.2  # the smallest shift here: slope 1/8 at i + n_k - n_q = 2


def test_flash2_gradients_are_the_distance_forms():
    q, k, v, sl = problem(seed=4)
    r = np.random.default_rng(5)
    do, dlse = r.standard_normal(q.shape), r.standard_normal(q.shape[:3])
    g1 = attncert.attention_vjp(q, k, v, do, dlse=dlse, alibi_slopes=sl, causal="bottom-right")
    g2 = attncert.attention_vjp(q, k, v, do, dlse=dlse, alibi_slopes=sl, alibi="flash2", causal="bottom-right")
    for a, b in zip(g1[:3], g2[:3]):  # d LSE / d s_ij = p_ij in both forms: a row constant changes no gradient
        np.testing.assert_array_equal(a, b)


def test_flash2_needs_a_causal_mask_and_slopes():
    q, k, v, sl = problem()
    with pytest.raises(ValueError, match="needs a causal mask"):
        attncert.attention(q, k, v, alibi_slopes=sl, alibi="flash2")
    with pytest.raises(ValueError, match="alibi='flash2' needs alibi_slopes"):
        attncert.attention(q, k, v, alibi="flash2", causal="top-left")
    with pytest.raises(ValueError, match="alibi must be distance or flash2"):
        attncert.attention(q, k, v, alibi_slopes=sl, alibi="flash3", causal="top-left")
