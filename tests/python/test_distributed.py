"""attncert.distributed on a Dask LocalCluster: the same bits as the single-process calls (forward with
row blocks, backward per kv-head group, numpy / torch / dask-array inputs), a worker killed mid-run
changes nothing, the sums that would cross tasks are refused, the row-sampled grading gives the
single-process grade, and max_seconds bounds every call as it bounds the single-process one.  Seeds:
ATTNCERT_SEED."""
import os
import threading
import time

import numpy as np
import pytest

import attncert

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
import attncert.distributed as ad  # noqa: E402
from attncert import testing  # noqa: E402

SEED = int(os.environ.get("ATTNCERT_SEED", "20261202"))


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                       silence_logs=40)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def qkv(B=2, H=4, Hk=2, n=24, d=8, seed=0):
    r = np.random.default_rng(SEED + seed)
    return (r.standard_normal((B, H, n, d)), r.standard_normal((B, Hk, n, d)), r.standard_normal((B, Hk, n, d)))


def same(a, b):
    np.testing.assert_array_equal(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


VARIANTS = [
    ("plain", {}),
    ("causal", {"causal": "top-left"}),
    ("bottom-right+window+softcap", {"causal": "bottom-right", "window": (5, 0), "softcap": 4.0}),
    ("alibi per batch", {"alibi_slopes": np.arange(8).reshape(2, 4) / 8.0}),
    ("bias full+mask", {"bias": np.random.default_rng(1).standard_normal((2, 4, 24, 24)),
                        "mask": np.random.default_rng(2).random((24, 24)) > 0.2, "empty_rows": "zeros"}),
    ("dropout", {"dropout_mask": np.random.default_rng(3).random((2, 4, 24, 24)) > 0.3, "dropout_p": "0.3"}),
]


@pytest.mark.parametrize("name,kw", VARIANTS, ids=[v[0] for v in VARIANTS])
@pytest.mark.parametrize("target", ["float64", "bfloat16"])
def test_forward_bit_for_bit(client, name, kw, target):
    q, k, v = qkv()
    ref, lse = attncert.attention(q, k, v, target=target, return_lse=True, **kw)
    out, dlse = ad.attention(q, k, v, client=client, rows_per_task=7, target=target, return_lse=True, **kw)
    same(out, ref)
    same(dlse, lse)
    assert out.dtype == ref.dtype


@pytest.mark.parametrize("name,kw", VARIANTS + [("sink b=1", {"sink": np.array([0.5, -1.0, 0.0, 2.0])})],
                         ids=[v[0] for v in VARIANTS] + ["sink b=1"])
def test_backward_bit_for_bit(client, name, kw):
    B = 1 if "sink" in kw else 2
    q, k, v = (x[:B] for x in qkv())
    if "bias" in kw:
        kw = dict(kw, bias=kw["bias"][:B])
    if "dropout_mask" in kw:
        kw = dict(kw, dropout_mask=kw["dropout_mask"][:B])
    if "alibi_slopes" in kw:
        kw = dict(kw, alibi_slopes=kw["alibi_slopes"][:B])
    do = np.random.default_rng(SEED + 9).standard_normal(q.shape)
    ref = attncert.attention_vjp(q, k, v, do, **kw)
    got = ad.attention_vjp(q, k, v, do, client=client, **kw)
    for name_, a, b in zip(ref._fields, got, ref):
        assert (a is None) == (b is None), name_
        if a is not None:
            same(a, b)


def test_torch_and_dask_inputs(client):
    torch = pytest.importorskip("torch")
    q, k, v = qkv()
    tq, tk, tv = (torch.from_numpy(x).to(torch.bfloat16) for x in (q, k, v))
    out = ad.attention(tq, tk, tv, client=client, causal="top-left")
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    same(out.float().numpy(), attncert.attention(tq, tk, tv, causal="top-left").float().numpy())
    dq, dk, dv = (da.from_array(x, chunks=(1, 2, 12, 8)) for x in (q, k, v))
    same(ad.attention(dq, dk, dv, client=client, causal="top-left", target="float64"),
         attncert.attention(q, k, v, causal="top-left"))


def test_refusals(client):
    q, k, v = qkv()
    do = np.ones_like(q)
    with pytest.raises(ValueError, match="broadcast over the batch or the heads"):
        ad.attention_vjp(q, k, v, do, client=client, bias=np.zeros((24, 24)))
    with pytest.raises(ValueError, match="dsink sums over the batch"):
        ad.attention_vjp(q, k, v, do, client=client, sink=np.zeros(4))
    with pytest.raises(ValueError, match="bhsd"):
        ad.attention(q[0], k[0], v[0], client=client)
    with pytest.raises(ValueError, match="rows_per_task"):
        ad.attention(q, k, v, client=client, rows_per_task=0)
    with pytest.raises(ValueError):  # the library's one-line message, raised from the task
        ad.attention(q, k, v[:, :, :5], client=client)


def run_killing_a_worker(call):
    """call(client) on a fresh 2-worker LocalCluster while one worker is killed 0.3 s in: its result, after checking
    that the worker died while the tasks ran."""
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                       silence_logs=50)
    c = distributed.Client(cluster)
    try:
        victim = sorted(c.scheduler_info()["workers"])[0]
        killed = []

        def kill():
            time.sleep(0.3)
            try:
                c.run(os._exit, 1, workers=[victim])
            except Exception:  # the worker dies before it answers
                pass
            killed.append(True)

        t = threading.Thread(target=kill)
        t.start()
        t0 = time.perf_counter()
        out = call(c)
        elapsed = time.perf_counter() - t0
        t.join()
        assert killed and elapsed > 0.3, elapsed  # the worker died while the tasks ran
        assert victim not in c.scheduler_info()["workers"]  # (its nanny starts a new one, at a new address)
        return out
    finally:
        c.close()
        cluster.close()


