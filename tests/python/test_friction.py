"""Issue 32, the friction a kernel author meets in the Python API (items 1, 2, 3, 4 and 12):

  1. causal takes exactly None, "top-left" or "bottom-right": a bool is refused, naming both conventions
     (FlashAttention's causal=True is bottom-right, torch SDPA's is_causal=True is top-left);
  2. window=(L, None) is FlashAttention's newer spelling of an unbounded side; a malformed window is
     explained in one line;
  3. q, k, v (or a candidate, or do) whose shapes fit only the other of bhsd / bshd are refused with a
     message that says so, and every grading failure says the layout;
  4. assert_attention_grads_close takes the tuple torch.autograd.grad returns (dq, dk, dv[, dbias][, dsink]),
     a list, a dict or a named tuple;
 12. a failing assertion's pytest traceback stops at the caller's line: attncert.testing's frames are hidden.
Seeds: ATTNCERT_SEED."""
import collections
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import attncert
from attncert import testing

SEED = int(os.environ.get("ATTNCERT_SEED", "20261202"))


def rand(*shape, seed=0):
    return np.random.default_rng(SEED + seed).standard_normal(shape)


def qkv(b=1, hq=2, hkv=2, nq=5, nk=7, d=4, dv=3, seed=0):
    return rand(b, hq, nq, d, seed=seed), rand(b, hkv, nk, d, seed=seed + 1), rand(b, hkv, nk, dv, seed=seed + 2)


def softmax_attention(q, k, v, allowed):
    """float64 softmax(q k^T / sqrt(d)) v over (b, h, n, d) with a boolean (n_q, n_k) mask: an independent
    reference, close to the exact values (it is graded at 1e-12 below, not bit for bit)."""
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(q.shape[-1])
    s = np.where(allowed, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), v)


def one_line(e):
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


class NoCluster:
    """A client whose use fails the test: attncert.distributed checks the arguments before submitting."""

    def submit(self, *a, **k):
        raise AssertionError("a task was submitted")

    def gather(self, *a, **k):
        raise AssertionError("gather was called")

    def scheduler_info(self):
        raise AssertionError("the scheduler was asked")

    compute = replicate = submit


def entry_points(q, k, v, with_distributed=True):
    """(name, call(**kw)) for every Python entry point that takes the variant keywords."""
    o = attncert.attention(q, k, v)
    do = np.ones_like(o)
    g = attncert.attention_vjp(q, k, v, do)
    calls = [("attention", lambda **kw: attncert.attention(q, k, v, **kw)),
             ("attention_vjp", lambda **kw: attncert.attention_vjp(q, k, v, do, **kw)),
             ("assert_attention_close", lambda **kw: testing.assert_attention_close(o, q, k, v, max_ulp=1e9, **kw)),
             ("assert_attention_grads_close",
              lambda **kw: testing.assert_attention_grads_close(g, q, k, v, do, max_ulp=1e9, **kw))]
    if with_distributed:
        try:
            import attncert.distributed as ad
        except ImportError:  # dask not installed: the single-process entry points only
            return calls
        c = NoCluster()
        calls += [("distributed.attention", lambda **kw: ad.attention(q, k, v, client=c, **kw)),
                  ("distributed.attention_vjp", lambda **kw: ad.attention_vjp(q, k, v, do, client=c, **kw)),
                  ("distributed.grade", lambda **kw: ad.grade(o, q, k, v, client=c, **kw)),
                  ("distributed.assert_attention_close",
                   lambda **kw: ad.assert_attention_close(o, q, k, v, client=c, **kw))]
    return calls


# ---- 1. causal: None, "top-left" or "bottom-right", never a bool ------------------------------------------

