"""attncert.distributed on a Dask LocalCluster: the same bits as the single-process calls (forward with
row blocks, backward per kv-head group, numpy / torch / dask-array inputs), a worker killed mid-run
changes nothing, and the sums that would cross tasks are refused.  Seeds: ATTNCERT_SEED."""
import os
import threading
import time

import numpy as np
import pytest

import attncert

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
import attncert.distributed as ad  # noqa: E402

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


def test_killed_worker_loses_nothing():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                       silence_logs=50)
    c = distributed.Client(cluster)
    try:
        q, k, v = qkv(B=1, H=8, Hk=8, n=256, d=32, seed=5)
        ref = attncert.attention(q, k, v, causal="top-left")
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
        out = ad.attention(q, k, v, client=c, rows_per_task=16, causal="top-left")
        elapsed = time.perf_counter() - t0
        t.join()
        assert killed and elapsed > 0.3, elapsed  # the worker died while the tasks ran
        assert victim not in c.scheduler_info()["workers"]  # (its nanny starts a new one, at a new address)
        same(out, ref)
        assert not np.isnan(out).any()
    finally:
        c.close()
        cluster.close()


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