def test_killed_worker_loses_nothing():
    q, k, v = qkv(B=1, H=8, Hk=8, n=512, d=32, seed=5)  # about 0.9 s of tasks: the kill comes at 0.3 s
    ref = attncert.attention(q, k, v, causal="top-left")
    out = run_killing_a_worker(lambda c: ad.attention(q, k, v, client=c, rows_per_task=16, causal="top-left"))
    same(out, ref)
    assert not np.isnan(out).any()


@pytest.mark.parametrize("kw", [
    dict(family="two-token", start=1e-17, stop=1e-5, points=41, log=True, recipes="fp64,fp32", policies="numpy"),
    dict(family="causal", start=0.5, stop=60.0, points=29, log=False, recipes="fp64,bf16", policies="numpy,absolute:1e-3"),
], ids=["two-token log", "causal linear"])
def test_drift_bit_for_bit(client, kw):
    ref = attncert.drift(**kw, diagnostic=np.linalg.matrix_rank)
    got = ad.drift(**kw, diagnostic=np.linalg.matrix_rank, client=client, points_per_task=6)
    a, b = dict(ref.report), dict(got.report)
    assert b.pop("command") == "attncert.distributed.drift (python)"
    a.pop("command")
    assert a == b
    assert repr(got) == repr(ref)
    with pytest.raises(ValueError, match="points_per_task"):
        ad.drift(**kw, client=client, points_per_task=1)


# ---- row-sampled grading: grade / assert_attention_close ------------------------------------------------------

def f32_attention(q, k, v, causal):
    """A float32 kernel as PyTorch's math path computes it (NumPy): a few ulps from the exact value (thousands
    where the output is small)."""
    q, k, v = (np.asarray(x, dtype=np.float32) for x in (q, k, v))
    r = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, r, axis=1), np.repeat(v, r, axis=1)
    s = (q @ k.swapaxes(-1, -2)) * np.float32(1 / np.sqrt(q.shape[-1]))
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, np.float32(-np.inf))
    p = np.exp(s - s.max(-1, keepdims=True))
    return ((p / p.sum(-1, keepdims=True)) @ v).astype(np.float32)


def grading_case():
    q, k, v = (x.astype(np.float32) for x in qkv(B=2, H=4, Hk=2, n=96, d=16, seed=11))
    return q, k, v, f32_attention(q, k, v, causal=True)


def sampled_rows(q, k, v, n, seed, **kw):
    """The internal rows rows=n, seed computes, read off the single-process reference (NaN elsewhere)."""
    out = attncert._reference(q, k, v, rows=n, seed=seed, **kw).output()
    return np.flatnonzero(~np.isnan(out.reshape(-1, out.shape[-1])).all(axis=1))


RULES = [("ulp", dict(rule="ulp", max_ulp=1e4)), ("flash", dict(rule="flash")),
         ("torch-sdpa", dict(rule="torch-sdpa")), ("assert-close", dict(rule="assert-close", atol=1e-5, rtol=1e-4))]


@pytest.mark.parametrize("name,rule", RULES, ids=[r[0] for r in RULES])
def test_grade_rows_bit_for_bit(client, name, rule):
    from attncert import _core, testing

    q, k, v, cand = grading_case()
    base = f32_attention(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16), True)  # larger errors
    rows = sampled_rows(q, k, v, 40, 3, causal="top-left")
    assert len(rows) == 40 and rows[-1] >= 40  # not a prefix: a sample
    np.testing.assert_array_equal(_core.sample_rows(2 * 4 * 96, 40, 3), rows)
    ref = testing.assert_attention_close(cand, q, k, v, rows=40, seed=3, causal="top-left", baseline=base, **rule)
    got = ad.grade(cand, q, k, v, client=client, rows=40, seed=3, rows_per_task=3, causal="top-left", baseline=base,
                   **rule)
    assert got == ref
    assert got["compared"] == 40 * 16 and got["skipped"] == (768 - 40) * 16 and got["max_ulp"] > 1
    assert (got["worst"]["index_bhik"][0] * 4 + got["worst"]["index_bhik"][1]) * 96 + got["worst"]["index_bhik"][2] in rows
    assert ad.assert_attention_close(cand, q, k, v, client=client, rows=40, seed=3, rows_per_task=16,
                                     causal="top-left", baseline=base, **rule) == ref


def test_grade_rows_failure_message(client):
    from attncert import testing

    q, k, v, cand = grading_case()
    rows = sampled_rows(q, k, v, 40, 3, causal="top-left")
    kw = dict(rows=40, seed=3, causal="top-left", max_ulp=1e4)
    bad = cand.copy()
    bad.reshape(-1, 16)[rows[17], 5] += np.float32(0.05)  # a sampled row
    with pytest.raises(AssertionError) as single:
        testing.assert_attention_close(bad, q, k, v, **kw)
    with pytest.raises(AssertionError) as dist:
        ad.assert_attention_close(bad, q, k, v, client=client, rows_per_task=5, **kw)
    assert str(dist.value) == str(single.value)
    b, h, i = rows[17] // (4 * 96), rows[17] // 96 % 4, rows[17] % 96
    assert "(%d, %d, %d, 5)" % (b, h, i) in str(dist.value)
    other = cand.copy()
    unsampled = np.setdiff1d(np.arange(768), rows)[[0, 300, -1]]
    other.reshape(-1, 16)[unsampled, 5] = np.nan  # rows not drawn are not graded
    g = ad.assert_attention_close(other, q, k, v, client=client, rows_per_task=5, **kw)
    assert g == testing.assert_attention_close(cand, q, k, v, **kw)
    assert g["nonfinite_where_truth_finite"] == 0


