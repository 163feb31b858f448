"""attncert.distributed: the oracle (forward and backward) on a Dask cluster.

    from dask.distributed import Client, LocalCluster
    import attncert.distributed as ad
    client = Client(LocalCluster(n_workers=2, threads_per_worker=1))
    out = ad.attention(q, k, v, client=client, causal="top-left")        # the same bits as attncert.attention
    grads = ad.attention_vjp(q, k, v, do, client=client, causal="top-left")
    ad.assert_attention_close(out_kernel, q, k, v, client=client, rows=4096, seed=0, causal="top-left")

Work is split into tasks by (batch, kv-head group, block of query rows); Dask schedules them, retries the
tasks of a worker that dies, and shows progress in its dashboard or with distributed.progress.  Every
element the oracle returns is the correctly rounded exact value, computed by its own row, so the result
does not depend on the split: it is bit for bit that of the single-process call (elements reported
faithful_only at the precision cap are decided by the same row computation, hence also equal).
Assembly writes each block to its own place, so a retried task cannot count a row twice.

Grading (grade, assert_attention_close) computes only the rows it grades: rows=N draws N query rows with
`seed` exactly as attncert.testing.assert_attention_close(..., rows=N, seed=...) does, the tasks (batch,
kv-head group, block of the drawn rows) return the exact values of their rows, and the driver grades the
candidate's drawn rows against them: the grade is the single-process one, field for field.

Layout bhsd ((b, h, n, d)) only.  The backward splits a unit into blocks of query rows too: dK and dV sum
over the rows of a group, and rounded partial sums would not be correctly rounded, so each block returns
enclosures of its partial sums (double-double balls), which the client adds and rounds once; a unit whose
enclosure cannot decide an element is redone whole by one task.  dbias and dsink are computed when no sum
crosses a unit (a bias whose batch and head dimensions are full, a sink with batch 1; such units are not
split), and refused otherwise.
"""
from __future__ import annotations

import json

import numpy as np

import attncert as _a

from . import _args

__all__ = ["attention", "attention_vjp", "grade", "assert_attention_close", "drift"]

_PER_UNIT_4D = ("bias", "mask", "dropout_mask")


def _arr(x, what):
    """A NumPy array, a torch tensor (converted) or a dask array (kept lazy)."""
    if x is None:
        return None
    if type(x).__module__.startswith("dask"):
        return x
    return _a._to_numpy(x, what)


def _local(x):
    """x for the single-process call: a dask array computed, anything else as given."""
    if x is not None and type(x).__module__.startswith("dask"):
        return np.asarray(x)
    return x


def _empty(*arrays):
    """Does an input have no elements (a dimension 0)?  Such a call has nothing to split: it is handed to the
    single-process call whole, which returns the same result, or raises the same exception, as it does."""
    return any(x is not None and 0 in tuple(getattr(x, "shape", ())) for x in arrays)


def _check_client(client):
    if not (hasattr(client, "submit") and hasattr(client, "gather")):
        raise TypeError("client: must be a dask.distributed Client, got %s" % _args._shown(client))


def _check_variant(q, variant, want_lse=False):
    """The keywords checked on the driver, as the single-process call checks them (attncert._options), before
    any task is submitted: a bad value raises here, not in a worker."""
    extra = set(variant) - set(_a._VARIANT_DEFAULTS)
    if extra:
        raise TypeError("unexpected keyword argument(s): %s" % ", ".join(sorted(extra)))
    args = dict(_a._VARIANT_DEFAULTS)
    args.update(variant)
    args["target"] = _default_target(q, variant)
    _a._options(None, want_lse=want_lse, **args)


def _dims(x, what):
    if x.ndim != 4:
        raise ValueError("attncert.distributed: %s must be (b, h, n, d) (layout bhsd), got shape %s" % (what, x.shape))
    return x.shape


