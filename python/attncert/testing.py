"""attncert.testing: assert that a kernel's attention (or its gradients) is close to the exact one.

    from attncert.testing import assert_attention_close
    assert_attention_close(out, q, k, v, causal="bottom-right")      # FlashAttention's test, nothing else to give

The rules are those of `attncert oracle --rule` (grading/grading.hpp), judged against the exact value o,
never against a rounded reference:
    flash         max |c - o| <= k * max |b - o| + atol  (FlashAttention's tests; k = 2 outputs, 3 gradients)
    ulp           max |c - o| / ulp(o) <= max_ulp (default 4 ulps of the target format): correctly rounded kernels
    torch-sdpa    PyTorch's SDPA tests: atol/rtol from the baseline's errors times a fudge factor
    assert-close  |c - o| <= atol + rtol * |o| with torch.testing's per-dtype defaults

Defaults.  rule=None is "flash", or "ulp" when max_ulp= is given.  flash and torch-sdpa compare the kernel's
error with a baseline's: without baseline= the baseline is default_baseline(...) (default_baseline_grads for the
gradients), the plain attention evaluated in the target format by a straightforward reference (its docstring
says exactly how), and flash's atol, unless given, is FlashAttention's fudge 2 * max |fl(fl(o + 0.3) - 0.3) - o|
in that format (hopper/test_flash_attn.py's fwd_atol / dq_atol), o the exact value rounded to it.  The target
format (the ulps, the baseline's format) is the candidate's dtype (a torch bfloat16 tensor: bfloat16, a NumPy
float16 array: float16; for the gradients dq's), q's dtype when the candidate's is not a float format;
target= wins.

On failure, AssertionError says which rule failed and by how much, the rule's formula with its settings,
where the baseline came from (given, attncert's default, or none), the target when it is not q's dtype (or
was given), the layout the tensors were read in, the worst element's index (always in (b, h, i, k) order,
whatever the layout) with its actual and exact values, how many elements are beyond 0.5/1/2/4/16 ulps, and a
histogram.  A candidate (or a gradient) whose shape is the expected one with dimensions 1 and 2 swapped, the
shape of the other of bhsd / bshd, is refused with a ValueError that says so; q, k, v that fit only the other
layout are refused by attncert itself.  The helpers and the functions their failures pass through set pytest's
__tracebackhide__: a failing test's traceback ends at the caller's line, not inside attncert.testing.

The cache.  attncert.attention, attncert.attention_vjp and the helpers share one cache of references, keyed by
a hash of the inputs' bytes and of the options as attncert reads them (equal spellings share an entry; a
reference with the LSE serves a call without), bounded in bytes (default 1 GiB, set_cache_limit) with
least-recently-used eviction.  cache_info() reports hits, misses, entries, bytes; clear_cache() empties it.
A partial reference (max_seconds) is never cached.  An entry's bytes are an estimate of the C++ object's
arrays: 16 bytes per input element (the binary64 copy and its internal layout) and 40 per output element
(the truth's enclosure, the rounded value).

Stats.  add_stats_hook(fn) calls fn(event) for every grade ({"event": "grade", "what", "rule", "compared",
"max_ulp", "verdict", "target"}), every reference computed ({"event": "oracle", "kind", "seconds"}) and every
reference reused ({"event": "cache_hit", "kind"}); attncert.pytest_plugin sums them up.
"""
from __future__ import annotations

import collections
import collections.abc
import fractions
import hashlib
import json
import math
import threading
import time

import numpy as np

import attncert as _a

from . import _args

__all__ = ["assert_attention_close", "assert_attention_grads_close", "default_baseline", "default_baseline_grads",
           "clear_cache", "cache_info", "set_cache_limit", "add_stats_hook", "remove_stats_hook"]

_DEFAULT_MAX_ULP = 4.0
_DEFAULT_CACHE_BYTES = 1 << 30

# ---- the cache -------------------------------------------------------------------------------------------------

_cache: "collections.OrderedDict[str, tuple]" = collections.OrderedDict()  # key -> (value, bytes)
_stats = {"hits": 0, "misses": 0, "evictions": 0, "bytes": 0, "limit": _DEFAULT_CACHE_BYTES, "oracle_seconds": 0.0}
_hooks = []
_lock = threading.RLock()  # attncert.attention may be called from several threads (the GIL is released inside)


def clear_cache():
    """Forget every cached reference (and the counts of cache_info)."""
    with _lock:
        _cache.clear()
        _stats.update(hits=0, misses=0, evictions=0, bytes=0, oracle_seconds=0.0)


def cache_info():
    """{'hits', 'misses', 'size' (entries), 'bytes' (their estimated size), 'limit', 'evictions', 'oracle_seconds'
    (time spent computing the references)} of the reference cache."""
    with _lock:
        return dict(hits=_stats["hits"], misses=_stats["misses"], size=len(_cache), bytes=_stats["bytes"],
                    limit=_stats["limit"], evictions=_stats["evictions"], oracle_seconds=_stats["oracle_seconds"])


def set_cache_limit(nbytes):
    """Bound the cache to `nbytes` (an integer >= 0; 0 caches nothing), evicting the least recently used entries
    beyond it; returns the previous limit."""
    nbytes = _args.integer(nbytes, "nbytes", 0)
    with _lock:
        before = _stats["limit"]
        _stats["limit"] = nbytes
        _evict()
    return before


def add_stats_hook(fn):
    """Call fn(event) (a dict, see the module's docstring) for every grade, reference computed and reference reused;
    returns fn."""
    if not callable(fn):
        raise TypeError("fn: must be callable, got %s (%s)" % (_args._shown(fn), _args._type_name(fn)))
    _hooks.append(fn)
    return fn


def remove_stats_hook(fn):
    """Stop calling fn (added by add_stats_hook); nothing if it is not there."""
    while fn in _hooks:
        _hooks.remove(fn)


def _emit(event):
    for fn in list(_hooks):
        fn(event)


def _evict():
    while _cache and _stats["bytes"] > _stats["limit"]:
        _, (_, n) = _cache.popitem(last=False)
        _stats["bytes"] -= n
        _stats["evictions"] += 1


def _cached(keys, kind, make, nbytes):
    """The value cached under any of `keys` (the first is the one a new value is stored under), or make()'s,
    stored when its nbytes fit the limit."""
    __tracebackhide__ = True  # noqa: F841  (pytest: the failure points at the caller's line)
    with _lock:
        hit = next((key for key in keys if key in _cache), None)
        if hit is not None:
            _stats["hits"] += 1
            _cache.move_to_end(hit)
            value = _cache[hit][0]
        else:
            _stats["misses"] += 1
    if hit is not None:
        _emit({"event": "cache_hit", "kind": kind})
        return value
    t0 = time.perf_counter()
    try:
        value = make()  # outside the lock: other threads look up and compute meanwhile
    finally:
        seconds = time.perf_counter() - t0
        with _lock:
            _stats["oracle_seconds"] += seconds
        _emit({"event": "oracle", "kind": kind, "seconds": seconds})
    n = int(nbytes)
    with _lock:
        if n <= _stats["limit"]:
            if keys[0] in _cache:  # another thread stored it meanwhile
                _stats["bytes"] -= _cache.pop(keys[0])[1]
            _cache[keys[0]] = (value, n)
            _stats["bytes"] += n
            _evict()
    return value