def test_grade_all_rows_and_empty_rows(client):
    from attncert import testing

    q, k, v, cand = grading_case()
    got = ad.grade(cand, q, k, v, client=client, rows_per_task=50, causal="top-left", max_ulp=1e4)
    assert got == testing.assert_attention_close(cand, q, k, v, causal="top-left", max_ulp=1e4)
    assert got["skipped"] == 0 and got["compared"] == 768 * 16
    # rows without keys (fully masked, empty_rows="nan") are graded by equality with NaN, and the rows not drawn
    # are skipped
    mask = np.random.default_rng(SEED + 12).random((96, 96)) > 0.3
    mask[::3] = False
    ref32 = attncert.attention(q, k, v, mask=mask, empty_rows="nan")
    noisy = (ref32 * (1 + np.float32(2 ** -22) * np.random.default_rng(SEED + 13).standard_normal(ref32.shape))).astype(
        np.float32)
    kw = dict(rows=60, seed=5, mask=mask, empty_rows="nan", max_ulp=1e4)
    got = ad.grade(noisy, q, k, v, client=client, rows_per_task=7, **kw)
    assert got == testing.assert_attention_close(noisy, q, k, v, **kw)
    assert got["skipped"] == (768 - 60) * 16 and got["max_ulp"] > 0.5
    assert got["fully_masked"]["compared"] > 0 and got["fully_masked"]["mismatched"] == 0
    zeroed = np.where(np.isnan(noisy), np.float32(0), noisy)  # 0 where the declared value is NaN: fails
    bad = ad.grade(zeroed, q, k, v, client=client, rows_per_task=7, **kw)
    assert bad["rule"]["verdict"] == "fail" and bad["fully_masked"]["mismatched"] > 0
    with pytest.raises(AssertionError, match="fully masked rows: %d of" % bad["fully_masked"]["mismatched"]):
        testing.assert_attention_close(zeroed, q, k, v, **kw)


def test_grade_dask_inputs(client):
    from attncert import testing

    q, k, v, cand = grading_case()
    dq, dk, dv = (da.from_array(x, chunks=(1, 2, 48, 16)) for x in (q, k, v))
    got = ad.grade(cand, dq, dk, dv, client=client, rows=40, seed=8, rows_per_task=4, causal="top-left", max_ulp=1e4)
    assert got == testing.assert_attention_close(cand, q, k, v, rows=40, seed=8, causal="top-left", max_ulp=1e4)
    assert got["rule"]["verdict"] == "pass" and got["compared"] == 40 * 16


def test_grade_refusals(client):
    q, k, v, cand = grading_case()
    with pytest.raises(ValueError, match="shape"):
        ad.grade(cand[:, :2], q, k, v, client=client, rows=4)
    with pytest.raises(ValueError, match="rows: must be an integer >= 1"):
        ad.grade(cand, q, k, v, client=client, rows=0)
    with pytest.raises(ValueError, match="max_ulp belongs"):
        ad.grade(cand, q, k, v, client=client, rows=4, rule="flash", max_ulp=3, baseline=cand)
    with pytest.raises(ValueError, match="must be a float array"):
        ad.grade(cand > 0, q, k, v, client=client, rows=4)
    with pytest.raises(TypeError, match="unexpected keyword"):
        ad.grade(cand, q, k, v, client=client, rows=4, lse=cand)
    with pytest.raises(ValueError, match="row_list: row 99 is not in"):
        attncert._core.Reference(q[:1, :1], k[:1, :1], v[:1, :1], dict(target="binary32", row_list=[3, 99]))


# ---- the defaults: attncert.testing's (flash against the default baseline, the target the candidate's dtype) ----

def bf16_tensor(x):
    torch = pytest.importorskip("torch")
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(torch.bfloat16)


def near_exact(q, k, v, dtype, **kw):
    """A kernel that passes FlashAttention's rule: the exact output in `dtype` (float32, or bfloat16 as float32),
    every third element moved up by about one ulp of that format."""
    exact = attncert.attention(q, k, v, target=dtype, **kw)
    up = np.nextafter(exact, np.float32(np.inf)) if dtype == "float32" else testing._round_bf16(exact * (1 + 2 ** -8))
    out = exact.copy()
    out.reshape(-1)[::3] = up.reshape(-1)[::3]
    return out


def mask_with_empty_rows():
    """A mask that leaves every fifth query row without keys (empty_rows="nan": their exact values are NaN, rows
    the single-process reference computes but not its default baseline)."""
    mask = np.random.default_rng(SEED + 14).random((96, 96)) > 0.3
    mask[::5] = False
    return dict(mask=mask, empty_rows="nan")


DEFAULT_CASES = [(c, i, m) for c in ("float32", "bfloat16") for i in ("numpy", "torch") for m in ("causal", "masked")
                 if not (c == "float32" and i == "torch")]


