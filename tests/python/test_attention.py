"""attncert.attention / attention_vjp against `attncert oracle` bit for bit, types in = types out,
bad input as the CLI's one-line message, the GIL released.  Seeds: ATTNCERT_SEED (printed)."""
import os
import re
import subprocess
import tempfile
import threading
import time

import numpy as np
import pytest

import attncert

CLI = os.environ.get("ATTNCERT_CLI")
SEED = int(os.environ.get("ATTNCERT_SEED", "20261202"))
print("ATTNCERT_SEED=%d" % SEED)

needs_cli = pytest.mark.skipif(not CLI, reason="ATTNCERT_CLI (the attncert binary) not set")


def rng(offset=0):
    return np.random.default_rng(SEED + offset)


def qkv(b=1, hq=2, hkv=2, nq=5, nk=7, d=4, dv=3, dtype=np.float64, off=0):
    r = rng(off)
    q = r.standard_normal((b, hq, nq, d)).astype(dtype)
    k = r.standard_normal((b, hkv, nk, d)).astype(dtype)
    v = r.standard_normal((b, hkv, nk, dv)).astype(dtype)
    return q, k, v


def run_cli(args, tmp):
    p = subprocess.run([CLI, "oracle"] + args, capture_output=True, text=True, cwd=tmp)
    return p


def save(tmp, **arrays):
    for name, a in arrays.items():
        np.save(os.path.join(tmp, name + ".npy"), a)


# (python keywords, CLI options, extra arrays) for a set of variants
def variants():
    r = rng(7)
    bias = r.standard_normal((1, 2, 5, 7))
    sink = np.array([0.5, -1.0])
    alibi = np.array([0.25, 0.5])
    keep = r.random((1, 2, 5, 7)) > 0.3
    return [
        ("plain", {}, [], {}),
        ("causal", {"causal": "top-left"}, ["--mask", "causal"], {}),
        ("bottom-right+window+softcap", {"causal": "bottom-right", "window": (2, 0), "softcap": 5.0},
         ["--mask", "causal-bottom-right", "--window", "2,0", "--softcap", "5"], {}),
        ("alibi+bias", {"alibi_slopes": alibi, "bias": bias}, ["--alibi-slopes", "alibi.npy", "--bias", "bias.npy"],
         {"alibi": alibi, "bias": bias}),
        ("sink+dropout", {"sink": sink, "dropout_mask": keep, "dropout_p": "0.25"},
         ["--sink", "sink.npy", "--dropout-mask", "keep.npy", "--dropout-p", "0.25"], {"sink": sink, "keep": keep}),
        ("scale", {"scale": "1/8"}, ["--scale", "1/8"], {}),
    ]


