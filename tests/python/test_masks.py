"""Issue 32, item 10: every mask torch's SDPA takes, and key-padding masks as FlashAttention and xformers pass them.

  - a bool `mask` (True = attend) of any shape that broadcasts to (b, h_q, n_q, n_k) gives, bit for bit, what the
    same mask written out in full gives;
  - a float `mask` is torch SDPA's additive mask (0 attended, -inf masked, other finite values added to the
    scores): bit for bit the bool mask of its finite entries plus a bias of their values (added to `bias=`), and
    close to an independent float64 NumPy reference of torch's semantics; +inf or NaN in it is refused;
  - `key_padding_mask` (b, n_k), True = a real key, is and-ed with `mask` and `causal`;
  - masks are in (b, h, n_q, n_k) order whatever q's layout;
  - shapes that do not broadcast, integer masks and the like are refused in one line naming the parameter;
  - the same keywords through attention_vjp and attncert.testing's assertions.
Seeds: ATTNCERT_SEED."""
import os

import numpy as np
import pytest
import torch

import attncert
from attncert import testing

SEED = int(os.environ.get("ATTNCERT_SEED", "20261202"))
B, HQ, HKV, NQ, NK, D, DV = 2, 4, 2, 5, 7, 4, 3
FULL = (B, HQ, NQ, NK)


def rng(seed):
    return np.random.default_rng(SEED + seed)


def qkv(seed=0):
    r = rng(seed)
    return r.standard_normal((B, HQ, NQ, D)), r.standard_normal((B, HKV, NK, D)), r.standard_normal((B, HKV, NK, DV))


def random_mask(shape, seed):
    """A random bool array of `shape` with key 0 always allowed (no fully masked row once broadcast)."""
    m = rng(seed).random(shape) < 0.6
    m[..., 0] = True
    return m


def full(mask):
    return np.array(np.broadcast_to(mask, FULL))


def reference(q, k, v, additive):
    """float64 torch SDPA semantics, written independently of attncert: softmax(q k^T / sqrt(d) + additive) v, the
    softmax taken over the finite entries (-inf = masked), GQA by repeating each kv head; a row with no finite
    entry gives 0.  Graded at 1e-12 (not bit for bit: this is float64 arithmetic, the oracle is exact)."""
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(q.shape[-1]) + additive
    live = np.isfinite(s)
    m = np.where(live, s, -np.inf).max(-1, keepdims=True)
    p = np.where(live, np.exp(np.where(live, s - np.where(np.isfinite(m), m, 0), 0.0)), 0.0)
    den = p.sum(-1, keepdims=True)
    return np.einsum("bhij,bhjd->bhid", p / np.where(den > 0, den, 1.0), v)


def dyadic(shape, seed):
    """Random multiples of 1/8 in [-4, 4]: their sums with float_mask's values are binary64 numbers exactly."""
    return rng(seed).integers(-32, 33, size=shape) / 8.0


def additive_of(allowed):
    return np.where(allowed, 0.0, -np.inf)


def one_line(e, name):
    msg = str(e.value)
    assert "\n" not in msg, msg
    assert msg.startswith(name + ":") or (name + "=") in msg, msg
    return msg


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert np.array_equal(a, b, equal_nan=True), np.abs(a - b).max()


# ---- bool masks of any broadcastable shape -----------------------------------------------------------------

BOOL_FORMS = {
    "(n_k,)": (NK,),
    "(1, n_k)": (1, NK),
    "(b, 1, 1, n_k) key padding": (B, 1, 1, NK),
    "(b, 1, n_q, n_k)": (B, 1, NQ, NK),
    "(h_q, n_q, n_k)": (HQ, NQ, NK),
    "(1, h_q, 1, n_k)": (1, HQ, 1, NK),
    "(b, h_q, n_q, 1) per query": (B, HQ, NQ, 1),
    "() scalar": (),
    "(n_q, n_k)": (NQ, NK),
    "(b, h_q, n_q, n_k)": FULL,
}


@pytest.mark.parametrize("shape", list(BOOL_FORMS.values()), ids=list(BOOL_FORMS))
def test_a_broadcastable_bool_mask_is_the_full_mask(shape):
    q, k, v = qkv()
    if shape == ():
        m = np.array(True)
    elif shape[-1] == 1:  # a whole row allowed or not
        m = rng(1).random(shape) < 0.7
    else:
        m = random_mask(shape, 1)
    kw = dict(empty_rows="zeros", return_lse=True)
    out, lse = attncert.attention(q, k, v, mask=m, **kw)
    want, want_lse = attncert.attention(q, k, v, mask=full(m), **kw)
    same(out, want)
    same(lse, want_lse)
    # the same as a torch bool tensor, and against torch's semantics
    same(attncert.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), mask=torch.from_numpy(m),
                            empty_rows="zeros").numpy(), want)
    np.testing.assert_allclose(out, reference(q, k, v, additive_of(full(m))), rtol=1e-12, atol=1e-12)