@pytest.mark.parametrize("value", [True, False, np.bool_(True)], ids=["True", "False", "np.bool_"])
def test_a_bool_causal_is_refused_naming_both_conventions(value):
    q, k, v = qkv()
    for name, call in entry_points(q, k, v):
        with pytest.raises(TypeError) as e:
            call(causal=value)
        msg = one_line(e)
        assert msg.startswith("causal: "), (name, msg)
        # each convention with the value that writes it
        assert "FlashAttention's causal=True means 'bottom-right'" in msg, (name, msg)
        assert "torch SDPA's is_causal=True means 'top-left'" in msg, (name, msg)
        if value:
            assert msg.endswith("write causal='bottom-right' or causal='top-left'"), (name, msg)
        else:
            assert "write causal=None for no causal mask" in msg, (name, msg)
        assert "--" not in msg, (name, msg)


def test_causal_values_other_than_the_three_are_refused():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^causal: must be None, 'top-left' or 'bottom-right', got 'yes'$"):
        attncert.attention(q, k, v, causal="yes")
    with pytest.raises(ValueError, match="causal"):
        attncert.attention(q, k, v, causal="causal")
    for bad in (1, 0, 1.0, 1j, ["top-left"]):
        with pytest.raises(TypeError, match=r"^causal: must be None, 'top-left' or 'bottom-right'"):
            attncert.attention(q, k, v, causal=bad)


def test_causal_strings_mean_their_alignments():
    q, k, v = qkv(nq=5, nk=7)
    i, j = np.arange(5)[:, None], np.arange(7)[None, :]
    for causal, allowed in ((None, np.ones((5, 7), bool)), ("top-left", j <= i), ("bottom-right", j <= i + 7 - 5)):
        out = attncert.attention(q, k, v, causal=causal)
        np.testing.assert_allclose(out, softmax_attention(q, k, v, allowed), rtol=0, atol=1e-12)
    assert not np.allclose(attncert.attention(q, k, v, causal="top-left"),
                           attncert.attention(q, k, v, causal="bottom-right"))


# ---- 2. window: None as an unbounded side; a malformed window explained -----------------------------------

def test_window_none_is_an_unbounded_side():
    q, k, v = qkv(nq=6, nk=6)
    for bounded, spellings in (((2, -1), [(2, None), [2, None], np.array([2, -1])]),
                               ((-1, 1), [(None, 1), [None, 1]]),
                               ((-1, -1), [(None, None)])):
        want = attncert.attention(q, k, v, window=bounded)
        for w in spellings:
            np.testing.assert_array_equal(attncert.attention(q, k, v, window=w), want)
    # and the side means what it says: key j allowed iff i - 2 <= j
    i, j = np.arange(6)[:, None], np.arange(6)[None, :]
    np.testing.assert_allclose(attncert.attention(q, k, v, window=(2, None)), softmax_attention(q, k, v, j >= i - 2),
                               rtol=0, atol=1e-12)
    np.testing.assert_array_equal(attncert.attention(q, k, v, window=(None, None)), attncert.attention(q, k, v))
    out = attncert.attention(q, k, v, window=(2, None))
    testing.assert_attention_close(out, q, k, v, max_ulp=0.5, window=(2, None))
    g = attncert.attention_vjp(q, k, v, np.ones_like(out), window=(None, 1))
    testing.assert_attention_grads_close(g, q, k, v, np.ones_like(out), max_ulp=0.5, window=(-1, 1))


@pytest.mark.parametrize("window,kind,words", [
    (4, TypeError, "got 4 (int)"),
    ((1, 2, 3), ValueError, "got 3 items: (1, 2, 3)"),
    ((5,), ValueError, "got 1 item: (5,)"),
    ((1.5, 0), TypeError, "the left side must be an integer >= -1 or None, got 1.5 (float)"),
    ((0, "1"), TypeError, "the right side must be an integer >= -1 or None, got '1' (str)"),
    ((True, 0), TypeError, "the left side must be an integer >= -1 or None, got True (bool)"),
    ((-2, 0), ValueError, "the left side must be an integer >= -1 or None, got -2"),
    ((0, 2 ** 63), ValueError, "the right side must be an integer <= 2^63 - 1, got 9223372036854775808"),
    ({"left": 1, "right": 2}, TypeError, "(dict)"),
], ids=["int", "triple", "single", "float side", "str side", "bool side", "-2", "2^63", "dict"])
def test_a_malformed_window_is_explained_in_one_line(window, kind, words):
    q, k, v = qkv()
    for name, call in entry_points(q, k, v):
        with pytest.raises(kind) as e:
            call(window=window)
        msg = one_line(e)
        assert msg.startswith("window: "), (name, msg)
        assert words in msg, (name, msg)
        if "side" not in words:  # a wrong shape of the whole: the form it must take
            assert "(left, right)" in msg and "None" in msg and "-1" in msg, (name, msg)