@needs_cli
@pytest.mark.parametrize("target", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", variants(), ids=lambda c: c[0])
def test_forward_matches_cli_bit_for_bit(case, target):
    name, kw, opts, arrays = case
    q, k, v = qkv()
    out, lse = attncert.attention(q, k, v, target=target, return_lse=True, **kw)
    with tempfile.TemporaryDirectory() as tmp:
        save(tmp, q=q, k=k, v=v, **arrays)
        p = run_cli(["--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--target", target, "--write-reference", "ref.npy",
                     "--write-lse", "lse.npy"] + opts, tmp)
        assert p.returncode == 0, p.stderr
        ref = np.load(os.path.join(tmp, "ref.npy"))
        ref_lse = np.load(os.path.join(tmp, "lse.npy"))
    assert out.shape == ref.shape
    np.testing.assert_array_equal(out.astype(np.float64), ref.astype(np.float64))
    np.testing.assert_array_equal(lse.astype(np.float64), ref_lse.astype(np.float64))
    # numpy in -> numpy out in the target's dtype (bfloat16: float32 holding bfloat16 values)
    assert isinstance(out, np.ndarray)
    assert out.dtype == {"float64": np.float64, "float32": np.float32, "float16": np.float16,
                         "bfloat16": np.float32}[target]


@needs_cli
def test_gqa_and_bshd_and_varlen_match_cli():
    q, k, v = qkv(b=2, hq=4, hkv=2, nq=6, nk=6)
    out = attncert.attention(q, k, v, causal="top-left")
    # bshd is the same attention with axes 1 and 2 swapped
    out_bshd = attncert.attention(q.transpose(0, 2, 1, 3).copy(), k.transpose(0, 2, 1, 3).copy(),
                                  v.transpose(0, 2, 1, 3).copy(), causal="top-left", layout="bshd")
    np.testing.assert_array_equal(out_bshd, out.transpose(0, 2, 1, 3))
    # packed thd with two sequences of lengths 3 and 5
    r = rng(3)
    qt, kt, vt = r.standard_normal((8, 4, 4)), r.standard_normal((8, 2, 4)), r.standard_normal((8, 2, 3))
    cu = np.array([0, 3, 8], dtype=np.int32)
    o = attncert.attention(qt, kt, vt, layout="thd", cu_seqlens_q=cu, cu_seqlens_k=cu, causal="bottom-right")
    with tempfile.TemporaryDirectory() as tmp:
        save(tmp, q=qt, k=kt, v=vt, cu=cu)
        p = run_cli(["--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--layout", "thd", "--cu-seqlens-q", "cu.npy",
                     "--cu-seqlens-k", "cu.npy", "--mask", "causal-bottom-right", "--write-reference", "ref.npy"], tmp)
        assert p.returncode == 0, p.stderr
        np.testing.assert_array_equal(o, np.load(os.path.join(tmp, "ref.npy")))


def test_packed_thd_equals_each_sequence_alone_forward_and_backward():
    # thd runs packed (memory O(total tokens), nothing padded): each sequence's outputs, LSE and
    # gradients are bit for bit those of the sequence run alone as bhsd, with every variant that
    # thd takes (GQA, bottom-right causal, window, softcap, per-(b, h) ALiBi, sink), empty
    # sequences included; internal row indices are the packed token indices.
    r = rng(29)
    lq, lk = [3, 0, 5, 1, 7, 2], [4, 2, 5, 3, 7, 0]
    cq, ck = np.concatenate([[0], np.cumsum(lq)]), np.concatenate([[0], np.cumsum(lk)])
    hq, hkv, d, dv = 4, 2, 4, 3
    qt, kt, vt = r.standard_normal((cq[-1], hq, d)), r.standard_normal((ck[-1], hkv, d)), r.standard_normal((ck[-1], hkv, dv))
    slopes = r.uniform(0.1, 1.0, (len(lq), hq))
    sink = r.standard_normal(hq)
    do, dlse = r.standard_normal((cq[-1], hq, dv)), r.standard_normal((hq, cq[-1])).astype(np.float32)
    kw = dict(causal="bottom-right", window=(3, 1), softcap=5.0, sink=sink, empty_rows="zeros")
    o, lse = attncert.attention(qt, kt, vt, layout="thd", cu_seqlens_q=cq.astype(np.int32), cu_seqlens_k=ck.astype(np.int64),
                                alibi_slopes=slopes, return_lse=True, **kw)
    g = attncert.attention_vjp(qt, kt, vt, do, dlse=dlse, layout="thd", cu_seqlens_q=cq.astype(np.int32),
                               cu_seqlens_k=ck.astype(np.int32), alibi_slopes=slopes, **kw)
    for s in range(len(lq)):
        if lq[s] == 0 or lk[s] == 0:
            continue
        bh = lambda x, a, b: x[a:b].transpose(1, 0, 2)[None].copy()  # (t, h, d) -> (1, h, t, d)
        q1, k1, v1 = bh(qt, cq[s], cq[s + 1]), bh(kt, ck[s], ck[s + 1]), bh(vt, ck[s], ck[s + 1])
        o1, lse1 = attncert.attention(q1, k1, v1, alibi_slopes=slopes[s], return_lse=True, **kw)
        np.testing.assert_array_equal(o[cq[s]:cq[s + 1]], o1[0].transpose(1, 0, 2))
        np.testing.assert_array_equal(lse[:, cq[s]:cq[s + 1]], lse1[0])
        g1 = attncert.attention_vjp(q1, k1, v1, bh(do, cq[s], cq[s + 1]), dlse=dlse[None, :, cq[s]:cq[s + 1]].copy(),
                                    alibi_slopes=slopes[s], **kw)
        np.testing.assert_array_equal(g.dq[cq[s]:cq[s + 1]], g1.dq[0].transpose(1, 0, 2))
        np.testing.assert_array_equal(g.dk[ck[s]:ck[s + 1]], g1.dk[0].transpose(1, 0, 2))
        np.testing.assert_array_equal(g.dv[ck[s]:ck[s + 1]], g1.dv[0].transpose(1, 0, 2))
    # keys of an empty query sequence get exact zero gradients
    np.testing.assert_array_equal(g.dk[ck[1]:ck[2]], 0)


@needs_cli
@pytest.mark.parametrize("case", [v for v in variants() if v[0] in ("plain", "bottom-right+window+softcap", "alibi+bias",
                                                                  "sink+dropout")], ids=lambda c: c[0])
@pytest.mark.parametrize("target", ["float64", "bfloat16"])
def test_vjp_matches_cli_bit_for_bit(case, target):
    name, kw, opts, arrays = case
    q, k, v = qkv()
    do = rng(11).standard_normal((1, 2, 5, 3))
    g = attncert.attention_vjp(q, k, v, do, target=target, **kw)
    assert isinstance(g, attncert.AttentionGrads)
    with tempfile.TemporaryDirectory() as tmp:
        save(tmp, q=q, k=k, v=v, do=do, **arrays)
        p = run_cli(["--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--target", target, "--grad-out", "do.npy",
                     "--write-grad-references", "g"] + opts, tmp)
        assert p.returncode == 0, p.stderr
        for n in ("dq", "dk", "dv", "dbias", "dsink"):
            f = os.path.join(tmp, "g.%s.npy" % n)
            got = getattr(g, n)
            if not os.path.exists(f):
                assert got is None, n
                continue
            np.testing.assert_array_equal(np.asarray(got, dtype=np.float64), np.load(f).astype(np.float64), err_msg=n)
    assert (g.dbias is None) == ("bias" not in kw)
    assert (g.dsink is None) == ("sink" not in kw)


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    q, k, v = qkv()
    for dt in (torch.float64, torch.float32, torch.bfloat16, torch.float16):
        tq, tk, tv = (torch.from_numpy(x).to(dt) for x in (q, k, v))
        out = attncert.attention(tq, tk, tv, causal="top-left")
        assert isinstance(out, torch.Tensor) and out.dtype == dt and out.shape == (1, 2, 5, 3)
        # the same bits as the numpy call on the same values (bfloat16 given as float32)
        ref = attncert.attention(tq.to(torch.float64).numpy(), tk.to(torch.float64).numpy(), tv.to(torch.float64).numpy(),
                                 causal="top-left", target={torch.float64: "float64", torch.float32: "float32",
                                                            torch.bfloat16: "bfloat16", torch.float16: "float16"}[dt])
        np.testing.assert_array_equal(out.to(torch.float64).numpy(), ref.astype(np.float64))
    g = attncert.attention_vjp(tq, tk, tv, torch.ones(1, 2, 5, 3, dtype=torch.float16))
    assert all(isinstance(t, torch.Tensor) and t.dtype == torch.float16 for t in (g.dq, g.dk, g.dv))


def test_exact_scale_of_a_float():
    # a float scale is taken at its exact binary value: 0.1 is not 1/10
    q, k, v = qkv()
    a = attncert.attention(q, k, v, scale=0.1)
    b = attncert.attention(q, k, v, scale="0.1000000000000000055511151231257827021181583404541015625")
    np.testing.assert_array_equal(a, b)


@needs_cli
@pytest.mark.parametrize("bad", [
    ("v with another length", lambda q, k, v: (q, k, v[:, :, :3]), {}, []),
    ("window", lambda q, k, v: (q, k, v), {"window": "2"}, ["--window", "2"]),
    ("softcap <= 0", lambda q, k, v: (q, k, v), {"softcap": "-1"}, ["--softcap", "-1"]),
    ("fully masked row", lambda q, k, v: (q, k, v), {"mask": np.zeros((5, 7), dtype=bool)}, ["--mask", "mask.npy"]),
    ("NaN in a used value", lambda q, k, v: (q, k, np.where(np.arange(3) == 1, np.nan, v)), {}, []),
], ids=lambda b: b[0] if isinstance(b, tuple) else None)
def test_bad_input_raises_the_cli_message(bad):
    name, change, kw, opts = bad
    q, k, v = change(*qkv())
    with pytest.raises(ValueError) as e:
        attncert.attention(q, k, v, **kw)
    with tempfile.TemporaryDirectory() as tmp:
        save(tmp, q=q, k=k, v=v)
        if "mask" in kw:
            save(tmp, mask=kw["mask"])
        p = run_cli(["--q", "q.npy", "--k", "k.npy", "--v", "v.npy"] + opts, tmp)
    assert p.returncode == 2
    # the same message, each option named by its keyword: --softcap is softcap= ("softcap:" when it heads the
    # message, "softcap must ..." before a verb, "empty_rows='zeros' or 'nan'" before its values)
    def keyword(m):
        name, verb, values = m.group(1).replace("-", "_"), m.group(2), m.group(3)
        if verb:
            return name + verb
        if values:
            return name + "=" + " or ".join("'%s'" % x for x in values[1:].split("|"))
        return name + "="

    as_keywords = re.sub(r"--([a-z][a-z0-9-]*)( must| is| needs| has| does)?( [a-z][a-z0-9_]*\|[a-z0-9_|]+)?", keyword,
                         p.stderr.strip())
    assert as_keywords.replace("=:", ":") == "attncert: " + str(e.value), (p.stderr, str(e.value))
    assert "--" not in str(e.value) and "\n" not in str(e.value)
    if name == "softcap <= 0":
        assert str(e.value) == "softcap must be > 0 (got '-1')"


def test_bad_keywords():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="causal: must be"):
        attncert.attention(q, k, v, causal="yes")
    with pytest.raises(TypeError):
        attncert.attention(q, k, v, nonsense=1)
    with pytest.raises(ValueError, match="default target"):
        attncert.attention(q.astype(np.int64), k, v)
    with pytest.raises(ValueError, match="do"):
        attncert.attention_vjp(q, k, v, np.ones((1, 2, 5, 4)))


def test_gil_released():
    # while one thread computes, another keeps running Python code
    q, k, v = qkv(nq=256, nk=256, d=64, dv=64)
    ticks = [0]
    done = threading.Event()

    def spin():
        while not done.is_set():
            ticks[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    t0 = time.perf_counter()
    attncert.attention(q, k, v, threads=1)
    dt = time.perf_counter() - t0
    done.set()
    t.join()
    # a held GIL lets the spinner run only at the switch interval (5 ms): a few hundred ticks at most
    assert dt > 0.01 and ticks[0] > 10000, (dt, ticks[0])
