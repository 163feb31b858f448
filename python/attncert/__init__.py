"""attncert: certified, correctly rounded attention for NumPy and PyTorch users.

    import attncert
    out = attncert.attention(q, k, v, causal="top-left")          # numpy in -> numpy out, torch in -> torch out
    out, lse = attncert.attention(q, k, v, return_lse=True)
    grads = attncert.attention_vjp(q, k, v, do)                    # (dq, dk, dv, dbias, dsink)
    attncert.testing.assert_attention_close(my_out, q, k, v, rule="flash", baseline=ref_out)

Every element returned is the exact value of the attention of the exact inputs, rounded to nearest
(ties to even) in the target format (default: the inputs' dtype); the semantics of each keyword
are those of `attncert oracle` (proofs/P14-oracle-variants.md, proofs/P15-oracle-backward.md).
Bad input raises an exception whose one-line message names the parameter (README, "Python"): TypeError
for a value of a type the parameter does not take, ValueError for a value out of the command line's range
(or the command line's own message, where the library checks it), MemoryError for an array whose binary64
copy does not fit, with the bytes asked for.  The computation runs in the C++ library (attncert._core)
with the GIL released; this layer converts arguments (attncert._args) and arrays and nothing else.
"""
from __future__ import annotations

import collections
import decimal
import fractions
import numbers
import sys
import warnings

import numpy as np

from . import _args, _core

__version__ = _core.version
__all__ = ["attention", "attention_vjp", "AttentionGrads", "rank", "certify", "check", "drift", "testing",
           "__version__", "capture", "Capture", "load_capture", "scaled_dot_product_attention", "audit", "AuditReport",
           "default_audit_spec", "block_bound"]

_TARGETS = {"float64": "binary64", "float32": "binary32", "float16": "binary16", "bfloat16": "bfloat16"}
_NUMPY_OF_TARGET = {"binary64": np.float64, "binary32": np.float32, "binary16": np.float16, "bfloat16": np.float32}
_cuda_warned = False

AttentionGrads = collections.namedtuple("AttentionGrads", ["dq", "dk", "dv", "dbias", "dsink"])


def _torch():
    try:
        import torch  # noqa: F401  (optional: only when the caller passes tensors)

        return torch
    except ImportError:
        return None


def _loaded_torch():
    """torch if the process has imported it, else None: a tensor or a torch dtype exists only then, so
    a NumPy caller never pays torch's import (seconds, and a Ctrl-C landing in it surfaced as torch's
    RuntimeError instead of KeyboardInterrupt)."""
    return sys.modules.get("torch")


def _is_tensor(x):
    t = _loaded_torch()
    return t is not None and isinstance(x, t.Tensor)


def _dtype_name(x):
    """float64 / float32 / float16 / bfloat16 (or the dtype's own name) of an array or tensor."""
    if _is_tensor(x):
        return str(x.dtype).replace("torch.", "")
    return np.asarray(x).dtype.name


# torch >= 2.1's float8 dtypes and the qkv_format each one is (torch 1.13 has none: detected by name).
_FP8_DTYPES = {"torch.float8_e4m3fn": "e4m3fn", "torch.float8_e5m2": "e5m2"}


def _fp8_format(q, qkv_format):
    """qkv_format as given, or the format of a torch float8 q (torch >= 2.1); a float8 q of another format than the one
    given is refused."""
    name = _FP8_DTYPES.get(str(getattr(q, "dtype", ""))) if _is_tensor(q) else None
    if qkv_format is None:
        return name
    qkv_format = _args.text(qkv_format, "qkv_format")
    if name is not None and name != qkv_format:
        raise ValueError("qkv_format: %r, but q is a torch.float8_%s tensor" % (qkv_format, name))
    return qkv_format


