"""The Python argument conversion (issue 28): every public entry point refuses a bad argument with an
exception whose message names the parameter, never with pybind11's "Unable to cast", a warning, a
NotImplementedError, StopIteration or a crash.

    TypeError    the Python type is not one the parameter takes (a str or float for an integer, a bool for a
                 number, a complex number, a non-callable diagnostic's wrong return type)
    ValueError   the value is out of range, NaN/Inf, complex or meta/sparse arrays, bad shapes (the CLI's text)
    MemoryError  an array whose conversion to binary64 cannot be allocated, with the bytes asked for

The regression tests of the issue's findings come first, then the sweep: each public entry point with a
call that succeeds, then every parameter replaced by bad values of each kind (wrong type, negative, huge,
NaN, complex, empty).  The distributed entry points are swept with a stand-in client that fails the test if
anything reaches it: their arguments are checked before any task is submitted."""
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import attncert
import attncert.testing as at

torch = pytest.importorskip("torch")

ACCEPTED = (ValueError, TypeError, MemoryError)
# the arrays of 2^37 elements below need 2 TiB to convert: refused before allocating on a machine with less
SMALL_MACHINE = 0 < attncert._args.memory_with_swap() < 2 ** 40


def qkv(dtype=np.float64):
    r = np.random.default_rng(28)
    return (r.standard_normal((1, 2, 3, 4)).astype(dtype), r.standard_normal((1, 2, 5, 4)).astype(dtype),
            r.standard_normal((1, 2, 5, 3)).astype(dtype))


def spellings(name):
    """The spellings a message may use for a parameter: its Python name, the CLI's (--alibi-slopes), the
    library's upper-case tensor names (Q, K, V, dO)."""
    s = {name, name.replace("_", "-"), "--" + name.replace("_", "-")}
    if name in ("q", "k", "v"):
        s.add(name.upper())
    if name == "do":
        s |= {"dO", "dout"}
    s |= {"start": {"--from"}, "stop": {"--to"}}.get(name, set())  # drift's messages in the CLI's words
    return s


def names_parameter(message, name):
    low = message.lower()
    return any(sp.lower() in low for sp in spellings(name))


