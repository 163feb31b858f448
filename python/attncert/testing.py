"""attncert.testing: assert that a kernel's attention (or its gradients) is close to the exact one.

    from attncert.testing import assert_attention_close
    assert_attention_close(out, q, k, v, causal="bottom-right", rule="flash", baseline=out_ref)

The rules are those of `attncert oracle --rule` (grading/grading.hpp), judged against the exact value o,
never against a rounded reference:
    ulp           max |c - o| / ulp(o) <= max_ulp (default 4 ulps of the target format)
    flash         max |c - o| <= k * max |b - o| + atol  (FlashAttention's tests; k = 2 outputs, 3 gradients)
    torch-sdpa    PyTorch's SDPA tests: atol/rtol from the baseline's errors times a fudge factor
    assert-close  |c - o| <= atol + rtol * |o| with torch.testing's per-dtype defaults
On failure, AssertionError says which rule failed and by how much, the layout the tensors were read in, the
worst element's index (always in (b, h, i, k) order, whatever the layout) with its actual and exact values,
how many elements are beyond 0.5/1/2/4/16 ulps, and a histogram.  A candidate (or a gradient) whose shape is
the expected one with dimensions 1 and 2 swapped, the shape of the other of bhsd / bshd, is refused with a
ValueError that says so; q, k, v that fit only the other layout are refused by attncert itself.
The helpers and the functions their failures pass through set pytest's __tracebackhide__: a failing test's
traceback ends at the caller's line, not inside attncert.testing.
References are cached within the process by a hash of the inputs and settings (test suites reuse inputs
across parametrizations); `clear_cache()` empties the cache.
"""
from __future__ import annotations

import collections
import collections.abc
import hashlib
import json

import numpy as np

import attncert as _a

from . import _args

__all__ = ["assert_attention_close", "assert_attention_grads_close", "clear_cache", "cache_info"]

_CACHE_SIZE = 32
_cache: "collections.OrderedDict[str, object]" = collections.OrderedDict()
_stats = {"hits": 0, "misses": 0}
_DEFAULT_MAX_ULP = 4.0


def clear_cache():
    """Forget every cached reference."""
    _cache.clear()
    _stats["hits"] = _stats["misses"] = 0


def cache_info():
    """{'hits', 'misses', 'size'} of the reference cache."""
    return dict(_stats, size=len(_cache))


def _digest(parts, names=None):
    h = hashlib.sha256()
    for i, p in enumerate(parts):
        if p is None:
            h.update(b"<none>")
        elif isinstance(p, np.ndarray):
            name = names[i] if names and names[i] else "an array"
            if not p.flags.c_contiguous:
                _args.check_copy(int(p.size) * int(p.itemsize), p.shape, name, "hashing")
            try:
                a = np.ascontiguousarray(p)
            except MemoryError:
                raise MemoryError("%s: out of memory hashing the array of shape %s: %d bytes asked for"
                                  % (name, tuple(p.shape), int(p.size) * int(p.itemsize))) from None
            h.update(repr((a.dtype.str, a.shape)).encode())
            h.update(a.tobytes())
        else:
            h.update(repr(p).encode())
        h.update(b"|")
    return h.hexdigest()


_CONVERTED = {"causal": _args.causal, "window": _args.window}


def _key(kind, arrays, variant, names=("q", "k", "v", "do", "dlse")):
    __tracebackhide__ = True  # noqa: F841  (pytest: a bad argument points at the caller's line)
    parts = [kind] + [_a._to_numpy(x, name) if x is not None else None for x, name in zip(arrays, names)]
    labels = [None] + list(names[:len(arrays)])
    for name in sorted(variant):
        val = variant[name]
        if name in _CONVERTED:  # checked here, before anything is hashed; equal spellings share a reference
            val = _CONVERTED[name](val)
        if val is not None and not isinstance(val, (str, int, float, bool, tuple, list)):
            val = _a._to_numpy(val, name)
        parts += [name, val]
        labels += [None, name]
    # the dtype of q decides the default target: part of the key
    parts.append(_a._dtype_name(arrays[0]))
    return _digest(parts, labels)


def _cached(key, make):
    __tracebackhide__ = True  # noqa: F841  (pytest: the failure points at the caller's line)
    if key in _cache:
        _stats["hits"] += 1
        _cache.move_to_end(key)
        return _cache[key]
    _stats["misses"] += 1
    value = make()
    _cache[key] = value
    if len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return value


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


def _g(x):
    return "%.9g" % x if isinstance(x, (int, float)) else str(x)


# how the tensors are read in each layout, said in every failure message
_READ_AS = {"bhsd": "(b, h, s, d)", "bshd": "(b, s, h, d)", "thd": "(t, h, d)"}


def _layout_line(layout, grads=False):
    return "  layout %s: %s read as %s" % (layout, "q, k, v, do and the gradients" if grads else
                                           "q, k, v and the output", _READ_AS.get(layout, layout))


def _message(what, g, order, layout="bhsd", grads=False):
    """The report's grade (JSON from the C++ grading) as a message a kernel engineer can act on: the rule and its
    margin, the layout the tensors were read in, the worst element, the counts beyond 0.5/1/2/4/16 ulps and a
    histogram."""
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
    if g["nonfinite_where_truth_finite"]:
        lines.append("  NaN/Inf where the exact value is finite: %d elements" % g["nonfinite_where_truth_finite"])
    if g["skipped"]:
        lines.append("  not graded (no finite exact value: padding, empty rows): %d elements" % g["skipped"])
    return "\n".join(lines)