def _to_numpy(x, what):
    """A NumPy view/copy of an array or tensor with exactly the same values (bfloat16 -> float32, exact).

    Refused with ValueError naming `what`: complex values (never silently cut to their real part), meta
    tensors (they hold no data), sparse, quantized and nested tensors, and anything NumPy cannot read as an
    array.  A tensor that requires grad is detached (its values are what is read)."""
    global _cuda_warned
    if x is None:
        return None
    if _is_tensor(x):
        torch = _torch()
        if x.device.type == "meta":
            raise ValueError("%s: a meta tensor holds no data (shape %s); give a tensor with values"
                             % (what, tuple(x.shape)))
        if getattr(x, "is_nested", False):
            raise ValueError("%s: a nested tensor is not supported; give a dense (strided) tensor" % what)
        if x.layout != torch.strided:
            raise ValueError("%s: a sparse tensor (%s) is not supported; give a dense one (x.to_dense())"
                             % (what, str(x.layout).replace("torch.", "")))
        if x.is_quantized:
            raise ValueError("%s: a quantized tensor (%s) is not supported; give x.dequantize()"
                             % (what, str(x.dtype).replace("torch.", "")))
        if x.is_complex():
            raise ValueError("%s: complex values are not supported (dtype %s)" % (what, str(x.dtype).replace("torch.", "")))
        if x.device.type != "cpu":
            if not _cuda_warned:
                warnings.warn("attncert: copying %s tensors to the CPU (the oracle runs on the CPU)" % x.device.type,
                              stacklevel=3)
                _cuda_warned = True
            x = x.cpu()
        x = x.detach()
        if str(x.dtype) in _FP8_DTYPES:  # torch >= 2.1's float8 tensors: their bytes, decoded by the library exactly
            x = x.contiguous().view(torch.uint8)
        if x.dtype == torch.bfloat16:  # exact: every bfloat16 is a float32
            _args.check_copy(4 * x.numel(), x.shape, what, "converting")
            try:
                x = x.to(torch.float32)
            except RuntimeError as e:  # torch's allocator says "can't allocate memory" as a RuntimeError
                if "alloc" not in str(e):
                    raise
                raise MemoryError("%s: out of memory converting the bfloat16 tensor of shape %s to float32: %d bytes "
                                  "asked for" % (what, tuple(x.shape), 4 * x.numel())) from None
        return x.resolve_conj().resolve_neg().numpy()  # a strided view: the conversion copies once
    if isinstance(x, np.ndarray):
        a = x
    else:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", np.ComplexWarning)
                a = np.asarray(x)
        except MemoryError:
            raise
        except Exception as e:  # numpy's own message (a ragged list, an object that is no array)
            raise ValueError("%s: not an array (%s)" % (what, e)) from None
    if a.dtype.kind == "c":
        raise ValueError("%s: complex values are not supported (dtype %s)" % (what, a.dtype.name))
    if a.dtype.kind in "OUSVMm":
        raise ValueError("%s: not an array of numbers (dtype %s)" % (what, a.dtype))
    return a


def _is_dtype(x):
    t = _loaded_torch()
    return t is not None and isinstance(x, t.dtype)


def _target_name(target):
    """float64 / float32 / ... of a dtype (NumPy or torch) or a type (np.float32), or the text given."""
    if isinstance(target, str):
        return target
    if _is_dtype(target):
        return str(target).replace("torch.", "")
    try:
        return np.dtype(target).name
    except TypeError:
        return str(target)


def _exact_text(x, what):
    """The exact value of a Python/NumPy number, or a string kept as given (an exact rational text).

    TypeError for a bool, a complex number or an object that is not a number; ValueError for NaN and Inf."""
    if isinstance(x, str):
        return x
    if isinstance(x, (bool, np.bool_)) or isinstance(x, (complex, np.complexfloating)) or \
            not isinstance(x, (numbers.Real, np.integer, np.floating, decimal.Decimal)):
        raise TypeError("%s: must be a real number or an exact rational text, got %s (%s)"
                        % (what, _args._shown(x), _args._type_name(x)))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, decimal.Decimal):
        if not x.is_finite():
            raise ValueError("%s: must be finite, got %r" % (what, x))
        x = fractions.Fraction(x)  # exactly
    if isinstance(x, numbers.Rational):  # fractions.Fraction: exactly p/q
        return "%d/%d" % (x.numerator, x.denominator)
    f = float(x)
    if f != f or f in (float("inf"), float("-inf")):
        raise ValueError("%s: must be finite, got %r" % (what, x))
    return str(decimal.Decimal(f))  # the binary value exactly, as a decimal