def raises_naming(call, name, kinds=ACCEPTED):
    """call() raises one of `kinds`, with a one-line message that names `name`, and warns nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ComplexWarning / UserWarning on the way is a failure
        with pytest.raises(kinds) as e:
            call()
    msg = str(e.value)
    assert names_parameter(msg, name), "%s: %s(%r) does not name it" % (name, type(e.value).__name__, msg)
    assert "Unable to cast" not in msg, msg
    return e.value


# ---- 1. complex arrays ------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda a: a.astype(np.complex64), lambda a: a.astype(np.complex128),
                                  lambda a: torch.from_numpy(a.astype(np.complex128))],
                         ids=["complex64", "complex128", "torch.complex128"])
def test_complex_arrays_are_refused_without_a_warning(make):
    q, k, v = qkv()
    for call, name in ((lambda: attncert.rank(make(q[0, 0] @ k[0, 0].T)), "scores"),
                       (lambda: attncert.rank(q=make(q[0, 0]), k=k[0, 0]), "q"),
                       (lambda: attncert.attention(q, make(k), v, target="float64"), "k"),
                       (lambda: attncert.attention(q, k, v, bias=make(np.zeros((3, 5)))), "bias")):
        e = raises_naming(call, name, ValueError)
        assert "complex" in str(e)
    e = raises_naming(lambda: attncert.attention(q, k, v, scale=np.complex128(0.5)), "scale", TypeError)
    assert "complex" in str(e)


# ---- 2. what a drift diagnostic returns -------------------------------------------------------------------

@pytest.mark.parametrize("value,kind", [(2.9, TypeError), ("2", TypeError), (True, TypeError), (np.float64(2), TypeError),
                                        (np.array(2), TypeError), (3, ValueError), (-1, ValueError),
                                        (10 ** 30, ValueError)],
                         ids=["2.9", "'2'", "True", "np.float64", "0-d array", "3 > min(m, n)", "-1", "10**30"])
def test_a_diagnostic_rank_is_an_int_within_min_m_n(value, kind):
    def mine(M):
        return value

    with pytest.raises(kind) as e:
        attncert.drift("two-token", 0.1, 1.0, points=3, recipes="fp64", policies="numpy", diagnostic={"mine": mine})
    assert "diagnostic 'mine' returned " + repr(value) in str(e.value), str(e.value)


def test_a_diagnostic_may_return_numpy_integers():
    d = attncert.drift("two-token", 0.1, 1.0, points=3, recipes="fp64", policies="numpy",
                       diagnostic={"np": lambda M: np.linalg.matrix_rank(M), "i8": lambda M: np.int8(2), "zero": lambda M: 0})
    assert d.ranks("fp64", "diagnostic:np") == [2, 2, 2]
    assert d.ranks("fp64", "diagnostic:zero") == [0, 0, 0]


# ---- 3. the command line's limits on every numeric parameter ----------------------------------------------

@pytest.mark.parametrize("call,name", [
    (lambda: attncert.rank(np.eye(2), max_bits=3), "max_bits"),             # rank --max-precision >= 128
    (lambda: attncert.rank(np.eye(2), max_bits=127), "max_bits"),
    (lambda: attncert.rank(np.eye(2), max_bits=(1 << 20) + 1), "max_bits"),
    (lambda: attncert.rank(np.eye(2), deflate_max_k=4097), "deflate_max_k"),
    (lambda: attncert.drift("two-token", 0.1, 1.0, points=3, max_bits=64), "max_bits"),  # drift --max-precision >= 128
    (lambda: attncert.drift("two-token", 0.1, 1.0, points=10 ** 7 + 1), "points"),
    (lambda: attncert.drift("random", 0.1, 1.0, points=3, n=4097), "n"),
    (lambda: attncert.drift("random", 0.1, 1.0, points=3, d=0), "d"),
    (lambda: attncert.certify({"objects": {}}, max_bits=63), "max_bits"),      # certify --max-precision >= 64
    (lambda: attncert.certify({"objects": {}}, max_seconds=1e8), "max_seconds"),
    (lambda: attncert.check(["two-token"], certify_bits=16), "certify_bits"),
    (lambda: attncert.attention(*qkv(), max_bits=127), "max_bits"),           # oracle --max-precision >= 128
    (lambda: attncert.attention(*qkv(), threads=257), "threads"),             # --threads in [1, 256]
    (lambda: attncert.attention(*qkv(), threads=0), "threads"),
], ids=["rank max_bits=3", "rank max_bits=127", "rank max_bits=2^20+1", "deflate_max_k", "drift max_bits=64",
        "drift points", "drift n", "drift d", "certify max_bits", "certify max_seconds", "check certify_bits",
        "attention max_bits", "threads=257", "threads=0"])
def test_the_command_lines_limits(call, name):
    raises_naming(call, name, ValueError)


# ---- 4. integers out of range name the parameter ----------------------------------------------------------

@pytest.mark.parametrize("call,name", [
    (lambda: attncert.attention(*qkv(), threads=-1), "threads"),
    (lambda: attncert.attention(*qkv(), max_bits=-1), "max_bits"),
    (lambda: attncert.attention(*qkv(), window=(10 ** 30, 0)), "window"),
    (lambda: at.assert_attention_close(qkv()[0][..., :3], *qkv(), rows=10 ** 30), "rows"),
    (lambda: at.assert_attention_close(qkv()[0][..., :3], *qkv(), rows=2, seed=-1), "seed"),
    (lambda: attncert.rank(np.eye(2), seed=-1), "seed"),
    (lambda: attncert.rank(np.eye(2), seed=2 ** 64), "seed"),
    (lambda: attncert.drift("random", 0.1, 1.0, points=3, n=10 ** 20), "n"),
    (lambda: attncert.drift("two-token", 0.1, 1.0, points=10 ** 30), "points"),
    (lambda: attncert.check(["two-token"], seed=-1), "seed"),
    (lambda: attncert.certify({"objects": {}}, max_bits=10 ** 30), "max_bits"),
], ids=["threads=-1", "max_bits=-1", "window=10**30", "rows=10**30", "seed=-1", "rank seed=-1", "rank seed=2^64",
        "drift n=10**20", "points=10**30", "check seed=-1", "certify max_bits=10**30"])
def test_out_of_range_integers_name_the_parameter(call, name):
    raises_naming(call, name, ValueError)


# ---- 5. meta, sparse, quantized tensors; requires_grad is read ---------------------------------------------

def test_meta_tensors_hold_no_data():
    q, k, v = (torch.from_numpy(a) for a in qkv())
    for args, name in (((torch.empty(1, 2, 3, 4, device="meta"), k, v), "q"), ((q, k, torch.empty(1, 2, 5, 3, device="meta")), "v")):
        e = raises_naming(lambda: attncert.attention(*args), name, ValueError)
        assert "meta tensor holds no data" in str(e)
    e = raises_naming(lambda: attncert.rank(torch.empty(2, 2, device="meta")), "scores", ValueError)
    assert "meta tensor holds no data" in str(e)


def test_sparse_and_quantized_tensors_are_refused():
    q, k, v = (torch.from_numpy(a) for a in qkv())
    raises_naming(lambda: attncert.attention(q.to_sparse(), k, v), "q", ValueError)
    raises_naming(lambda: attncert.rank(torch.eye(2).to_sparse()), "scores", ValueError)
    quant = torch.quantize_per_tensor(torch.eye(2), 0.5, 0, torch.qint8)
    raises_naming(lambda: attncert.rank(quant), "scores", ValueError)


def test_tensors_that_require_grad_are_read():
    q, k, v = (torch.from_numpy(a).requires_grad_() for a in qkv())
    out = attncert.attention(q, k, v)
    assert torch.equal(out, attncert.attention(q.detach(), k.detach(), v.detach()))


# ---- 7. out of memory during conversion ------------------------------------------------------------------

@pytest.mark.skipif(not SMALL_MACHINE, reason="a machine with 1 TiB of memory or more")
def test_an_array_too_large_for_the_machine_is_a_memory_error_with_its_size():
    # a broadcast view of 2^37 elements (1 TiB as binary64, 2 TiB with numpy's copy): nothing is allocated
    q = np.broadcast_to(np.float32(1), (1, 1, 2 ** 20, 2 ** 17))
    k, v = qkv()[1:]
    e = raises_naming(lambda: attncert.attention(q, k, v), "q", MemoryError)
    assert "2199023255552 bytes" in str(e) and "(1, 1, 1048576, 131072)" in str(e), str(e)
    e = raises_naming(lambda: attncert.rank(np.broadcast_to(1.0, (2 ** 19, 2 ** 18))), "scores", MemoryError)
    assert "2199023255552 bytes" in str(e), str(e)  # a broadcast view is not contiguous: numpy's copy and ours
    for t in (torch.zeros(1).expand(1, 1, 2 ** 20, 2 ** 17), torch.zeros(1, dtype=torch.bfloat16).expand(1, 1, 2 ** 20, 2 ** 17)):
        e = raises_naming(lambda: attncert.attention(t, k, v, target="float64"), "q", MemoryError)
        assert " bytes" in str(e) and "asked for" in str(e) and "1048576, 131072" in str(e), str(e)
    # beyond the .npy limit of 2^40 elements: bad input, as for the command line
    e = raises_naming(lambda: attncert.attention(np.broadcast_to(np.float32(1), (1, 1, 2 ** 21, 2 ** 20)), k, v), "q",
                      ValueError)
    assert "2^40" in str(e)


def test_an_allocation_that_fails_is_a_memory_error_with_its_size():
    # In a child process whose address space is capped, a conversion the machine could hold fails to
    # allocate: MemoryError naming the argument and the bytes asked for, not ValueError, and no crash.
    code = r"""