# ---- 3. shapes against the declared layout -----------------------------------------------------------------

def bshd(*xs):
    return tuple(np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in xs)


def test_bshd_tensors_without_layout_are_refused_where_the_shapes_decide():
    # decoding one token against a 16-token cache, 4 query heads over 2 kv heads, in (b, s, h, d)
    q, k, v = bshd(*qkv(b=2, hq=4, hkv=2, nq=1, nk=16, d=8, dv=8))
    assert q.shape == (2, 1, 4, 8) and k.shape == (2, 16, 2, 8)
    want = attncert.attention(q, k, v, layout="bshd")
    do = np.ones_like(want)
    calls = [("attention", lambda: attncert.attention(q, k, v)),
             ("attention_vjp", lambda: attncert.attention_vjp(q, k, v, do)),
             ("assert_attention_close", lambda: testing.assert_attention_close(want, q, k, v)),
             ("assert_attention_grads_close",
              lambda: testing.assert_attention_grads_close({"dq": q, "dk": k, "dv": v}, q, k, v, do))]
    for name, call in calls:
        with pytest.raises(ValueError) as e:
            call()
        msg = one_line(e)
        assert msg.startswith("layout: "), (name, msg)
        assert "q (2, 1, 4, 8), k (2, 16, 2, 8), v (2, 16, 2, 8)" in msg, (name, msg)
        assert "do not fit layout='bhsd' (b, h, s, d)" in msg and "h_q = 1 is not a multiple of h_kv = 16" in msg, \
            (name, msg)
        assert "they fit layout='bshd' (b, s, h, d)" in msg, (name, msg)
    # the same tensors with their layout declared: computed (and right)
    heads = (x.transpose(0, 2, 1, 3) for x in (q, k.repeat(2, 2), v.repeat(2, 2)))  # kv head h // 2 for query head h
    ref = softmax_attention(*heads, np.ones((1, 16), bool))
    np.testing.assert_allclose(want, ref.transpose(0, 2, 1, 3), rtol=0, atol=1e-12)


def test_bhsd_tensors_declared_bshd_are_refused():
    q, k, v = qkv(b=2, hq=4, hkv=2, nq=3, nk=5, d=8, dv=8)  # (2, 4, 3, 8): as bshd, h_q = 3 and h_kv = 5
    with pytest.raises(ValueError) as e:
        attncert.attention(q, k, v, layout="bshd")
    msg = one_line(e)
    assert "do not fit layout='bshd' (b, s, h, d): h_q = 3 is not a multiple of h_kv = 5" in msg, msg
    assert "they fit layout='bhsd' (b, h, s, d)" in msg, msg


def test_valid_bhsd_inputs_are_not_refused():
    # shapes that fit both layouts, or bhsd only, or neither (the library's own message then)
    for shapes in [((1, 2, 5, 4), (1, 2, 7, 4)), ((2, 4, 1, 8), (2, 2, 16, 8)), ((1, 6, 4, 4), (1, 3, 2, 4)),
                   ((1, 1, 1, 4), (1, 1, 1, 4))]:
        q, k = rand(*shapes[0]), rand(*shapes[1], seed=1)
        v = rand(*shapes[1], seed=2)
        attncert.attention(q, k, v)
        out = attncert.attention(q, k, v)
        testing.assert_attention_close(out, q, k, v, max_ulp=0.5)
    q, k, v = rand(1, 3, 4, 4), rand(1, 2, 6, 4), rand(1, 2, 6, 4)  # h_q % h_kv != 0 in both readings
    with pytest.raises(ValueError) as e:
        attncert.attention(q, k, v)
    assert "h_q = 3 is not a multiple of h_kv = 2" in str(e.value) and "layout=" not in str(e.value), str(e.value)