def _options(q, *, scale, causal, window, softcap, alibi_slopes, bias, sink, mask, dropout_mask, dropout_p, layout,
             alibi="distance",
             cu_seqlens_q, cu_seqlens_k, seqlens_k, target, empty_rows, max_bits, threads, want_lse, lse_base,
             key_padding_mask=None, k=None, sink_token_length=0, attention_chunk=0, key_leftpad=None, qv=None,
             qkv_format=None, q_descale=None, k_descale=None, v_descale=None, empty_lse="-inf"):
    o = {"layout": _args.text(layout, "layout"), "empty_rows": _args.text(empty_rows, "empty_rows"),
         "max_bits": _args.limited(max_bits, "oracle.max_bits"), "threads": _args.limited(threads, "threads"),
         "want_lse": _args.flag(want_lse, "return_lse"), "lse_base": _args.text(lse_base, "lse_base")}
    if lse_base not in ("e", "2"):  # checked with or without the LSE, as every other keyword
        raise ValueError("lse_base: must be 'e' or '2' (got %s)" % _args._shown(lse_base))
    fp8 = _fp8_format(q, qkv_format)
    if fp8 is not None:
        o["qkv_format"] = fp8
    if target is None and fp8 is not None:
        target = "bfloat16"  # FlashAttention 3's FP8 kernels write bfloat16
    if target is None:
        name = _dtype_name(q)
        if name not in _TARGETS:
            raise ValueError("target: the default target is the dtype of q, which is %s; give target= (float64, "
                             "float32, float16, bfloat16)" % name)
        target = name
    elif not isinstance(target, (str, np.dtype, type)) and not (_is_dtype(target)):
        raise TypeError("target: must be a format name or a dtype, got %s (%s)" % (_args._shown(target),
                                                                                  _args._type_name(target)))
    o["target"] = _TARGETS.get(_target_name(target), _target_name(target))
    causal = _args.causal(causal)
    if causal == "top-left":
        o["causal"] = True
    elif causal == "bottom-right":
        o["causal_bottom_right"] = True
    window = _args.window(window)
    if window is not None:
        o["window"] = window
    if scale is not None:
        o["scale"] = _exact_text(scale, "scale")
    if softcap is not None and softcap != 0:
        o["softcap"] = _exact_text(softcap, "softcap")
    o["alibi"] = _args.text(alibi, "alibi")
    o["empty_lse"] = _empty_lse(empty_lse)
    for key, val in (("sink_token_length", sink_token_length), ("attention_chunk", attention_chunk)):
        if val not in (0, None):
            o[key] = _args.integer(val, key, 0, 2 ** 62)
    for key, val in (("q_descale", q_descale), ("k_descale", k_descale), ("v_descale", v_descale)):
        if val is None:
            continue
        if fp8 is None:
            raise ValueError("%s: a descale applies to FP8 inputs: give qkv_format= ('e4m3fn' or 'e5m2') with uint8 "
                             "q, k, v (or torch float8 tensors)" % key)
        if isinstance(val, numbers.Real) and not isinstance(val, bool):
            o[key] = _exact_text(val, key)
        else:
            o[key] = _to_numpy(val, key)
    if dropout_mask is not None:
        o["dropout_p"] = _exact_text(dropout_p, "dropout_p")
    elif dropout_p not in (0, 0.0, None, "0"):
        raise ValueError("dropout_p: dropout needs both dropout_mask= and dropout_p= (dropout_p without dropout_mask)")
    for key, val in (("alibi_slopes", alibi_slopes), ("sink", sink), ("dropout_mask", dropout_mask),
                     ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k), ("seqlens_k", seqlens_k),
                     ("key_leftpad", key_leftpad), ("qv", qv)):
        if val is not None:
            o[key] = _to_numpy(val, key)
    mask, bias = _masks(q, k, layout, mask, bias, key_padding_mask)
    for key, val in (("mask", mask), ("bias", bias)):
        if val is not None:
            o[key] = val
    return o


_EMPTY_LSE = {"-inf": "-inf", "+inf": "+inf", "inf": "+inf", "0": "0", "nan": "nan"}


def _empty_lse(x):
    """empty_lse= as the library's text: "-inf" (FlashAttention 3's, the default), "+inf" (FlashAttention 2's), "0" or
    "nan"; the floats -inf, inf, 0.0 and nan are taken too."""
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        f = float(x)
        key = "nan" if f != f else "0" if f == 0 else "+inf" if f == float("inf") else "-inf" if f == -float("inf") else None
    else:
        key = _EMPTY_LSE.get(_args.text(x, "empty_lse"))
    if key is None:
        raise ValueError("empty_lse: the LSE of a row without keys must be -inf (FlashAttention 3), +inf (FlashAttention 2), "
                         "0 or nan; got %s" % _args._shown(x))
    return key


# ---------------------------------------------------------------------------------------------- masks
# What torch SDPA's attn_mask takes (a bool mask broadcastable to (b, h, n_q, n_k), True = attend, or a float
# mask added to the scores, -inf = masked) and FlashAttention's / xformers' key-padding masks, as the library
# takes them: one bool mask (n_q, n_k), (h, n_q, n_k) or (b, h, n_q, n_k) with its leading dimensions 1 or full,
# and one additive bias.

_MASK_ORDER = "masks are in (b, h, n_q, n_k) order whatever the layout, as torch's"
_KEY_PADDING = ("True = a real key to attend, FlashAttention's and xformers' convention (an integer attention_mask "
                "with 1 = a real token is m.bool()); torch nn.MultiheadAttention's key_padding_mask is the opposite, "
                "True = padding: give ~m")