def _slice_broadcast(a, b, heads, B, H):
    """A mask/bias-like array (up to 4 dims, broadcast to (B, H, nq, nk)) restricted to batch b and the query
    heads `heads` (a slice), keeping its broadcast dimensions."""
    a4 = a.reshape((1,) * (4 - a.ndim) + tuple(a.shape))
    bb = slice(b, b + 1) if a4.shape[0] == B and B > 1 else slice(0, 1)
    hh = heads if a4.shape[1] == H and H > 1 else slice(0, 1)
    return a4[bb, hh]


def _units(q, k, variant):
    B, H, nq, _ = _dims(q, "q")
    Bk, Hk, _, _ = _dims(k, "k")
    if Bk != B or H % Hk:
        raise ValueError("attncert.distributed: q has %d batches and %d heads, k %d and %d (h_q must be a multiple of "
                         "h_kv)" % (B, H, Bk, Hk))
    r = H // Hk
    if variant.get("layout", "bhsd") != "bhsd":
        raise ValueError("attncert.distributed: layout bhsd only (got %r)" % variant.get("layout"))
    for key in ("cu_seqlens_q", "cu_seqlens_k"):
        if variant.get(key) is not None:
            raise ValueError("attncert.distributed: %s (layout thd) is not supported" % key)
    return B, H, Hk, r, nq


def _unit_variant(variant, b, g, r, B, H):
    """The keywords of the call restricted to batch b and kv-head group g (query heads g*r .. g*r + r - 1)."""
    heads = slice(g * r, (g + 1) * r)
    out = dict(variant)
    for key in _PER_UNIT_4D:
        if variant.get(key) is not None:
            out[key] = _slice_broadcast(_a._to_numpy(variant[key], key), b, heads, B, H)
    s = variant.get("alibi_slopes")
    if s is not None:
        s = _a._to_numpy(s, "alibi_slopes")
        out["alibi_slopes"] = s[b:b + 1, heads] if s.ndim == 2 else s[heads]
    if variant.get("sink") is not None:
        out["sink"] = _a._to_numpy(variant["sink"], "sink")[heads]
    if variant.get("seqlens_k") is not None:
        out["seqlens_k"] = _a._to_numpy(variant["seqlens_k"], "seqlens_k")[b:b + 1]
    return out


def _forward_task(q, k, v, opts, row_block):
    """One task: the internal rows [begin, end) (h-major, then i) of one (batch, kv-head group) unit.
    Returns those rows of the output (and of the LSE) and their formats."""
    import attncert

    opts = dict(opts, threads=1)
    want_lse = opts.pop("want_lse")
    ref = attncert._reference(np.asarray(q), np.asarray(k), np.asarray(v), want_lse=want_lse, row_block=row_block, **opts)
    begin, end = row_block
    out = ref.output()
    lse = ref.lse()
    return (out.reshape(-1, out.shape[-1])[begin:end].copy(), None if lse is None else lse.reshape(-1)[begin:end].copy(),
            ref.target, ref.lse_target)


def _backward_task(q, k, v, do, dlse, args):
    """One task: the gradients of one (batch, kv-head group) unit, all its rows."""
    import attncert

    g = attncert._gradients(np.asarray(q), np.asarray(k), np.asarray(v), np.asarray(do),
                            None if dlse is None else np.asarray(dlse), dict(args, threads=1))
    return {n: g.get(n) for n in ("dq", "dk", "dv", "dbias", "dsink")}, g.target


def _identity(x):
    return x


def _put(client, x):
    """A task argument, held on the cluster once for all the tasks that use it: a NumPy array as the result of
    a task that returns it (not scattered: a scattered array lost with its worker cannot be recomputed, a
    task's result can, from the task); a dask array computed there (its graph recomputes it); None."""
    if x is None:
        return None
    if isinstance(x, np.ndarray):
        return client.submit(_identity, x, pure=False)
    return client.compute(x)


def _hold(client, parts):
    """The arguments of a unit's tasks held once on the cluster (_put) and copied to every worker: the tasks then
    run where they are scheduled, not queued behind the one worker that holds their inputs."""
    held = [_put(client, x) for x in parts]
    client.replicate([h for h in held if h is not None])
    return held