def test_a_candidate_in_the_other_layout_is_refused_saying_so():
    q, k, v = qkv(b=1, hq=2, hkv=2, nq=5, nk=7, d=4, dv=3)
    out = attncert.attention(q, k, v)
    flipped = out.transpose(0, 2, 1, 3)  # the kernel wrote (b, s, h, d)
    for call in (lambda: testing.assert_attention_close(flipped, q, k, v),
                 lambda: testing.assert_attention_close(out, q, k, v, rule="flash", baseline=flipped)):
        with pytest.raises(ValueError) as e:
            call()
        msg = one_line(e)
        assert "shape (1, 5, 2, 3) fits layout 'bshd' (b, s, h, d)" in msg, msg
        assert "not the declared layout='bhsd' (b, h, s, d), whose shape is (1, 2, 5, 3)" in msg, msg
    # declared bshd, the candidate in bhsd
    qs, ks, vs = bshd(q, k, v)
    with pytest.raises(ValueError, match=r"fits layout 'bhsd' \(b, h, s, d\), not the declared layout='bshd'"):
        testing.assert_attention_close(out, qs, ks, vs, layout="bshd")
    # gradients and the cotangent
    do = np.ones_like(out)
    g = attncert.attention_vjp(q, k, v, do)
    with pytest.raises(ValueError, match=r"^dk: shape \(1, 7, 2, 4\) fits layout 'bshd'"):
        testing.assert_attention_grads_close(dict(dq=g.dq, dk=g.dk.transpose(0, 2, 1, 3), dv=g.dv), q, k, v, do)
    with pytest.raises(ValueError, match=r"^do: shape \(1, 5, 2, 3\) fits layout 'bshd'"):
        attncert.attention_vjp(q, k, v, do.transpose(0, 2, 1, 3))
    # a square candidate (h = s) is its own transpose: graded, not refused
    q, k, v = qkv(hq=3, hkv=3, nq=3, nk=3, d=3, dv=3)
    testing.assert_attention_close(attncert.attention(q, k, v), q, k, v, max_ulp=0.5)


@pytest.mark.parametrize("layout,read", [("bhsd", "(b, h, s, d)"), ("bshd", "(b, s, h, d)")])
def test_every_grading_failure_says_the_layout(layout, read):
    q, k, v = qkv(b=1, hq=2, hkv=2, nq=5, nk=7, d=4, dv=3)
    if layout == "bshd":
        q, k, v = bshd(q, k, v)
    out, lse = attncert.attention(q, k, v, layout=layout, return_lse=True)
    do = np.ones_like(out)
    g = attncert.attention_vjp(q, k, v, do, layout=layout)
    line = "\n  layout %s: q, k, v and the output read as %s\n" % (layout, read)
    grad_line = "\n  layout %s: q, k, v, do and the gradients read as %s\n" % (layout, read)
    for call, want, n in (
            (lambda: testing.assert_attention_close(out + 1e-6, q, k, v, layout=layout), line, 1),
            (lambda: testing.assert_attention_close(out, q, k, v, layout=layout, lse=lse + 1e-6), line, 1),
            (lambda: testing.assert_attention_close(out + 1e-6, q, k, v, layout=layout, rule="flash",
                                                    baseline=out + 1e-9), line, 1),
            (lambda: testing.assert_attention_grads_close(dict(dq=g.dq + 1e-6, dk=g.dk, dv=g.dv + 1e-6), q, k, v, do,
                                                          layout=layout), grad_line, 2)):
        with pytest.raises(AssertionError) as e:
            call()
        assert str(e.value).count(want) == n, str(e.value)
    with pytest.raises(AssertionError) as e:
        testing.assert_attention_grads_close(dict(dq=g.dq, dk=g.dk + 1e-6, dv=g.dv), q, k, v, do, layout=layout)
    assert str(e.value).startswith("dk is not close") and grad_line in str(e.value), str(e.value)