def _problem_shape(q, k, layout):
    """(b, h_q, n_q, n_k) from the shapes of q and k in `layout`; an entry is None where they do not say it (no q
    or k given, layout thd, a shape the library refuses with its own message)."""
    def shape(x):
        if x is None:
            return None
        try:
            return tuple(int(n) for n in (x.shape if hasattr(x, "shape") else np.shape(x)))
        except Exception:  # a ragged list and the like: refused as q or k by their own conversion
            return None

    sq, sk = shape(q), shape(k)
    b = h = nq = nk = None
    if layout == "bhsd":
        if sq is not None and 2 <= len(sq) <= 4:
            b, h, nq = ((1, 1) + sq)[-4:-1]
        if sk is not None and 2 <= len(sk) <= 4:
            nk = sk[-2]
    elif layout == "bshd":
        if sq is not None and len(sq) == 4:
            b, nq, h = sq[:3]
        if sk is not None and len(sk) == 4:
            nk = sk[1]
    return b, h, nq, nk


def _shown_dims(dims):
    return "(%s)" % ", ".join("?" if n is None else str(n) for n in dims)


def _check_mask_shape(m, dims, layout):
    """ValueError naming mask unless m's shape broadcasts to dims = (b, h_q, n_q, n_k) (None: any size)."""
    if m.ndim <= 4:
        padded = (1,) * (4 - m.ndim) + tuple(m.shape)
        if all(n is None or have in (1, n) for have, n in zip(padded, dims)):
            return
    raise ValueError("mask: shape %s does not broadcast to (b, h_q, n_q, n_k) = %s (%s%s)"
                     % (tuple(m.shape), _shown_dims(dims), _MASK_ORDER,
                        "" if layout != "bshd" else "; q, k, v are bshd"))


def _split_additive(m):
    """(allowed, additive) of torch SDPA's float mask m: allowed = finite (None when all are), additive = the
    finite values as float64, exactly (None when all are zero).  +inf and NaN are refused: no mask means them."""
    _args.check_copy(9 * m.size, m.shape, "mask", "splitting")  # a bool and a float64 array of its size
    bad = np.isnan(m) | (m == np.inf)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError("mask: a float mask is torch SDPA's additive mask (0 or a finite value where attended, -inf "
                         "where masked); it holds %s at index %s" % ("NaN" if np.isnan(m[at]) else "+inf", at))
    allowed = m != -np.inf
    additive = np.where(allowed, m, 0).astype(np.float64)  # every float dtype's values are binary64 numbers
    return (None if allowed.all() else allowed), (additive if additive.any() else None)


def _key_padding(kp, layout, b, nk):
    """The (b, n_k) key-padding mask (True = a real key) as a (b, 1, 1, n_k) bool mask."""
    if layout == "thd":
        raise ValueError("key_padding_mask: not supported with layout='thd' (cu_seqlens_k gives each sequence's keys)")
    if kp.dtype != np.bool_:
        raise ValueError("key_padding_mask: must be a bool array, %s; got dtype %s" % (_KEY_PADDING, kp.dtype.name))
    if kp.ndim != 2 or (b is not None and kp.shape[0] != b) or (nk is not None and kp.shape[1] != nk):
        raise ValueError("key_padding_mask: shape %s is not (b, n_k) = %s (%s)"
                         % (tuple(kp.shape), _shown_dims((b, nk)), _KEY_PADDING))
    return kp[:, None, None, :]


def _with_additive(bias, additive):
    """bias= plus a float mask's finite values (either may be None), exactly: refused when a sum of two finite
    values is not a binary64 number.  In the bias's own shape when the mask's values do not widen it."""
    b = _to_numpy(bias, "bias")
    if additive is None or b is None:
        return additive if b is None else b
    if b.dtype.kind not in "fi" or b.ndim > 4 or (b.dtype.kind == "i" and b.dtype.itemsize == 8 and
                                                   ((b > 2 ** 53).any() or (b < -2 ** 53).any())):
        return b  # the library refuses it, naming bias
    try:
        shape = np.broadcast_shapes(b.shape, additive.shape)
    except ValueError:
        raise ValueError("bias: shape %s does not broadcast with the float mask's shape %s (both to (b, h_q, n_q, n_k))"
                         % (tuple(b.shape), tuple(additive.shape))) from None
    _args.check_copy(8 * int(np.prod(shape)) * 3, shape, "bias", "adding the float mask to")
    x = b.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        total = x + additive
        back = total - x  # TwoSum (Knuth): the sum is exact iff its rounding error is 0
        error = (x - (total - back)) + (additive - back)
        inexact = np.isfinite(x) & np.isfinite(additive) & ~(np.isfinite(total) & (error == 0))
    if inexact.any():
        at = tuple(int(i) for i in np.argwhere(inexact)[0])
        xb, xa = np.broadcast_to(x, shape)[at], np.broadcast_to(additive, shape)[at]
        raise ValueError("mask: the float mask's finite values plus bias= are not exact binary64 numbers (at index %s: "
                         "%r + %r); give the sum you mean as bias= and a bool mask" % (at, float(xb), float(xa)))
    return total.reshape(b.shape) if total.size == b.size else total