def _default_target(q, variant):
    target = variant.get("target")
    if target is None:
        # a dask array's dtype without computing it (np.asarray would)
        target = q.dtype.name if type(q).__module__.startswith("dask") else _a._dtype_name(q)
        if target not in _a._TARGETS:
            raise ValueError("target: the default target is the dtype of q, which is %s; give target= (float64, "
                             "float32, float16, bfloat16)" % target)
    return target


def _progress(futures, progress):
    if progress:
        from distributed import progress as dask_progress

        dask_progress([f for _, f in futures])


def attention(q, k, v, *, client, rows_per_task=1024, return_lse=False, progress=False, **variant):
    """attncert.attention(q, k, v, **variant) computed on `client`'s workers, bit for bit the same.

    q, k, v: NumPy arrays, torch tensors or dask arrays (layout bhsd).  rows_per_task: query rows per task
    (rows of all the query heads of a kv-head group count; a unit with more rows is split into blocks).  Returns the output (and the LSE with
    return_lse) as attncert.attention does: NumPy, or torch for torch q.  progress=True shows Dask's progress
    bar (distributed.progress) while the tasks run; the dashboard (client.dashboard_link) shows them too.
    """
    import uuid

    _check_client(client)
    per_task = _args.integer(rows_per_task, "rows_per_task", 1)
    return_lse, progress = _args.flag(return_lse, "return_lse"), _args.flag(progress, "progress")
    q_, k_, v_ = _arr(q, "q"), _arr(k, "k"), _arr(v, "v")
    if _empty(q_, k_, v_):
        return _a.attention(_local(q), _local(k), _local(v), return_lse=return_lse, **variant)
    _check_variant(q, variant, return_lse)
    B, H, Hk, r, nq = _units(q_, k_, variant)
    opts = dict(variant, target=_default_target(q, variant), want_lse=return_lse)
    token = uuid.uuid4().hex[:12]
    futures = []
    for b in range(B):
        for g in range(Hk):
            rows = r * nq
            parts = (q_[b:b + 1, g * r:(g + 1) * r], k_[b:b + 1, g:g + 1], v_[b:b + 1, g:g + 1])
            # one task for the unit: its arrays go with it; several: held once on the cluster for all of them
            args = [_put(client, x) if rows > per_task or not isinstance(x, np.ndarray) else x for x in parts]
            unit_opts = _unit_variant(opts, b, g, r, B, H)
            for begin in range(0, rows, per_task):
                end = min(rows, begin + per_task)
                f = client.submit(_forward_task, *args, unit_opts, (begin, end), pure=False,
                                  key="attncert-fwd-%s-b%d-g%d-r%d" % (token, b, g, begin))
                futures.append(((b, g, begin, end), f))
    _progress(futures, progress)
    units, lses, target, lse_target = {}, {}, None, None
    results = client.gather([f for _, f in futures])
    for ((b, g, begin, end), _), (o, l_, target, lse_target) in zip(futures, results):
        u = units.setdefault((b, g), np.full((r * nq, o.shape[-1]), np.nan))
        u[begin:end] = o  # each block to its own place: a retried task cannot add a row twice
        if return_lse:
            lses.setdefault((b, g), np.full(r * nq, np.nan))[begin:end] = l_
    dv = next(iter(units.values())).shape[-1]
    out = np.empty((B, H, nq, dv))
    lse = np.empty((B, H, nq)) if return_lse else None
    for (b, g), u in units.items():
        out[b, g * r:(g + 1) * r] = u.reshape(r, nq, dv)
        if return_lse:
            lse[b, g * r:(g + 1) * r] = lses[(b, g)].reshape(r, nq)
    res = _a._like(out, q, target)
    return (res, _a._like(lse, q, lse_target)) if return_lse else res