def test_masks_are_in_bhnn_order_whatever_the_layout():
    q, k, v = qkv(2)
    m = random_mask((B, 1, 1, NK), 3)
    kp = random_mask((B, NK), 4)
    want = attncert.attention(q, k, v, mask=full(m) & kp[:, None, None, :])
    t = lambda x: np.ascontiguousarray(x.transpose(0, 2, 1, 3))  # noqa: E731
    got = attncert.attention(t(q), t(k), t(v), layout="bshd", mask=m, key_padding_mask=kp)
    same(got, t(want))


def test_a_broadcast_mask_reaches_the_library_without_a_copy(monkeypatch):
    seen = {}
    real = attncert._core.Reference

    def spy(q, k, v, opts):
        seen.update(opts)
        return real(q, k, v, opts)

    monkeypatch.setattr(attncert._core, "Reference", spy)
    q, k, v = qkv()
    m = random_mask((B, 1, 1, NK), 5)
    attncert.attention(q, k, v, mask=m)
    assert np.shares_memory(seen["mask"], m), seen["mask"].shape
    assert seen["mask"].shape[-2:] == (NQ, NK)


# ---- float (additive) masks ---------------------------------------------------------------------------------

def float_mask(shape, seed, finite=True):
    """torch SDPA's additive mask: 0 or a finite value where attended (when `finite`), -inf where masked."""
    r = rng(seed)
    vals = r.choice([0.0, 0.0, -1.5, 2.0, -1e9, 0.25], size=shape) if finite else np.zeros(shape)
    return np.where(random_mask(shape, seed + 1), vals, -np.inf)


@pytest.mark.parametrize("shape", [(B, 1, NQ, NK), (NQ, NK), (B, 1, 1, NK), (HQ, 1, NK), FULL],
                         ids=["b1qk", "qk", "b11k", "h1k", "bhqk"])
def test_a_float_mask_is_torch_sdpa_s_additive_mask(shape):
    q, k, v = qkv(6)
    fm = float_mask(shape, 7)
    out = attncert.attention(q, k, v, mask=fm)
    np.testing.assert_allclose(out, reference(q, k, v, fm), rtol=1e-12, atol=1e-12)
    # bit for bit: the bool mask of its finite entries and a bias of their values
    same(out, attncert.attention(q, k, v, mask=full(np.isfinite(fm)), bias=np.where(np.isfinite(fm), fm, 0.0)))
    # torch's own float mask (what torch builds from a bool mask), as a float32 tensor
    allowed = torch.from_numpy(random_mask(shape, 8))
    tm = torch.zeros(allowed.shape, dtype=torch.float32).masked_fill(~allowed, float("-inf"))
    same(attncert.attention(q, k, v, mask=tm), attncert.attention(q, k, v, mask=full(allowed.numpy())))


def test_a_float_mask_adds_to_the_bias():
    q, k, v = qkv(9)
    fm = float_mask((B, 1, NQ, NK), 10)
    bias = dyadic((HQ, NQ, NK), 11)
    out = attncert.attention(q, k, v, mask=fm, bias=bias)
    np.testing.assert_allclose(out, reference(q, k, v, fm + bias), rtol=1e-12, atol=1e-12)
    same(out, attncert.attention(q, k, v, mask=full(np.isfinite(fm)), bias=np.where(np.isfinite(fm), fm, 0.0) + bias))


def test_a_float_mask_of_zeros_and_minus_inf_is_its_bool_mask():
    q, k, v = qkv(12)
    allowed = random_mask((B, 1, NQ, NK), 13)
    for dt in (np.float16, np.float32, np.float64):
        same(attncert.attention(q, k, v, mask=additive_of(allowed).astype(dt)),
             attncert.attention(q, k, v, mask=allowed))
    # all finite and zero: no mask at all
    same(attncert.attention(q, k, v, mask=np.zeros((NQ, NK))), attncert.attention(q, k, v))