def _masks(q, k, layout, mask, bias, key_padding_mask):
    """(mask, bias) for the library from the caller's mask (bool, True = attend, or torch SDPA's additive float
    mask), bias and key_padding_mask (b, n_k), True = a real key: one bool mask, the and of mask's finite entries
    and key_padding_mask, broadcast (a view, no copy) to (b|1, h_q|1, n_q, n_k); one bias, bias + the float
    mask's finite values."""
    m = _to_numpy(mask, "mask")
    kp = _to_numpy(key_padding_mask, "key_padding_mask")
    if m is None and kp is None:
        return None, _to_numpy(bias, "bias")
    layout = layout if isinstance(layout, str) else None
    dims = _problem_shape(q, k, layout)
    additive = None
    if m is not None:
        if m.dtype.kind not in "bf":
            raise ValueError("mask: must be bool (True = attend, torch SDPA's attn_mask) or float (torch SDPA's "
                             "additive mask: 0 attended, -inf masked), got dtype %s: an integer mask is ambiguous "
                             "(torch nn.MultiheadAttention's byte masks mean 1 = masked); give m.bool() if 1 means "
                             "attend, ~m.bool() if 1 means masked" % m.dtype.name)
        _check_mask_shape(m, dims, layout)
        if m.dtype.kind == "f":
            m, additive = _split_additive(m)
    if kp is not None:
        kp = _key_padding(kp, layout, dims[0], dims[3])
        if m is None:
            m = kp
        else:
            shape = np.broadcast_shapes(m.shape, kp.shape)
            _args.check_copy(int(np.prod(shape)), shape, "key_padding_mask", "and-ing mask with")
            m = np.logical_and(m, kp)
    if m is not None and m.ndim <= 4:
        m = m.reshape((1,) * (4 - m.ndim) + tuple(m.shape))
        nq, nk = (m.shape[2] if dims[2] is None else dims[2]), (m.shape[3] if dims[3] is None else dims[3])
        m = np.broadcast_to(m, m.shape[:2] + (nq, nk))
    return m, _with_additive(bias, additive)


_LAYOUT_DIMS = {"bhsd": "(b, h, s, d)", "bshd": "(b, s, h, d)"}
_HEADS = {"bhsd": 1, "bshd": 2}  # the heads' dimension of a 4-d tensor in each layout (the other is the sequence)


def _other(layout):
    return "bshd" if layout == "bhsd" else "bhsd"


def _shape(x):
    return tuple(int(n) for n in x.shape)


def _check_layout(q, k, v, layout):
    """ValueError, naming the declared layout, when q, k, v (4-d arrays) do not fit `layout` and fit the other of
    bhsd / bshd: the only difference between the two readings is which dimension holds the heads, so this is
    the case h_q (as declared) is not a multiple of h_kv while the other reading's is, the batch, the feature
    sizes and k's and v's shapes agreeing.  Every input this refuses the library refuses too (it needs
    h_q = g * h_kv); the message adds that the tensors are in the other layout.  Inputs that fit the declared
    layout, that fit neither, that hold an empty dimension or are not 4-d are left to the library."""
    __tracebackhide__ = True  # noqa: F841  (pytest: attncert.testing's failures point at the caller's line)
    if layout not in _HEADS or any(x.ndim != 4 or 0 in x.shape for x in (q, k, v)):
        return
    sq, sk, sv = _shape(q), _shape(k), _shape(v)
    if not (sq[0] == sk[0] == sv[0] and sk[1:3] == sv[1:3] and sq[3] == sk[3]):
        return

    def heads(lay):
        return sq[_HEADS[lay]], sk[_HEADS[lay]]

    hq, hk = heads(layout)
    if hq % hk == 0:
        return
    other = _other(layout)
    oq, ok = heads(other)
    if oq % ok:
        return
    raise ValueError("layout: q %s, k %s, v %s do not fit layout='%s' %s: h_q = %d is not a multiple of h_kv = %d; "
                     "they fit layout='%s' %s (h_q = %d, h_kv = %d): pass layout='%s' if that is their layout"
                     % (sq, sk, sv, layout, _LAYOUT_DIMS[layout], hq, hk, other, _LAYOUT_DIMS[other], oq, ok, other))