@pytest.mark.parametrize("rows", [None, 40], ids=["all rows", "rows=40"])
@pytest.mark.parametrize("cand_dtype,inputs,case", DEFAULT_CASES, ids=["-".join(c) for c in DEFAULT_CASES])
def test_grading_defaults_are_the_single_process_ones(client, cand_dtype, inputs, case, rows):
    """No rule=, no baseline=, no target=: the distributed grade and AssertionError are attncert.testing's, with
    its defaults (flash against the default baseline, FlashAttention's fudge, the candidate's dtype as target),
    for a float32 and a bfloat16 candidate of float32 inputs (NumPy, or torch: the baseline computed by torch)."""
    q, k, v, _ = grading_case()
    kw = dict(causal="top-left") if case == "causal" else mask_with_empty_rows()
    cand = near_exact(q, k, v, cand_dtype, **kw)
    if rows is not None:
        kw.update(rows=rows, seed=3)
    if inputs == "torch":
        torch = pytest.importorskip("torch")
        q, k, v = (torch.from_numpy(x) for x in (q, k, v))
    conv = bf16_tensor if cand_dtype == "bfloat16" else (lambda x: x)
    events = []
    testing.add_stats_hook(events.append)
    try:
        want = testing.assert_attention_close(conv(cand), q, k, v, **kw)
        assert ad.grade(conv(cand), q, k, v, client=client, rows_per_task=17, **kw) == want
        assert ad.assert_attention_close(conv(cand), q, k, v, client=client, rows_per_task=64, **kw) == want
    finally:
        testing.remove_stats_hook(events.append)
    grades = [e for e in events if e["event"] == "grade"]
    assert len(grades) == 2 and grades[0] == grades[1] and grades[0]["target"] == cand_dtype, grades
    r = want["rule"]
    assert r["rule"] == "flash" and r["verdict"] == "pass" and r["atol"] > 0 and r["baseline_max_abs_error"] > 0, r
    # a kernel off in a drawn row: the same message, naming the default baseline (and the target when it is not q's)
    variant = {n: x for n, x in kw.items() if n not in ("rows", "seed")}
    graded = sampled_rows(np.asarray(q), np.asarray(k), np.asarray(v), rows, 3, **variant) if rows else np.arange(768)
    graded = graded[np.isfinite(cand.reshape(-1, 16)[graded]).all(axis=1)]  # not a row without keys
    bad = cand.copy()
    bad.reshape(-1, 16)[graded[len(graded) // 2], 3] += np.float32(0.25)
    with pytest.raises(AssertionError) as single:
        testing.assert_attention_close(conv(bad), q, k, v, **kw)
    with pytest.raises(AssertionError) as dist:
        ad.assert_attention_close(conv(bad), q, k, v, client=client, rows_per_task=23, **kw)
    assert str(dist.value) == str(single.value)
    msg = str(single.value)
    assert "under rule flash" in msg and "  baseline: the default, attncert.testing.default_baseline: " in msg, msg
    assert ("\n  target bfloat16: the candidate's dtype (q is float32)" in msg) == (cand_dtype == "bfloat16"), msg
    assert ad.grade(conv(bad), q, k, v, client=client, **kw) == ad.grade(conv(bad), q, k, v, client=client,
                                                                          rows_per_task=5, **kw)


def test_grading_default_rules_and_refusals_as_the_single_process_ones(client):
    """max_ulp= alone is rule ulp, rule="flash" without baseline= takes the default baseline (it was refused), a
    given baseline is used, flash_k / fudge / atol / target= reach the grade, and the refusals are the
    single-process ones, message for message."""
    q, k, v, cand = grading_case()
    base = f32_attention(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16), True)
    for extra in (dict(max_ulp=1e4), dict(rule="flash"), dict(baseline=base), dict(flash_k=3), dict(atol=1e-3),
                  dict(rule="torch-sdpa"), dict(rule="torch-sdpa", fudge=2), dict(rule="assert-close"),
                  dict(target="float64"), dict(target="bfloat16")):
        kw = dict(extra, rows=40, seed=3, causal="top-left")
        want, got = outcome(lambda: testing.assert_attention_close(cand, q, k, v, **kw)), \
            outcome(lambda: ad.assert_attention_close(cand, q, k, v, client=client, rows_per_task=9, **kw))
        assert got == want, (extra, want, got)
        if want[0] == "ok":
            assert ad.grade(cand, q, k, v, client=client, **kw) == want[1], extra
    assert outcome(lambda: ad.grade(cand, q, k, v, client=client, rows=4, causal="top-left"))[1]["rule"]["rule"] == \
        "flash"
    for bad, exc in ((dict(rule="flash", max_ulp=3), ValueError), (dict(rule="nope"), ValueError),
                     (dict(baseline=cand.swapaxes(1, 2)), ValueError), (dict(target="int8"), ValueError)):
        want = outcome(lambda: testing.assert_attention_close(cand, q, k, v, rows=4, **bad))
        got = outcome(lambda: ad.assert_attention_close(cand, q, k, v, client=client, rows=4, **bad))
        assert issubclass(want[0], exc) and got == want, (bad, want, got)


@pytest.mark.parametrize("rows", [None, 40], ids=["all rows", "rows=40"])
def test_explicit_ulp_rule_as_before(client, rows):
    """rule="ulp" given: 4 ulps of the exact value in the target format, no baseline, as before the defaults
    changed (and as attncert.testing): the same grade as the old defaults spelled out, the same message."""
    q, k, v, _ = grading_case()
    exact = attncert.attention(q, k, v, causal="top-left", target="float64")
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    kw = dict(causal="top-left") if rows is None else dict(causal="top-left", rows=rows, seed=3)
    near = (exact + 2 * ulp).astype(np.float32)  # 2 (and a rounding) ulps: passes 4 ulps
    got = ad.grade(near, q, k, v, client=client, rule="ulp", rows_per_task=11, **kw)
    assert got == testing.assert_attention_close(near, q, k, v, rule="ulp", **kw)
    assert got == ad.grade(near, q, k, v, client=client, rule="ulp", max_ulp=4, target="float32", baseline=None, **kw)
    r = got["rule"]
    assert r["rule"] == "ulp" and r["threshold"] == 4 and r["verdict"] == "pass" and 1.5 < got["max_ulp"] <= 4, got
    assert "baseline_max_abs_error" not in r, r
    far = (exact + 8 * ulp).astype(np.float32)
    with pytest.raises(AssertionError) as single:
        testing.assert_attention_close(far, q, k, v, rule="ulp", **kw)
    with pytest.raises(AssertionError) as dist:
        ad.assert_attention_close(far, q, k, v, client=client, rule="ulp", rows_per_task=11, **kw)
    assert str(dist.value) == str(single.value)
    msg = str(dist.value)
    assert "under rule ulp" in msg and "the default rule" not in msg and "baseline: not used" in msg, msg
    assert ad.grade(far, q, k, v, client=client, rule="ulp", **kw)["rule"]["verdict"] == "fail"


# ---- the backward split into blocks of query rows: partial dK/dV enclosures added, rounded once ----

SPLIT_VARIANTS = [v for v in VARIANTS if "bias" not in v[1]]


def outcome(call):
    """("ok", result) or (exception type, message): what a call did."""
    try:
        return "ok", call()
    except Exception as e:  # noqa: BLE001  (compared, not handled)
        return type(e), str(e)


EMPTY = [  # (name, how q, k, v become empty): every dimension of (b, h, n, d) in turn
    ("b=0", lambda q, k, v: (q[:0], k[:0], v[:0])),
    ("h=0", lambda q, k, v: (q[:, :0], k[:, :0], v[:, :0])),
    ("h_kv=0", lambda q, k, v: (q, k[:, :0], v[:, :0])),
    ("n_q=0", lambda q, k, v: (q[:, :, :0], k, v)),
    ("n_k=0", lambda q, k, v: (q, k[:, :, :0], v[:, :, :0])),
    ("d=0", lambda q, k, v: (q[..., :0], k[..., :0], v)),
    ("d_v=0", lambda q, k, v: (q, k, v[..., :0])),
]


@pytest.mark.parametrize("name,make", EMPTY, ids=[e[0] for e in EMPTY])
def test_empty_inputs_as_the_single_process_call(client, name, make):
    # issue 28: an empty input raised StopIteration (forward) or ZeroDivisionError (backward, h_kv = 0) here,
    # and another message than the single-process call's (grade): the same exception and message now, or
    # the same result where the single-process call accepts the input
    q, k, v = make(*qkv())
    do = np.ones(q.shape[:3] + v.shape[-1:])
    for single, dist in (
            (lambda: attncert.attention(q, k, v), lambda: ad.attention(q, k, v, client=client)),
            (lambda: attncert.attention_vjp(q, k, v, do), lambda: ad.attention_vjp(q, k, v, do, client=client)),
            (lambda: testing.assert_attention_close(do, q, k, v, rows=3),
             lambda: ad.assert_attention_close(do, q, k, v, client=client, rows=3))):
        want, got = outcome(single), outcome(dist)
        assert want[0] is got[0], (want, got)
        if want[0] == "ok":
            for a, b in zip(want[1] if isinstance(want[1], tuple) else [want[1]],
                            got[1] if isinstance(got[1], tuple) else [got[1]]):
                assert (a is None and b is None) or np.array_equal(a, b), (a, b)
        else:
            assert want == got
            assert issubclass(want[0], (ValueError, TypeError)), want


@pytest.mark.parametrize("name,kw", SPLIT_VARIANTS, ids=[v[0] for v in SPLIT_VARIANTS])
@pytest.mark.parametrize("target,with_dlse", [("float64", True), ("bfloat16", False)])
def test_backward_row_blocks_bit_for_bit(client, name, kw, target, with_dlse):
    q, k, v = qkv(seed=11)
    r = np.random.default_rng(SEED + 12)
    do = r.standard_normal(q.shape)
    dlse = r.standard_normal(q.shape[:3]) if with_dlse else None
    ref = attncert.attention_vjp(q, k, v, do, dlse=dlse, target=target, **kw)
    stats = {}
    got = ad.attention_vjp(q, k, v, do, client=client, dlse=dlse, rows_per_task=7, stats=stats, target=target, **kw)
    for field, a, b in zip(ref._fields, got, ref):
        assert (a is None) == (b is None), field
        if a is not None:
            same(a, b)
    # every unit (2 batches x 2 kv heads, 48 rows each) was split into 7 blocks, and the enclosures decided
    assert stats == {"units": 4, "split_units": 4, "blocks": 28, "units_redone": 0}, stats


def test_backward_block_declined_redoes_the_unit(client):
    q, k, v = qkv(seed=13)
    do = np.random.default_rng(SEED + 14).standard_normal(q.shape)
    kw = {"causal": "top-left", "softcap": "1/3"}  # a softcap that is not a binary64 number: no fast path
    ref = attncert.attention_vjp(q, k, v, do, **kw)
    stats = {}
    got = ad.attention_vjp(q, k, v, do, client=client, rows_per_task=20, stats=stats, **kw)
    for a, b in zip(got[:3], ref[:3]):
        same(a, b)
    assert stats["split_units"] == 4 and stats["units_redone"] == 4, stats


def test_backward_row_blocks_dask_inputs_and_auto(client):
    q, k, v = qkv(B=1, H=4, Hk=1, n=160, d=8, seed=15)  # one unit of 640 rows: "auto" splits it in 3 (256 rows)
    do = np.random.default_rng(SEED + 16).standard_normal(q.shape)
    ref = attncert.attention_vjp(q, k, v, do, causal="bottom-right")
    dq_, dk_, dv_, ddo = (da.from_array(x, chunks=(1, 1, 80, 8)) for x in (q, k, v, do))
    stats = {}
    got = ad.attention_vjp(dq_, dk_, dv_, ddo, client=client, stats=stats, causal="bottom-right", target="float64")
    for a, b in zip(got[:3], ref[:3]):
        same(a, b)
    assert stats == {"units": 1, "split_units": 1, "blocks": 3, "units_redone": 0}, stats
    with pytest.raises(ValueError, match="rows_per_task"):
        ad.attention_vjp(q, k, v, do, client=client, rows_per_task=0)


def test_killed_worker_loses_nothing_backward_blocks():
    # n = 512 (about 1 s of tasks): at n = 256 a quiet machine finished in 0.27 s, before the kill at 0.3 s
    q, k, v = qkv(B=1, H=8, Hk=1, n=512, d=32, seed=17)
    do = np.random.default_rng(SEED + 18).standard_normal(q.shape)
    ref = attncert.attention_vjp(q, k, v, do, causal="top-left")
    stats = {}
    got = run_killing_a_worker(
        lambda c: ad.attention_vjp(q, k, v, do, client=c, rows_per_task=128, stats=stats, causal="top-left"))
    assert stats["blocks"] == 32 and stats["units_redone"] == 0, stats
    for a, b in zip(got[:3], ref[:3]):
        same(a, b)


# ---- max_seconds: the call's budget, as the single-process calls' (all or nothing; drift: a partial sweep) ----

SLOW = "1/3"  # a softcap that is not a binary64 number: no fast path, every row computed in MPFI (ms per row)
LATE = 1.5    # the budget is honoured within 10 % or 1 s; the test allows 1.5 s past it (a loaded machine)


def workers_idle_within(client, seconds):
    """Do the workers run no task (a cancelled one still running counts) within `seconds`?"""
    end = time.perf_counter() + seconds
    while True:
        busy = client.run(lambda dask_worker: dask_worker.executing_count)
        if not any(busy.values()):
            return True
        if time.perf_counter() > end:
            return False
        time.sleep(0.05)


def test_attention_max_seconds(client):
    # 4 units of 512 rows in MPFI: 5.8 s on this machine's two workers uninterrupted
    q, k, v = qkv(B=1, H=4, Hk=4, n=512, d=16, seed=21)
    t0 = time.perf_counter()
    with pytest.raises(TimeoutError, match=r"attncert\.distributed\.attention: not computed within max_seconds=0\.5 "):
        ad.attention(q, k, v, client=client, softcap=SLOW, max_seconds=0.5, rows_per_task=256)
    elapsed = time.perf_counter() - t0
    assert 0.5 <= elapsed < 0.5 + LATE, elapsed
    assert workers_idle_within(client, 1.0)  # each task stopped itself at the deadline: none runs on
    small = [x[:, :, :12] for x in (q, k, v)]  # the client is usable afterwards; a budget met changes no bit
    same(ad.attention(*small, client=client, softcap=SLOW, max_seconds=60), attncert.attention(*small, softcap=SLOW))


@pytest.mark.parametrize("name,shape", [
    ("units", dict(B=1, H=4, Hk=4, n=256, d=16)),     # 4 whole units: 2.7 s uninterrupted on two workers
    ("blocks declined", dict(B=1, H=4, Hk=1, n=256, d=16)),  # blocks decline (no fast path); redone whole: 5 s
], ids=["units", "blocks declined"])
def test_attention_vjp_max_seconds(client, name, shape):
    q, k, v = qkv(seed=22, **shape)
    do = np.random.default_rng(SEED + 23).standard_normal(q.shape)
    t0 = time.perf_counter()
    with pytest.raises(TimeoutError, match=r"distributed\.attention_vjp: not computed within max_seconds=0\.5 "):
        ad.attention_vjp(q, k, v, do, client=client, softcap=SLOW, max_seconds=0.5)
    elapsed = time.perf_counter() - t0
    assert 0.5 <= elapsed < 0.5 + LATE, elapsed
    assert workers_idle_within(client, 1.0)
    small = [x[:, :, :10] for x in (q, k, v, do)]
    got = ad.attention_vjp(*small, client=client, softcap=SLOW, max_seconds=60)
    for a, b in zip(got[:3], attncert.attention_vjp(*small, softcap=SLOW)[:3]):
        same(a, b)


@pytest.mark.parametrize("call", ["grade", "assert_attention_close"])
def test_grade_max_seconds(client, call):
    q, k, v = qkv(B=1, H=4, Hk=4, n=512, d=16, seed=24)
    cand = np.zeros(q.shape)
    t0 = time.perf_counter()
    with pytest.raises(TimeoutError, match=r"attncert\.distributed\.%s: not computed within max_seconds=0\.5 " % call):
        getattr(ad, call)(cand, q, k, v, client=client, rows=1500, seed=1, softcap=SLOW, max_seconds=0.5)
    elapsed = time.perf_counter() - t0
    assert 0.5 <= elapsed < 0.5 + LATE, elapsed
    assert workers_idle_within(client, 1.0)


def test_drift_max_seconds_partial_sweep(client):
    kw = dict(points=121, recipes="fp64,fp32", policies="numpy")

    def slow_rank(m):  # nested, hence sent by value to the workers: 4 calls a point, 121 points, 10 s in one process
        time.sleep(0.02)
        return np.linalg.matrix_rank(m)

    t0 = time.perf_counter()
    got = ad.drift(**kw, diagnostic=slow_rank, client=client, points_per_task=61, max_seconds=0.5)
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.5 + LATE, elapsed
    assert workers_idle_within(client, 1.0)  # each run stopped at the deadline (after the point it was computing)
    s = got.report["summary"]
    assert s["partial"] is True and s["points_planned"] == 121 and 2 <= s["points"] < 121, s
    assert s["not_computed"].startswith("stopped at max_seconds=0.5 after %d of 121 grid points: not computed: a "
                                        % s["points"]), s
    assert got.report["settings"]["max_seconds"] == 0.5
    # the points computed are the single-process sweep's at the same a, each once
    ref = attncert.drift(**kw).report["points"]
    pts = got.report["points"]
    idx = [ref["a"].index(a) for a in pts["a"]]
    assert idx == sorted(set(idx)) and len(idx) == s["points"]
    for key in ("exact_rank_lo", "exact_rank_hi"):
        assert pts[key] == [ref[key][i] for i in idx]
    for rec, rrec in zip(pts["recipes"], ref["recipes"]):
        assert rec["numerical_rank"]["numpy"] == [rrec["numerical_rank"]["numpy"][i] for i in idx]
        assert len(rec["numerical_rank"]["diagnostic:slow_rank"]) == len(idx)
    # a budget the sweep meets: the single-process report with the same budget
    fast = dict(family="causal", start=0.5, stop=60.0, points=29, recipes="fp64,bf16", policies="numpy,absolute:1e-3")
    a = attncert.drift(**fast, max_seconds=60).report
    b = ad.drift(**fast, client=client, points_per_task=6, max_seconds=60).report
    assert b.pop("command") != a.pop("command")
    assert a == b


def test_drift_merge_with_runs_left_out():
    # the merge on its own (merge_drift_runs, in C++): runs 0 and 3 whole, run 1 stopped after its first 3
    # points, run 2 not computed; each run's result crosses as its wire text, as from a worker
    from attncert import _core

    kw = dict(family="causal", start=0.5, stop=60.0, points=29, log=False, recipes="fp64,bf16",
              policies="numpy,absolute:1e-3")
    args = dict(kw, diagnostic=None, object=None, seed=20261129, resolution=1e-9, enclosures=False, max_bits=4096,
                n=None, d=None)
    grid = list(_core.drift_grid(ad._drift_options(args)))
    runs = [(0, 7), (7, 14), (14, 21), (21, 28)]
    wires = [ad._drift_task(args, grid[s:e + 1]) for s, e in runs]
    wires[1] = ad._drift_task(args, grid[7:10])  # what a run stopped at its budget keeps
    wires[2] = None
    merged = ad._merge_drift(args, wires, 2.0)
    ref = attncert.drift(**kw).report
    keep = list(range(0, 10)) + list(range(21, 29))
    assert merged["points"]["a"] == [grid[i] for i in keep]
    for key in ("exact_rank_lo", "exact_rank_hi", "diverges"):
        assert merged["points"][key] == [ref["points"][key][i] for i in keep]
    for rec, rrec in zip(merged["points"]["recipes"], ref["points"]["recipes"]):
        for pol, ranks in rec["numerical_rank"].items():
            assert ranks == [rrec["numerical_rank"][pol][i] for i in keep]
        assert rec["sigma_min"] == [rrec["sigma_min"][i] for i in keep]
    s = merged["summary"]
    assert s["partial"] is True and s["points"] == 18 and s["points_planned"] == 29
    assert s["not_computed"] == ("stopped at max_seconds=2 after 18 of 29 grid points: not computed: a in [%s, %s] "
                                 "(11 points); the sweep and its intervals cover the other grid points only"
                                 % (shortest(grid[10]), shortest(grid[20])))
    assert merged["settings"]["max_seconds"] == 2.0 and merged["command"] == "attncert.distributed.drift (python)"
    # intervals lie within the computed stretches [grid[0], grid[9]] and [grid[21], grid[28]]
    for d in merged["divergence"]:
        for lo, hi in d["intervals"]:
            assert grid[0] <= lo <= hi <= grid[9] or grid[21] <= lo <= hi <= grid[28], (d, lo, hi)
    assert sum(len(d["intervals"]) for d in merged["divergence"]) == s["intervals"] > 0
    # every run back: the single-process report, its command apart
    whole = ad._merge_drift(args, [ad._drift_task(args, grid[s:e + 1]) for s, e in runs], 0)
    single = attncert.drift(**kw).report
    assert whole.pop("command") != single.pop("command")
    assert whole == single
    with pytest.raises(ValueError, match="drift runs: no run computed a grid point"):
        ad._merge_drift(args, [None, None], 0)


def shortest(x):
    """A float as the library's reports write it (std::to_chars: the shortest text that reads back; 60, not 60.0)."""
    t = repr(float(x))
    return t[:-2] if t.endswith(".0") else t


@pytest.mark.parametrize("key,shape,unit,want", [
    ("bias", (2, 4, 3, 5), (1, 2, 4), [(1, 2), (2, 4), (0, 3), (0, 5)]),
    ("bias", (1, 4, 3, 5), (1, 2, 4), [(0, 1), (2, 4), (0, 3), (0, 5)]),    # batch broadcast: kept whole
    ("bias", (4, 1, 5), (1, 0, 2), [(0, 2), (0, 1), (0, 5)]),               # 3 dims: (h, n_q, n_k)
    ("mask", (3, 5), (0, 0, 2), [(0, 3), (0, 5)]),
    ("dropout_mask", (2, 1, 3, 5), (1, 2, 4), [(1, 2), (0, 1), (0, 3), (0, 5)]),
    ("alibi_slopes", (4,), (1, 2, 4), [(2, 4)]),
    ("alibi_slopes", (2, 4), (1, 2, 4), [(1, 2), (2, 4)]),
    ("sink", (4,), (0, 0, 2), [(0, 2)]),
    ("seqlens_k", (2,), (1, 0, 2), [(1, 2)]),
])
def test_unit_ranges_follow_the_oracles_broadcasting(key, shape, unit, want):
    # B = 2 batches, H = 4 query heads; the unit (b, h0, h1)
    from attncert import _core

    assert [tuple(x) for x in _core.unit_ranges(key, list(shape), 2, 4, *unit)] == want


@pytest.mark.parametrize("key,shape,msg", [
    ("bias", (3, 4, 3, 5), "bias does not broadcast: its batch dimension is 3, expected 1 or 2"),
    ("mask", (2, 3, 3, 5), "mask does not broadcast: its head dimension is 3, expected 1 or 4"),
    ("alibi_slopes", (2, 3, 4), r"alibi_slopes: shape \(2, 3, 4\) is not \(h_q,\) or \(b, h_q\)"),
    ("seqlens_k", (1,), "seqlens_k: 1 lengths for a batch of 2"),
])
def test_unit_ranges_refuse_what_does_not_broadcast(key, shape, msg):
    from attncert import _core

    with pytest.raises(ValueError, match=msg):
        _core.unit_ranges(key, list(shape), 2, 4, 0, 0, 2)


def bad_seconds_calls():
    q, k, v = qkv()
    do = np.ones_like(q)
    return {"attention": lambda c, ms: ad.attention(q, k, v, client=c, max_seconds=ms),
            "attention_vjp": lambda c, ms: ad.attention_vjp(q, k, v, do, client=c, max_seconds=ms),
            "grade": lambda c, ms: ad.grade(do, q, k, v, client=c, rows=4, max_seconds=ms),
            "assert_attention_close": lambda c, ms: ad.assert_attention_close(do, q, k, v, client=c, max_seconds=ms),
            "drift": lambda c, ms: ad.drift(points=5, recipes="fp64", policies="numpy", client=c, max_seconds=ms)}


class NoCluster:
    """A client whose use fails the test: max_seconds is checked before anything reaches the cluster."""

    def submit(self, *a, **k):
        raise AssertionError("a task was submitted")

    gather = compute = replicate = scheduler_info = cancel = submit


@pytest.mark.parametrize("call", ["attention", "attention_vjp", "grade", "assert_attention_close", "drift"])
@pytest.mark.parametrize("bad,exc,msg", [
    (-1, ValueError, r"max_seconds: must be in \[0, 1e\+07\], got -1"),
    (1e8, ValueError, r"max_seconds: must be in \[0, 1e\+07\]"),
    (float("nan"), ValueError, r"max_seconds: must be a finite number"),
    ("1", TypeError, r"max_seconds: must be a real number, got '1' \(str\)"),
    (True, TypeError, r"max_seconds: must be a real number, got True \(bool\)"),
], ids=["-1", "1e8", "nan", "str", "bool"])
def test_max_seconds_checked_as_the_single_process_calls(call, bad, exc, msg):
    with pytest.raises(exc, match=msg):
        bad_seconds_calls()[call](NoCluster(), bad)
    with pytest.raises(exc, match=msg):  # the single-process call's own check, the same message
        attncert.attention(*qkv(), max_seconds=bad)


# ---------------------------------------------------------------------------------------------- the audit

def _encoder_capture(torch, nf, batch):
    torch.manual_seed(SEED % 1000)
    layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True, norm_first=nf)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    x = torch.randn(batch, 10, 16)
    with torch.enable_grad(), attncert.capture(model) as cap:
        model(x, mask=torch.nn.Transformer.generate_square_subsequent_mask(10))
    return cap