def test_a_float_mask_s_fully_masked_row_follows_empty_rows():
    q, k, v = qkv(31)
    fm = float_mask((NQ, NK), 32)
    fm[2] = -np.inf
    with pytest.raises(ValueError) as e:
        attncert.attention(q, k, v, mask=fm)
    assert "fully masked" in str(e.value)
    for policy in ("zeros", "nan"):
        out = attncert.attention(q, k, v, mask=fm, empty_rows=policy)
        same(out, attncert.attention(q, k, v, mask=full(np.isfinite(fm)), bias=np.where(np.isfinite(fm), fm, 0.0),
                                     empty_rows=policy))
        assert (np.isnan(out[:, :, 2]) if policy == "nan" else out[:, :, 2] == 0).all()
    # a mask value of many models, finfo(float32).min, is a finite score: attended, with a weight that underflows
    hf = np.where(random_mask((B, 1, 1, NK), 33), 0, np.finfo(np.float32).min).astype(np.float32)
    np.testing.assert_allclose(attncert.attention(q, k, v, mask=hf), reference(q, k, v, hf.astype(np.float64)),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bad,what", [(np.inf, "+inf"), (np.nan, "NaN")], ids=["+inf", "NaN"])
def test_a_float_mask_with_plus_inf_or_nan_is_refused(bad, what):
    q, k, v = qkv()
    fm = np.zeros((NQ, NK))
    fm[2, 3] = bad
    with pytest.raises(ValueError) as e:
        attncert.attention(q, k, v, mask=fm)
    assert what in one_line(e, "mask")
    assert "(2, 3)" in str(e.value)


def test_a_float_mask_whose_sum_with_the_bias_is_inexact_is_refused():
    q, k, v = qkv()
    fm = np.full((NQ, NK), 1e-30)
    with pytest.raises(ValueError) as e:
        attncert.attention(q, k, v, mask=fm, bias=np.full((NQ, NK), 1.0))
    assert "exact" in one_line(e, "mask")
    # float32 values and finfo.min (the mask value of many models): their sum is rounded, refused all the same
    fm = np.where(np.eye(NQ, NK, dtype=bool), np.finfo(np.float32).min, 0).astype(np.float32)
    with pytest.raises(ValueError):
        attncert.attention(q, k, v, mask=fm, bias=np.full((NQ, NK), np.float32(0.1)))


# ---- refusals -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(NQ + 1, NK), (NK + 1,), (3, 1, 1, NK), (B, 3, NQ, NK), (1, B, HQ, NQ, NK)],
                         ids=["n_q+1", "n_k+1", "batch 3", "heads 3", "5-d"])
@pytest.mark.parametrize("dtype", [bool, np.float32])
def test_a_mask_that_does_not_broadcast_is_refused(shape, dtype):
    q, k, v = qkv()
    m = np.ones(shape, dtype=dtype)
    with pytest.raises(ValueError) as e:
        attncert.attention(q, k, v, mask=m)
    msg = one_line(e, "mask")
    assert str(shape) in msg and "(b, h_q, n_q, n_k) = %s" % (FULL,) in msg, msg


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_an_integer_mask_is_refused_naming_both_conventions(dtype):
    q, k, v = qkv()
    with pytest.raises(ValueError) as e:
        attncert.attention(q, k, v, mask=np.ones((NQ, NK), dtype=dtype))
    msg = one_line(e, "mask")
    assert np.dtype(dtype).name in msg and "True = attend" in msg, msg


# ---- key padding masks ---------------------------------------------------------------------------------------

def test_a_key_padding_mask_is_and_ed_with_mask_and_causal():
    q, k, v = qkv(14)
    kp = random_mask((B, NK), 15)
    kp[1, 4:] = False  # a padded tail
    pad = kp[:, None, None, :]
    out = attncert.attention(q, k, v, key_padding_mask=kp)
    same(out, attncert.attention(q, k, v, mask=full(pad)))
    np.testing.assert_allclose(out, reference(q, k, v, additive_of(full(pad))), rtol=1e-12, atol=1e-12)
    m = random_mask((NQ, NK), 16)
    same(attncert.attention(q, k, v, key_padding_mask=kp, mask=m), attncert.attention(q, k, v, mask=full(pad & m)))
    tril = np.tril(np.ones((NQ, NK), dtype=bool))
    same(attncert.attention(q, k, v, key_padding_mask=kp, causal="top-left"),
         attncert.attention(q, k, v, mask=full(pad & tril)))
    fm = float_mask((B, 1, NQ, NK), 17)
    got = attncert.attention(q, k, v, key_padding_mask=torch.from_numpy(kp), mask=fm)
    np.testing.assert_allclose(got, reference(q, k, v, fm + additive_of(pad)), rtol=1e-12, atol=1e-12)


def test_a_key_padding_mask_with_a_batch_all_padding_follows_empty_rows():
    q, k, v = qkv(18)
    kp = random_mask((B, NK), 19)
    kp[0] = False
    with pytest.raises(ValueError):
        attncert.attention(q, k, v, key_padding_mask=kp)
    out = attncert.attention(q, k, v, key_padding_mask=kp, empty_rows="zeros")
    same(out, attncert.attention(q, k, v, mask=full(kp[:, None, None, :]), empty_rows="zeros"))
    assert not out[0].any() and out[1].all()