def _check_transposed(x, want, layout, what):
    """ValueError, naming `what` and both layouts, when the array x (a candidate, a gradient, a cotangent) has
    shape `want` with dimensions 1 and 2 swapped: the shape of the other of bhsd / bshd, not the declared one.
    Any other shape is left to the library's own check."""
    __tracebackhide__ = True  # noqa: F841  (pytest: attncert.testing's failures point at the caller's line)
    if x is None or layout not in _HEADS or len(want) != 4 or getattr(x, "ndim", None) != 4:
        return
    have, want = _shape(x), tuple(int(n) for n in want)
    flipped = (want[0], want[2], want[1], want[3])
    if have != want and have == flipped:
        raise ValueError("%s: shape %s fits layout '%s' %s, not the declared layout='%s' %s, whose shape is %s: "
                         "give it in the layout of q, k, v (swap dimensions 1 and 2)"
                         % (what, have, _other(layout), _LAYOUT_DIMS[_other(layout)], layout, _LAYOUT_DIMS[layout],
                            want))


def _like(values, like, target):
    """values (float64 NumPy holding target-format numbers) as the caller's type and the target's dtype."""
    if _is_tensor(like):
        torch = _torch()
        tdt = {"binary64": torch.float64, "binary32": torch.float32, "binary16": torch.float16,
               "bfloat16": torch.bfloat16}[target]
        return torch.from_numpy(values).to(tdt)  # exact: the values are numbers of the target format
    return values.astype(_NUMPY_OF_TARGET[target])


_VARIANT_DEFAULTS = dict(scale=None, causal=None, window=None, softcap=None, alibi_slopes=None, alibi="distance",
                         bias=None, sink=None,
                         mask=None, dropout_mask=None, dropout_p=0.0, layout="bhsd", cu_seqlens_q=None, cu_seqlens_k=None,
                         seqlens_k=None, target=None, empty_rows="error", max_bits=4096, threads=2, lse_base="e",
                         key_padding_mask=None, sink_token_length=0, attention_chunk=0, key_leftpad=None, qv=None,
                         qkv_format=None, q_descale=None, k_descale=None, v_descale=None, empty_lse="-inf")


def _reference(q, k, v, want_lse=False, rows=None, seed=0, row_block=None, max_seconds=0, **kw):
    extra = set(kw) - set(_VARIANT_DEFAULTS)
    if extra:
        raise TypeError("unexpected keyword argument(s): %s" % ", ".join(sorted(extra)))
    args = dict(_VARIANT_DEFAULTS)
    args.update(kw)
    opts = _options(q, want_lse=want_lse, k=k, **args)
    if rows is not None:
        opts["rows"] = _args.limited(rows, "rows")
        opts["seed"] = _args.limited(seed, "seed")
    if max_seconds:
        opts["max_seconds"] = _args.real(max_seconds, "max_seconds", 0, 1e7)
    if row_block is not None:  # internal rows [begin, end) only (attncert.distributed's tasks)
        opts["row_block"] = (_args.integer(row_block[0], "row_block", 0), _args.integer(row_block[1], "row_block", 0))
    q, k, v = _to_numpy(q, "q"), _to_numpy(k, "k"), _to_numpy(v, "v")
    _check_layout(q, k, v, opts["layout"])
    return _core.Reference(q, k, v, opts)