def test_thd_failures_say_the_layout():
    q, k, v = rand(9, 2, 4), rand(9, 2, 4, seed=1), rand(9, 2, 3, seed=2)
    cu = np.array([0, 4, 9], dtype=np.int32)
    out = attncert.attention(q, k, v, layout="thd", cu_seqlens_q=cu, cu_seqlens_k=cu)
    with pytest.raises(AssertionError, match=r"\n  layout thd: q, k, v and the output read as \(t, h, d\)\n"):
        testing.assert_attention_close(out + 1e-6, q, k, v, layout="thd", cu_seqlens_q=cu, cu_seqlens_k=cu)


# ---- 4. the gradients as torch.autograd.grad returns them ----------------------------------------------------

def torch_grads(q, k, v, do, perturb_dq=1.0):
    torch = pytest.importorskip("torch")
    tq, tk, tv = (torch.from_numpy(x).requires_grad_() for x in (q, k, v))
    s = (tq @ tk.transpose(-1, -2)) / np.sqrt(q.shape[-1])
    out = torch.softmax(s, -1) @ tv
    dq, dk, dv = torch.autograd.grad(out, (tq, tk, tv), torch.from_numpy(do))
    return dq * perturb_dq, dk, dv


def test_the_tuple_of_torch_autograd_grad_is_graded():
    q, k, v = qkv()
    do = rand(1, 2, 5, 3, seed=5)
    grads = torch_grads(q, k, v, do)
    assert type(grads) is tuple
    g = testing.assert_attention_grads_close(grads, q, k, v, do, rule="assert-close")
    assert set(g) == {"dq", "dk", "dv"}
    testing.assert_attention_grads_close(list(grads), q, k, v, do, rule="flash", baseline=grads)
    # positions are (dq, dk, dv): a perturbed dq fails as dq, and a swapped order fails
    with pytest.raises(AssertionError) as e:
        testing.assert_attention_grads_close(torch_grads(q, k, v, do, 1.001), q, k, v, do, rule="assert-close")
    assert str(e.value).startswith("dq is not close") and "dk is not close" not in str(e.value), str(e.value)
    qs, ks, vs = qkv(nq=5, nk=5, d=3, dv=3)
    dos = rand(1, 2, 5, 3, seed=6)
    dq, dk, dv = torch_grads(qs, ks, vs, dos)
    with pytest.raises(AssertionError, match="dq is not close"):
        testing.assert_attention_grads_close((dk, dq, dv), qs, ks, vs, dos, rule="assert-close")


