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
candidate's drawn rows against them: the grade is the single-process one, field for field, and so is the
AssertionError's message.  The defaults are attncert.testing's: rule None is "flash" ("ulp" when only max_ulp=
is given), the target is the candidate's dtype unless target= is given, and flash / torch-sdpa without
baseline= compare with attncert.testing.default_baseline, computed in tasks (one per query head with drawn
rows, on that head's drawn rows only, as the single-process helper computes it) with flash's atol
FlashAttention's fudge of the drawn rows' exact values.

Layout bhsd ((b, h, n, d)) only.  The backward splits a unit into blocks of query rows too: dK and dV sum
over the rows of a group, and rounded partial sums would not be correctly rounded, so each block returns
enclosures of its partial sums (double-double balls), which the client adds and rounds once; a unit whose
enclosure cannot decide an element is redone whole by one task.  dbias and dsink are computed when no sum
crosses a unit (a bias whose batch and head dimensions are full, a sink with batch 1; such units are not
split), and refused otherwise.

max_seconds (every call; 0: no limit) is the call's budget, as the single-process calls take it.  The client
fixes an absolute deadline (time.time() + max_seconds) and hands it to every task, which computes what is left
when it starts (a task that starts past it computes nothing) and gives that to the oracle as its own
max_seconds; the client waits for the tasks until the deadline.  attention, attention_vjp, grade and
assert_attention_close are all or nothing: past the deadline, TimeoutError naming the call, the call's tasks
cancelled, nothing returned.  drift returns the sweep of the points computed within the budget (summary partial
True, points_planned, not_computed naming the grid points left out), as attncert.drift(max_seconds=) does.
The deadline is read on the workers' clocks: on a cluster of several machines they must agree (NTP).
"""
from __future__ import annotations

import json
import threading
import time

import numpy as np

import attncert as _a

from . import _args

__all__ = ["attention", "attention_vjp", "grade", "assert_attention_close", "drift"]

_PER_UNIT = ("bias", "mask", "dropout_mask", "alibi_slopes", "sink", "seqlens_k", "key_leftpad")


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


def _fold_key_padding(q, k, variant):
    """key_padding_mask (b, n_k), True = a real key, folded into `mask` so that each unit reads its batch of it
    as the single-process call does: and-ed with a bool mask, added as 0 / -inf to torch SDPA's float additive
    mask (which each task splits as attncert.attention does)."""
    kp = variant.pop("key_padding_mask", None)
    if kp is None:
        return
    kp = _a._key_padding(_a._to_numpy(kp, "key_padding_mask"), "bhsd", q.shape[0], k.shape[2])
    m = variant.get("mask")
    if m is None:
        variant["mask"] = kp
        return
    m = _a._to_numpy(m, "mask")
    if m.dtype.kind == "f":
        variant["mask"] = m + np.where(kp, m.dtype.type(0), m.dtype.type(-np.inf))
    else:
        variant["mask"] = np.logical_and(m, kp)


def _units(q, k, variant):
    _fold_key_padding(q, k, variant)
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
    for key in ("qv", "qkv_format", "q_descale", "k_descale", "v_descale"):
        if variant.get(key) is not None:
            raise ValueError("attncert.distributed: %s is not supported (its units do not split it yet); call "
                             "attncert.%s on one process" % (key, "attention"))
    return B, H, Hk, r, nq


def _unit_variant(variant, b, g, r, B, H, heads=None):
    """The keywords of the call restricted to batch b and kv-head group g (query heads g*r .. g*r + r - 1, or the
    query heads [h0, h1) of heads=(h0, h1)): each variant input a view of the part the unit reads, as the
    library's broadcasting rule gives it (oracle::unit_ranges: a dimension of size 1 kept whole)."""
    from . import _core

    h0, h1 = (g * r, (g + 1) * r) if heads is None else heads
    out = dict(variant)
    for key in _PER_UNIT:
        if variant.get(key) is not None:
            a = _a._to_numpy(variant[key], key)
            ranges = _core.unit_ranges(key, list(a.shape), B, H, b, h0, h1)
            out[key] = a[tuple(slice(lo, hi) for lo, hi in ranges)]
    return out


def _forward_task(q, k, v, opts, row_block, deadline=None):
    """One task: the internal rows [begin, end) (h-major, then i) of one (batch, kv-head group) unit.
    Returns those rows of the output (and of the LSE) and their formats; None when they were not all computed
    before the call's deadline (_left)."""
    import attncert

    left = _left(deadline)
    if left is not None and left <= 0:
        return None
    opts = dict(opts, threads=1)
    want_lse = opts.pop("want_lse")
    ref = attncert._reference(np.asarray(q), np.asarray(k), np.asarray(v), want_lse=want_lse, row_block=row_block,
                              max_seconds=left or 0, **opts)
    if ref.summary()["undecided_rows"]:
        return None
    begin, end = row_block
    out = ref.output()
    lse = ref.lse()
    return (out.reshape(-1, out.shape[-1])[begin:end].copy(), None if lse is None else lse.reshape(-1)[begin:end].copy(),
            ref.target, ref.lse_target)


def _backward_task(q, k, v, do, dlse, args, deadline=None):
    """One task: the gradients of one (batch, kv-head group) unit, all its rows; None when they were not
    computed before the call's deadline."""
    import attncert

    left = _left(deadline)
    if left is not None and left <= 0:
        return None
    try:
        g = attncert._gradients(np.asarray(q), np.asarray(k), np.asarray(v), np.asarray(do),
                                None if dlse is None else np.asarray(dlse), dict(args, threads=1), left or 0)
    except TimeoutError:  # past the budget (the oracle's max_seconds): all or nothing
        if deadline is None:
            raise
        return None
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


def _progress(futures, progress, budget=None):
    """Dask's progress bar over the futures.  In a console it blocks until they are done; with a budget it runs
    in a thread of its own instead, so that the client still stops waiting at the deadline."""
    if progress:
        from distributed import progress as dask_progress

        fs = [f for _, f in futures]
        if budget is None or budget.deadline is None:
            dask_progress(fs)
        else:
            threading.Thread(target=dask_progress, args=(fs,), daemon=True, name="attncert-progress").start()


def _seconds(max_seconds):
    """max_seconds checked as the single-process calls check it (0: no limit)."""
    return _args.real(max_seconds, "max_seconds", 0, 1e7)


def _left(deadline):
    """In a task: the seconds left before the call's deadline (an absolute time.time(), fixed on the client),
    at most 1e7 (max_seconds' range); None without a budget.  <= 0: the task started too late, it computes
    nothing."""
    if deadline is None:
        return None
    return min(deadline - time.time(), 1e7)


_POLL = 0.02  # seconds between two looks at the futures while the client waits with a deadline


class _Budget:
    """The max_seconds of one call on the client: the absolute deadline handed to its tasks, and the futures of
    the call (its tasks, and the inputs held on the cluster for them), let go of when the budget is spent."""

    def __init__(self, client, call, max_seconds):
        self.client, self.call, self.max_seconds = client, call, max_seconds
        self.deadline = time.time() + max_seconds if max_seconds else None
        self.tasks, self.inputs = [], []

    def hold(self, xs):
        """Keeps the futures among task arguments xs (arrays, None or futures): the inputs held for the tasks."""
        from distributed import Future

        self.inputs.extend(x for x in xs if isinstance(x, Future))
        return xs

    def track(self, fs):
        """Keeps the call's task futures fs."""
        self.tasks.extend(fs)
        return fs

    def spent(self, what):
        """Cancels the call's tasks that are not done, releases its other futures (results, held inputs) and
        raises TimeoutError: nothing of the call is returned.  (Only the tasks are cancelled: Dask cancels the
        dependents of a cancelled input itself, and then waits a second for each of them asked again.)"""
        try:
            pending = [f for f in self.tasks if not f.done()]
            if pending:
                self.client.cancel(pending)
            for f in self.tasks + self.inputs:
                f.release()
        finally:
            raise TimeoutError("attncert.distributed.%s: not computed within max_seconds=%s (%s); nothing is returned "
                               "and the call's tasks are cancelled" % (self.call, _g(self.max_seconds), what))

    def wait(self, futures, until=None):
        """Waits until every future is done or one has failed (True: client.gather returns the results or
        raises the task's exception at once), or until the time `until` (default: the deadline) has come
        (False).  Without a deadline: True at once (client.gather waits)."""
        if self.deadline is None:
            return True
        until = self.deadline if until is None else until
        pending = list(futures)
        while True:
            still = []
            for f in pending:
                if not f.done():
                    still.append(f)
                elif f.status == "error":
                    return True
            pending = still
            if not pending:
                return True
            now = time.time()
            if now >= until:
                return False
            time.sleep(min(_POLL, until - now))

    def collect(self, futures):
        """The futures' results (client.gather), all of them within the deadline: TimeoutError (spent) when the
        deadline comes first or a task reports that it did not compute its part within it (None).  A task's
        own exception is raised as client.gather raises it."""
        if not self.wait(futures):
            self.spent("%d of %d tasks done at the deadline" % (sum(f.done() for f in futures), len(futures)))
        results = self.client.gather(futures)
        if self.deadline is not None:
            late = sum(r is None for r in results)
            if late:
                self.spent("%d of %d tasks not done within it" % (late, len(futures)))
        return results


def _g(x):
    """A number as the messages show it: 0.5, 2, 1e+06."""
    return "%g" % x


def attention(q, k, v, *, client, rows_per_task=1024, return_lse=False, progress=False, max_seconds=0, **variant):
    """attncert.attention(q, k, v, **variant) computed on `client`'s workers, bit for bit the same.

    q, k, v: NumPy arrays, torch tensors or dask arrays (layout bhsd).  rows_per_task: query rows per task
    (rows of all the query heads of a kv-head group count; a unit with more rows is split into blocks).  Returns the output (and the LSE with
    return_lse) as attncert.attention does: NumPy, or torch for torch q.  progress=True shows Dask's progress
    bar (distributed.progress) while the tasks run; the dashboard (client.dashboard_link) shows them too.
    max_seconds > 0 bounds the call, as attncert.attention's: past it, TimeoutError and the tasks cancelled
    (never a partial answer); each task gets what is left of it when it starts.
    """
    import uuid

    _check_client(client)
    per_task = _args.integer(rows_per_task, "rows_per_task", 1)
    return_lse, progress = _args.flag(return_lse, "return_lse"), _args.flag(progress, "progress")
    max_seconds = _seconds(max_seconds)
    budget = _Budget(client, "attention", max_seconds)
    q_, k_, v_ = _arr(q, "q"), _arr(k, "k"), _arr(v, "v")
    if _empty(q_, k_, v_):
        return _a.attention(_local(q), _local(k), _local(v), return_lse=return_lse, max_seconds=max_seconds, **variant)
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
            args = budget.hold([_put(client, x) if rows > per_task or not isinstance(x, np.ndarray) else x
                                for x in parts])
            unit_opts = _unit_variant(opts, b, g, r, B, H)
            for begin in range(0, rows, per_task):
                end = min(rows, begin + per_task)
                f = client.submit(_forward_task, *args, unit_opts, (begin, end), budget.deadline, pure=False,
                                  key="attncert-fwd-%s-b%d-g%d-r%d" % (token, b, g, begin))
                futures.append(((b, g, begin, end), f))
    budget.track([f for _, f in futures])
    _progress(futures, progress, budget)
    units, lses, target, lse_target = {}, {}, None, None
    results = budget.collect([f for _, f in futures])
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


def _backward_block_task(q, k, v, do, dlse, args, row_block, deadline=None):
    """One task: the internal rows [begin, end) of one (batch, kv-head group) unit: their dq, correctly rounded,
    and the enclosures of their partial dK (before the scale) and dV sums (attncert/oracle/backward.hpp); None
    when it starts past the call's deadline.  (The budget left goes with the options, but the library's block
    (run_oracle_backward_block, the fast path) does not poll it today: a block that has started runs to its
    end, and the client stops waiting at the deadline all the same.)"""
    import attncert
    from attncert import _core

    left = _left(deadline)
    if left is not None and left <= 0:
        return None
    opts = attncert._options(q, want_lse=dlse is not None, **dict(args, threads=1))
    if left is not None:
        opts["max_seconds"] = left
    try:
        return _core.backward_block(np.asarray(q), np.asarray(k), np.asarray(v), np.asarray(do),
                                    None if dlse is None else np.asarray(dlse), opts, tuple(row_block))
    except TimeoutError:
        if deadline is None:
            raise
        return None


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


def attention_vjp(q, k, v, do, *, client, dlse=None, rows_per_task="auto", progress=False, stats=None, max_seconds=0,
                  **variant):
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
    stats: a dict, filled with the counts of units, blocks and units redone whole.  max_seconds > 0 bounds the
    call, as attncert.attention_vjp's: past it, TimeoutError and the tasks cancelled (dK and dV sum over every
    row: there is no partial answer).  A unit's task gets what is left of the budget when it starts and stops
    itself past it; a row block only checks it when it starts (the library's block does not poll a budget)."""
    import uuid

    _check_client(client)
    if not (isinstance(rows_per_task, str) and rows_per_task == "auto"):
        if isinstance(rows_per_task, str):
            raise ValueError("rows_per_task: must be \"auto\" or an integer >= 1, got %s" % _args._shown(rows_per_task))
        rows_per_task = _args.integer(rows_per_task, "rows_per_task", 1)
    progress = _args.flag(progress, "progress")
    if stats is not None and not isinstance(stats, dict):
        raise TypeError("stats: must be a dict (filled with the counts) or None, got %s" % _args._shown(stats))
    max_seconds = _seconds(max_seconds)
    budget = _Budget(client, "attention_vjp", max_seconds)
    q_, k_, v_, do_, dlse_ = _arr(q, "q"), _arr(k, "k"), _arr(v, "v"), _arr(do, "do"), _arr(dlse, "dlse")
    if _empty(q_, k_, v_, do_, dlse_):
        return _a.attention_vjp(_local(q), _local(k), _local(v), _local(do), dlse=_local(dlse), max_seconds=max_seconds,
                                **variant)
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
                held = budget.hold([x if x is None or isinstance(x, np.ndarray) else client.compute(x) for x in parts])
                whole.append(((b, g), client.submit(_backward_task, *held, unit_args, budget.deadline, pure=False,
                                                    key="attncert-bwd-%s-b%d-g%d" % (token, b, g))))
            else:
                held = budget.hold(_hold(client, parts))
                fs = [client.submit(_backward_block_task, *held, unit_args, blk, budget.deadline, pure=False,
                                    key="attncert-bwdblk-%s-b%d-g%d-r%d" % (token, b, g, blk[0])) for blk in blocks]
                split.append(((b, g), fs, held, unit_args))
    tasks = [f for _, f in whole] + [f for _, fs, _, _ in split for f in fs]
    budget.track(tasks)
    _progress([(None, f) for f in tasks], progress, budget)
    if not budget.wait(tasks):  # with a budget: every task done (or one failed) before any result is fetched
        budget.spent("%d of %d tasks done at the deadline" % (sum(f.done() for f in tasks), len(tasks)))
    results = {}
    for ((b, g), _), res in zip(whole, budget.collect([f for _, f in whole])):
        results[(b, g)] = res
    redo = []
    for (b, g), fs, held, unit_args in split:
        reduced = _reduce_unit(budget.collect(fs), r, nq, q_.shape[-1])
        if reduced is None:
            f = client.submit(_backward_task, *held, unit_args, budget.deadline, pure=False,
                              key="attncert-bwd-%s-b%d-g%d" % (token, b, g))
            budget.track([f])
            redo.append(((b, g), f))
        else:
            grads, target = reduced
            dk = grads["dk"].reshape(1, 1, -1, k_.shape[-1])
            dv = grads["dv"].reshape(1, 1, -1, v_.shape[-1])
            results[(b, g)] = ({"dq": grads["dq"], "dk": dk, "dv": dv, "dbias": None, "dsink": None}, target)
    _progress(redo, progress, budget)
    for ((b, g), _), res in zip(redo, budget.collect([f for _, f in redo])):
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


_TRUTH = ("hi", "lo", "rad", "reference", "policy")


def _grade_task(q, k, v, opts, rows, deadline=None):
    """One task: the exact values of the internal rows `rows` (sorted, of one (batch, kv-head group) unit), the
    only rows it computes.  Returns {hi, lo, rad, reference} of those rows, each (len(rows), dv), and the target;
    None when they were not all computed before the call's deadline."""
    import attncert

    left = _left(deadline)
    if left is not None and left <= 0:
        return None
    args = dict(attncert._VARIANT_DEFAULTS)
    args.update(opts, threads=1)
    o = attncert._options(q, want_lse=False, **args)
    o["row_list"] = rows
    if left is not None:
        o["max_seconds"] = left
    ref = attncert._core.Reference(np.asarray(q), np.asarray(k), np.asarray(v), o)
    if ref.summary()["undecided_rows"]:
        return None
    t = ref.truth()
    return {n: t[n].reshape(-1, t[n].shape[-1])[rows] for n in _TRUTH}, ref.target


def _baseline_task(q, k, v, variant, torch_, h, rows, blocks, deadline=None):
    """One task: the default baseline (attncert.testing.default_baseline) of query head h of a unit (q (1, r, n_q,
    d), k and v (1, 1, n_k, d); variant: the keywords restricted to that head), computed as
    attncert.testing.assert_attention_close computes it, so that its values are the same bits: in the format of
    the reference's target, read off the truth blocks of the head's rows ([(a _grade_task's result, begin, end)],
    rows [begin, end) of each being this head's); rows None, the whole head; else the head's drawn query rows
    `rows` whose exact values are finite somewhere (the rows the single-process reference computed), the others
    0.  torch_: computed by torch (the caller's q is a tensor), else by NumPy.  Returns the baseline's rows
    (`rows`, or all), NumPy; None past the deadline."""
    import attncert
    from attncert import testing

    left = _left(deadline)
    if left is not None and left <= 0:
        return None
    if any(t is None for t, _, _ in blocks):  # a block not computed within the deadline
        return None
    fmt = testing._FORMAT.get(blocks[0][0][1], blocks[0][0][1])
    q, k, v = np.asarray(q)[:, h:h + 1], np.asarray(k), np.asarray(v)
    computed = None
    if rows is not None:
        hi = np.concatenate([t[0]["hi"][begin:end] for t, begin, end in blocks])
        computed = np.zeros((1, 1, q.shape[2]), dtype=bool)
        computed[0, 0, rows[np.isfinite(hi).any(axis=-1)]] = True
    if torch_:
        import torch

        q, k, v = (torch.from_numpy(np.ascontiguousarray(x)) for x in (q, k, v))
    out, _ = testing._baseline(q, k, v, fmt, variant, computed=computed)
    out = attncert._to_numpy(out, "baseline")[0, 0]
    return out if rows is None else out[rows]


def _candidate_rows(x, what, shape, rows):
    """The internal rows `rows` of a candidate (NumPy or torch) of the output's shape, as NumPy."""
    if x is None:
        return None
    a = _a._to_numpy(x, what)
    _a._check_transposed(a, shape, "bhsd", what)  # the other layout's shape: attncert.testing's message
    if tuple(a.shape) != tuple(shape):
        raise ValueError("attncert.distributed: %s has shape %s, the output's is %s"
                         % (what, tuple(a.shape), tuple(shape)))
    if a.dtype == np.bool_:
        raise ValueError("%s: must be a float array" % what)
    return a.reshape(-1, shape[-1])[rows]


def _settle(rules, defaulted, fmt, source, q, actual, default, exact):
    """(rules, the message's context) as attncert.testing.assert_attention_close settles them once the target
    format fmt is known (source: where the target came from, testing._target_of): with the default baseline
    (default True), where it came from and, under flash without atol=, FlashAttention's fudge of the exact
    values `exact` (the reference's rounded values; NaN where not computed) as atol."""
    from . import testing

    q_like = np.empty(0, q.dtype) if type(q).__module__.startswith("dask") else q  # its dtype, not computed
    ctx = {"rule_defaulted": defaulted, "format": fmt, "target_line": testing._target_line(fmt, source, q_like, actual),
           "baseline": "given"}
    if default:
        torch_ = _a._is_tensor(q)
        ctx.update(baseline="default", baseline_how="attncert.testing.default_baseline: the plain attention computed "
                   "by %s in %s%s" % ("torch" if torch_ else "NumPy", fmt, testing._EMULATED.get((torch_, fmt), "")))
        if rules["rule"] == "flash" and rules["atol"] is None:
            rules = dict(rules, atol=testing._flash_fudge(exact, fmt))
            ctx["fudge_format"] = fmt
    return rules, ctx


def _grade_local(actual, q, k, v, rows, seed, rules, defaulted, source, baseline, variant, max_seconds, budget):
    """(JSON, context, layout) of an input with no elements, on the driver as attncert.testing grades it (there
    is nothing to compute): the same grade, or the same exception."""
    from . import testing

    q, k, v = _local(q), _local(k), _local(v)
    ref = _a._reference(q, k, v, rows=rows, seed=seed if rows else 0, max_seconds=max_seconds, **variant)
    if ref.summary()["undecided_rows"]:  # (an empty input has no row to compute: never)
        budget.spent("rows of the reference not computed")
    layout = variant.get("layout", "bhsd")
    cand, base = _a._to_numpy(actual, "actual"), _a._to_numpy(baseline, "baseline")
    for x, name in ((cand, "actual"), (base, "baseline")):
        _a._check_transposed(x, testing._dims(q)[:-1] + testing._dims(v)[-1:], layout, name)
    fmt = testing._FORMAT.get(ref.target, ref.target)
    default = rules["rule"] in testing._NEEDS_BASELINE and base is None
    if default:
        computed = None
        if rows is not None and layout in ("bhsd", "bshd"):
            computed = np.isfinite(ref.truth()["hi"]).any(axis=-1)
        out, _ = testing._baseline(q, k, v, fmt, dict(variant, target=None), computed=computed)
        base = _a._to_numpy(out, "baseline")
    rules, ctx = _settle(rules, defaulted, fmt, source, q, actual, default, ref.output())
    return ref.grade(cand, base, rules, False, ("actual", "baseline")), ctx, layout


def _grade_tasks(client, budget, parts, opts, sampled, per, dims, every, default, torch_):
    """Submits a grade's tasks: for each (batch, kv-head group) unit with drawn rows, blocks of at most `per` of
    them (_grade_task: their exact values) and, with `default` (the default baseline is used), one
    _baseline_task per query head with drawn rows (every: rows=None, each head whole), which waits for the truth
    blocks of its rows (the rows the reference computed, its target).  parts(b, g): the unit's q, k, v.  Returns
    the lists [((p0, p1), future)] of the truth blocks and of the heads' baselines, [p0, p1) their positions in
    sampled."""
    import uuid

    B, H, Hk, r, nq = dims
    token = uuid.uuid4().hex[:12]
    truth, base = [], []
    for b in range(B):
        for g in range(Hk):
            start = (b * H + g * r) * nq  # the unit's internal rows are [start, start + r * nq)
            lo, hi = (int(x) for x in np.searchsorted(sampled, [start, start + r * nq]))
            if lo == hi:
                continue
            # several tasks use the unit's arrays: held once on the cluster; one task: sent with it
            shared = hi - lo > per or default
            args = budget.hold([_put(client, x) if shared or not isinstance(x, np.ndarray) else x for x in parts(b, g)])
            unit_opts = _unit_variant(opts, b, g, r, B, H)
            blocks = []
            for p0 in range(lo, hi, per):
                p1 = min(hi, p0 + per)
                f = client.submit(_grade_task, *args, unit_opts, sampled[p0:p1] - start, budget.deadline, pure=False,
                                  key="attncert-grade-%s-b%d-g%d-p%d" % (token, b, g, p0))
                blocks.append(((p0, p1), f))
            truth.extend(blocks)
            for h in range(g * r, (g + 1) * r) if default else ():
                h0, h1 = (int(x) for x in np.searchsorted(sampled, [(b * H + h) * nq, (b * H + h + 1) * nq]))
                if h0 == h1:
                    continue
                mine = [(f, max(h0, p0) - p0, min(h1, p1) - p0) for (p0, p1), f in blocks if p0 < h1 and h0 < p1]
                f = client.submit(_baseline_task, *args, _unit_variant(opts, b, g, r, B, H, (h, h + 1)), torch_,
                                  h - g * r, None if every else sampled[h0:h1] - (b * H + h) * nq, mine,
                                  budget.deadline, pure=False,
                                  key="attncert-baseline-%s-b%d-h%d" % (token, b, h))
                base.append(((h0, h1), f))
    return truth, base


def _grade_json(actual, q, k, v, client, rows, seed, rows_per_task, progress, rules, defaulted, baseline, variant,
                max_seconds, call):
    """(the grade's JSON, the message's context, the layout) of attncert.testing.assert_attention_close's
    grade, with the exact values (and the default baseline) of the drawn rows computed in tasks."""
    from . import _core, testing

    extra = set(variant) - set(_a._VARIANT_DEFAULTS)
    if extra:
        raise TypeError("unexpected keyword argument(s): %s" % ", ".join(sorted(extra)))
    _check_client(client)
    per = _args.integer(rows_per_task, "rows_per_task", 1)
    progress = _args.flag(progress, "progress")
    if rows is not None:
        rows, seed = _args.limited(rows, "rows"), _args.limited(seed, "seed")
    max_seconds = _seconds(max_seconds)
    budget = _Budget(client, call, max_seconds)
    target, source = testing._target_of(actual, variant)  # the candidate's dtype, unless target= is given
    if target is not None:
        variant = dict(variant, target=target)
    default = rules["rule"] in testing._NEEDS_BASELINE and baseline is None
    q_, k_, v_ = _arr(q, "q"), _arr(k, "k"), _arr(v, "v")
    if _empty(q_, k_, v_):  # the single-process grade (attncert.testing.assert_attention_close's), or its error
        return _grade_local(actual, q, k, v, rows, seed, rules, defaulted, source, baseline, variant, max_seconds,
                            budget)
    _check_variant(q, variant)
    dims = B, H, Hk, r, nq = _units(q_, k_, variant)
    shape = (B, H, nq, v_.shape[-1])
    # the rows attncert.testing's rows=N draws (every row of a bhsd call is used), sorted; rows=None: all
    sampled = np.arange(B * H * nq, dtype=np.int64) if rows is None else _core.sample_rows(B * H * nq, rows, seed)
    cand = _candidate_rows(actual, "actual", shape, sampled)
    base = _candidate_rows(baseline, "baseline", shape, sampled)
    opts = dict(variant, target=_default_target(q, variant))
    truth_fs, base_fs = _grade_tasks(
        client, budget, lambda b, g: (q_[b:b + 1, g * r:(g + 1) * r], k_[b:b + 1, g:g + 1], v_[b:b + 1, g:g + 1]),
        opts, sampled, per, dims, rows is None, default, _a._is_tensor(q))
    budget.track([f for _, f in truth_fs + base_fs])
    _progress(truth_fs + base_fs, progress, budget)
    truth = {n: np.full(cand.shape, 0.0 if n == "policy" else np.nan) for n in _TRUTH}
    target = None
    for ((p0, p1), _), (t, target) in zip(truth_fs, budget.collect([f for _, f in truth_fs])):
        for n in _TRUTH:
            truth[n][p0:p1] = t[n]  # each block to its own place
    if default:
        base = np.full(cand.shape, np.nan)
        for ((h0, h1), _), rows_ in zip(base_fs, budget.collect([f for _, f in base_fs])):
            base[h0:h1] = rows_
    rules, ctx = _settle(rules, defaulted, testing._FORMAT.get(target, target), source, q, actual, default,
                         truth["reference"])
    return _core.grade_rows(cand, base, truth, sampled, shape, target, rules), ctx, "bhsd"


def grade(actual, q, k, v, *, client, rows=None, seed=0, rows_per_task=1024, progress=False, rule=None, max_ulp=None,
          baseline=None, atol=None, rtol=None, flash_k=None, fudge=None, max_seconds=0, **variant):
    """The grade of a kernel's output `actual` against the exact attention of q, k, v (the keywords of
    attncert.attention), computed on `client`'s workers: the dict attncert.testing.assert_attention_close(actual,
    q, k, v, rows=rows, seed=seed, rule=..., **variant) returns, field for field, whatever the verdict (it is
    g["rule"]["verdict"]; this call does not raise on "fail").

    The defaults are attncert.testing.assert_attention_close's: rule None is "flash", FlashAttention's test, or
    "ulp" when max_ulp= is given (rule="ulp": 4 ulps unless max_ulp=); flash and torch-sdpa without baseline=
    compare with attncert.testing.default_baseline (the plain attention in the target format), flash's atol
    then FlashAttention's fudge unless atol= is given; the target (the ulps, the default baseline's format) is
    the dtype of `actual` (a float array or tensor; else q's), unless target= is given.  The default baseline
    is computed in tasks, one per query head with drawn rows, on that head's drawn rows only (rows=None: the
    whole head), as the single-process helper computes it, so that its values are the same bits: a task's
    memory is bounded by one head's drawn rows against its keys, and the driver holds only the drawn rows.
    rows=N: only N query rows, drawn by `seed` as the single-process call draws them, are computed and graded
    (the others are counted as skipped); rows=None: every row.  rows_per_task: drawn rows per task (tasks are
    (batch, kv-head group, block of its drawn rows)).  actual and baseline: NumPy or torch, of the output's
    shape (b, h_q, n_q, d_v); q, k, v: NumPy, torch or dask arrays (layout bhsd).  The rules as in
    attncert.testing.  Beyond the candidate itself, the driver holds the drawn rows only (of the candidate, of
    the baseline and of the exact values).  max_seconds > 0 bounds the computation of the exact rows (and of
    the default baseline), as attncert.testing.assert_attention_close's: past it, TimeoutError and the tasks
    cancelled (never a grade of the rows computed so far).  Unlike assert_attention_close, it tells no stats hook.
    """
    from . import testing

    rules, defaulted = testing._chosen_rules(rule, max_ulp, atol, rtol, flash_k, fudge)
    return json.loads(_grade_json(actual, q, k, v, client, rows, seed, rows_per_task, progress, rules, defaulted,
                                  baseline, variant, max_seconds, "grade")[0])


def assert_attention_close(actual, q, k, v, *, client, rows=None, seed=0, rows_per_task=1024, progress=False, rule=None,
                           max_ulp=None, baseline=None, atol=None, rtol=None, flash_k=None, fudge=None, max_seconds=0,
                           **variant):
    """attncert.testing.assert_attention_close(actual, q, k, v, rows=rows, seed=seed, ...) with the rows (and the
    default baseline) computed on `client`'s workers (see grade): the same defaults (rule None: "flash" against
    attncert.testing.default_baseline with FlashAttention's fudge, or "ulp" when max_ulp= is given; the target
    the dtype of `actual` unless target= is given), the same AssertionError, message for message, on failure,
    the same grade (a dict) when it passes, and the same stats hook event.  max_seconds > 0: past it,
    TimeoutError (never a pass on the rows computed so far)."""
    __tracebackhide__ = True  # noqa: F841  (pytest: the failure points at the caller's line)
    from . import testing

    rules, defaulted = testing._chosen_rules(rule, max_ulp, atol, rtol, flash_k, fudge)
    gj, ctx, layout = _grade_json(actual, q, k, v, client, rows, seed, rows_per_task, progress, rules, defaulted,
                                  baseline, variant, max_seconds, "assert_attention_close")
    return testing._check(gj, "attention output", layout, ctx)


def _drift_options(args, grid=None, max_seconds=0):
    from . import analysis

    return analysis._drift_options(*[args[x] for x in ("family", "start", "stop", "points", "log", "recipes", "policies",
                                                       "object", "seed", "resolution", "enclosures", "max_bits")],
                                   grid, args["n"], args["d"], max_seconds)


def _drift_task(args, chunk, deadline=None):
    """One task: the sweep on a run of the grid's points (its bisections included); returns its result as wire
    text (attncert/drift/runs.hpp).  With the call's deadline, the sweep gets what is left of it when the task
    starts as its max_seconds: the result of the run's first points when it stops there, None when fewer than
    two of them were computed (the sweep's TimeoutError) or when the task starts past the deadline."""
    from attncert import _core, analysis

    diagnostics = analysis._diagnostics(args["diagnostic"])
    left = _left(deadline)
    if left is None:
        return _core.drift_run(_drift_options(args, chunk), diagnostics)
    if left <= 0:
        return None
    try:
        return _core.drift_run(_drift_options(args, chunk, left), diagnostics)
    except TimeoutError:
        return None


def _merge_drift(args, runs, max_seconds=0):
    """The runs' results (wire texts in grid order; None: a run not computed) as the whole sweep's report, merged
    in C++ (merge_drift_runs, attncert/drift/runs.hpp): every point computed once, the intervals joined through
    the runs' shared end points, and the grid points left out named in the summary (partial, points_planned,
    not_computed), as attncert.drift(max_seconds=) names them."""
    from attncert import _core, analysis

    names = [n for n, _ in analysis._diagnostics(args["diagnostic"])]
    return json.loads(_core.drift_merge(_drift_options(args, None, max_seconds), names, list(runs),
                                        "attncert.distributed.drift (python)"))


def _grace(max_seconds):
    """How long past the deadline drift's client waits for the runs' partial reports: a run stops at the deadline
    but finishes the point it is computing, and its report has to come back.  Half the tolerance the budget is
    honoured within (10 % of it or 1 s, whichever is larger)."""
    return 0.5 * max(1.0, 0.1 * max_seconds)


def drift(family="two-token", start=0.0, stop=1.0, points=101, log=False, recipes="fp16,bf16-fp32acc,fp32,fp64,mpfr256",
          policies="numpy,absolute:1e-6,relative:1e-3", diagnostic=None, *, client, points_per_task=None,
          progress=False, object=None, seed=20261129, resolution=1e-9, enclosures=False, max_bits=4096, n=None,
          d=None, max_seconds=0):
    """attncert.drift(...) computed on `client`'s workers: the grid split into runs of points_per_task points
    (default: four runs per worker) that share their end points, each run's bisections done in its task;
    joined, the result is the single-process one (the same report but its command).  A diagnostic must be
    picklable (Dask sends it to the workers; lambdas are, through cloudpickle).

    max_seconds > 0 bounds the sweep, as attncert.drift(max_seconds=) does: a partial sweep, not an exception.
    Each run gets what is left of the budget when it starts; a run stopped by it keeps its first points, a run
    that starts too late (or whose report is not back shortly after the deadline: it is cancelled) has none.  The
    report holds the points computed; its summary has partial True, points_planned and not_computed (the grid
    points left out, which may lie anywhere in the grid).  TimeoutError when no run computed two points."""
    from . import _core, analysis

    _check_client(client)
    progress = _args.flag(progress, "progress")
    if points_per_task is not None:
        points_per_task = _args.integer(points_per_task, "points_per_task", 2)
    max_seconds = _seconds(max_seconds)
    budget = _Budget(client, "drift", max_seconds)
    args = dict(family=family, start=start, stop=stop, points=points, log=log, recipes=recipes, policies=policies,
                diagnostic=diagnostic, object=object, seed=seed, resolution=resolution, enclosures=enclosures,
                max_bits=max_bits, n=n, d=d)
    analysis._diagnostics(diagnostic)  # checked here, before any task
    grid = _core.drift_grid(_drift_options(args))
    workers = max(1, len(client.scheduler_info()["workers"]))
    per = points_per_task if points_per_task is not None else max(2, -(-len(grid) // (4 * workers)))
    runs, s = [], 0
    while s < len(grid) - 1:
        e = min(s + per - 1, len(grid) - 1)
        runs.append((s, e))
        s = e
    futures = [((s, e), client.submit(_drift_task, args, grid[s:e + 1], budget.deadline, pure=False))
               for s, e in runs]
    fs = budget.track([f for _, f in futures])
    _progress(futures, progress, budget)
    if budget.deadline is None:
        reports = client.gather(fs)
    else:
        budget.wait(fs, budget.deadline + _grace(max_seconds))
        back = [f for f in fs if f.status in ("finished", "error")]  # a task's error raises here, as without a budget
        late = [f for f in fs if f.status not in ("finished", "error")]
        if late:
            client.cancel(late)
        got = dict(zip([f.key for f in back], client.gather(back)))
        reports = [got.get(f.key) for f in fs]
        if all(r is None for r in reports):
            budget.spent("no run computed two grid points: 0 of %d" % len(grid))
    return analysis.DriftResult(_merge_drift(args, reports, max_seconds))