def attention(q, k, v, *, scale=None, causal=None, window=None, softcap=None, alibi_slopes=None, alibi="distance",
              bias=None, sink=None,
              mask=None, key_padding_mask=None, dropout_mask=None, dropout_p=0.0, layout="bhsd", cu_seqlens_q=None,
              cu_seqlens_k=None, target=None, return_lse=False, seqlens_k=None, empty_rows="error", max_bits=4096,
              threads=2, lse_base="e", max_seconds=0, empty_lse="-inf", sink_token_length=0, attention_chunk=0,
              key_leftpad=None, qv=None, qkv_format=None, q_descale=None, k_descale=None, v_descale=None):
    """The correctly rounded attention output (and the LSE with return_lse=True), as the caller's type.

    q (..., n_q, d), k (..., n_k, d), v (..., n_k, d_v) in `layout` (bhsd, bshd, or thd with cu_seqlens_q/k);
    GQA from the head counts.  scale: None = 1/sqrt(d) exactly; a number is taken at its exact binary value;
    a string is an exact rational ("1/8").  causal: None, "top-left" (key j <= i) or "bottom-right"
    (j <= i + n_k - n_q), exactly: a bool is refused (TypeError), as FlashAttention's causal=True is bottom-right
    and torch SDPA's is_causal=True top-left.  window: (left, right), each side an integer >= -1 or None, -1 and
    None meaning unbounded (FlashAttention's (L, None)), or a text "LEFT,RIGHT".  Shapes are checked against
    `layout`: q, k, v that fit only the other of bhsd / bshd (h_q a multiple of h_kv in that reading alone) are
    refused with a ValueError that says so.  softcap, alibi_slopes (h_q,) or (b, h_q), bias (broadcastable to
    (b, h_q, n_q, n_k)), sink (h_q,), dropout_mask (keep-mask) with dropout_p.  alibi: "distance" (default:
    -slope |i + n_k - n_q - j|) or "flash2" (+slope j, what FlashAttention 2's kernel and its reference add under
    a causal mask: the same output, an LSE larger by slope (i + n_k - n_q); needs a causal mask).
    mask: torch SDPA's attn_mask, of any shape that broadcasts to (b, h_q, n_q, n_k) ((n_k,), (b, 1, 1, n_k),
    (b, 1, n_q, n_k), (h_q, n_q, n_k), ...): masks are in (b, h, n_q, n_k) order whatever the layout, as torch's.
    Bool: True = attend.  Float: added to the scores, 0 where attended, -inf where masked, any other finite value
    added as bias= is (to bias=, exactly; a sum that is not a binary64 number is refused); +inf and NaN are
    refused.  An integer mask is refused: 1 means attend to some and masked to nn.MultiheadAttention's byte masks.
    key_padding_mask: (b, n_k) bool, True = a real key to attend (FlashAttention's and xformers' convention; torch
    nn.MultiheadAttention's key_padding_mask is the opposite, True = padding: give ~m), and-ed with mask, causal
    and window.  A row with every key masked follows empty_rows ("error", "zeros" or "nan").
    target: float64, float32, float16 or bfloat16 (default: q's dtype; bfloat16 with NumPy inputs comes back as
    float32 holding bfloat16 values).  The LSE is natural-log (lse_base="2" for log2), in float64 for a float64
    target and float32 otherwise.  max_seconds > 0 bounds the computation (`oracle --max-seconds`): when rows
    are left undecided past it, TimeoutError (never a partial or a wrong answer).

    FlashAttention's other options, with its semantics: sink_token_length=N (StreamingLLM: the first N key positions
    stay allowed beside a left window; the right side, causal masks and chunks still apply); attention_chunk=C
    (chunked local attention: key position j allowed only in the chunk of C keys holding i + n_k - n_q);
    key_leftpad (b,) ints (its kv-cache cache_leftpad: keys j < key_leftpad[b] are padding and positions count from
    there, for masks, windows, chunks, sinks and ALiBi); qv (FlashAttention 3's MLA term, q's shape with v's feature
    size: scores scale (q k + qv v), default scale 1/sqrt(d + d_v); forward only, as FlashAttention's);
    qkv_format="e4m3fn" / "e5m2" with uint8 q, k, v holding FP8 bytes (or torch >= 2.1 float8 tensors, detected),
    decoded exactly, and q_descale / k_descale / v_descale (a number, or an array () or (b, h_kv)); the default
    target is then bfloat16, FlashAttention 3's FP8 output.  empty_lse: the LSE of a row without keys, "-inf"
    (default, FlashAttention 3), "+inf" (FlashAttention 2), "0" or "nan" (floats too); the testing helpers grade a
    kernel's LSE there by equality.
    """
    # one cache with attncert.testing's helpers (issue 32, item 11): computed here or there, reused by both
    ref = testing._shared_reference(q, k, v, want_lse=return_lse,
                                    timeout="attention: %d rows not computed within max_seconds=%s",
                     scale=scale, causal=causal, window=window, softcap=softcap,
                     alibi_slopes=alibi_slopes, alibi=alibi, bias=bias, sink=sink, mask=mask, key_padding_mask=key_padding_mask,
                     dropout_mask=dropout_mask, dropout_p=dropout_p, layout=layout, cu_seqlens_q=cu_seqlens_q,
                     cu_seqlens_k=cu_seqlens_k, seqlens_k=seqlens_k, target=target, empty_rows=empty_rows,
                     max_bits=max_bits, threads=threads, lse_base=lse_base, max_seconds=max_seconds,
                     empty_lse=empty_lse, sink_token_length=sink_token_length, attention_chunk=attention_chunk,
                     key_leftpad=key_leftpad, qv=qv, qkv_format=qkv_format, q_descale=q_descale, k_descale=k_descale,
                     v_descale=v_descale)
    out = _like(ref.output(), q, ref.target)  # (undecided rows past max_seconds: TimeoutError, nothing cached)
    if not return_lse:
        return out
    return out, _like(ref.lse(), q, ref.lse_target)