@pytest.mark.parametrize("bad,words", [
    (np.ones((B, NK), dtype=np.int64), ["int64", "True = a real key"]),
    (np.ones((B, NK), dtype=np.float32), ["float32", "True = a real key"]),
    (np.ones((B, NK + 1), dtype=bool), ["(2, 8)", "(b, n_k) = (2, 7)"]),
    (np.ones((B, 1, 1, NK), dtype=bool), ["(2, 1, 1, 7)", "(b, n_k) = (2, 7)"]),
], ids=["int", "float", "n_k+1", "4-d"])
def test_a_bad_key_padding_mask_is_refused(bad, words):
    q, k, v = qkv()
    with pytest.raises(ValueError) as e:
        attncert.attention(q, k, v, key_padding_mask=bad)
    msg = one_line(e, "key_padding_mask")
    assert all(w in msg for w in words), msg


def test_a_key_padding_mask_with_packed_sequences_is_refused():
    r = rng(20)
    q, k, v = r.standard_normal((6, 2, 4)), r.standard_normal((6, 2, 4)), r.standard_normal((6, 2, 4))
    cu = np.array([0, 2, 6], dtype=np.int32)
    with pytest.raises(ValueError) as e:
        attncert.attention(q, k, v, layout="thd", cu_seqlens_q=cu, cu_seqlens_k=cu,
                           key_padding_mask=np.ones((2, 4), dtype=bool))
    assert "thd" in one_line(e, "key_padding_mask")


# ---- gradients and attncert.testing -----------------------------------------------------------------------------

def test_attention_vjp_takes_every_mask_form():
    q, k, v = qkv(21)
    do = rng(22).standard_normal((B, HQ, NQ, DV))
    fm = float_mask((B, 1, NQ, NK), 23)
    kp = random_mask((B, NK), 24)
    allowed = full(np.isfinite(fm) & kp[:, None, None, :])
    g = attncert.attention_vjp(q, k, v, do, mask=fm, key_padding_mask=kp)
    want = attncert.attention_vjp(q, k, v, do, mask=allowed, bias=np.where(np.isfinite(fm), fm, 0.0))
    for n in ("dq", "dk", "dv"):
        same(getattr(g, n), getattr(want, n))
    assert g.dbias is None  # no bias given: the float mask's values are no bias of the caller's
    # with a bias of the float mask's shape: dbias is the bias's, bit for bit
    bias = dyadic((B, 1, NQ, NK), 25)
    g = attncert.attention_vjp(q, k, v, do, mask=fm, bias=bias)
    want = attncert.attention_vjp(q, k, v, do, mask=full(np.isfinite(fm)),
                                  bias=bias + np.where(np.isfinite(fm), fm, 0.0))
    for n in ("dq", "dk", "dv", "dbias"):
        same(getattr(g, n), getattr(want, n))
    # a bias the float mask's values would widen: its dbias would be a sum of rounded parts, refused
    with pytest.raises(ValueError) as e:
        attncert.attention_vjp(q, k, v, do, mask=fm, bias=np.zeros((NQ, NK)))
    assert "bias" in one_line(e, "mask")
    # a bool mask of any broadcastable shape
    m = random_mask((B, 1, 1, NK), 26)
    g, want = attncert.attention_vjp(q, k, v, do, mask=m), attncert.attention_vjp(q, k, v, do, mask=full(m))
    for n in ("dq", "dk", "dv"):
        same(getattr(g, n), getattr(want, n))


def test_the_testing_assertions_take_the_mask_keywords():
    q, k, v = qkv(27)
    fm = float_mask((B, 1, NQ, NK), 28)
    kp = random_mask((B, NK), 29)
    kp[:, -2:] = False
    out = attncert.attention(q, k, v, mask=fm, key_padding_mask=kp)
    testing.assert_attention_close(out, q, k, v, mask=fm, key_padding_mask=kp, max_ulp=0.5)
    # torch nn.MultiheadAttention's convention (True = padding) read as ours gives another answer: a failure
    wrong = attncert.attention(q, k, v, mask=fm, key_padding_mask=~kp | np.eye(B, NK, dtype=bool), empty_rows="zeros")
    with pytest.raises(AssertionError):
        testing.assert_attention_close(wrong, q, k, v, mask=fm, key_padding_mask=kp, max_ulp=4)
    do = rng(30).standard_normal(out.shape)
    g = attncert.attention_vjp(q, k, v, do, mask=fm, key_padding_mask=kp)
    testing.assert_attention_grads_close(g, q, k, v, do, mask=fm, key_padding_mask=kp, max_ulp=0.5)
    g2 = attncert.attention_vjp(q, k, v, do, mask=np.isfinite(fm))  # the finite values dropped
    with pytest.raises(AssertionError):
        testing.assert_attention_grads_close(g2, q, k, v, do, mask=fm, key_padding_mask=kp, max_ulp=4)