import resource, sys
import numpy as np
import attncert
q = np.broadcast_to(np.float32(1), (1, 1, 2 ** 14, 2 ** 14))   # 2 GiB as binary64
k = v = np.ones((1, 1, 2, 2 ** 14))
with open("/proc/self/status") as f:
    vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm + 2 ** 30, resource.RLIM_INFINITY))
try:
    attncert.attention(q, k, v)
except MemoryError as e:
    print("MemoryError:", e)
except Exception as e:
    print(type(e).__name__ + ":", e)
"""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    out = p.stdout.strip()
    assert out.startswith("MemoryError: q: out of memory converting the array of shape (1, 1, 16384, 16384)"), out
    assert "4294967296 bytes" in out, out


# ---- the sweep -------------------------------------------------------------------------------------------

BIG = np.broadcast_to(np.float32(0), (1, 1, 2 ** 20, 2 ** 17))  # 2^37 elements: MemoryError, nothing allocated


def bad_arrays(shape=(1, 2, 3, 4)):
    """(label, value) pairs that no array parameter takes."""
    return [
        ("str", "abc"),
        ("complex", np.ones(shape, dtype=np.complex128)),
        ("complex tensor", torch.ones(shape, dtype=torch.complex64)),
        ("meta tensor", torch.empty(shape, device="meta")),
        ("ragged list", [[1.0, 2.0], [3.0]]),
        ("object", np.array([None, 1.0], dtype=object)),
    ] + ([("huge view", BIG)] if SMALL_MACHINE else [])


BAD_INTEGERS = [("str", "4"), ("float", 2.5), ("bool", True), ("negative", -1), ("huge", 10 ** 30), ("NaN", math.nan),
                ("complex", 1j), ("None", None)]
BAD_REALS = [("str", "x"), ("bool", True), ("NaN", math.nan), ("inf", math.inf), ("complex", 1j), ("negative", -1.0),
             ("list", [1.0])]
BAD_FLAGS = [("str", "no"), ("int", 2), ("None", None)]
BAD_TEXTS = [("int", 5), ("complex", 1j), ("unknown", "no-such-name")]


def cases():
    """(entry point, parameter, label, call) for every bad value of every parameter."""
    q, k, v = qkv()
    o = attncert.attention(q, k, v)
    do = np.ones_like(o)
    S = np.array([[3.0, -3.0], [-3.0, 3.0]])
    out = []

    def add(entry, base, param, values):
        for label, val in values:
            out.append((entry, param, label, (lambda val=val: base(**{param: val}))))

    # attncert.attention and attention_vjp: the arrays, then the keywords
    for entry, base in (("attention", lambda **kw: attncert.attention(**dict(dict(q=q, k=k, v=v), **kw))),
                        ("attention_vjp", lambda **kw: attncert.attention_vjp(**dict(dict(q=q, k=k, v=v, do=do), **kw)))):
        for name in ("q", "k", "v") + (("do",) if entry == "attention_vjp" else ()):
            add(entry, base, name, bad_arrays() + [("empty", np.zeros((1, 2, 0, 4)))])
        add(entry, base, "max_bits", BAD_INTEGERS)
        add(entry, base, "threads", BAD_INTEGERS)
        add(entry, base, "window", [("str", "x"), ("triple", (1, 2, 3)), ("float side", (1.5, 0)), ("negative", (-2, 0)),
                                    ("huge", (10 ** 30, 0)), ("int", 5), ("complex", (1j, 0))])
        for name in ("scale", "softcap"):
            add(entry, base, name, [("str", "x"), ("bool", True), ("NaN", math.nan), ("inf", math.inf), ("complex", 1j),
                                    ("list", [1.0])])
        add(entry, base, "softcap", [("negative", -1.0)])
        add(entry, base, "causal", [("str", "yes"), ("int", 2), ("complex", 1j)])
        add(entry, base, "target", BAD_TEXTS)
        for name in ("layout", "empty_rows", "lse_base"):
            add(entry, base, name, BAD_TEXTS)
        for name, shape in (("alibi_slopes", (2,)), ("bias", (3, 5)), ("sink", (2,)), ("mask", (3, 5))):
            add(entry, base, name, bad_arrays(shape) + [("NaN" if name != "mask" else "wrong shape",
                                                         np.full((2, 2, 2), np.nan))])
        add(entry, base, "dropout_p", [("without a mask", 0.5)])
        add(entry, lambda **kw: base(dropout_mask=np.ones((1, 2, 3, 5), dtype=bool), **kw), "dropout_p",
            [("str", "x"), ("NaN", math.nan), ("complex", 1j), ("1", 1.0), ("negative", -0.5)])
    add("attention", lambda **kw: attncert.attention(q, k, v, **kw), "return_lse", BAD_FLAGS)
    add("attention_vjp", lambda **kw: attncert.attention_vjp(q, k, v, do, **kw), "dlse", bad_arrays((1, 2, 3)))
    add("attention", lambda **kw: attncert.attention(q, k, v, **kw), "max_seconds", BAD_REALS)
    add("attention_vjp", lambda **kw: attncert.attention_vjp(q, k, v, do, **kw), "max_seconds", BAD_REALS)

    # attncert.rank
    base = lambda **kw: attncert.rank(**dict(dict(scores=S, formats="binary64", policies="numpy"), **kw))  # noqa: E731
    add("rank", base, "scores", [b for b in bad_arrays((2, 2)) if b[0] != "huge view"] + [
        ("empty", np.zeros((0, 2))), ("NaN", np.full((2, 2), np.nan)), ("3-D", np.zeros((2, 2, 2)))] +
        ([("huge view", BIG[0, 0])] if SMALL_MACHINE else []))
    add("rank", base, "max_bits", BAD_INTEGERS)
    add("rank", base, "seed", BAD_INTEGERS[:-1])
    add("rank", base, "deflate_max_k", BAD_INTEGERS)
    add("rank", base, "threads", BAD_INTEGERS + [("zero", 0), ("257", 257)])
    for name in ("max_seconds", "sigma_rel_width", "deflate_seconds"):
        add("rank", base, name, BAD_REALS)
    add("rank", base, "object", BAD_TEXTS)
    add("rank", base, "mask", [("str", "upper"), ("complex", np.ones((2, 2), dtype=complex)), ("wrong shape", np.ones((3, 3), bool))])
    add("rank", base, "formats", [("unknown", "fp7"), ("int", 5)])
    add("rank", base, "policies", [("unknown", "nonsense"), ("int", 5)])
    qb = lambda **kw: attncert.rank(**dict(dict(q=q[0, 0], k=k[0, 0], formats="binary64", policies="numpy"), **kw))  # noqa
    add("rank", qb, "q", [b for b in bad_arrays((3, 4)) if b[0] != "huge view"])
    add("rank", qb, "scale", [("str", "x"), ("NaN", math.nan), ("complex", 1j), ("bool", True)])

    # attncert.certify and check
    claim = {"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"at": "0"},
             "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 1}
    add("certify", lambda **kw: attncert.certify(**dict(dict(claim=claim), **kw)), "max_bits", BAD_INTEGERS)
    add("certify", lambda **kw: attncert.certify(**dict(dict(claim=claim), **kw)), "max_seconds", BAD_REALS)
    add("certify", lambda **kw: attncert.certify(**kw), "claim", [("int", 42), ("missing file", "/nonexistent/claim.json")])
    chk = lambda **kw: attncert.check(**dict(dict(ids=["two-token"], formats="binary64"), **kw))  # noqa: E731
    add("check", chk, "seed", BAD_INTEGERS[:-1])
    add("check", chk, "certify_bits", BAD_INTEGERS)
    add("check", chk, "certify_max_bits", BAD_INTEGERS)
    add("check", chk, "ids", [("int", 5), ("unknown", "no-such-check")])
    add("check", chk, "max_seconds", BAD_REALS)

    # attncert.drift
    base = lambda **kw: attncert.drift(**dict(dict(family="two-token", start=0.1, stop=1.0, points=3, recipes="fp64",  # noqa
                                                   policies="numpy"), **kw))
    add("drift", base, "points", BAD_INTEGERS[:-1] + [("one", 1)])
    add("drift", base, "seed", BAD_INTEGERS[:-1])
    add("drift", base, "max_bits", BAD_INTEGERS)
    for name in ("start", "stop"):
        add("drift", base, name, [r for r in BAD_REALS if r[0] != "negative"] + [("huge", 1e300)])
    add("drift", base, "resolution", BAD_REALS + [("0.5", 0.5), ("zero", 0.0)])
    add("drift", base, "log", BAD_FLAGS)
    add("drift", base, "max_seconds", BAD_REALS)
    add("drift", base, "enclosures", BAD_FLAGS)
    add("drift", base, "family", BAD_TEXTS)
    add("drift", base, "object", BAD_TEXTS)
    add("drift", base, "recipes", [("unknown", "fp7"), ("empty", ""), ("int", 5)])
    add("drift", base, "diagnostic", [("int", 42), ("dict of int", {"x": 42})])
    rnd = lambda **kw: attncert.drift(**dict(dict(family="random", start=0.1, stop=1.0, points=2, recipes="fp64",  # noqa
                                                  policies="numpy"), **kw))
    add("drift", rnd, "n", BAD_INTEGERS[:-1] + [("zero", 0)])
    add("drift", rnd, "d", BAD_INTEGERS[:-1] + [("zero", 0)])

    # attncert.testing
    base = lambda **kw: at.assert_attention_close(**dict(dict(actual=o, q=q, k=k, v=v, max_ulp=1e9), **kw))  # noqa: E731
    add("assert_attention_close", base, "actual", bad_arrays((1, 2, 3, 3)) + [("wrong shape", o[..., :2])])
    add("assert_attention_close", base, "baseline", bad_arrays((1, 2, 3, 3)))
    add("assert_attention_close", base, "rows", BAD_INTEGERS[:-1] + [("zero", 0)])
    add("assert_attention_close", lambda **kw: base(rows=2, **kw), "seed", BAD_INTEGERS[:-1])
    for name in ("max_ulp", "atol", "rtol", "flash_k", "fudge"):
        add("assert_attention_close", base, name, BAD_REALS)
    add("assert_attention_close", base, "rule", BAD_TEXTS)
    add("assert_attention_close", base, "threads", BAD_INTEGERS)
    add("assert_attention_close", base, "q", bad_arrays())
    g = attncert.attention_vjp(q, k, v, do)
    base = lambda **kw: at.assert_attention_grads_close(**dict(dict(actual=g, q=q, k=k, v=v, do=do, max_ulp=1e9), **kw))  # noqa
    add("assert_attention_grads_close", base, "do", bad_arrays())
    add("assert_attention_grads_close", base, "max_ulp", BAD_REALS)
    add("assert_attention_grads_close", base, "max_bits", BAD_INTEGERS)
    add("assert_attention_grads_close", lambda **kw: base(**dict(dict(actual={"dq": kw.pop("dq"), "dk": g.dk, "dv": g.dv}), **kw)),
        "dq", bad_arrays())
    return out


CASES = cases()


@pytest.mark.parametrize("entry,param,label,call", CASES, ids=["%s-%s-%s" % c[:3] for c in CASES])
def test_sweep(entry, param, label, call):
    raises_naming(call, param)


def test_the_sweep_calls_succeed_with_good_values():
    # each base call of the sweep succeeds as it stands: a refusal above is the bad value's doing
    q, k, v = qkv()
    o = attncert.attention(q, k, v)
    do = np.ones_like(o)
    attncert.attention(q, k, v, dropout_mask=np.ones((1, 2, 3, 5), dtype=bool), dropout_p=0.5)
    g = attncert.attention_vjp(q, k, v, do)
    attncert.rank(np.array([[3.0, -3.0], [-3.0, 3.0]]), formats="binary64", policies="numpy")
    attncert.rank(q=q[0, 0], k=k[0, 0], formats="binary64", policies="numpy")
    attncert.drift("two-token", 0.1, 1.0, points=3, recipes="fp64", policies="numpy")
    attncert.drift("random", 0.1, 1.0, points=2, recipes="fp64", policies="numpy")
    at.assert_attention_close(o, q, k, v, max_ulp=1e9)
    at.assert_attention_close(o, q, k, v, max_ulp=1e9, rows=2)
    at.assert_attention_grads_close(g, q, k, v, do, max_ulp=1e9)
    assert attncert.certify({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"at": "0"},
                             "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 1})


# ---- attncert.distributed: checked before anything reaches the cluster ---------------------------------

class NoCluster:
    """A client whose use fails the test: the distributed entry points check their arguments first."""

    def submit(self, *a, **k):
        raise AssertionError("a task was submitted")

    def gather(self, *a, **k):
        raise AssertionError("gather was called")

    def scheduler_info(self):
        raise AssertionError("the scheduler was asked")

    compute = replicate = submit


def distributed_cases():
    ad = pytest.importorskip("attncert.distributed")
    q, k, v = qkv()
    o = attncert.attention(q, k, v)
    do = np.ones_like(o)
    c = NoCluster()
    out = []

    def add(entry, base, param, values):
        for label, val in values:
            out.append((entry, param, label, (lambda val=val: base(**{param: val}))))

    fwd = lambda **kw: ad.attention(**dict(dict(q=q, k=k, v=v, client=c), **kw))  # noqa: E731
    bwd = lambda **kw: ad.attention_vjp(**dict(dict(q=q, k=k, v=v, do=do, client=c), **kw))  # noqa: E731
    grd = lambda **kw: ad.grade(**dict(dict(actual=o, q=q, k=k, v=v, client=c), **kw))  # noqa: E731
    ass = lambda **kw: ad.assert_attention_close(**dict(dict(actual=o, q=q, k=k, v=v, client=c), **kw))  # noqa: E731
    dft = lambda **kw: ad.drift(**dict(dict(family="two-token", start=0.1, stop=1.0, points=3, recipes="fp64",  # noqa
                                           policies="numpy", client=c), **kw))
    for entry, base in (("distributed.attention", fwd), ("distributed.attention_vjp", bwd), ("distributed.grade", grd),
                        ("distributed.assert_attention_close", ass)):
        add(entry, base, "client", [("None", None), ("str", "tcp://nowhere")])
        add(entry, base, "rows_per_task", [r for r in BAD_INTEGERS if r[0] != "None"] + [("zero", 0)])
        add(entry, base, "progress", BAD_FLAGS)
        add(entry, base, "threads", BAD_INTEGERS)
        add(entry, base, "max_bits", BAD_INTEGERS)
        add(entry, base, "window", [("huge", (10 ** 30, 0)), ("float side", (1.5, 0))])
        add(entry, base, "scale", [("complex", 1j), ("NaN", math.nan)])
        add(entry, base, "bias", [("complex", np.ones((3, 5), dtype=complex)), ("meta tensor", torch.empty(3, 5, device="meta"))])
        add(entry, base, "q", [("complex", q.astype(complex)), ("meta tensor", torch.empty(1, 2, 3, 4, device="meta"))])
    add("distributed.attention", fwd, "return_lse", BAD_FLAGS)
    add("distributed.attention_vjp", bwd, "stats", [("list", [])])
    add("distributed.attention_vjp", bwd, "do", [("complex", do.astype(complex))])
    for entry, base in (("distributed.grade", grd), ("distributed.assert_attention_close", ass)):
        add(entry, base, "rows", [r for r in BAD_INTEGERS if r[0] != "None"] + [("zero", 0)])
        add(entry, lambda **kw: base(rows=2, **kw), "seed", [r for r in BAD_INTEGERS if r[0] != "None"])
        add(entry, base, "max_ulp", BAD_REALS)
    add("distributed.drift", dft, "client", [("None", None)])
    add("distributed.drift", dft, "points_per_task", [r for r in BAD_INTEGERS if r[0] != "None"] + [("zero", 0), ("one", 1)])
    add("distributed.drift", dft, "points", [r for r in BAD_INTEGERS if r[0] != "None"])
    add("distributed.drift", dft, "max_bits", BAD_INTEGERS)
    add("distributed.drift", dft, "progress", BAD_FLAGS)
    add("distributed.drift", dft, "diagnostic", [("int", 42)])
    return out


DCASES = distributed_cases()


@pytest.mark.parametrize("entry,param,label,call", DCASES, ids=["%s-%s-%s" % c[:3] for c in DCASES])
def test_distributed_sweep(entry, param, label, call):
    raises_naming(call, param)
