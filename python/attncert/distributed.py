"""attncert.distributed: the oracle (forward and backward) on a Dask cluster.

    from dask.distributed import Client, LocalCluster
    import attncert.distributed as ad
    client = Client(LocalCluster(n_workers=2, threads_per_worker=1))
    out = ad.attention(q, k, v, client=client, causal="top-left")        # the same bits as attncert.attention
    grads = ad.attention_vjp(q, k, v, do, client=client, causal="top-left")

Work is split into tasks by (batch, kv-head group, block of query rows); Dask schedules them, retries the
tasks of a worker that dies, and shows progress in its dashboard or with distributed.progress.  Every
element the oracle returns is the correctly rounded exact value, computed by its own row, so the result
does not depend on the split: it is bit for bit that of the single-process call (elements reported
faithful_only at the precision cap are decided by the same row computation, hence also equal).
Assembly writes each block to its own place, so a retried task cannot count a row twice.

Layout bhsd ((b, h, n, d)) only.  The backward splits by (batch, kv-head group) only, each task with all
its query rows: dK and dV sum over the rows of a group, and rounded partial sums would not be correctly
rounded; dbias and dsink are computed when no sum crosses a task (a bias whose batch and head dimensions
are full, a sink with batch 1), and refused otherwise.
"""
from __future__ import annotations

import numpy as np

import attncert as _a

__all__ = ["attention", "attention_vjp", "drift"]

_PER_UNIT_4D = ("bias", "mask", "dropout_mask")


def _arr(x, what):
    """A NumPy array, a torch tensor (converted) or a dask array (kept lazy)."""
    if x is None:
        return None
    if type(x).__module__.startswith("dask"):
        return x
    return _a._to_numpy(x, what)


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


def _default_target(q, variant):
    target = variant.get("target")
    if target is None:
        target = _a._dtype_name(q)
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

    q_, k_, v_ = _arr(q, "q"), _arr(k, "k"), _arr(v, "v")
    B, H, Hk, r, nq = _units(q_, k_, variant)
    if int(rows_per_task) < 1:
        raise ValueError("rows_per_task must be >= 1 (got %r)" % (rows_per_task,))
    opts = dict(variant, target=_default_target(q, variant), want_lse=bool(return_lse))
    token = uuid.uuid4().hex[:12]
    futures = []
    for b in range(B):
        for g in range(Hk):
            rows = r * nq
            parts = (q_[b:b + 1, g * r:(g + 1) * r], k_[b:b + 1, g:g + 1], v_[b:b + 1, g:g + 1])
            # one task for the unit: its arrays go with it; several: held once on the cluster for all of them
            args = [_put(client, x) if rows > int(rows_per_task) or not isinstance(x, np.ndarray) else x for x in parts]
            unit_opts = _unit_variant(opts, b, g, r, B, H)
            for begin in range(0, rows, int(rows_per_task)):
                end = min(rows, begin + int(rows_per_task))
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


def attention_vjp(q, k, v, do, *, client, dlse=None, progress=False, **variant):
    """attncert.attention_vjp(q, k, v, do, dlse=dlse, **variant) computed on `client`'s workers, bit for bit
    the same: one task per (batch, kv-head group).  Refused (ValueError): a bias broadcast over the batch
    (with b > 1) or over the heads (with more than one kv head), and a sink with b > 1, whose gradients
    would be sums across tasks."""
    import uuid

    q_, k_, v_, do_, dlse_ = _arr(q, "q"), _arr(k, "k"), _arr(v, "v"), _arr(do, "do"), _arr(dlse, "dlse")
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
    token = uuid.uuid4().hex[:12]
    futures = []
    for b in range(B):
        for g in range(Hk):
            heads = slice(g * r, (g + 1) * r)
            # one task per unit: NumPy slices go with it (recomputable with the task); dask arrays stay on the cluster
            parts = [x if x is None or isinstance(x, np.ndarray) else client.compute(x)
                     for x in (q_[b:b + 1, heads], k_[b:b + 1, g:g + 1], v_[b:b + 1, g:g + 1], do_[b:b + 1, heads],
                               None if dlse_ is None else dlse_[b:b + 1, heads])]
            f = client.submit(_backward_task, *parts, _unit_variant(args, b, g, r, B, H), pure=False,
                              key="attncert-bwd-%s-b%d-g%d" % (token, b, g))
            futures.append(((b, g), f))
    _progress(futures, progress)
    full, target = {}, None
    results = client.gather([f for _, f in futures])
    for ((b, g), _), (grads, target) in zip(futures, results):
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
                       "intervals": sum(len(e["intervals"]) for e in base["divergence"])}
    return base


def drift(family="two-token", start=0.0, stop=1.0, points=101, log=False, recipes="fp16,bf16-fp32acc,fp32,fp64,mpfr256",
          policies="numpy,absolute:1e-6,relative:1e-3", diagnostic=None, *, client, points_per_task=None,
          progress=False, object=None, seed=20261129, resolution=1e-9, enclosures=False, max_bits=4096):
    """attncert.drift(...) computed on `client`'s workers: the grid split into runs of points_per_task points
    (default: four runs per worker) that share their end points, each run's bisections done in its task;
    joined, the result is the single-process one (the same report but its command).  A diagnostic must be
    picklable (Dask sends it to the workers; lambdas are, through cloudpickle)."""
    from . import _core, analysis

    args = dict(family=family, start=start, stop=stop, points=points, log=log, recipes=recipes, policies=policies,
                diagnostic=diagnostic, object=object, seed=seed, resolution=resolution, enclosures=enclosures,
                max_bits=max_bits)
    analysis._diagnostics(diagnostic)  # checked here, before any task
    grid = _core.drift_grid(analysis._drift_options(family, start, stop, points, log, recipes, policies, object, seed,
                                                    resolution, enclosures, max_bits))
    workers = max(1, len(client.scheduler_info()["workers"]))
    per = int(points_per_task) if points_per_task else max(2, -(-len(grid) // (4 * workers)))
    if per < 2:
        raise ValueError("points_per_task must be >= 2 (got %r)" % (points_per_task,))
    runs, s = [], 0
    while s < len(grid) - 1:
        e = min(s + per - 1, len(grid) - 1)
        runs.append((s, e))
        s = e
    futures = [((s, e), client.submit(_drift_task, args, grid[s:e + 1], pure=False)) for s, e in runs]
    _progress(futures, progress)
    reports = client.gather([f for _, f in futures])
    return analysis.DriftResult(_merge_drift(reports, [grid[e] for _, e in runs]))