def _check(grade_json, what, layout="bhsd"):
    """The grade (a dict) of a passing verdict; AssertionError with _message's text on a failing one."""
    __tracebackhide__ = True  # noqa: F841  (pytest: the failure points at the caller's line)
    g = json.loads(grade_json)
    if g["rule"]["verdict"] == "fail":
        raise AssertionError(_message(what, g, g["index_order"], layout))
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


def assert_attention_close(actual, q, k, v, *, rule="ulp", max_ulp=None, baseline=None, atol=None, rtol=None,
                           rows=None, seed=0, flash_k=None, fudge=None, lse=None, baseline_lse=None, max_seconds=0,
                           **variant):
    """Raise AssertionError unless `actual` (the kernel's output, NumPy or torch) passes `rule` against the exact
    attention of q, k, v with the keywords of attncert.attention (causal, window, softcap, ..., target).

    baseline: the output of a baseline implementation (needed by rule="flash" and "torch-sdpa").  lse (and
    baseline_lse): the kernel's LSE, graded by the same rule.  rows=N: only N query rows, drawn by `seed`, are
    computed and graded (for tensors too large to check whole; the others are counted as skipped).  Returns
    the grade (a dict, as the CLI's JSON report writes it) when it passes.  max_seconds > 0 bounds the reference:
    past it, TimeoutError (never a pass on the rows computed so far).
    """
    __tracebackhide__ = True  # noqa: F841  (pytest: the failure points at the caller's line)
    if "return_lse" in variant:
        raise TypeError("assert_attention_close: give the kernel's LSE as lse=, not return_lse")
    want_lse = lse is not None
    rules = _rules(rule, max_ulp, atol, rtol, flash_k, fudge)  # checked before the reference is computed
    max_seconds = _args.real(max_seconds, "max_seconds", 0, 1e7)
    key = _key("fwd", (q, k, v), dict(variant, want_lse=want_lse, rows=rows, seed=seed if rows else 0))

    def make():
        __tracebackhide__ = True  # noqa: F841
        ref = _a._reference(q, k, v, want_lse=want_lse, rows=rows, seed=seed, max_seconds=max_seconds, **variant)
        undecided = ref.summary()["undecided_rows"]
        if undecided:  # not cached: a later call with more time computes it
            raise TimeoutError("assert_attention_close: %d rows of the reference not computed within max_seconds=%s"
                               % (undecided, max_seconds))
        return ref

    ref = _cached(key, make)
    layout = variant.get("layout", "bhsd")  # a str: the reference was made with it
    cand, base = _a._to_numpy(actual, "actual"), _a._to_numpy(baseline, "baseline")
    out_shape = _dims(q)[:-1] + _dims(v)[-1:]
    for x, name in ((cand, "actual"), (base, "baseline")):
        _a._check_transposed(x, out_shape, layout, name)
    g = _check(ref.grade(cand, base, rules, False, ("actual", "baseline")), "attention output", layout)
    if want_lse:
        _check(ref.grade(_a._to_numpy(lse, "lse"), _a._to_numpy(baseline_lse, "baseline_lse"), rules, True,
                         ("lse", "baseline_lse")), "LSE", layout)
    return g


def assert_attention_grads_close(actual, q, k, v, do, *, dlse=None, rule="ulp", max_ulp=None, baseline=None,
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
    assert_attention_close.  The rules' factors are per gradient as in
    `attncert oracle --candidate-grads` (flash: k = 3; torch-sdpa: fudge dq 180, dk 16, dv 4, dbias 45, dsink 45)
    unless flash_k / fudge are given.  Every failing gradient is reported.  Returns {name: grade} when all pass.
    max_seconds > 0 bounds the exact gradients: past it, TimeoutError.
    """
    __tracebackhide__ = True  # noqa: F841  (pytest: the failure points at the caller's line)
    args = dict(_a._VARIANT_DEFAULTS)
    extra = set(variant) - set(args)
    if extra:
        raise TypeError("unexpected keyword argument(s): %s" % ", ".join(sorted(extra)))
    args.update(variant)
    rules = _rules(rule, max_ulp, atol, rtol, flash_k, fudge)  # checked before the gradients are computed
    names = ["dq", "dk", "dv"] + (["dbias"] if variant.get("bias") is not None else []) + \
        (["dsink"] if variant.get("sink") is not None else [])
    cands, bases = _gradients_of(actual, names, "actual"), _gradients_of(baseline, names, "baseline")
    key = _key("bwd", (q, k, v, do, dlse), variant)
    max_seconds = _args.real(max_seconds, "max_seconds", 0, 1e7)

    def make():
        __tracebackhide__ = True  # noqa: F841
        return _a._gradients(q, k, v, do, dlse, args, max_seconds)

    grads = _cached(key, make)
    layout = args["layout"]
    shapes = {"dq": _dims(q), "dk": _dims(k), "dv": _dims(v)}
    failures, grades = [], {}
    for n in names:
        c = cands[n]
        if c is None:
            raise ValueError("assert_attention_grads_close: actual has no %s (this call grades %s)" % (n, ", ".join(names)))
        c, b = _a._to_numpy(c, n), _a._to_numpy(bases[n], "baseline " + n)
        if n in shapes:
            _a._check_transposed(c, shapes[n], layout, n)
            _a._check_transposed(b, shapes[n], layout, "baseline " + n)
        gj = json.loads(grads.grade(n, c, b, rules))
        grades[n] = gj
        if gj["rule"]["verdict"] == "fail":
            failures.append(_message(n, gj, gj["index_order"], layout, grads=True))
    if failures:
        raise AssertionError("\n".join(failures))
    return grades