def attention_vjp(q, k, v, do, *, dlse=None, scale=None, causal=None, window=None, softcap=None, alibi_slopes=None,
                  alibi="distance", bias=None, sink=None, mask=None, key_padding_mask=None, dropout_mask=None, dropout_p=0.0,
                  layout="bhsd", cu_seqlens_q=None, cu_seqlens_k=None, target=None, seqlens_k=None, empty_rows="error",
                  max_bits=4096, threads=2, lse_base="e", max_seconds=0, empty_lse="-inf", sink_token_length=0,
                  attention_chunk=0, key_leftpad=None, qkv_format=None, q_descale=None, k_descale=None, v_descale=None):
    """The correctly rounded gradients of attention(q, k, v, ...) for the output cotangent `do` (and `dlse`).

    Returns AttentionGrads(dq, dk, dv, dbias, dsink): dq, dk, dv in the layouts of q, k, v; dbias in the bias's
    shape (summed over its broadcast dimensions) when a bias is given, else None; dsink (h_q,) when a sink is
    given, else None.  The keywords are attention()'s (causal, window and the layout check as there; a `do` whose
    shape is the output's in the other of bhsd / bshd is refused; mask and key_padding_mask as there: a float
    mask's finite values are no bias of the caller's, so they give no dbias, and a float mask whose nonzero values
    would widen bias= to a larger shape is refused, as that dbias would be a sum of rounded parts).  Exact zeros
    (keys no query attends) are exact zeros.  max_seconds > 0 bounds the computation: past it, TimeoutError (dK
    and dV sum over every row, so there is no partial answer).
    """
    args = dict(_VARIANT_DEFAULTS)
    args.update(scale=scale, causal=causal, window=window, softcap=softcap, alibi_slopes=alibi_slopes, alibi=alibi,
                bias=bias,
                sink=sink, mask=mask, key_padding_mask=key_padding_mask, dropout_mask=dropout_mask,
                dropout_p=dropout_p, layout=layout, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                seqlens_k=seqlens_k, target=target, empty_rows=empty_rows, max_bits=max_bits, threads=threads,
                lse_base=lse_base, empty_lse=empty_lse, sink_token_length=sink_token_length,
                attention_chunk=attention_chunk, key_leftpad=key_leftpad, qkv_format=qkv_format, q_descale=q_descale,
                k_descale=k_descale, v_descale=v_descale)
    g = testing._shared_gradients(q, k, v, do, dlse, args, max_seconds)  # cached with attncert.testing's
    return AttentionGrads(*[None if g.get(n) is None or (n == "dbias" and bias is None)  # a float mask's, not bias='s
                            else _like(g.get(n), q, g.target) for n in ("dq", "dk", "dv", "dbias", "dsink")])


def _gradients(q, k, v, do, dlse, args, max_seconds=0):
    opts = _options(q, want_lse=dlse is not None, k=k, **args)
    if args.get("bias") is not None and opts.get("bias") is not None:
        given = _to_numpy(args["bias"], "bias").shape
        if opts["bias"].shape != given:  # the float mask's values widened it: dbias would be a sum of rounded parts
            raise ValueError("mask: the float mask's nonzero finite values widen bias= from shape %s to %s, whose "
                             "dbias summed back to %s would not be correctly rounded; give bias= in shape %s "
                             "(np.broadcast_to) and sum its dbias, or a bool mask and the values in bias="
                             % (tuple(given), tuple(opts["bias"].shape), tuple(given), tuple(opts["bias"].shape)))
    if max_seconds:
        opts["max_seconds"] = _args.real(max_seconds, "max_seconds", 0, 1e7)
    q, k, v, do = _to_numpy(q, "q"), _to_numpy(k, "k"), _to_numpy(v, "v"), _to_numpy(do, "do")
    _check_layout(q, k, v, opts["layout"])
    _check_transposed(do, q.shape[:-1] + v.shape[-1:], opts["layout"], "do")
    return _core.Gradients(q, k, v, do, _to_numpy(dlse, "dlse"), opts)


from . import testing  # noqa: E402  (uses the names above)
from .analysis import (CertifyResult, CheckResult, DriftResult, RankResult, certify, check, drift,  # noqa: E402,F401
                       rank)
from .capture import Capture, capture, load_capture, scaled_dot_product_attention  # noqa: E402,F401
from .auditing import AuditReport, audit, default_audit_spec  # noqa: E402,F401
from .blocks import block_bound  # noqa: E402,F401