def test_audit_on_the_cluster_is_the_single_process_report(client):
    """attncert.audit(client=...): one task per captured call, the parts joined in C++: the report of the
    single-process audit but its command, key for key; a spec that is not the registered one is refused before
    any task."""
    torch = pytest.importorskip("torch")
    from attncert.capture import Capture

    cap = Capture()
    cap.calls = _encoder_capture(torch, False, 2).calls + _encoder_capture(torch, True, 2).calls
    spec = {"allowable_output_error": 1e-6, "target_contrast": {"batches": [1, 0], "margin": 0.01}}
    one = attncert.audit(cap, spec=spec).to_dict()
    many = attncert.audit(cap, spec=spec, client=client).to_dict()
    assert len(many["layers"]) == 4 and [x["name"] for x in many["layers"]] == [x["name"] for x in one["layers"]]
    assert many["command"] != one["command"]
    for d in (one, many):
        d.pop("command")
    assert many == one

    class NoTask:  # a client that fails the test if anything is submitted to it
        def submit(self, *args, **kwargs):
            pytest.fail("a task was submitted")

        gather = submit

    with pytest.raises(ValueError, match="changed after they were fixed"):
        attncert.audit(cap, spec=spec, client=NoTask(), registered="0" * 64)


def test_key_padding_mask_on_the_cluster_is_the_single_process_call(client):
    """key_padding_mask= (b, n_k), alone and with a bool or a float additive mask: each unit reads its batch of it,
    and the result is bit for bit attncert.attention's (forward with LSE, and the backward)."""
    q, k, v = qkv(B=2, H=4, Hk=2, n=24, d=8, seed=11)
    kp = np.ones((2, 24), bool)
    kp[0, 17:] = False  # the first sequence has 17 real keys, the second 24
    r = np.random.default_rng(SEED + 12)
    extra = [{}, {"mask": r.random((24, 24)) > 0.2, "empty_rows": "zeros"},
             {"mask": np.where(r.random((2, 1, 24, 24)) > 0.2, 0.0, -np.inf) + np.float64(0.25)}]
    for kw in extra:
        kw = dict(kw, key_padding_mask=kp)
        out, lse = ad.attention(q, k, v, client=client, return_lse=True, **kw)
        want, want_lse = attncert.attention(q, k, v, return_lse=True, **kw)
        same(out, want)
        same(lse, want_lse)
    do = np.random.default_rng(SEED + 13).standard_normal(q.shape)
    got = ad.attention_vjp(q, k, v, do, client=client, key_padding_mask=kp)
    want = attncert.attention_vjp(q, k, v, do, key_padding_mask=kp)
    for a, b in zip(got[:3], want[:3]):
        same(a, b)


def test_flash_options_split_or_refused(client):
    """FlashAttention's options (issue 32, item 13) in a distributed call: key_leftpad splits per batch and gives the
    single-process result bit for bit, as sink_token_length and attention_chunk (scalars); qv and FP8 are refused."""
    rng = np.random.default_rng(SEED + 40)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((3, 2, 20, 8), (3, 1, 30, 8), (3, 1, 30, 8)))
    kw = dict(key_leftpad=np.array([0, 4, 9]), causal="bottom-right", window=(6, 0), sink_token_length=2,
              attention_chunk=8, empty_rows="nan")
    got = ad.attention(q, k, v, client=client, rows_per_task=7, **kw)
    want = attncert.attention(q, k, v, **kw)
    np.testing.assert_array_equal(got, want)
    for key, val in (("qv", rng.standard_normal((3, 2, 20, 8))), ("qkv_format", "e4m3fn")):
        with pytest.raises(ValueError, match="attncert.distributed: %s is not supported" % key):
            ad.attention(q, k, v, client=client, **{key: val})