def _hash_arrays(arrays, names):
    """sha256 over the arrays' dtypes, shapes and bytes (None as such)."""
    h = hashlib.sha256()
    for p, name in zip(arrays, names):
        if p is None:
            h.update(b"<none>|")
            continue
        spread = tuple(st == 0 and n > 1 for st, n in zip(p.strides, p.shape))
        if any(spread):  # a broadcast view: its distinct values and where they are repeated (nothing expanded)
            h.update(repr(("broadcast", p.shape, spread)).encode())
            p = p[tuple(0 if s else slice(None) for s in spread)]
        if not p.flags.c_contiguous:
            _args.check_copy(int(p.size) * int(p.itemsize), p.shape, name, "hashing")
        try:
            a = np.ascontiguousarray(p)
        except MemoryError:
            raise MemoryError("%s: out of memory hashing the array of shape %s: %d bytes asked for"
                              % (name, tuple(p.shape), int(p.size) * int(p.itemsize))) from None
        h.update(repr((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
        h.update(b"|")
    return h


_NOT_KEYED = ("threads",)  # options that change no value of the result


def _key(h, kind, opts, extra=()):
    """The cache key: the arrays' hash h (copied) with the kind and the options attncert built (_options)."""
    h = h.copy()
    h.update(kind.encode() + b"|")
    for name in sorted(opts):
        if name in _NOT_KEYED:
            continue
        val = opts[name]
        h.update(name.encode() + b"=")
        if isinstance(val, np.ndarray):
            h.update(_hash_arrays([val], [name]).digest())
        else:
            h.update(repr(val).encode())
        h.update(b"|")
    h.update(repr(tuple(extra)).encode())
    return h.hexdigest()


def _size(*arrays):
    return sum(int(np.size(a)) for a in arrays if a is not None)


def _check_variant(variant):
    __tracebackhide__ = True  # noqa: F841
    extra = set(variant) - set(_a._VARIANT_DEFAULTS)
    if extra:
        raise TypeError("unexpected keyword argument(s): %s" % ", ".join(sorted(extra)))
    args = dict(_a._VARIANT_DEFAULTS)
    args.update(variant)
    return args


def _checked_seconds(max_seconds):
    __tracebackhide__ = True  # noqa: F841
    return _args.real(max_seconds, "max_seconds", 0, 1e7) if max_seconds else max_seconds


def _shared_reference(q, k, v, *, want_lse=False, rows=None, seed=0, max_seconds=0,
                      timeout="%d rows not computed within max_seconds=%s", **variant):
    """The forward reference (_core.Reference) of these inputs and options from the cache, or computed (and
    cached): attncert.attention and assert_attention_close both come here.  Past max_seconds, TimeoutError with
    `timeout` % (rows left, max_seconds), and nothing cached."""
    __tracebackhide__ = True  # noqa: F841  (pytest: a bad argument points at the caller's line)
    args = _check_variant(variant)
    opts = _a._options(q, want_lse=want_lse, k=k, **args)  # attncert's reading of the options: the key
    extra = ()
    if rows is not None:
        extra = ("rows", _args.limited(rows, "rows"), "seed", _args.limited(seed, "seed"))
    max_seconds = _checked_seconds(max_seconds)
    qn, kn, vn = _a._to_numpy(q, "q"), _a._to_numpy(k, "k"), _a._to_numpy(v, "v")
    h = _hash_arrays((qn, kn, vn), ("q", "k", "v"))
    keys = [_key(h, "fwd", opts, extra)]
    if not want_lse:  # a reference with the LSE serves a call without it
        keys.append(_key(h, "fwd", dict(opts, want_lse=True), extra))

    def make():
        __tracebackhide__ = True  # noqa: F841
        ref = _a._reference(q, k, v, want_lse=want_lse, rows=rows, seed=seed, max_seconds=max_seconds, **variant)
        undecided = ref.summary()["undecided_rows"]
        if undecided:  # not cached: a later call with more time computes it
            raise TimeoutError(timeout % (undecided, max_seconds))
        return ref

    rows_out = qn.size // qn.shape[-1] if qn.ndim and qn.shape[-1] else 0
    out = rows_out * (vn.shape[-1] if vn.ndim else 0)
    nbytes = 16 * (_size(qn, kn, vn) + sum(_size(x) for x in opts.values() if isinstance(x, np.ndarray))) + \
        40 * out + 24 * rows_out
    return _cached(keys, "reference", make, nbytes)


def _shared_gradients(q, k, v, do, dlse, args, max_seconds=0):
    """The exact gradients (_core.Gradients) of these inputs and options from the cache, or computed (and cached):
    attncert.attention_vjp and assert_attention_grads_close both come here."""
    __tracebackhide__ = True  # noqa: F841
    opts = _a._options(q, want_lse=dlse is not None, k=k, **args)
    max_seconds = _checked_seconds(max_seconds)
    arrays = [_a._to_numpy(q, "q"), _a._to_numpy(k, "k"), _a._to_numpy(v, "v"), _a._to_numpy(do, "do"),
              _a._to_numpy(dlse, "dlse")]
    h = _hash_arrays(arrays, ("q", "k", "v", "do", "dlse"))
    keys = [_key(h, "bwd", opts)]
    others = [x for x in opts.values() if isinstance(x, np.ndarray)]
    nbytes = 16 * (_size(*arrays) + _size(*others)) + 40 * (_size(*arrays[:3]) + _size(*others))

    def make():
        __tracebackhide__ = True  # noqa: F841
        return _a._gradients(q, k, v, do, dlse, args, max_seconds)

    return _cached(keys, "gradients", make, nbytes)


# ---- rules and messages -------------------------------------------------------------------------------------------

def _rules(rule, max_ulp, atol, rtol, flash_k=None, fudge=None):
    __tracebackhide__ = True  # noqa: F841  (pytest: a bad argument points at the caller's line)
    rule = _args.text(rule, "rule")
    max_ulp, atol, rtol, flash_k, fudge = (_args.optional_real(x, name, 0) for x, name in (
        (max_ulp, "max_ulp"), (atol, "atol"), (rtol, "rtol"), (flash_k, "flash_k"), (fudge, "fudge")))
    if rule == "ulp" and max_ulp is None:
        max_ulp = _DEFAULT_MAX_ULP
    r = {"rule": rule, "max_ulp": max_ulp if rule == "ulp" else None, "atol": atol, "rtol": rtol, "flash_k": flash_k,
         "fudge": fudge}
    if rule != "ulp" and max_ulp is not None:
        raise ValueError("max_ulp belongs to rule='ulp' (got rule=%r)" % rule)
    return r


def _chosen_rules(rule, max_ulp, atol, rtol, flash_k, fudge):
    """(_rules' dict, whether the rule is the default): rule=None is flash, or ulp when max_ulp is given."""
    __tracebackhide__ = True  # noqa: F841
    defaulted = rule is None and max_ulp is None
    if rule is None:
        rule = "ulp" if max_ulp is not None else "flash"
    return _rules(rule, max_ulp, atol, rtol, flash_k, fudge), defaulted


_NEEDS_BASELINE = ("flash", "torch-sdpa", "torch_sdpa")


def _g(x):
    return "%.9g" % x if isinstance(x, (int, float)) else str(x)


def _s(x):
    return "%.4g" % x if isinstance(x, (int, float)) else str(x)


# how the tensors are read in each layout, said in every failure message
_READ_AS = {"bhsd": "(b, h, s, d)", "bshd": "(b, s, h, d)", "thd": "(t, h, d)"}


def _layout_line(layout, grads=False):
    return "  layout %s: %s read as %s" % (layout, "q, k, v, do and the gradients" if grads else
                                           "q, k, v and the output", _READ_AS.get(layout, layout))


def _rule_line(r, ctx):
    """The rule's formula with its settings, and where it comes from."""
    name = r["rule"]
    if name == "flash":
        atol = "atol = %s" % _s(r.get("atol", 0))
        if ctx.get("fudge_format"):
            atol += ", FlashAttention's fudge 2 max |(o + 0.3) - 0.3 - o| in %s" % ctx["fudge_format"]
        line = "rule flash: max |c - o| <= k * max |b - o| + atol, FlashAttention's tests (k = %s, %s)" % (
            _s(r.get("k")), atol)
    elif name == "ulp":
        line = "rule ulp: |c - o| <= max_ulp = %s ulps of o, for a correctly rounded kernel" % _s(r.get("threshold"))
    elif name in ("torch-sdpa", "torch_sdpa"):
        line = ("rule torch-sdpa: |c - o| <= atol + rtol |o|, PyTorch's SDPA tests (atol = %s, rtol = %s: fudge %s "
                "times the baseline's errors)" % (_s(r.get("atol")), _s(r.get("rtol")), _s(r.get("fudge"))))
    else:
        line = "rule %s: |c - o| <= atol + rtol |o|, torch.testing.assert_close (atol = %s, rtol = %s)" % (
            name, _s(r.get("atol")), _s(r.get("rtol")))
    if ctx.get("rule_defaulted"):
        line += "; the default rule; rule='ulp' grades a correctly rounded kernel"
    return "  " + line


def _baseline_line(r, ctx):
    if r["rule"] not in _NEEDS_BASELINE:
        return "  baseline: not used (rule %s compares with the exact values alone)" % r["rule"]
    err = "max |b - o| = %s" % _s(r.get("baseline_max_abs_error"))
    if ctx.get("baseline") == "default":
        return "  baseline: the default, %s (%s); give baseline= to use your own" % (ctx["baseline_how"], err)
    return "  baseline: given as baseline= (%s)" % err


def _value(x):
    """A number of the report's JSON (NaN and infinities come as strings or None) as a float."""
    if isinstance(x, str):
        return float(x.replace("+", ""))
    return math.nan if x is None else float(x)


def _declared(x, field):
    """The declared value of a row without keys as its keyword (empty_rows or empty_lse) spells it."""
    v = _value(x)
    if field == "empty_rows":
        return "'nan'" if v != v else "'zeros'"
    return "'nan'" if v != v else "'0'" if v == 0 else "'+inf'" if v > 0 else "'-inf'"


def _message(what, g, order, layout="bhsd", grads=False, ctx=None):
    """The report's grade (JSON from the C++ grading) as a message a kernel engineer can act on: the rule and its
    margin, its formula and settings, the baseline's origin, the target (when not q's dtype), the layout the
    tensors were read in, the worst element, the counts beyond 0.5/1/2/4/16 ulps and a histogram."""
    ctx = ctx or {}
    r = g["rule"]
    lines = []
    head = "%s is not close to the exact %s under rule %s" % (what, what, r["rule"])
    if r["verdict"] == "fail":
        lines.append("%s: %s" % (head, r.get("reason", "")))
        detail = "observed %s, threshold %s, margin %s, ratio %s" % (
            _g(r["observed"]), _g(r["threshold"]), _g(r["margin"]), _g(r["ratio"]))
        if r["rule"] == "flash":
            detail += "; k = %s, k needed = %s, baseline max |b - o| = %s" % (
                _g(r["k"]), _g(r["k_needed"]), _g(r["baseline_max_abs_error"]))
        elif r["rule"] == "torch-sdpa":
            detail += "; fudge = %s, fudge needed = %s" % (_g(r["fudge"]), _g(r["fudge_needed"]))
        elif r["rule"] == "assert-close":
            detail += "; atol = %s, rtol = %s" % (_g(r["atol"]), _g(r["rtol"]))
        if r.get("index") is not None:
            detail += "; decisive element at (%s) = %s" % (order, tuple(r["index"]))
        lines.append("  " + detail)
    else:
        lines.append(head)
    lines.append(_rule_line(r, ctx))
    lines.append(_baseline_line(r, ctx))
    if ctx.get("target_line"):
        lines.append(ctx["target_line"])
    lines.append(_layout_line(layout, grads))
    w = g.get("worst")
    if w is not None:
        idx = w.get("index_bhik", w.get("index_bhi"))
        lines.append("  worst ulp error at (%s) = %s: actual %r, exact %r (correctly rounded: %r), %s ulps" % (
            order, tuple(idx), float(w["value"]), float(w["truth_approx"]), float(w["reference"]), _g(g["max_ulp"])))
    lines.append("  max abs error %s, max rel error %s, mean %s ulps" % (
        _g(g["max_abs_error"]), _g(g["max_rel_error"]), _g(g["mean_ulp"])))
    beyond = g["beyond_ulps"]
    keys = sorted(beyond, key=float)  # "0.5", "1", "2", "4", "16"
    lines.append("  elements beyond %s ulps: %s of %d compared" % (
        "/".join(keys), " / ".join(str(beyond[k]) for k in keys), g["compared"]))
    counts = [g["compared"] - beyond[keys[0]]] + [beyond[keys[i]] - beyond[keys[i + 1]] for i in range(len(keys) - 1)]
    counts.append(beyond[keys[-1]])
    edges = ["[0, %s]" % keys[0]] + ["(%s, %s]" % (keys[i], keys[i + 1]) for i in range(len(keys) - 1)]
    edges.append("> %s" % keys[-1])
    lines.append("  histogram (ulps): " + " | ".join("%s %d" % (e, c) for e, c in zip(edges, counts)))
    fm = g.get("fully_masked", {})
    if fm.get("mismatched"):
        f = fm["first"]
        lines.append("  fully masked rows: %d of %d elements are not %s=%s; the first at (%s) = %s: actual %r" % (
            fm["mismatched"], fm["compared"], fm["field"], _declared(f["declared"], fm["field"]), order, tuple(f["index"]),
            _value(f["value"])))
    if g["nonfinite_where_truth_finite"]:
        lines.append("  NaN/Inf where the exact value is finite: %d elements" % g["nonfinite_where_truth_finite"])
    if g["skipped"]:
        lines.append("  not graded (no finite exact value: padding, empty rows): %d elements" % g["skipped"])
    return "\n".join(lines)


def _graded(grade_json, what, ctx=None):
    """The grade (a dict) of the JSON, told to the stats hooks."""
    g = json.loads(grade_json)
    _emit({"event": "grade", "what": what, "rule": g["rule"]["rule"], "compared": g["compared"],
           "max_ulp": g["max_ulp"], "verdict": g["rule"]["verdict"], "target": (ctx or {}).get("format")})
    return g


def _check(grade_json, what, layout="bhsd", ctx=None):
    """The grade (a dict) of a passing verdict; AssertionError with _message's text on a failing one."""
    __tracebackhide__ = True  # noqa: F841  (pytest: the failure points at the caller's line)
    g = _graded(grade_json, what, ctx)
    if g["rule"]["verdict"] == "fail":
        raise AssertionError(_message(what, g, g["index_order"], layout, ctx=ctx))
    return g


def _dims(x):
    """The shape of an array, a tensor or a nested list (for the layout checks; the library checks the rest)."""
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


_GRADS = ("dq", "dk", "dv", "dbias", "dsink")


def _gradients_of(obj, names, what):
    """{name: gradient or None} for the gradients `names` this call grades, from obj as the caller gives it:
        a mapping                       obj[name] (a missing key: None)
        a named tuple / an object       its attribute (attncert.AttentionGrads, a named tuple of the caller's)
        a tuple or a list               by position: in the order of `names` when it has len(names) items (what
                                        torch.autograd.grad(out, (q, k, v[, bias][, sink]), do) returns), in
                                        AttentionGrads' order (dq, dk, dv, dbias, dsink) when it has five
    None gives None for every name.  A bare array or tensor is a TypeError, a sequence of another length a
    ValueError, both naming `what`."""
    __tracebackhide__ = True  # noqa: F841  (pytest: the failure points at the caller's line)
    if obj is None:
        return dict.fromkeys(names)
    if isinstance(obj, collections.abc.Mapping):
        return {n: obj.get(n) for n in names}
    if isinstance(obj, np.ndarray) or _a._is_tensor(obj):
        raise TypeError("%s: must be (dq, dk, dv), a dict or a named tuple of gradients, got %s of shape %s"
                        % (what, "a tensor" if _a._is_tensor(obj) else "an array", tuple(obj.shape)))
    if isinstance(obj, (tuple, list)) and not hasattr(obj, "_fields"):
        if len(obj) == len(names):
            return dict(zip(names, obj))
        if len(obj) == len(_GRADS):
            return {n: g for n, g in zip(_GRADS, obj) if n in names}
        raise ValueError("%s: a sequence of %d gradients; this call grades (%s): give them in that order (or all five "
                         "of attncert.AttentionGrads, None where one does not apply), a dict or a named tuple"
                         % (what, len(obj), ", ".join(names)))
    return {n: getattr(obj, n, None) for n in names}


# ---- the target: the candidate's dtype ---------------------------------------------------------------------------

_FORMAT = {"binary64": "float64", "binary32": "float32", "binary16": "float16", "bfloat16": "bfloat16"}


def _float_dtype(x):
    """float64 / float32 / float16 / bfloat16 of an array or a tensor, else None (lists, integers, bad values:
    the grading names those)."""
    if _a._is_tensor(x) or isinstance(x, np.ndarray):
        name = _a._dtype_name(x)
        return name if name in _a._TARGETS else None
    return None


def _target_of(candidate, variant):
    """(target for the reference or None for q's dtype, where it came from: "given", "candidate" or "q")."""
    if variant.get("target") is not None:
        return variant["target"], "given"
    name = _float_dtype(candidate)
    if name is not None:
        return name, "candidate"
    return None, "q"


def _target_line(fmt, source, q, candidate, who="the candidate"):
    """The message's target line: when the format was given, or is not q's dtype (the reference's format, its
    ulps and the default baseline's format are this one)."""
    q_name = _a._dtype_name(q) if (_a._is_tensor(q) or isinstance(q, np.ndarray)) else None
    if source == "given":
        c = _float_dtype(candidate)
        return "  target %s: given as target=%s" % (fmt, " (%s is %s)" % (who, c) if c else "")
    if source == "candidate" and q_name is not None and q_name != fmt:
        return "  target %s: %s's dtype (q is %s); target= grades in another format" % (fmt, who, q_name)
    return None


# ---- the helpers --------------------------------------------------------------------------------------------------

def assert_attention_close(actual, q, k, v, *, rule=None, max_ulp=None, baseline=None, atol=None, rtol=None,
                           rows=None, seed=0, flash_k=None, fudge=None, lse=None, baseline_lse=None, max_seconds=0,
                           **variant):
    """Raise AssertionError unless `actual` (the kernel's output, NumPy or torch) passes `rule` against the exact
    attention of q, k, v with the keywords of attncert.attention (causal, window, softcap, ..., target).

    rule: None (the default) is "flash", FlashAttention's test, or "ulp" when max_ulp= is given; "ulp" is for a
    correctly rounded kernel (4 ulps unless max_ulp=).  baseline: the output of a baseline implementation, which
    flash and torch-sdpa compare with; None: default_baseline(q, k, v, dtype=<target>, ...), the plain attention
    in the target format, with flash's atol (unless given) FlashAttention's fudge.  target (a keyword of the
    variant): default the dtype of `actual`.  lse (and baseline_lse): the kernel's LSE, graded by the same rule
    (baseline_lse None: the default baseline's).  rows=N: only N query rows, drawn by `seed`, are computed and
    graded (for tensors too large to check whole; the others are counted as skipped; the default baseline
    computes those rows only).  Returns the grade (a dict, as the CLI's JSON report writes it) when it passes.
    max_seconds > 0 bounds the reference: past it, TimeoutError (never a pass on the rows computed so far).
    """
    __tracebackhide__ = True  # noqa: F841  (pytest: the failure points at the caller's line)
    if "return_lse" in variant:
        raise TypeError("assert_attention_close: give the kernel's LSE as lse=, not return_lse")
    want_lse = lse is not None
    rules, defaulted = _chosen_rules(rule, max_ulp, atol, rtol, flash_k, fudge)  # checked before the reference
    max_seconds = _args.real(max_seconds, "max_seconds", 0, 1e7)
    target, source = _target_of(actual, variant)
    if target is not None:
        variant = dict(variant, target=target)
    ref = _shared_reference(q, k, v, want_lse=want_lse, rows=rows, seed=seed if rows else 0, max_seconds=max_seconds,
                            timeout="assert_attention_close: %d rows of the reference not computed within "
                                    "max_seconds=%s", **variant)
    layout = variant.get("layout", "bhsd")  # a str: the reference was made with it
    cand, base = _a._to_numpy(actual, "actual"), _a._to_numpy(baseline, "baseline")
    out_shape = _dims(q)[:-1] + _dims(v)[-1:]
    for x, name in ((cand, "actual"), (base, "baseline")):
        _a._check_transposed(x, out_shape, layout, name)
    fmt = _FORMAT.get(ref.target, ref.target)
    ctx = {"rule_defaulted": defaulted, "format": fmt, "target_line": _target_line(fmt, source, q, actual),
           "baseline": "given"}
    lse_ctx = dict(ctx, target_line=None, format=_FORMAT.get(ref.lse_target, ref.lse_target) if want_lse else None)
    needs = rules["rule"] in _NEEDS_BASELINE
    out_rules, lse_rules = rules, rules
    default_base = default_lse = None
    if needs and (base is None or (want_lse and baseline_lse is None)):
        computed = None
        if rows is not None and layout in ("bhsd", "bshd"):
            computed = np.isfinite(ref.truth()["hi"]).any(axis=-1)  # the rows the reference computed (b, h, i)
        default_base, default_lse = _baseline(q, k, v, fmt, dict(variant, target=None), want_lse=want_lse,
                                              computed=computed)
    how = "attncert.testing.default_baseline: the plain attention computed by %s in %s%s" % (
        "torch" if _a._is_tensor(q) else "NumPy", fmt, _EMULATED.get((_a._is_tensor(q), fmt), ""))
    if needs and base is None:
        base = _a._to_numpy(default_base, "baseline")
        ctx.update(baseline="default", baseline_how=how)
        if rules["rule"] == "flash" and rules["atol"] is None:
            out_rules = dict(rules, atol=_flash_fudge(ref.output(), fmt))
            ctx["fudge_format"] = fmt
    g = _check(ref.grade(cand, base, out_rules, False, ("actual", "baseline")), "attention output", layout, ctx)
    if want_lse:
        lbase = baseline_lse
        if needs and lbase is None:
            lbase = default_lse
            lse_ctx.update(baseline="default", baseline_how=how)
            if rules["rule"] == "flash" and rules["atol"] is None:
                lse_rules = dict(rules, atol=_flash_fudge(ref.lse(), lse_ctx["format"]))
                lse_ctx["fudge_format"] = lse_ctx["format"]
        _check(ref.grade(_a._to_numpy(lse, "lse"), _a._to_numpy(lbase, "baseline_lse"), lse_rules, True,
                         ("lse", "baseline_lse")), "LSE", layout, lse_ctx)
    return g


def assert_attention_grads_close(actual, q, k, v, do, *, dlse=None, rule=None, max_ulp=None, baseline=None,
                                 atol=None, rtol=None, flash_k=None, fudge=None, max_seconds=0, **variant):
    """Raise AssertionError unless each gradient of `actual` passes `rule` against the exact gradients of the
    attention of q, k, v for the cotangent do (and dlse).

    actual (and baseline): the gradients dq, dk, dv (and dbias / dsink when the call has a bias / sink) as
      - a tuple or list in that order, as torch.autograd.grad(out, (q, k, v[, bias][, sink]), do) returns them,
        or of all five in attncert.AttentionGrads' order (dq, dk, dv, dbias, dsink; None where one does not
        apply);
      - a mapping {"dq": q.grad, ...};
      - a named tuple (attncert.AttentionGrads, or the caller's own) or an object with those attributes.
    A gradient whose shape is that of the other of bhsd / bshd is refused (ValueError), as in
    assert_attention_close.  rule: None is "flash" ("ulp" with max_ulp=); baseline None under flash and
    torch-sdpa: default_baseline_grads(q, k, v, do, dtype=<target>, ...), autograd of the plain attention in the
    target format, with flash's atol (unless given) FlashAttention's fudge, per gradient.  target: default dq's
    dtype.  The rules' factors are per gradient as in `attncert oracle --candidate-grads` (flash: k = 3;
    torch-sdpa: fudge dq 180, dk 16, dv 4, dbias 45, dsink 45) unless flash_k / fudge are given.  Every failing
    gradient is reported.  Returns {name: grade} when all pass.  max_seconds > 0 bounds the exact gradients:
    past it, TimeoutError.
    """
    __tracebackhide__ = True  # noqa: F841  (pytest: the failure points at the caller's line)
    args = _check_variant(variant)
    rules, defaulted = _chosen_rules(rule, max_ulp, atol, rtol, flash_k, fudge)  # checked before the gradients
    names = ["dq", "dk", "dv"] + (["dbias"] if variant.get("bias") is not None else []) + \
        (["dsink"] if variant.get("sink") is not None else [])
    cands, bases = _gradients_of(actual, names, "actual"), _gradients_of(baseline, names, "baseline")
    target, source = _target_of(cands["dq"], variant)
    if target is not None:
        args["target"] = target
    max_seconds = _args.real(max_seconds, "max_seconds", 0, 1e7)
    grads = _shared_gradients(q, k, v, do, dlse, args, max_seconds)
    layout = args["layout"]
    fmt = _FORMAT.get(grads.target, grads.target)
    shapes = {"dq": _dims(q), "dk": _dims(k), "dv": _dims(v)}
    for n in names:
        if cands[n] is None:
            raise ValueError("assert_attention_grads_close: actual has no %s (this call grades %s)"
                             % (n, ", ".join(names)))
    needs = rules["rule"] in _NEEDS_BASELINE
    default = None
    if needs and any(bases[n] is None for n in names):
        default = _baseline_grads(q, k, v, do, dlse, fmt, dict(variant, target=None))
    failures, grades = [], {}
    for n in names:
        c, b = _a._to_numpy(cands[n], n), _a._to_numpy(bases[n], "baseline " + n)
        if n in shapes:
            _a._check_transposed(c, shapes[n], layout, n)
            _a._check_transposed(b, shapes[n], layout, "baseline " + n)
        ctx = {"rule_defaulted": defaulted, "format": fmt, "baseline": "given",
               "target_line": _target_line(fmt, source, q, cands["dq"], "dq")}
        r = rules
        if needs and b is None:
            b = _a._to_numpy(getattr(default, n), "baseline " + n)
            how = ("torch.autograd through the plain attention computed by torch" if _a._is_tensor(q) else
                   "the backward of the plain attention computed by NumPy")
            ctx.update(baseline="default", baseline_how="attncert.testing.default_baseline_grads: %s in %s%s" % (
                how, fmt, _EMULATED.get((_a._is_tensor(q), fmt), "")))
            if rules["rule"] == "flash" and rules["atol"] is None:
                r = dict(rules, atol=_flash_fudge(grads.get(n), fmt))
                ctx["fudge_format"] = fmt
        gj = _graded(grads.grade(n, c, b, r), n, ctx)
        grades[n] = gj
        if gj["rule"]["verdict"] == "fail":
            failures.append(_message(n, gj, gj["index_order"], layout, grads=True, ctx=ctx))
    if failures:
        raise AssertionError("\n".join(failures))
    return grades


# how the default baseline computes a format it does not compute in natively (said in the failure message)
_EMULATED = {(True, "float16"): " (float32 rounded to float16 after every operation: torch has no float16 matmul on "
                                 "the CPU)",
             (False, "float16"): " (float32 rounded to float16 after every operation)",
             (False, "bfloat16"): " (float32 rounded to bfloat16 after every operation)"}


def _flash_fudge(exact, fmt):
    """FlashAttention's atol (hopper/test_flash_attn.py: fwd_atol = 2 * (out_ref + 0.3 - 0.3 - out_ref).abs().max()):
    2 max |fl(fl(o + 0.3) - 0.3) - o| over the finite exact values o (rounded to fmt), fl rounding to fmt."""
    o = np.asarray(exact, dtype=np.float64)
    o = o[np.isfinite(o)]
    if o.size == 0:
        return 0.0
    x = _round64(_round64(o + 0.3, fmt) - 0.3, fmt)
    return float(2 * np.max(np.abs(x - o)))


# ---- the default baseline -----------------------------------------------------------------------------------------

def _round_bf16(x):
    """float32 values rounded to the nearest bfloat16 (ties to even), as float32."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    b = x.view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out = b.view(np.float32).reshape(x.shape)
    return np.where(np.isnan(x), x, out)


def _round64(x, fmt):
    """float64 values rounded to fmt, as float64."""
    x = np.asarray(x, dtype=np.float64)
    if fmt == "float64":
        return x
    if fmt == "float16":
        return x.astype(np.float16).astype(np.float64)
    if fmt == "bfloat16":
        return _round_bf16(x.astype(np.float32)).astype(np.float64)
    return x.astype(np.float32).astype(np.float64)


_FORMATS = ("float64", "float32", "float16", "bfloat16")


def _format_arg(dtype, q):
    """The format of dtype= (a name, a NumPy or torch dtype; None: q's dtype) as float64/float32/float16/bfloat16."""
    __tracebackhide__ = True  # noqa: F841
    if dtype is None:
        name = _a._dtype_name(q)
        if name not in _FORMATS:
            raise ValueError("dtype: the default is the dtype of q, which is %s; give dtype= (float64, float32, "
                             "float16, bfloat16)" % name)
        return name
    if not isinstance(dtype, (str, np.dtype, type)) and not _a._is_dtype(dtype):
        raise TypeError("dtype: must be a format name or a dtype, got %s (%s)" % (_args._shown(dtype),
                                                                                _args._type_name(dtype)))
    name = _a._target_name(dtype)
    name = _FORMAT.get(name, name)
    if name not in _FORMATS:
        raise ValueError("dtype: must be float64, float32, float16 or bfloat16, got %s" % _args._shown(name))
    return name


class _NumpyMath:
    """NumPy in the format: float64 and float32 natively; float16 and bfloat16 computed in float32 and rounded
    to the format after every operation."""
    torch = False

    def __init__(self, fmt):
        self.fmt = fmt
        self.cdt = np.float64 if fmt == "float64" else np.float32
        self.ldt = self.cdt  # the LSE's format: float64 for float64, float32 otherwise

    def put(self, x, name):
        a = np.asarray(_a._to_numpy(x, name))
        if self.fmt == "float16":
            return a.astype(np.float16).astype(np.float32)
        if self.fmt == "bfloat16":
            return _round_bf16(a.astype(np.float32))
        return a.astype(self.cdt)

    def rnd(self, x):
        x = np.asarray(x, dtype=self.cdt)
        if self.fmt == "float16":
            return x.astype(np.float16).astype(np.float32)
        if self.fmt == "bfloat16":
            return _round_bf16(x)
        return x

    def const(self, a):
        return self.put(a, "constant")

    def mask(self, a):
        return np.asarray(a, dtype=bool)

    def scalar(self, x):
        return self.cdt(x)

    def mm(self, a, b):
        return np.matmul(a, b)

    def T(self, x):
        return np.swapaxes(x, -1, -2)

    def perm(self, x, axes):
        return np.transpose(x, axes)

    def rep(self, x, g):
        return np.repeat(x, g, axis=1) if g != 1 else x

    def cat(self, xs, axis):
        return np.concatenate(xs, axis=axis)

    def where(self, c, a, b):
        return np.where(c, a, self.cdt(b) if isinstance(b, float) else b).astype(self.cdt, copy=False)

    def tanh(self, x):
        return np.tanh(x)

    def softmax(self, x):
        with np.errstate(all="ignore"):
            m = x.max(axis=-1, keepdims=True, initial=-np.inf)
            m = np.where(np.isfinite(m), m, self.cdt(0))
            e = np.exp(x - m)
            return e / e.sum(axis=-1, keepdims=True)

    def logsumexp(self, x):
        x = np.asarray(x, dtype=self.ldt)
        with np.errstate(all="ignore"):
            m = x.max(axis=-1, keepdims=True, initial=-np.inf)
            m = np.where(np.isfinite(m), m, self.ldt(0))
            return (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))[..., 0]

    def all_neginf(self, x):
        return np.all(x == -np.inf, axis=-1)

    def expand(self, x, shape):
        return np.broadcast_to(x, shape)

    def zeros(self, shape):
        return np.zeros(shape, dtype=self.cdt)

    def out(self, x):
        """The result as the caller gets it: float16 as float16, bfloat16 as float32 holding bfloat16 values."""
        return x.astype(np.float16) if self.fmt == "float16" else x

    def lse_out(self, x):
        return x


class _TorchMath:
    """torch on the CPU in the format: float64, float32 and bfloat16 natively; float16 (which torch cannot multiply
    on the CPU) computed in float32 and rounded to float16 after every operation, its gradients too."""
    torch = True

    def __init__(self, fmt):
        import torch

        self.t = torch
        self.fmt = fmt
        self.dt = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
                   "bfloat16": torch.bfloat16}[fmt]
        self.cdt = torch.float32 if fmt == "float16" else self.dt
        self.ldt = torch.float64 if fmt == "float64" else torch.float32

    def _tensor(self, x, name):
        if _a._is_tensor(x):
            _a._to_numpy(x, name)  # its checks (meta, sparse, complex...)
            x = x.detach()
            if x.device.type != "cpu":
                x = x.cpu()
            return x.resolve_conj().resolve_neg()
        return self.t.from_numpy(np.ascontiguousarray(_a._to_numpy(x, name)))

    def put(self, x, name):
        return self._tensor(x, name).to(self.dt).to(self.cdt)

    def leaf(self, x, name):
        """A leaf in the format's dtype that autograd differentiates."""
        return self._tensor(x, name).to(self.dt).clone().requires_grad_()

    def lift(self, x):
        return x.to(self.cdt)

    def rnd(self, x):
        return x.to(self.dt).to(self.cdt) if self.dt != self.cdt else x

    def const(self, a):
        return self.t.from_numpy(np.ascontiguousarray(a)).to(self.dt).to(self.cdt)

    def mask(self, a):
        return self.t.from_numpy(np.ascontiguousarray(a, dtype=bool))

    def scalar(self, x):
        return float(np.float32(x)) if self.dt != self.t.float64 else float(x)

    def mm(self, a, b):
        return self.t.matmul(a, b)

    def T(self, x):
        return x.transpose(-1, -2)

    def perm(self, x, axes):
        return x.permute(*axes)

    def rep(self, x, g):
        return x.repeat_interleave(g, dim=1) if g != 1 else x

    def cat(self, xs, axis):
        return self.t.cat(xs, dim=axis)

    def where(self, c, a, b):
        if isinstance(b, float):
            b = self.t.tensor(b, dtype=a.dtype)
        return self.t.where(c, a, b)

    def tanh(self, x):
        return self.t.tanh(x)

    def softmax(self, x):
        return self.t.softmax(x, -1)

    def logsumexp(self, x):
        x = x.to(self.ldt)
        if x.shape[-1] == 0:
            return self.t.full(x.shape[:-1], -math.inf, dtype=self.ldt)
        return self.t.logsumexp(x, -1)

    def all_neginf(self, x):
        return (x == -math.inf).all(-1)

    def expand(self, x, shape):
        return x.expand(*shape)

    def zeros(self, shape):
        return self.t.zeros(shape, dtype=self.cdt)

    def out(self, x):
        return x.to(self.dt)

    def lse_out(self, x):
        return x


def _math(q, fmt):
    return _TorchMath(fmt) if _a._is_tensor(q) else _NumpyMath(fmt)


def _exact_float(text):
    return float(fractions.Fraction(text))


class _Plan:
    """The geometry and the variant of one call as attncert reads them (its _options), so that the baseline
    computes what the oracle's semantics say (proofs/P14): the steps in FlashAttention's reference order."""

    def __init__(self, q_shape, k_shape, v_shape, opts):
        __tracebackhide__ = True  # noqa: F841
        self.layout = opts["layout"]
        self.q_shape, self.k_shape, self.v_shape = tuple(q_shape), tuple(k_shape), tuple(v_shape)
        d = self.q_shape[-1] if self.q_shape else 0
        self.scale = _exact_float(opts["scale"]) if "scale" in opts else (1 / math.sqrt(d) if d else math.inf)
        self.softcap = _exact_float(opts["softcap"]) if "softcap" in opts else None
        self.keep = opts.get("dropout_mask")
        self.dropc = 1 / (1 - _exact_float(opts["dropout_p"])) if self.keep is not None else None
        self.causal_tl = bool(opts.get("causal"))
        self.causal_br = bool(opts.get("causal_bottom_right"))
        self.window = None
        if "window" in opts:
            try:
                self.window = tuple(int(x) for x in str(opts["window"]).split(","))
                assert len(self.window) == 2
            except (ValueError, AssertionError):
                raise ValueError("window: must be 'LEFT,RIGHT', got %s" % _args._shown(opts["window"])) from None
        self.alibi = opts.get("alibi_slopes")
        self.alibi_mode = opts.get("alibi", "distance")
        self.bias = opts.get("bias")
        self.sink = opts.get("sink")
        self.mask_ = opts.get("mask")
        self.fill = math.nan if opts.get("empty_rows") == "nan" else 0.0
        self.lse_base = opts.get("lse_base", "e")
        self.sink_tokens = int(opts.get("sink_token_length", 0))
        self.chunk = int(opts.get("attention_chunk", 0))
        lp = opts.get("key_leftpad")
        self.leftpad = None if lp is None else np.asarray(lp, dtype=np.int64).reshape(-1)
        self.qv = opts.get("qv")
        if self.qv is not None and "scale" not in opts:  # FlashAttention 3: 1/sqrt(d + d_v) with qv
            self.scale = 1 / math.sqrt(d + self.v_shape[-1])
        self.cu_q, self.cu_k = opts.get("cu_seqlens_q"), opts.get("cu_seqlens_k")
        self.seqlens_k = opts.get("seqlens_k")
        if self.layout == "thd":
            if self.cu_q is None or self.cu_k is None:
                raise ValueError("layout: thd needs cu_seqlens_q and cu_seqlens_k")
            if self.mask_ is not None or self.bias is not None or self.keep is not None:
                raise ValueError("layout: thd takes no mask, bias or dropout_mask")
            self.cu_q = [int(x) for x in np.asarray(self.cu_q).reshape(-1)]
            self.cu_k = [int(x) for x in np.asarray(self.cu_k).reshape(-1)]
        elif self.layout not in ("bhsd", "bshd"):
            raise ValueError("layout: must be bhsd, bshd or thd, got %s" % _args._shown(self.layout))

    # the caller's layout <-> the internal (b, h, n, d)
    def to4(self, M, x):
        if self.layout == "bshd":
            return M.perm(x, (0, 2, 1, 3))
        return x.reshape((1,) * (4 - x.ndim) + tuple(x.shape))

    def from4(self, M, x4, shape):
        if self.layout == "bshd":
            return M.perm(x4, (0, 2, 1, 3))
        return x4.reshape(shape)

    def units(self):
        """(q rows, k rows, batch index) of each packed sequence (thd), or None."""
        if self.layout != "thd":
            return None
        return [(slice(self.cu_q[s], self.cu_q[s + 1]), slice(self.cu_k[s], self.cu_k[s + 1]), s)
                for s in range(len(self.cu_q) - 1)]

    def context(self, M, b_idx, h_idx, qpos, nq, nk, nk_valid, bias=None, sink=None):
        """The unit's allowed keys (bool, broadcastable to (B, H, R, nk)), its ALiBi term (rounded to the format)
        or None, bias and sink (backend arrays, selected), and dropout keep-mask, for the batches b_idx, the heads
        h_idx and the query positions qpos of a sequence of nq queries and nk keys (nk_valid of them used)."""
        b_idx, h_idx, qpos = (np.asarray(x, dtype=np.int64) for x in (b_idx, h_idx, qpos))
        nkv = np.asarray(nk_valid, dtype=np.int64).reshape(-1, 1, 1, 1)
        delta = nkv - nq
        j = np.arange(nk).reshape(1, 1, 1, -1)
        i = qpos.reshape(1, 1, -1, 1)
        allowed = j < nkv
        pad = 0 if self.leftpad is None else self.leftpad[b_idx].reshape(-1, 1, 1, 1)
        jp, dp = j - pad, delta - pad  # key positions (key_leftpad): j - pad, n_k' = n_k - pad
        allowed = allowed & (jp >= 0)
        if self.causal_tl:
            allowed = allowed & (jp <= i)
        if self.causal_br:
            allowed = allowed & (jp <= i + dp)
        if self.window is not None:
            left, right = self.window
            if left >= 0:
                allowed = allowed & ((jp >= i + dp - left) | (jp < self.sink_tokens))
            if right >= 0:
                allowed = allowed & (jp <= i + dp + right)
        if self.chunk > 0:  # the chunk of the diagonal i + n_k' - n_q (floor division)
            c0 = (i + dp) - np.mod(i + dp, self.chunk)
            allowed = allowed & (jp >= c0) & (jp < c0 + self.chunk)
        if self.mask_ is not None:
            allowed = allowed & self.pick(self.mask_, b_idx, h_idx, qpos, nk)
        alibi = None
        if self.alibi is not None:
            a = np.asarray(self.alibi, dtype=np.float64)
            slopes = (a[b_idx][:, h_idx] if a.ndim == 2 else a[h_idx][None, :])[:, :, None, None]
            if self.alibi_mode == "flash2":  # FlashAttention 2's +slope j (under a causal mask)
                alibi = M.const(slopes * (j + 0 * i))
            else:
                alibi = M.const(-slopes * np.abs(i + delta - j))
        keep = None if self.keep is None else M.mask(self.pick(self.keep, b_idx, h_idx, qpos, nk))
        if bias is not None:
            bias = self.pick_backend(M, bias, b_idx, h_idx, qpos, nk)
        if sink is not None:
            sink = sink[self.t_index(M, h_idx)] if M.torch else sink[h_idx]
        return M.mask(allowed), alibi, bias, sink, keep

    @staticmethod
    def _sel(a4, b_idx, h_idx, qpos, nk):
        full = (b_idx, h_idx, qpos, np.arange(nk))
        return [idx if n != 1 else np.zeros(1, np.int64) for idx, n in zip(full, a4.shape)]

    def pick(self, a, b_idx, h_idx, qpos, nk):
        a4 = np.asarray(a).reshape((1,) * (4 - np.ndim(a)) + np.shape(a))
        return a4[np.ix_(*self._sel(a4, b_idx, h_idx, qpos, nk))]

    @staticmethod
    def t_index(M, idx):
        return M.t.from_numpy(np.ascontiguousarray(idx, dtype=np.int64))

    def pick_backend(self, M, a, b_idx, h_idx, qpos, nk):
        """pick() of a backend array (the bias as a leaf: torch indexing keeps the gradient)."""
        a4 = a.reshape((1,) * (4 - a.ndim) + tuple(a.shape))
        sel = self._sel(a4, b_idx, h_idx, qpos, nk)
        if not M.torch:
            return a4[np.ix_(*sel)]
        for axis, idx in enumerate(sel):
            if len(idx) != a4.shape[axis] or not np.array_equal(idx, np.arange(a4.shape[axis])):
                a4 = a4.index_select(axis, self.t_index(M, idx))
        return a4


def _forward(M, plan, q, k, v, ctx, want_lse, keep_parts=False, qv=None):
    """The plain attention of one unit: q (B, H, R, d), k (B, Hk, nk, d), v (B, Hk, nk, dv), in the compute
    dtype holding format values; every operation rounded to the format (M.rnd).  Returns (o, lse, parts)."""
    allowed, alibi, bias, sink, keep = ctx
    B, H, R = q.shape[0], q.shape[1], q.shape[2]
    Hk, nk = k.shape[1], k.shape[2]
    g = H // Hk if Hk else 1
    kx, vx = M.rep(k, g), M.rep(v, g)
    qs = M.rnd(q * M.scalar(plan.scale))                      # q * scale
    s = M.rnd(M.mm(qs, M.T(kx)))                               # (q * scale) @ k^T
    if qv is not None:                                         # + (qv * scale) @ v^T (FlashAttention 3's qv)
        s = M.rnd(s + M.rnd(M.mm(M.rnd(qv * M.scalar(plan.scale)), M.T(vx))))
    t = None
    if plan.softcap is not None:                               # softcap * tanh(s / softcap)
        t = M.rnd(M.tanh(M.rnd(s / M.scalar(plan.softcap))))
        s = M.rnd(t * M.scalar(plan.softcap))
    if alibi is not None:                                      # + ALiBi's -slope |i + n_k - n_q - j|
        s = M.rnd(s + alibi)
    if bias is not None:                                       # + bias
        s = M.rnd(s + bias)
    s = M.where(allowed, s, -math.inf)                         # masked keys: -inf
    ext = s
    if sink is not None:                                       # the sink: one more logit in the softmax
        ext = M.cat([s, M.expand(sink.reshape(1, H, 1, 1), (B, H, R, 1))], -1)
    empty = M.all_neginf(ext)                                  # rows without keys (and no sink)
    ext0 = M.where(empty[..., None], 0.0, ext)
    pe = M.rnd(M.softmax(ext0))                                # softmax, one operation
    p = pe[..., :nk] if sink is not None else pe
    pd = M.rnd(M.where(keep, p, 0.0) * M.scalar(plan.dropc)) if keep is not None else p   # dropout: keep / (1 - p)
    o = M.rnd(M.mm(pd, vx))                                    # P @ v
    o = M.where(empty[..., None], plan.fill, o)
    lse = None
    if want_lse:                                               # logsumexp in the LSE's format (float32 / float64)
        lse = M.logsumexp(ext0)
        if plan.lse_base == "2":
            lse = lse / math.log(2)
        lse = M.where(empty, -math.inf, lse)
    parts = None
    if keep_parts:
        parts = dict(kx=kx, vx=vx, qs=qs, t=t, pe=pe, p=p, pd=pd, ext0=ext0, empty=empty, allowed=allowed, keep=keep,
                     g=g, sink=sink is not None, nk=nk)
    return o, lse, parts


def _numpy_backward(M, plan, parts, do, dlse, bias_shape4=None):
    """The backward of _forward (NumPy), every operation rounded to the format, in autograd's order: returns
    (dq, dk, dv, dbias4 or None, dsink or None) of the unit."""
    P = parts
    B, H, R, _ = do.shape
    nk, g = P["nk"], P["g"]
    dO = M.where(P["empty"][..., None], 0.0, do)
    dpd = M.rnd(M.mm(dO, M.T(P["vx"])))                        # d(P_dropped)
    dvx = M.rnd(M.mm(M.T(P["pd"]), dO))
    dp = M.rnd(M.where(P["keep"], dpd, 0.0) * M.scalar(plan.dropc)) if P["keep"] is not None else dpd
    pe = P["pe"]
    dpe = M.cat([dp, M.zeros((B, H, R, 1))], -1) if P["sink"] else dp
    dse = M.rnd(pe * (dpe - (dpe * pe).sum(axis=-1, keepdims=True)))   # softmax's backward, one operation
    if dlse is not None:                                       # logsumexp's backward: dlse * exp(x - lse)
        dl = np.where(P["empty"], 0, np.asarray(dlse, dtype=M.ldt))
        if plan.lse_base == "2":
            dl = (dl / math.log(2)).astype(M.ldt)
        x = np.asarray(P["ext0"], dtype=M.ldt)
        with np.errstate(all="ignore"):
            lse = M.logsumexp(x)
            gl = (dl[..., None] * np.exp(x - lse[..., None])).astype(M.ldt)
        dse = M.rnd(dse + M.rnd(gl))
    dse = M.where(P["empty"][..., None], 0.0, dse)
    ds = dse[..., :nk]
    dsink = M.rnd(dse[..., nk].sum(axis=(0, 2))) if P["sink"] else None
    ds = M.where(P["allowed"], ds, 0.0)
    dbias = None
    if bias_shape4 is not None:                                 # summed over the bias's broadcast dimensions
        axes = tuple(a for a in range(4) if bias_shape4[a] == 1 and ds.shape[a] != 1)
        dbias = M.rnd(ds.sum(axis=axes, keepdims=True)) if axes else ds
    if P["t"] is not None:                                     # softcap's backward
        t = P["t"]
        dtt = M.rnd(ds * M.scalar(plan.softcap))
        du = M.rnd(dtt * (1 - t * t))
        ds = M.rnd(du / M.scalar(plan.softcap))
    dqs = M.rnd(M.mm(ds, P["kx"]))
    dkx = M.rnd(M.mm(M.T(ds), P["qs"]))
    dq = M.rnd(dqs * M.scalar(plan.scale))
    if g != 1:                                                 # GQA: each kv head sums its group's
        dkx = M.rnd(dkx.reshape(B, H // g, g, *dkx.shape[2:]).sum(axis=2))
        dvx = M.rnd(dvx.reshape(B, H // g, g, *dvx.shape[2:]).sum(axis=2))
    return dq, dkx, dvx, dbias, dsink


def _fp8_table(fmt):
    """The value of each of the 256 bytes of an OCP FP8 format (e4m3fn: no infinities, S.1111.111 NaN; e5m2: IEEE-like)."""
    e_bits, m_bits = (4, 3) if fmt == "e4m3fn" else (5, 2)
    bias = (1 << (e_bits - 1)) - 1
    t = np.empty(256)
    for byte in range(256):
        s, e, m = byte >> 7, (byte >> m_bits) & ((1 << e_bits) - 1), byte & ((1 << m_bits) - 1)
        if fmt == "e5m2" and e == 31:
            x = math.inf if m == 0 else math.nan
        elif fmt == "e4m3fn" and e == 15 and m == 7:
            x = math.nan
        elif e == 0:
            x = math.ldexp(m, 1 - bias - m_bits)
        else:
            x = math.ldexp((1 << m_bits) + m, e - bias - m_bits)
        t[byte] = -x if s else x
    return t


def _fp8_values(q, k, v, opts):
    """q, k, v (uint8 FP8 bytes, any layout) as float64 values times their descales (a number, or (b, h_kv) for bhsd /
    bshd), as the caller's kind (NumPy, or torch float64)."""
    table = _fp8_table(opts["qkv_format"])
    layout = opts["layout"]
    out = []
    for name, x in (("q", q), ("k", k), ("v", v)):
        a = table[np.asarray(_a._to_numpy(x, name)).astype(np.int64)]
        d = opts.get(name + "_descale")
        if d is not None:
            f = np.asarray(_exact_float(d) if isinstance(d, str) else d, dtype=np.float64)
            if f.size == 1:
                a = a * f.reshape(())
            elif layout == "thd" or a.ndim != 4:
                raise ValueError("%s_descale: a (b, h_kv) descale needs a bhsd or bshd baseline input; give baseline="
                                 % name)
            else:
                hq = a.shape[1] if layout == "bhsd" else a.shape[2]
                f = np.repeat(f, hq // f.shape[1], axis=1)  # q's heads share their kv head's descale
                a = a * (f[:, :, None, None] if layout == "bhsd" else f[:, None, :, None])
        out.append(_a._torch().from_numpy(a) if _a._is_tensor(x) else a)
    return out


def _prepare(q, k, v, fmt, variant, want_lse):
    __tracebackhide__ = True  # noqa: F841
    args = _check_variant(variant)
    args["target"] = fmt
    opts = _a._options(q, want_lse=want_lse, k=k, **args)
    M = _math(q, fmt)
    if "qkv_format" in opts:  # FP8 bytes: their values times the descales, exactly in float64, then rounded as inputs
        q, k, v = _fp8_values(q, k, v, opts)
    qc, kc, vc = M.put(q, "q"), M.put(k, "k"), M.put(v, "v")
    if qc.ndim != kc.ndim or qc.ndim != vc.ndim:
        raise ValueError("q, k and v must have the same number of dimensions (got %d, %d, %d)"
                         % (qc.ndim, kc.ndim, vc.ndim))
    plan = _Plan(qc.shape, kc.shape, vc.shape, opts)
    if plan.layout in ("bhsd", "bshd"):
        _a._check_layout(_a._to_numpy(q, "q"), _a._to_numpy(k, "k"), _a._to_numpy(v, "v"), plan.layout)
        if not 2 <= qc.ndim <= 4 or (plan.layout == "bshd" and qc.ndim != 4):
            raise ValueError("q: shape %s is not a %s tensor" % (tuple(qc.shape), plan.layout))
    _check_shapes(plan, tuple(qc.shape), tuple(kc.shape), tuple(vc.shape))
    return M, plan, qc, kc, vc


def _check_shapes(plan, sq, sk, sv):
    """ValueError naming the parameter when the shapes do not fit together (what the library checks; the helpers
    have had them checked by the reference already)."""
    __tracebackhide__ = True  # noqa: F841
    def fail(name, what):
        raise ValueError("%s: %s" % (name, what))

    if plan.layout == "thd":
        if len(sq) != 3 or len(sk) != 3 or len(sv) != 3:
            fail("q", "layout thd takes (t, h, d) tensors, got q %s, k %s, v %s" % (sq, sk, sv))
        (tq, H, d), (tk, Hk, dk), (tv, Hv, _) = sq, sk, sv
        B, nq, nk = len(plan.cu_q) - 1, None, None
        if len(plan.cu_q) != len(plan.cu_k) or len(plan.cu_q) < 2 or plan.cu_q[0] != 0 or plan.cu_k[0] != 0 or \
                plan.cu_q[-1] != tq or plan.cu_k[-1] != tk or np.any(np.diff(plan.cu_q) < 0) or \
                np.any(np.diff(plan.cu_k) < 0):
            fail("cu_seqlens_q", "cu_seqlens_q %s and cu_seqlens_k %s must run from 0 to the tokens of q (%d) and k "
                 "(%d), non-decreasing, with as many entries" % (plan.cu_q, plan.cu_k, tq, tk))
    else:
        def four(s):  # (b, h, n, d)
            return (1,) * (4 - len(s)) + s if plan.layout == "bhsd" else (s[0], s[2], s[1], s[3])
        if not len(sq) == len(sk) == len(sv):
            fail("q", "q, k and v must have the same number of dimensions (got %d, %d, %d)"
                 % (len(sq), len(sk), len(sv)))
        (B, H, nq, d), (bk, Hk, nk, dk), (bv, Hv, tv, _) = four(sq), four(sk), four(sv)
        tk = nk
        if bk != B or bv != B:
            fail("k", "batch %d (v: %d) is not q's %d" % (bk, bv, B))
    if tv != tk or Hv != Hk:
        fail("v", "shape %s does not match k's %s" % (sv, sk))
    if dk != d:
        fail("k", "feature size %d is not q's %d" % (dk, d))
    if Hk == 0 or H % Hk:
        fail("k", "h_q = %d is not a multiple of h_kv = %d" % (H, Hk))
    full = (B, H, nq, nk)
    for name, a in (("bias", plan.bias), ("mask", plan.mask_), ("dropout_mask", plan.keep)):
        if a is not None:
            shape = np.shape(a)
            padded = (1,) * (4 - len(shape)) + tuple(shape)
            if len(shape) > 4 or any(n not in (1, f) for n, f in zip(padded, full)):
                fail(name, "shape %s does not broadcast to (b, h_q, n_q, n_k) = %s" % (tuple(shape), full))
    if plan.alibi is not None and np.shape(plan.alibi) not in ((H,), (B, H)):
        fail("alibi_slopes", "shape %s, expected (h_q,) = (%d,) or (b, h_q) = (%d, %d)"
             % (np.shape(plan.alibi), H, B, H))
    if plan.sink is not None and np.size(plan.sink) != H:
        fail("sink", "%d values, expected h_q = %d" % (np.size(plan.sink), H))
    if plan.seqlens_k is not None:
        lens = np.asarray(plan.seqlens_k).reshape(-1)
        if plan.layout == "thd" or lens.size != B or np.any(lens < 0) or np.any(lens > nk):
            fail("seqlens_k", "must hold b = %s key counts in [0, %s] (bhsd or bshd), got %s"
                 % (B, nk, _args._shown(lens.tolist())))


def _nk_valid(plan, B, nk):
    if plan.seqlens_k is not None:
        return np.asarray(plan.seqlens_k, dtype=np.int64).reshape(-1)
    return np.full(B, nk, dtype=np.int64)


def _baseline(q, k, v, fmt, variant, want_lse=False, computed=None, grads=None):
    """The default baseline's output (and LSE) of q, k, v in format fmt as the caller's type; computed (b, h, i):
    compute those rows only (the others are 0).  grads=(do, dlse): also return the gradients."""
    __tracebackhide__ = True  # noqa: F841
    want_lse = want_lse or (grads is not None and grads[1] is not None)
    M, plan, q, k, v = _prepare(q, k, v, fmt, variant, want_lse)
    if plan.qv is not None and grads is not None:
        raise ValueError("qv: no gradients with qv (FlashAttention's backward takes no qv)")
    qv = None if plan.qv is None else M.put(plan.qv, "qv")
    leaves = {}
    if grads is not None and M.torch:  # autograd: q, k, v (bias, sink) as leaves in the format's dtype
        for name, x in (("q", q), ("k", k), ("v", v)):
            leaves[name] = M.leaf(x.to(M.dt), name)
        q, k, v = (M.lift(leaves[n]) for n in ("q", "k", "v"))
    bias = sink = None
    if plan.bias is not None:
        if grads is not None and M.torch:
            leaves["bias"] = M.leaf(plan.bias, "bias")
            bias = M.lift(leaves["bias"])
        else:
            bias = M.put(plan.bias, "bias")
    if plan.sink is not None:
        if grads is not None and M.torch:
            leaves["sink"] = M.leaf(plan.sink, "sink")
            sink = M.lift(leaves["sink"])
        else:
            sink = M.put(plan.sink, "sink").reshape(-1)
    numpy_grads = grads is not None and not M.torch
    outs, lses, pieces = [], [], []
    units = plan.units()
    if units is None:
        q4, k4, v4 = plan.to4(M, q), plan.to4(M, k), plan.to4(M, v)
        B, H, nq = q4.shape[0], q4.shape[1], q4.shape[2]
        nk = k4.shape[2]
        nkv = _nk_valid(plan, B, nk)
        if computed is None:
            ctx = plan.context(M, np.arange(B), np.arange(H), np.arange(nq), nq, nk, nkv, bias, sink)
            o4, l4, parts = _forward(M, plan, q4, k4, v4, ctx, want_lse or numpy_grads, numpy_grads,
                                     None if qv is None else plan.to4(M, qv))
            pieces.append((parts, None))
        else:  # the rows the reference computed, (b, h) by (b, h)
            o4 = M.zeros((B, H, nq, v4.shape[3]))
            l4 = None
            if want_lse:
                l4 = M.t.full((B, H, nq), -math.inf, dtype=M.ldt) if M.torch else np.full((B, H, nq), -np.inf, M.ldt)
            g = H // k4.shape[1] if k4.shape[1] else 1
            rows = np.asarray(computed).reshape(B, H, nq)
            for b, h in zip(*np.nonzero(rows.any(axis=2))):
                sel = np.flatnonzero(rows[b, h])
                at = plan.t_index(M, sel) if M.torch else sel
                ctx = plan.context(M, [b], [h], sel, nq, nk, nkv[b:b + 1], bias, sink)
                qv1 = None if qv is None else plan.to4(M, qv)[b:b + 1, h:h + 1][:, :, at]
                ob, lb, _ = _forward(M, plan, q4[b:b + 1, h:h + 1][:, :, at], k4[b:b + 1, h // g:h // g + 1],
                                     v4[b:b + 1, h // g:h // g + 1], ctx, want_lse, qv=qv1)
                o4[b, h, at] = ob[0, 0]
                if want_lse:
                    l4[b, h, at] = lb[0, 0]
        out = plan.from4(M, o4, tuple(q.shape[:-1]) + (v.shape[-1],))
        lse = None
        if l4 is not None and (want_lse or grads is not None):
            lse = l4.reshape(tuple(q.shape[:-1])) if plan.layout == "bhsd" else l4
    else:
        H = q.shape[1]
        for qs_, ks_, s in units:
            qu, ku, vu = (M.perm(x, (1, 0, 2))[None] for x in (q[qs_], k[ks_], v[ks_]))
            nq, nk = qu.shape[2], ku.shape[2]
            ctx = plan.context(M, [s], np.arange(H), np.arange(nq), nq, nk, [nk], bias, sink)
            qvu = None if qv is None else M.perm(qv[qs_], (1, 0, 2))[None]
            o4, l4, parts = _forward(M, plan, qu, ku, vu, ctx, want_lse or numpy_grads, numpy_grads, qvu)
            outs.append(M.perm(o4[0], (1, 0, 2)))
            lses.append(l4[0] if l4 is not None else None)
            pieces.append((parts, (qs_, ks_)))
        dv_ = v.shape[-1]
        out = M.cat(outs, 0) if outs else M.zeros((0, H, dv_))
        lse = None
        if want_lse or numpy_grads:
            lse = M.cat(lses, 1) if lses else M.zeros((H, 0)).to(M.ldt) if M.torch else np.zeros((H, 0), M.ldt)
    if grads is None:
        return M.out(out), (M.lse_out(lse) if want_lse else None)
    do, dlse = grads
    if M.torch:
        return out, lse, _torch_grads(M, plan, out, lse, do, dlse, leaves)
    return out, lse, _numpy_grads(M, plan, pieces, q, k, v, do, dlse)


def _torch_grads(M, plan, out, lse, do, dlse, leaves):
    outputs, cot = [out], [M.put(do, "do")]
    if dlse is not None:
        outputs.append(lse)
        cot.append(M._tensor(dlse, "dlse").to(M.ldt))
    names = [n for n in ("q", "k", "v", "bias", "sink") if n in leaves]
    got = M.t.autograd.grad(outputs, [leaves[n] for n in names], cot, allow_unused=True)
    res = dict.fromkeys(_GRADS)
    for n, g in zip(names, got):
        res["d" + n] = g if g is not None else M.t.zeros_like(leaves[n])
    return _a.AttentionGrads(*[res[n] for n in _GRADS])


def _numpy_grads(M, plan, pieces, q, k, v, do, dlse):
    do = M.put(do, "do")
    dl = None if dlse is None else np.asarray(_a._to_numpy(dlse, "dlse"), dtype=M.ldt)
    dbias = dsink = None
    if plan.layout != "thd":
        parts, _ = pieces[0]
        do4 = plan.to4(M, do)
        dl4 = None
        if dl is not None:
            dl4 = dl.reshape((1,) * (3 - dl.ndim) + dl.shape)
        b4 = None
        if plan.bias is not None:
            b4 = (1,) * (4 - np.ndim(plan.bias)) + np.shape(plan.bias)
        dq4, dk4, dv4, db4, dsink = _numpy_backward(M, plan, parts, do4, dl4, b4)
        dq, dk, dv = (plan.from4(M, x, s.shape) for x, s in ((dq4, q), (dk4, k), (dv4, v)))
        if db4 is not None:
            dbias = np.broadcast_to(db4, b4).reshape(np.shape(plan.bias)).copy()
    else:
        dq, dk, dv = M.zeros(q.shape), M.zeros(k.shape), M.zeros(v.shape)
        for parts, (qs_, ks_) in pieces:
            do4 = M.perm(do[qs_], (1, 0, 2))[None]
            dl4 = None if dl is None else dl[:, qs_][None]
            a, b, c, _, ds = _numpy_backward(M, plan, parts, do4, dl4)
            dq[qs_] = M.perm(a[0], (1, 0, 2))
            dk[ks_] = M.perm(b[0], (1, 0, 2))
            dv[ks_] = M.perm(c[0], (1, 0, 2))
            if ds is not None:
                dsink = ds if dsink is None else M.rnd(dsink + ds)
        if plan.sink is not None and dsink is None:
            dsink = M.zeros(np.shape(plan.sink))
    return _a.AttentionGrads(M.out(dq), M.out(dk), M.out(dv), None if dbias is None else M.out(dbias),
                             None if dsink is None else M.out(dsink.reshape(np.shape(plan.sink))))


def _baseline_grads(q, k, v, do, dlse, fmt, variant):
    __tracebackhide__ = True  # noqa: F841
    out, lse, g = _baseline(q, k, v, fmt, variant, grads=(do, dlse))
    if variant.get("bias") is None and g.dbias is not None:  # a float mask's values, not bias='s: as attention_vjp
        g = g._replace(dbias=None)
    return g


def default_baseline(q, k, v, *, dtype=None, return_lse=False, **variant):
    """The default baseline of the rules flash and torch-sdpa: the plain attention of q, k, v (the keywords of
    attncert.attention: causal, window, softcap, alibi_slopes, bias, sink, mask, dropout_mask/dropout_p, scale,
    layout, cu_seqlens_q/k, seqlens_k, empty_rows, lse_base) evaluated in the format `dtype` (float64, float32,
    float16, bfloat16; default q's dtype; the helpers pass the target) by a straightforward reference:

        torch tensors   torch on the CPU: float64, float32 and bfloat16 in that dtype; float16, which torch cannot
                        multiply on the CPU, in float32 with every result rounded to float16
        anything else   NumPy: float64 and float32 in that dtype; float16 and bfloat16 in float32 with every result
                        rounded to the format (bfloat16: ties to even)

    The inputs are rounded to the format first.  Per query row, in FlashAttention's reference order (P14), every
    step one operation rounded to the format (scale a binary64 number, rounded to float32 below float64):
        qs = q * scale;  s = qs @ k^T                       (k, v repeated over GQA groups)
        s = softcap * tanh(s / softcap)                     (softcap=: three operations)
        s = s - slope |i + n_k - n_q - j|;  s = s + bias    (alibi_slopes= (the term rounded first), bias=)
        s = -inf where a key is masked (causal, window, mask, key padding)
        p = softmax([s, sink])  (one operation; the sink's column dropped after)
        p = (p where kept, else 0) * (1 / (1 - dropout_p)) (dropout_mask=)
        o = p @ v;  rows without keys: 0 (empty_rows="nan": NaN)
        lse = logsumexp([s, sink]) in float32 (float64 for float64), / ln 2 with lse_base="2"; -inf without keys
    Returns o (and lse with return_lse=True) as the caller's type: a tensor of the format's dtype, or a NumPy
    array (float32 holding bfloat16 values for bfloat16).  Shapes as attncert.attention's.
    """
    __tracebackhide__ = True  # noqa: F841
    return_lse = _args.flag(return_lse, "return_lse")
    fmt = _format_arg(dtype, q)
    out, lse = _baseline(q, k, v, fmt, variant, want_lse=return_lse)
    return (out, lse) if return_lse else out


def default_baseline_grads(q, k, v, do, *, dlse=None, dtype=None, **variant):
    """The default baseline of assert_attention_grads_close: the gradients of default_baseline's output (and LSE)
    for the cotangents do (and dlse), in the same format: torch tensors by torch.autograd through the forward's
    operations (float16 in float32, each gradient rounded to float16 where the forward rounds); NumPy arrays by the
    same backward written out in NumPy, every operation rounded to the format.  Returns attncert.AttentionGrads
    (dq, dk, dv, dbias when a bias is given, dsink when a sink is given) as the caller's type."""
    __tracebackhide__ = True  # noqa: F841
    fmt = _format_arg(dtype, q)
    return _baseline_grads(q, k, v, do, dlse, fmt, variant)