def test_gradients_as_dict_named_tuple_and_longer_tuples():
    q, k, v = qkv()
    do = rand(1, 2, 5, 3, seed=5)
    bias, sink = rand(5, 7, seed=7), rand(2, seed=8)
    g = attncert.attention_vjp(q, k, v, do, bias=bias, sink=sink)
    Mine = collections.namedtuple("Mine", "dq dk dv dbias dsink")
    for form in (g, tuple(g), list(g), Mine(*g), g._asdict(), dict(g._asdict())):
        grades = testing.assert_attention_grads_close(form, q, k, v, do, bias=bias, sink=sink, max_ulp=0.5)
        assert set(grades) == {"dq", "dk", "dv", "dbias", "dsink"}
    # the gradients this call grades, in order: autograd.grad(out, (q, k, v, sink)) is (dq, dk, dv, dsink)
    gs = attncert.attention_vjp(q, k, v, do, sink=sink)
    testing.assert_attention_grads_close((gs.dq, gs.dk, gs.dv, gs.dsink), q, k, v, do, sink=sink, max_ulp=0.5)
    gb = attncert.attention_vjp(q, k, v, do, bias=bias)
    testing.assert_attention_grads_close((gb.dq, gb.dk, gb.dv, gb.dbias), q, k, v, do, bias=bias, max_ulp=0.5)
    with pytest.raises(AssertionError, match="^dsink is not close"):  # the fourth is dsink here, and graded
        testing.assert_attention_grads_close((gs.dq, gs.dk, gs.dv, gs.dsink * 1.01), q, k, v, do, sink=sink,
                                             max_ulp=0.5)
    # a plain tuple of 3 for a call that grades dbias too is not enough, and says what is expected
    with pytest.raises(ValueError) as e:
        testing.assert_attention_grads_close((gb.dq, gb.dk, gb.dv), q, k, v, do, bias=bias)
    msg = one_line(e)
    assert msg == ("actual: a sequence of 3 gradients; this call grades (dq, dk, dv, dbias): give them in that order "
                   "(or all five of attncert.AttentionGrads, None where one does not apply), a dict or a named "
                   "tuple"), msg
    with pytest.raises(ValueError, match=r"^baseline: a sequence of 2 gradients"):
        testing.assert_attention_grads_close(tuple(gb)[:4], q, k, v, do, bias=bias, rule="flash",
                                             baseline=(gb.dq, gb.dk))
    with pytest.raises(ValueError, match=r"^assert_attention_grads_close: actual has no dk \(this call grades dq, dk"):
        testing.assert_attention_grads_close((gb.dq, None, gb.dv), q, k, v, do)
    with pytest.raises(TypeError, match=r"^actual: must be \(dq, dk, dv\), a dict or a named tuple of gradients, got "
                                        r"an array of shape \(1, 2, 5, 4\)"):
        testing.assert_attention_grads_close(gb.dq, q, k, v, do)


# ---- 12. attncert.testing's frames hidden from pytest's traceback ---------------------------------------------

CALLER = '''
import numpy as np
import attncert
from attncert import testing


def qkv():
    r = np.random.default_rng(0)
    return r.standard_normal((1, 2, 5, 4)), r.standard_normal((1, 2, 7, 4)), r.standard_normal((1, 2, 7, 3))


def test_output():
    q, k, v = qkv()
    out = attncert.attention(q, k, v)
    testing.assert_attention_close(out + 1e-6, q, k, v, rule="ulp")  # CALLER LINE OUTPUT


def test_grads():
    q, k, v = qkv()
    do = np.ones((1, 2, 5, 3))
    g = attncert.attention_vjp(q, k, v, do)
    testing.assert_attention_grads_close(dict(dq=g.dq, dk=g.dk + 1e-6, dv=g.dv), q, k, v, do)  # CALLER LINE GRADS


def test_lse():
    q, k, v = qkv()
    out, lse = attncert.attention(q, k, v, return_lse=True)
    testing.assert_attention_close(out, q, k, v, lse=lse + 1e-6)  # CALLER LINE LSE


def test_shape():
    q, k, v = qkv()
    testing.assert_attention_close(np.zeros((1, 5, 2, 3)), q, k, v)  # CALLER LINE SHAPE
'''


@pytest.mark.parametrize("tb", ["long", "short", "auto"])
def test_pytest_tracebacks_stop_at_the_callers_line(tmp_path, tb):
    (tmp_path / "test_caller.py").write_text(textwrap.dedent(CALLER))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(attncert.__file__)),
                                                   env.get("PYTHONPATH", "")] if p)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=" + tb,
                        "-o", "addopts=", str(tmp_path / "test_caller.py")],
                       cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    assert "4 failed" in out, out
    for line in ("CALLER LINE OUTPUT", "CALLER LINE GRADS", "CALLER LINE LSE", "CALLER LINE SHAPE"):
        assert line in out, out
    # none of attncert.testing's frames (nor the layout checks it calls in attncert/__init__.py)
    assert os.path.join("attncert", "testing.py") not in out, out
    for frame in ("in assert_attention_close", "in assert_attention_grads_close", "in _check", "in _cached",
                  "in make", "def _check", "raise AssertionError(_message", "in _check_transposed"):
        assert frame not in out, (frame, out)
    # and the failures themselves
    assert "attention output is not close" in out and "dk is not close" in out and "LSE is not close" in out, out
    assert "actual: shape (1, 5, 2, 3)" in out, out