def _backward_block_task(q, k, v, do, dlse, args, row_block):
    """One task: the internal rows [begin, end) of one (batch, kv-head group) unit: their dq, correctly rounded,
    and the enclosures of their partial dK (before the scale) and dV sums (attncert/oracle/backward.hpp)."""
    import attncert
    from attncert import _core

    opts = attncert._options(q, want_lse=dlse is not None, **dict(args, threads=1))
    return _core.backward_block(np.asarray(q), np.asarray(k), np.asarray(v), np.asarray(do),
                                None if dlse is None else np.asarray(dlse), opts, tuple(row_block))


def _row_blocks(rows, units, workers, rows_per_task):
    """The blocks [begin, end) of a unit's `rows` internal rows: rows_per_task rows each; "auto": whole units
    when there are at least two per worker, else enough blocks of at least 256 rows for two tasks per worker."""
    if rows_per_task == "auto":
        if units >= 2 * workers:
            return [(0, rows)]
        per = max(256, -(-rows // -(-2 * workers // units)))
    else:
        per = int(rows_per_task)
    return [(s, min(rows, s + per)) for s in range(0, rows, per)]


def _reduce_unit(blocks, r, nq, d):
    """A split unit's gradients from its blocks' results, or None when a block declined or a dK/dV element stays
    undecided (the unit is then redone whole by one task)."""
    from . import _core

    if not all(x["complete"] for x in blocks):
        return None
    scale, target = blocks[0]["scale"], blocks[0]["target"]
    if any(x["scale"] != scale or x["target"] != target for x in blocks):
        raise RuntimeError("attncert.distributed: the blocks of a unit disagree on the scale or the target")
    out = {}
    for name, sc in (("dk", scale), ("dv", None)):
        ref, decided = _core.reduce_backward_blocks([x[name] for x in blocks], sc, target)
        if not decided.all():
            return None
        out[name] = ref
    out["dq"] = np.concatenate([x["dq"] for x in blocks]).reshape(1, r, nq, d)
    return out, target


def attention_vjp(q, k, v, do, *, client, dlse=None, rows_per_task="auto", progress=False, stats=None, **variant):
    """attncert.attention_vjp(q, k, v, do, dlse=dlse, **variant) computed on `client`'s workers, bit for bit
    the same.

    Tasks are (batch, kv-head group) units, split into blocks of query rows (rows_per_task rows of the group's
    query heads; "auto": split only when there are fewer than two units per worker).  A block returns its rows'
    dq, correctly rounded, and enclosures of its partial dK and dV sums; the client adds the enclosures, scales
    and rounds once (attncert/oracle/backward.hpp: reduce_backward_blocks), so dK and dV are correctly rounded,
    not sums of rounded parts.  A unit whose block declined (the fast path does not hold the request) or whose
    sum leaves an element undecided is redone whole by one task.  A bias or a sink is never split (dbias and
    dsink sum over the rows); refused (ValueError): a bias broadcast over the batch (with b > 1) or over the
    heads (with more than one kv head), and a sink with b > 1, whose gradients would be sums across units.
    stats: a dict, filled with the counts of units, blocks and units redone whole."""
    import uuid

    _check_client(client)
    if not (isinstance(rows_per_task, str) and rows_per_task == "auto"):
        if isinstance(rows_per_task, str):
            raise ValueError("rows_per_task: must be \"auto\" or an integer >= 1, got %s" % _args._shown(rows_per_task))
        rows_per_task = _args.integer(rows_per_task, "rows_per_task", 1)
    progress = _args.flag(progress, "progress")
    if stats is not None and not isinstance(stats, dict):
        raise TypeError("stats: must be a dict (filled with the counts) or None, got %s" % _args._shown(stats))
    q_, k_, v_, do_, dlse_ = _arr(q, "q"), _arr(k, "k"), _arr(v, "v"), _arr(do, "do"), _arr(dlse, "dlse")
    if _empty(q_, k_, v_, do_, dlse_):
        return _a.attention_vjp(_local(q), _local(k), _local(v), _local(do), dlse=_local(dlse), **variant)
    _check_variant(q, variant, dlse is not None)
    B, H, Hk, r, nq = _units(q_, k_, variant)
    bias = variant.get("bias")
    bias4 = None
    if bias is not None:
        bias = _a._to_numpy(bias, "bias")
        bias4 = bias.reshape((1,) * (4 - bias.ndim) + tuple(bias.shape))
        if (bias4.shape[0] == 1 and B > 1) or (bias4.shape[1] == 1 and Hk > 1):
            raise ValueError("attncert.distributed: dbias of a bias broadcast over the batch or the heads sums across "
                             "tasks; give the bias with full batch and head dimensions, or use attncert.attention_vjp")
    if variant.get("sink") is not None and B > 1:
        raise ValueError("attncert.distributed: dsink sums over the batch, across tasks; use attncert.attention_vjp "
                         "for a sink with b > 1")
    args = dict(_a._VARIANT_DEFAULTS)
    extra = set(variant) - set(args)
    if extra:
        raise TypeError("unexpected keyword argument(s): %s" % ", ".join(sorted(extra)))
    args.update(variant)
    args["target"] = _default_target(q, variant)
    splittable = bias is None and variant.get("sink") is None
    workers = max(1, len(client.scheduler_info()["workers"]))
    token = uuid.uuid4().hex[:12]
    whole, split = [], []  # ((b, g), future) and ((b, g), [futures of its blocks], parts)
    for b in range(B):
        for g in range(Hk):
            heads = slice(g * r, (g + 1) * r)
            parts = (q_[b:b + 1, heads], k_[b:b + 1, g:g + 1], v_[b:b + 1, g:g + 1], do_[b:b + 1, heads],
                     None if dlse_ is None else dlse_[b:b + 1, heads])
            unit_args = _unit_variant(args, b, g, r, B, H)
            blocks = _row_blocks(r * nq, B * Hk, workers, rows_per_task) if splittable else [(0, r * nq)]
            if len(blocks) == 1:
                # one task per unit: NumPy slices go with it (recomputable with the task); dask arrays stay on the cluster
                held = [x if x is None or isinstance(x, np.ndarray) else client.compute(x) for x in parts]
                whole.append(((b, g), client.submit(_backward_task, *held, unit_args, pure=False,
                                                    key="attncert-bwd-%s-b%d-g%d" % (token, b, g))))
            else:
                held = _hold(client, parts)
                fs = [client.submit(_backward_block_task, *held, unit_args, blk, pure=False,
                                    key="attncert-bwdblk-%s-b%d-g%d-r%d" % (token, b, g, blk[0])) for blk in blocks]
                split.append(((b, g), fs, held, unit_args))
    _progress(whole + [(None, f) for _, fs, _, _ in split for f in fs], progress)
    results = {}
    for ((b, g), _), res in zip(whole, client.gather([f for _, f in whole])):
        results[(b, g)] = res
    redo = []
    for (b, g), fs, held, unit_args in split:
        reduced = _reduce_unit(client.gather(fs), r, nq, q_.shape[-1])
        if reduced is None:
            redo.append(((b, g), client.submit(_backward_task, *held, unit_args, pure=False,
                                               key="attncert-bwd-%s-b%d-g%d" % (token, b, g))))
        else:
            grads, target = reduced
            dk = grads["dk"].reshape(1, 1, -1, k_.shape[-1])
            dv = grads["dv"].reshape(1, 1, -1, v_.shape[-1])
            results[(b, g)] = ({"dq": grads["dq"], "dk": dk, "dv": dv, "dbias": None, "dsink": None}, target)
    _progress(redo, progress)
    for ((b, g), _), res in zip(redo, client.gather([f for _, f in redo])):
        results[(b, g)] = res
    if stats is not None:
        stats.update(units=B * Hk, split_units=len(split), blocks=sum(len(fs) for _, fs, _, _ in split),
                     units_redone=len(redo))
    full, target = {}, None
    for (b, g), (grads, target) in sorted(results.items()):
        heads = slice(g * r, (g + 1) * r)
        for name, x in grads.items():
            if x is None:
                continue
            if name == "dq":
                full.setdefault(name, np.empty((B, H) + x.shape[2:]))[b, heads] = x[0]
            elif name in ("dk", "dv"):
                full.setdefault(name, np.empty((B, Hk) + x.shape[2:]))[b, g] = x[0, 0]
            elif name == "dbias":
                d = full.setdefault(name, np.empty(bias4.shape))
                d[b if bias4.shape[0] > 1 else 0:(b if bias4.shape[0] > 1 else 0) + 1,
                  heads if bias4.shape[1] > 1 else slice(0, 1)] = x.reshape((x.shape[0], -1) + bias4.shape[2:])
            else:  # dsink (b = 1): the group's heads
                full.setdefault(name, np.empty(H))[heads] = x
    if "dbias" in full:
        full["dbias"] = full["dbias"].reshape(bias.shape)
    return _a.AttentionGrads(*[None if full.get(n) is None else _a._like(full[n], q, target)
                               for n in ("dq", "dk", "dv", "dbias", "dsink")])


_TRUTH = ("hi", "lo", "rad", "reference")


def _grade_task(q, k, v, opts, rows):
    """One task: the exact values of the internal rows `rows` (sorted, of one (batch, kv-head group) unit), the
    only rows it computes.  Returns {hi, lo, rad, reference} of those rows, each (len(rows), dv), and the target."""
    import attncert

    args = dict(attncert._VARIANT_DEFAULTS)
    args.update(opts, threads=1)
    o = attncert._options(q, want_lse=False, **args)
    o["row_list"] = rows
    ref = attncert._core.Reference(np.asarray(q), np.asarray(k), np.asarray(v), o)
    t = ref.truth()
    return {n: t[n].reshape(-1, t[n].shape[-1])[rows] for n in _TRUTH}, ref.target


def _candidate_rows(x, what, shape, rows):
    """The internal rows `rows` of a candidate (NumPy or torch) of the output's shape, as NumPy."""
    if x is None:
        return None
    a = _a._to_numpy(x, what)
    if tuple(a.shape) != tuple(shape):
        raise ValueError("attncert.distributed: %s has shape %s, the output's is %s"
                         % (what, tuple(a.shape), tuple(shape)))
    if a.dtype == np.bool_:
        raise ValueError("%s: must be a float array" % what)
    return a.reshape(-1, shape[-1])[rows]


def _grade_json(actual, q, k, v, client, rows, seed, rows_per_task, progress, rules, baseline, variant):
    import uuid

    from . import _core

    extra = set(variant) - set(_a._VARIANT_DEFAULTS)
    if extra:
        raise TypeError("unexpected keyword argument(s): %s" % ", ".join(sorted(extra)))
    _check_client(client)
    per = _args.integer(rows_per_task, "rows_per_task", 1)
    progress = _args.flag(progress, "progress")
    if rows is not None:
        rows, seed = _args.limited(rows, "rows"), _args.limited(seed, "seed")
    q_, k_, v_ = _arr(q, "q"), _arr(k, "k"), _arr(v, "v")
    if _empty(q_, k_, v_):  # the single-process grade (attncert.testing.assert_attention_close's), or its error
        ref = _a._reference(_local(q), _local(k), _local(v), rows=rows, seed=seed, **variant)
        return ref.grade(_a._to_numpy(actual, "actual"), _a._to_numpy(baseline, "baseline"), rules, False,
                         ("actual", "baseline"))
    _check_variant(q, variant)
    B, H, Hk, r, nq = _units(q_, k_, variant)
    shape = (B, H, nq, v_.shape[-1])
    if rules["rule"] in ("flash", "torch-sdpa", "torch_sdpa") and baseline is None:
        raise ValueError("rule %s compares with a baseline: give baseline=" % rules["rule"].replace("_", "-"))
    total = B * H * nq
    # the rows attncert.testing's rows=N draws (every row of a bhsd call is used), sorted; rows=None: all
    sampled = np.arange(total, dtype=np.int64) if rows is None else _core.sample_rows(total, rows, seed)
    cand = _candidate_rows(actual, "actual", shape, sampled)
    base = _candidate_rows(baseline, "baseline", shape, sampled)
    opts = dict(variant, target=_default_target(q, variant))
    token = uuid.uuid4().hex[:12]
    futures = []
    for b in range(B):
        for g in range(Hk):
            start = (b * H + g * r) * nq  # the unit's internal rows are [start, start + r * nq)
            lo, hi = np.searchsorted(sampled, [start, start + r * nq])
            if lo == hi:
                continue
            parts = (q_[b:b + 1, g * r:(g + 1) * r], k_[b:b + 1, g:g + 1], v_[b:b + 1, g:g + 1])
            args = [_put(client, x) if hi - lo > per or not isinstance(x, np.ndarray) else x for x in parts]
            unit_opts = _unit_variant(opts, b, g, r, B, H)
            for p0 in range(int(lo), int(hi), per):
                p1 = min(int(hi), p0 + per)
                f = client.submit(_grade_task, *args, unit_opts, sampled[p0:p1] - start, pure=False,
                                  key="attncert-grade-%s-b%d-g%d-p%d" % (token, b, g, p0))
                futures.append(((p0, p1), f))
    _progress(futures, progress)
    truth = {n: np.full(cand.shape, np.nan) for n in _TRUTH}
    target = None
    for ((p0, p1), _), (t, target) in zip(futures, client.gather([f for _, f in futures])):
        for n in _TRUTH:
            truth[n][p0:p1] = t[n]  # each block to its own place
    return _core.grade_rows(cand, base, truth, sampled, shape, target, rules)


def grade(actual, q, k, v, *, client, rows=None, seed=0, rows_per_task=1024, progress=False, rule="ulp", max_ulp=None,
          baseline=None, atol=None, rtol=None, flash_k=None, fudge=None, **variant):
    """The grade of a kernel's output `actual` against the exact attention of q, k, v (the keywords of
    attncert.attention), computed on `client`'s workers: the dict attncert.testing.assert_attention_close(actual,
    q, k, v, rows=rows, seed=seed, rule=..., **variant) returns, field for field, whatever the verdict (it is
    g["rule"]["verdict"]; this call does not raise on "fail").

    rows=N: only N query rows, drawn by `seed` as the single-process call draws them, are computed and graded
    (the others are counted as skipped); rows=None: every row.  rows_per_task: drawn rows per task (tasks are
    (batch, kv-head group, block of its drawn rows)).  actual and baseline: NumPy or torch, of the output's
    shape (b, h_q, n_q, d_v); q, k, v: NumPy, torch or dask arrays (layout bhsd).  The rules as in
    attncert.testing.  Beyond the candidate itself, the driver holds the drawn rows only (of the candidate and
    of the exact values).
    """
    from . import testing

    rules = testing._rules(rule, max_ulp, atol, rtol, flash_k, fudge)
    return json.loads(_grade_json(actual, q, k, v, client, rows, seed, rows_per_task, progress, rules, baseline,
                                  variant))


def assert_attention_close(actual, q, k, v, *, client, rows=None, seed=0, rows_per_task=1024, progress=False, rule="ulp",
                           max_ulp=None, baseline=None, atol=None, rtol=None, flash_k=None, fudge=None, **variant):
    """attncert.testing.assert_attention_close(actual, q, k, v, rows=rows, seed=seed, ...) with the rows computed on
    `client`'s workers (see grade): the same AssertionError on failure, the same grade (a dict) when it passes."""
    from . import testing

    rules = testing._rules(rule, max_ulp, atol, rtol, flash_k, fudge)
    return testing._check(_grade_json(actual, q, k, v, client, rows, seed, rows_per_task, progress, rules, baseline,
                                      variant), "attention output")


def _drift_task(args, chunk):
    """One task: the sweep on a run of the grid's points (its bisections included); returns the report."""
    import attncert

    return attncert.drift(**args, _grid=chunk).report


def _join(columns, _first=True):
    """Per-point columns of consecutive runs that share their end points, the shared points once."""
    out = list(columns[0])
    for c in columns[1:]:
        out.extend(c[1:])
    return out


def _merge_drift(reports, bounds):
    """The reports of consecutive grid runs (run c ends where run c + 1 starts, at bounds[c]) as one report."""
    import copy

    base = copy.deepcopy(reports[0])
    base["command"] = "attncert.distributed.drift (python)"
    pts = [r["points"] for r in reports]
    merged = base["points"]
    for key, val in merged.items():
        if isinstance(val, list) and key != "recipes":
            merged[key] = _join([p[key] for p in pts], True)
    for ri, rec in enumerate(merged["recipes"]):
        runs = [p["recipes"][ri] for p in pts]
        for key, val in rec.items():
            if isinstance(val, list):
                rec[key] = _join([r[key] for r in runs], True)
        rec["numerical_rank"] = {pol: _join([r["numerical_rank"][pol] for r in runs], True) for pol in rec["numerical_rank"]}
        failures, offset = {}, 0
        for r, p in zip(runs, pts):
            for i, msg in r["failures"].items():
                if offset == 0 or int(i) > 0:
                    failures[str(int(i) + offset)] = msg
            offset += len(p["a"]) - 1
        rec["failures"] = failures
    for d, entry in enumerate(base["divergence"]):
        intervals, evals = [], 0
        for c, r in enumerate(reports):
            e = r["divergence"][d]
            evals += e["bisection_evaluations"]
            for lo, hi in e["intervals"]:
                if intervals and c > 0 and intervals[-1][1] == bounds[c - 1] and lo == bounds[c - 1]:
                    intervals[-1][1] = hi  # an interval through the shared point
                else:
                    intervals.append([lo, hi])
        entry["intervals"] = intervals
        entry["bisection_evaluations"] = evals
    base["summary"] = {"points": len(merged["a"]), "diverging_points": int(sum(bool(x) for x in merged["diverges"])),
                       "intervals": sum(len(e["intervals"]) for e in base["divergence"]),
                       "partial": False, "points_planned": len(merged["a"])}  # the tasks run unbudgeted
    return base


def drift(family="two-token", start=0.0, stop=1.0, points=101, log=False, recipes="fp16,bf16-fp32acc,fp32,fp64,mpfr256",
          policies="numpy,absolute:1e-6,relative:1e-3", diagnostic=None, *, client, points_per_task=None,
          progress=False, object=None, seed=20261129, resolution=1e-9, enclosures=False, max_bits=4096, n=None,
          d=None):
    """attncert.drift(...) computed on `client`'s workers: the grid split into runs of points_per_task points
    (default: four runs per worker) that share their end points, each run's bisections done in its task;
    joined, the result is the single-process one (the same report but its command).  A diagnostic must be
    picklable (Dask sends it to the workers; lambdas are, through cloudpickle)."""
    from . import _core, analysis

    _check_client(client)
    progress = _args.flag(progress, "progress")
    if points_per_task is not None:
        points_per_task = _args.integer(points_per_task, "points_per_task", 2)
    args = dict(family=family, start=start, stop=stop, points=points, log=log, recipes=recipes, policies=policies,
                diagnostic=diagnostic, object=object, seed=seed, resolution=resolution, enclosures=enclosures,
                max_bits=max_bits, n=n, d=d)
    analysis._diagnostics(diagnostic)  # checked here, before any task
    grid = _core.drift_grid(analysis._drift_options(family, start, stop, points, log, recipes, policies, object, seed,
                                                    resolution, enclosures, max_bits, None, n, d))
    workers = max(1, len(client.scheduler_info()["workers"]))
    per = points_per_task if points_per_task is not None else max(2, -(-len(grid) // (4 * workers)))
    runs, s = [], 0
    while s < len(grid) - 1:
        e = min(s + per - 1, len(grid) - 1)
        runs.append((s, e))
        s = e
    futures = [((s, e), client.submit(_drift_task, args, grid[s:e + 1], pure=False)) for s, e in runs]
    _progress(futures, progress)
    reports = client.gather([f for _, f in futures])
    return analysis.DriftResult(_merge_drift(reports, [grid[e] for _, e in runs]))
