"""attncert.capture: record every attention call of a torch model, as the model made it (`attncert audit`'s input).

    with attncert.capture(model) as cap:          # weights=True: per-head probabilities too (see below)
        y = model(x)
    cap.calls[0].name, .q, .k, .v, .allowed, .bias, .weights, .output, .w_o, .b_o, .x
    cap.save("run1")                              # .npy files + manifest.json
    cap = attncert.load_capture("run1")

Guarantee: capturing never changes what the model computes.  Inside the block every
torch.nn.MultiheadAttention of the model has its forward wrapped (an instance attribute) and, where it exists
(torch >= 2.0), torch.nn.functional.scaled_dot_product_attention is replaced by a wrapper; each wrapper passes
the caller's arguments unchanged to the original and returns the original's result object untouched, and
records copies (detached, on the CPU, as NumPy) afterwards.  attncert.scaled_dot_product_attention (this
module's explicit torch implementation of torch 2.x's SDPA, for any torch) is not patched: it computes exactly
as outside a capture and, when a capture is active, records its call into the innermost active capture after
computing.  On leaving the block, normally or by an exception, every patch and hook is removed.  The three
kinds of record: "torch.nn.MultiheadAttention", "scaled_dot_product_attention" (torch's) and
"attncert.scaled_dot_product_attention".  What is recorded per call (CapturedCall):

  q, k, v   (B, H, n_q, d), (B, H_kv, n_k, d), (B, H_kv, n_k, d_v): per head, after the input projections and
            before any scaling, in the model's dtype (bfloat16 is stored exactly as float32, dtype "bfloat16").
            For MultiheadAttention they are computed with torch's own functions
            (F._in_projection_packed / F._in_projection) on the tensors F.multi_head_attention_forward receives,
            so they are the bits of torch's (non-fused) path.  For SDPA (both kinds) they are the tensors
            given: k, v with their H_kv heads, not expanded to H.
  allowed   bool (B|1, H|1, n_q, n_k), True where query i may attend key j; None when nothing is masked.
  bias      float64, same shape: the finite additive part of a float mask, when nonzero; else None.
  mask_kind "none" (allowed is None), "causal" (allowed is exactly j <= i) or "explicit".
  scale     "1/sqrt(d)" or repr(float(scale)) of an explicit SDPA scale.
  weights   (B, H, n_q, n_k) probabilities, with weights=True, else None.  MultiheadAttention (eval mode or
            dropout 0): a second call of the original forward with need_weights=True, average_attn_weights=False
            under torch.no_grad(), torch's CPU RNG state saved and restored around it; the model gets the first
            call's result.  attncert.scaled_dot_product_attention (dropout_p 0): the very tensor of
            probabilities the call multiplied with v.  torch's SDPA: None.
  output    as returned: (B, n_q, E) after out_proj for MultiheadAttention, (B, H, n_q, d_v) for SDPA
            (both kinds).
  w_o, b_o  out_proj's weight (E, H*d_v) and bias (E,) or None; x the query input (B, n_q, E).  SDPA: None.
  residual  the residual stream the output is added to (B, n_q, E): the input of the nn.TransformerEncoderLayer
            or TransformerDecoderLayer whose self_attn the module is (a forward pre-hook on that layer; norm_first
            either way adds self_attn's output to the layer's input), when its dropout1 is inactive; else None.

Not seen (no record, no error): fused paths that bypass MultiheadAttention.forward -- in eval mode without
grad, nn.TransformerEncoderLayer (and nn.TransformerEncoder) call torch's fused kernel directly.  Capture under
torch.enable_grad() with parameters that require grad, or in train mode with dropout 0.  A MultiheadAttention
in eval mode without grad may itself take torch's fused path: its output is recorded as returned, but q, k, v
are then torch's non-fused projections, which may differ from the fused kernel's in the last bits.  SDPA is seen
only when called through the attribute torch.nn.functional.scaled_dot_product_attention (not a name imported
before the block, not torch._C); calls made inside a recorded MultiheadAttention are part of that record.
An SDPA call with both is_causal=True and an attn_mask is recorded as causal only (torch 2.0 ignores the mask
then; the documented reference refuses the combination, as attncert.scaled_dot_product_attention does).  The
name of an SDPA call (both kinds) is the innermost module of the model running when it was called ("" = the
model itself, "(outside the model)" when none): while a capture is active every module of its model carries a
forward pre-hook and a forward hook that keep the stack of running modules.  Modules with
add_bias_kv or add_zero_attn are refused (ValueError).  CapturedCall: `from attncert.capture import CapturedCall`
(the name attncert.capture is the function).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
import os
import secrets
import shutil
from typing import Optional

import numpy as np

FORMAT = "attncert-capture 1"
MHA = "torch.nn.MultiheadAttention"
SDPA = "scaled_dot_product_attention"
ATTNCERT_SDPA = "attncert.scaled_dot_product_attention"
OUTSIDE = "(outside the model)"
_ARRAYS = ("q", "k", "v", "output", "allowed", "bias", "weights", "w_o", "b_o", "x", "residual")
_REQUIRED = ("q", "k", "v", "output")
_NO_CALL = ("attncert.capture: no attention call was captured (the model has no torch.nn.MultiheadAttention "
            "and calls no scaled_dot_product_attention)")
_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_ACTIVE = []  # the captures now recording, innermost last (attncert.scaled_dot_product_attention records there)


def _torch():
    import torch  # lazily: `import attncert` must work without torch

    return torch


def _error(text):
    return ValueError("attncert.capture: " + text)


@dataclasses.dataclass(repr=False, eq=False)
class CapturedCall:
    """One attention call: what it computed with (q, k, v, allowed, bias, scale) and what it returned."""
    name: str
    kind: str
    dtype: str
    scale: str
    mask_kind: str
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    output: np.ndarray
    allowed: Optional[np.ndarray] = None
    bias: Optional[np.ndarray] = None
    weights: Optional[np.ndarray] = None
    w_o: Optional[np.ndarray] = None
    b_o: Optional[np.ndarray] = None
    x: Optional[np.ndarray] = None
    residual: Optional[np.ndarray] = None
    dropout_p: float = 0.0

    batch = property(lambda self: int(self.q.shape[0]))
    heads = property(lambda self: int(self.q.shape[1]))
    kv_heads = property(lambda self: int(self.k.shape[1]))
    n_q = property(lambda self: int(self.q.shape[2]))
    n_k = property(lambda self: int(self.k.shape[2]))
    head_dim = property(lambda self: int(self.q.shape[3]))
    value_dim = property(lambda self: int(self.v.shape[3]))

    def __repr__(self):
        return ("CapturedCall(name=%r, kind=%r, dtype=%s, B=%d, H=%d, H_kv=%d, n_q=%d, n_k=%d, d=%d, d_v=%d, "
                "mask_kind=%r, scale=%r%s)" % (self.name, self.kind, self.dtype, self.batch, self.heads,
                                               self.kv_heads, self.n_q, self.n_k, self.head_dim, self.value_dim,
                                               self.mask_kind, self.scale,
                                               "" if self.weights is None else ", weights"))


# ---------------------------------------------------------------------------------------------- conversion

def _numpy(t):
    """A NumPy copy of tensor t with exactly its values (bfloat16 -> float32, exact); None stays None."""
    if t is None:
        return None
    torch = _torch()
    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.to(torch.float32)
    return np.array(t.cpu().resolve_conj().resolve_neg().numpy(), copy=True)


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def _as_bhxx(a, lead):
    """Array a (broadcastable to lead + its last two dims) as 4-D (B, H, ., .): lead is (B, H) for 4-D
    tensors, (B,) for 3-D ones (H = 1), () for 2-D; more leading dims are flattened into B."""
    nd = len(lead) + 2
    a = a.reshape((1,) * (nd - a.ndim) + a.shape)
    if nd == 2:
        return a[None, None]
    if nd == 3:
        return a[:, None]
    if nd == 4:
        return a
    a = np.broadcast_to(a, tuple(lead[:-1]) + a.shape[-3:])
    return a.reshape((-1,) + a.shape[-3:])


# ---------------------------------------------------------------------------------------------- masks

def _mask_arrays(additive, causal, n_q, n_k, where):
    """(allowed, bias, mask_kind) from a float64 additive mask (-inf = not allowed; 4-D, broadcastable to
    (B, H, n_q, n_k)) and/or top-left causality."""
    shapes = [(1, 1, n_q, n_k)]
    allowed = bias = None
    if causal:
        allowed = np.tril(np.ones((n_q, n_k), dtype=bool))[None, None]
    if additive is not None:
        if np.isnan(additive).any() or np.isposinf(additive).any():
            raise _error("%s: the attention mask holds NaN or +inf, which no recorded mask can represent" % where)
        ok = additive != -np.inf
        shapes.append(ok.shape)
        allowed = ok if allowed is None else allowed & ok
        finite = np.where(ok, additive, 0.0)
        if np.any(finite != 0):
            bias = finite
    shape = np.broadcast_shapes(*shapes)
    if allowed is not None:
        allowed = np.array(np.broadcast_to(allowed, shape), dtype=bool)
        if allowed.all():
            allowed = None
    if bias is not None:
        bias = np.array(np.broadcast_to(bias, shape), dtype=np.float64)
    return allowed, bias, _mask_kind(allowed, n_q, n_k)


def _mask_kind(allowed, n_q, n_k):
    if allowed is None:
        return "none"
    tril = np.tril(np.ones((n_q, n_k), dtype=bool))
    return "causal" if bool(np.all(allowed == tril)) else "explicit"


def _float64(t):
    """A float mask tensor as float64 NumPy, exactly."""
    return _numpy(t).astype(np.float64)


def _canonical(m, dtype):
    """An MHA-convention mask (bool/uint8 True = masked, or float additive) as torch's float form: zeros with
    -inf where masked, in `dtype` (what torch builds); a float mask as given."""
    torch = _torch()
    if m.dtype == torch.uint8:
        m = m.to(torch.bool)
    if m.dtype == torch.bool:
        return torch.zeros(m.shape, dtype=dtype, device=m.device).masked_fill_(m, float("-inf"))
    return m


def _mha_additive(a, B, H, L, S, dtype):
    """(additive mask tensor (B|1, H|1, L, S) or None, causal) of a MultiheadAttention call, merged as torch
    merges attn_mask and key_padding_mask (torch < 2: a float key_padding_mask with a bool attn_mask is
    or-ed, non-zero = masked)."""
    torch = _torch()
    attn, kpm = a.get("attn_mask"), a.get("key_padding_mask")
    if a.get("is_causal", False) and (attn is None or (kpm is None and not a.get("need_weights", True))):
        return None, True  # torch >= 2: the is_causal hint replaces attn_mask (top-left causal)
    m = None
    if attn is not None:
        m = _canonical(attn, dtype)
        m = m.reshape(1, 1, L, S) if m.dim() == 2 else m.reshape(B, H, L, S)
    if kpm is not None:
        legacy = int(torch.__version__.split(".")[0]) < 2
        if legacy and attn is not None and attn.dtype in (torch.bool, torch.uint8) and kpm.is_floating_point():
            kpm = kpm != 0
        p = _canonical(kpm, dtype).reshape(B, 1, 1, S)
        m = p if m is None else m + p
    return m, False


def _sdpa_additive(attn, lead):
    """SDPA's attn_mask (bool True = allowed, or float additive) as a float64 additive 4-D array."""
    torch = _torch()
    if attn.dtype == torch.bool:
        a = np.where(_numpy(attn), 0.0, -np.inf)
    else:
        a = _float64(attn)
    return _as_bhxx(a, lead)


# ---------------------------------------------------------------------------------------------- MultiheadAttention

def _bind(fn, args, kwargs, where):
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise _error("%s: cannot read the arguments of forward (%s)" % (where, e)) from None
    bound.apply_defaults()
    if not all(n in bound.arguments for n in ("query", "key", "value")):
        raise _error("%s: forward takes no (query, key, value) arguments" % where)
    return bound


def _mha_inputs(module, query, key, value):
    """(query, key, value) as F.multi_head_attention_forward holds them before projecting: (L, B, E), with the
    identities (query is key, key is value) that torch keeps, so the projections take torch's branch."""
    if query.dim() == 3:
        if module.batch_first:
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = [t.transpose(1, 0) for t in (query, key)]
                    value = key
            else:
                query, key, value = [t.transpose(1, 0) for t in (query, key, value)]
        return query, key, value
    return query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)


def _mha_projections(module, query, key, value):
    """q, k, v (L, B, E) / (S, B, E) computed with the functions torch's MultiheadAttention uses."""
    F = _torch().nn.functional
    if module._qkv_same_embed_dim:
        return F._in_projection_packed(query, key, value, module.in_proj_weight, module.in_proj_bias)
    b = module.in_proj_bias
    b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
    return F._in_projection(query, key, value, module.q_proj_weight, module.k_proj_weight, module.v_proj_weight,
                            b_q, b_k, b_v)


def _batch_first(t, module, batched):
    """An MHA input or output tensor as (B, L, E)."""
    if not batched:
        return t.unsqueeze(0)
    return t if module.batch_first else t.transpose(0, 1)


def _mha_weights(orig, bound):
    """Per-head probabilities (B, H, L, S) from a second call of the original forward (need_weights=True,
    average_attn_weights=False, no grad, RNG state restored), or None when forward takes no such arguments."""
    torch = _torch()
    params = bound.signature.parameters
    if "need_weights" not in params or "average_attn_weights" not in params:
        return None
    again = inspect.BoundArguments(bound.signature, dict(bound.arguments))
    again.arguments["need_weights"] = True
    again.arguments["average_attn_weights"] = False
    state = torch.get_rng_state()
    try:
        with torch.no_grad():
            result = orig(*again.args, **again.kwargs)
    finally:
        torch.set_rng_state(state)
    w = result[1]
    return None if w is None else (w.unsqueeze(0) if w.dim() == 3 else w)


def _record_mha(name, module, orig, args, kwargs, result, want_weights):
    """The CapturedCall of one MultiheadAttention.forward call that returned `result`."""
    torch = _torch()
    bound = _bind(orig, args, kwargs, name)
    a = bound.arguments
    batched = a["query"].dim() == 3
    H = module.num_heads
    with torch.no_grad():
        q, k, v = _mha_projections(module, *_mha_inputs(module, a["query"], a["key"], a["value"]))
        L, B, E = q.shape
        S = k.shape[0]

        def heads(t):
            return _numpy(t.reshape(t.shape[0], B, H, t.shape[2] // H).permute(1, 2, 0, 3))

        additive, causal = _mha_additive(a, B, H, L, S, q.dtype)
        allowed, bias, kind = _mask_arrays(None if additive is None else _float64(additive), causal, L, S,
                                            name or "the model")
        qh, kh, vh = heads(q), heads(k), heads(v)
    weights = None
    if want_weights and (not module.training or module.dropout == 0):
        weights = _numpy(_mha_weights(orig, bound))
    out = result[0] if isinstance(result, (tuple, list)) else result
    return CapturedCall(name=name, kind=MHA, dtype=_dtype_name(q), scale="1/sqrt(d)", mask_kind=kind,
                        q=qh, k=kh, v=vh, output=_numpy(_batch_first(out, module, batched)), allowed=allowed,
                        bias=bias, weights=weights, w_o=_numpy(module.out_proj.weight),
                        b_o=_numpy(module.out_proj.bias), x=_numpy(_batch_first(a["query"], module, batched)),
                        dropout_p=float(module.dropout) if module.training else 0.0)


# ---------------------------------------------------------------------------------------------- SDPA

def _record_sdpa(name, args, kwargs, out, record=SDPA, weights=None):
    """The CapturedCall of one scaled_dot_product_attention call (torch's, or attncert's with record=ATTNCERT_SDPA
    and the probabilities it used) that returned `out`."""
    a = dict(zip(_SDPA_ARGS, args))
    a.update(kwargs)
    q, k, v = a["query"], a["key"], a["value"]
    n_q, n_k = q.shape[-2], k.shape[-2]
    causal = bool(a.get("is_causal", False))
    attn = a.get("attn_mask")
    additive = None if attn is None or causal else _sdpa_additive(attn, tuple(q.shape[:-2]))
    allowed, bias, kind = _mask_arrays(additive, causal, n_q, n_k, name or "the model")
    scale = a.get("scale")
    if weights is not None:
        weights = _as_bhxx(_numpy(weights), tuple(weights.shape[:-2]))
    return CapturedCall(name=name, kind=record, dtype=_dtype_name(q),
                        scale="1/sqrt(d)" if scale is None else repr(float(scale)), mask_kind=kind,
                        q=_as_bhxx(_numpy(q), tuple(q.shape[:-2])), k=_as_bhxx(_numpy(k), tuple(k.shape[:-2])),
                        v=_as_bhxx(_numpy(v), tuple(v.shape[:-2])),
                        output=_as_bhxx(_numpy(out), tuple(out.shape[:-2])), allowed=allowed, bias=bias,
                        weights=weights, dropout_p=float(a.get("dropout_p", 0.0) or 0.0))


# ---------------------------------------------------------------------------------------------- attncert's SDPA

def _sdpa_error(text):
    return ValueError("scaled_dot_product_attention: " + text)


def _real(x, name):
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError("scaled_dot_product_attention: %s must be a real number, got %s" % (name, type(x).__name__))
    x = float(x)
    if not np.isfinite(x):
        raise _sdpa_error("%s must be finite, got %r" % (name, x))
    return x


def _sdpa_check(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """The arguments' errors (TypeError / ValueError naming the argument); returns (dropout_p, scale) as floats."""
    torch = _torch()
    for name, t in (("query", query), ("key", key), ("value", value)) + \
            ((("attn_mask", attn_mask),) if attn_mask is not None else ()):
        if not isinstance(t, torch.Tensor):
            raise TypeError("scaled_dot_product_attention: %s must be a torch.Tensor, got %s"
                            % (name, type(t).__name__))
    for name, flag in (("is_causal", is_causal), ("enable_gqa", enable_gqa)):
        if not isinstance(flag, bool):
            raise TypeError("scaled_dot_product_attention: %s must be True or False, got %r" % (name, flag))
    if not query.is_floating_point():
        raise _sdpa_error("query has dtype %s, expected a floating-point dtype" % _dtype_name(query))
    for name, t in (("key", key), ("value", value)):
        if t.dtype != query.dtype:
            raise _sdpa_error("%s has dtype %s, query %s (they must agree)"
                              % (name, _dtype_name(t), _dtype_name(query)))
    if not 2 <= query.dim() == key.dim() == value.dim():
        raise _sdpa_error("query, key and value must have the same number (>= 2) of dimensions, got %d, %d, %d"
                          % (query.dim(), key.dim(), value.dim()))
    qs, ks, vs = tuple(query.shape), tuple(key.shape), tuple(value.shape)
    if qs[-1] < 1 or ks[-1] != qs[-1]:
        raise _sdpa_error("key has shape %s, query %s: the last dimensions (E >= 1) must agree" % (ks, qs))
    if vs[:-1] != ks[:-1]:
        raise _sdpa_error("value has shape %s, key %s: all but the last dimension must agree" % (vs, ks))
    if qs[:-3] != ks[:-3]:
        raise _sdpa_error("key has shape %s, query %s: the batch dimensions must agree" % (ks, qs))
    if query.dim() >= 3 and qs[-3] != ks[-3]:
        if not enable_gqa:
            raise _sdpa_error("query has %d heads, key and value %d: give enable_gqa=True for grouped-query "
                              "attention" % (qs[-3], ks[-3]))
        if ks[-3] == 0 or qs[-3] % ks[-3]:
            raise _sdpa_error("query has %d heads, key and value %d: not a multiple" % (qs[-3], ks[-3]))
    if attn_mask is not None:
        if is_causal:
            raise _sdpa_error("attn_mask and is_causal=True together (give one)")
        if attn_mask.dtype != torch.bool and attn_mask.dtype != query.dtype:
            raise _sdpa_error("attn_mask has dtype %s, expected bool or query's %s" % (_dtype_name(attn_mask),
                                                                                     _dtype_name(query)))
        target = qs[:-1] + (ks[-2],)
        try:
            ok = np.broadcast_shapes(tuple(attn_mask.shape), target) == target
        except ValueError:
            ok = False
        if not ok:
            raise _sdpa_error("attn_mask has shape %s, not broadcastable to %s" % (tuple(attn_mask.shape), target))
    p = _real(dropout_p, "dropout_p")
    if not 0.0 <= p <= 1.0:
        raise _sdpa_error("dropout_p must be in [0, 1], got %r" % p)
    return p, None if scale is None else _real(scale, "scale")


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """torch 2.x's scaled_dot_product_attention, computed explicitly in torch (any torch, torch 1.13 included).

    query (..., H, L, E), key (..., H_kv, S, E), value (..., H_kv, S, E_v) of one floating dtype, the same
    batch dimensions "...", returns (..., H, L, E_v) in that dtype.  Computed in the inputs' dtype, exactly as
    these torch operations compute:  scores = (query @ key^T) * scale  (scale None: the Python float
    1/sqrt(E)); then -inf where attn_mask (bool, broadcastable to (..., H, L, S)) is False, or + attn_mask
    (float, query's dtype), or -inf where j > i with is_causal=True (top-left causal; refused together with
    attn_mask); P = softmax(scores) over the last dimension; with dropout_p > 0, P = torch.dropout(P,
    dropout_p, train=True); output = P @ value.  H != H_kv needs enable_gqa=True and H % H_kv == 0: query head
    h uses key/value head h // (H / H_kv) (repeat_interleave).  A row with every key masked gives NaN.

    Inside `with attncert.capture(model) as cap:` every call is recorded in the innermost active capture
    (kind "attncert.scaled_dot_product_attention", named after the innermost running module of its model),
    after the output is computed, so capturing never changes it; with the capture's weights=True and
    dropout_p == 0 the record's weights are the very P multiplied with value.  TypeError for an argument of
    the wrong type, ValueError (one line, naming the argument) for shapes, dtypes and values out of range.
    """
    torch = _torch()
    p_drop, s = _sdpa_check(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    k, v = key, value
    if query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        group = query.shape[-3] // key.shape[-3]
        k, v = key.repeat_interleave(group, dim=-3), value.repeat_interleave(group, dim=-3)
    scores = torch.matmul(query, k.transpose(-2, -1)) * (1.0 / math.sqrt(query.shape[-1]) if s is None else s)
    if is_causal:
        keep = torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    elif attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    probs = torch.softmax(scores, dim=-1)
    if p_drop > 0:
        probs = torch.dropout(probs, p_drop, True)
    out = torch.matmul(probs, v)
    cap = _ACTIVE[-1] if _ACTIVE else None
    if cap is not None and cap._inside_mha == 0:
        args = dict(query=query, key=key, value=value, attn_mask=attn_mask, dropout_p=p_drop, is_causal=is_causal,
                    scale=scale)
        cap.calls.append(_record_sdpa(cap._running(), (), args, out, record=ATTNCERT_SDPA,
                                      weights=probs if cap.weights and p_drop == 0 else None))
    return out


# ---------------------------------------------------------------------------------------------- Capture

class Capture:
    """The attention calls recorded while the `with` block ran (`calls`, in call order); a context manager.

    Use attncert.capture(model) to make one and attncert.load_capture(directory) to read a saved one."""

    def __init__(self, model=None, weights=True):
        if model is not None:
            torch = _torch()
            if not isinstance(model, torch.nn.Module):
                raise TypeError("attncert.capture: model must be a torch.nn.Module, got %s" % type(model).__name__)
            self.torch_version = str(torch.__version__)
        else:
            self.torch_version = None
        if not isinstance(weights, bool):
            raise TypeError("attncert.capture: weights must be True or False, got %r" % (weights,))
        self.calls = []
        self.model_name = None if model is None else type(model).__name__
        self.weights = weights
        self._model = model
        self._undo = None
        self._names = {}
        self._stack = []
        self._inside_mha = 0

    def __repr__(self):
        return "Capture(model=%s, %d call%s)" % (self.model_name, len(self.calls), "" if len(self.calls) == 1 else "s")

    def __len__(self):
        return len(self.calls)

    # ------------------------------------------------------------------ patching
    def __enter__(self):
        if self._model is None:
            raise _error("this Capture has no model to record (use attncert.capture(model))")
        if self._undo is not None:
            raise _error("this capture is already recording")
        torch = _torch()
        self._names = {m: n for n, m in self._model.named_modules()}
        mhas = [(n, m) for m, n in self._names.items() if isinstance(m, torch.nn.MultiheadAttention)]
        for n, m in mhas:
            _check_supported(n, m)
        self._undo = []
        self._layer_input = {}
        try:
            for n, m in mhas:
                self._patch_mha(n, m, self._residual_layer(torch, n, m))
            if hasattr(torch.nn.functional, "scaled_dot_product_attention"):
                self._patch_sdpa(torch)
            for m in self._names:  # the running-module stack (names of SDPA calls, both kinds)
                self._undo.append(m.register_forward_pre_hook(self._push).remove)
                self._undo.append(m.register_forward_hook(self._pop).remove)
            _ACTIVE.append(self)
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc):
        self._restore()
        return False

    def _restore(self):
        undo, self._undo = self._undo or [], None
        for i in reversed(range(len(_ACTIVE))):
            if _ACTIVE[i] is self:
                del _ACTIVE[i]
        self._stack.clear()
        first = None
        for fn in reversed(undo):
            try:
                fn()
            except Exception as e:  # undo the rest, then report the first failure
                first = first or e
        if first is not None:
            raise first

    def _residual_layer(self, torch, name, module):
        """The nn.TransformerEncoderLayer / TransformerDecoderLayer whose self_attn `module` is, with a forward
        pre-hook that keeps the layer's input (the residual stream its attention output is added to, with
        norm_first either way); None for any other MultiheadAttention."""
        parent_name, _, attr = name.rpartition(".")
        if attr != "self_attn":
            return None
        parent = next((m for m, n in self._names.items() if n == parent_name), None)
        if not isinstance(parent, (torch.nn.TransformerEncoderLayer, torch.nn.TransformerDecoderLayer)) or \
                parent.self_attn is not module:
            return None

        def keep(layer, inputs):
            self._layer_input[layer] = inputs[0] if inputs else None

        def drop(layer, inputs, output):  # known only while the layer's forward runs
            self._layer_input.pop(layer, None)

        self._undo.append(parent.register_forward_pre_hook(keep).remove)
        self._undo.append(parent.register_forward_hook(drop).remove)
        return parent

    def _residual(self, layer, module, batched):
        """The residual stream of the call (B, n_q, E), or None: unknown (the module called outside its layer's
        forward), or not what the layer adds to (its dropout1 active in train mode)."""
        if layer is None:
            return None
        x = self._layer_input.get(layer)
        if x is None or (layer.training and layer.dropout1.p > 0):
            return None
        return _numpy(_batch_first(x, module, batched))

    def _patch_mha(self, name, module, layer=None):
        orig = module.forward
        had_own = "forward" in module.__dict__

        @functools.wraps(orig)
        def forward(*args, **kwargs):
            self._inside_mha += 1
            try:
                result = orig(*args, **kwargs)
                call = _record_mha(name, module, orig, args, kwargs, result, self.weights)
                call.residual = self._residual(layer, module, _bind(orig, args, kwargs, name).arguments["query"].dim() == 3)
                if call.residual is not None and call.residual.shape != call.output.shape:
                    call.residual = None
                self.calls.append(call)
            finally:
                self._inside_mha -= 1
            return result

        module.forward = forward

        def undo():
            if had_own:
                module.forward = orig
            else:
                del module.forward

        self._undo.append(undo)

    def _patch_sdpa(self, torch):
        F = torch.nn.functional
        orig = F.scaled_dot_product_attention

        @functools.wraps(orig)
        def sdpa(*args, **kwargs):
            out = orig(*args, **kwargs)
            if self._inside_mha == 0:
                self.calls.append(_record_sdpa(self._running(), args, kwargs, out))
            return out

        F.scaled_dot_product_attention = sdpa
        self._undo.append(lambda: setattr(F, "scaled_dot_product_attention", orig))

    def _running(self):
        """The name of the innermost module of the model now running ("" = the model, OUTSIDE = none)."""
        return self._names.get(self._stack[-1], "") if self._stack else OUTSIDE

    def _push(self, module, inputs):
        self._stack.append(module)

    def _pop(self, module, inputs, output):
        while self._stack:  # back to this module's entry (a forward that raised inside left its own)
            if self._stack.pop() is module:
                break

    # ------------------------------------------------------------------ files
    def save(self, directory):
        """Write every call as call%03d.<key>.npy plus manifest.json into `directory`, which must not exist or
        be empty; written into a sibling temporary directory and renamed into place, so a failure leaves nothing."""
        if not self.calls:
            raise ValueError(_NO_CALL)
        shown = os.fspath(directory)
        target = os.path.abspath(shown)
        if os.path.lexists(target) and (not os.path.isdir(target) or os.listdir(target)):
            raise _error("%s: exists and is not an empty directory" % shown)
        parent = os.path.dirname(target)
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, ".%s.tmp-%d-%s" % (os.path.basename(target), os.getpid(), secrets.token_hex(4)))
        os.mkdir(tmp)
        try:
            manifest = {"format": FORMAT, "torch": self.torch_version, "model": self.model_name,
                        "calls": [_save_call(tmp, i, c) for i, c in enumerate(self.calls)]}
            with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=1)
                f.write("\n")
            try:
                os.rename(tmp, target)  # replaces an empty directory
            except OSError:
                raise _error("%s: exists and is not an empty directory" % shown) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def _check_supported(name, module):
    if module.bias_k is not None or module.bias_v is not None:
        raise _error("%s: MultiheadAttention with add_bias_kv=True is not supported" % (name or "the model"))
    if module.add_zero_attn:
        raise _error("%s: MultiheadAttention with add_zero_attn=True is not supported" % (name or "the model"))


def _save_call(directory, i, call):
    files = {}
    for key in _ARRAYS:
        a = getattr(call, key)
        if a is not None:
            files[key] = "call%03d.%s.npy" % (i, key)
            np.save(os.path.join(directory, files[key]), a, allow_pickle=False)
    return {"name": call.name, "kind": call.kind, "dtype": call.dtype, "scale": call.scale,
            "mask_kind": call.mask_kind, "batch": call.batch, "heads": call.heads, "kv_heads": call.kv_heads,
            "n_q": call.n_q, "n_k": call.n_k, "head_dim": call.head_dim, "value_dim": call.value_dim,
            "dropout_p": float(call.dropout_p), "files": files}


def capture(model, weights=True):
    """A Capture of `model`: `with attncert.capture(model) as cap: model(...)` records every attention call
    the model makes inside the block (see the module's docstring); the model's results are untouched."""
    return Capture(model, weights=weights)


# ---------------------------------------------------------------------------------------------- loading

_INTS = ("batch", "heads", "kv_heads", "n_q", "n_k", "head_dim", "value_dim")
_TEXTS = ("name", "kind", "dtype", "scale", "mask_kind")


def load_capture(directory):
    """The Capture saved in `directory` by Capture.save (arrays read with NumPy); ValueError naming the file
    or key for anything missing or inconsistent."""
    shown = os.fspath(directory)
    if not os.path.isdir(shown):
        raise _error("%s: no such directory" % shown)
    path = os.path.join(shown, "manifest.json")
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise _error("%s: missing" % path) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise _error("%s: not valid JSON (%s)" % (path, e)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else None
        raise _error("%s: \"format\" is %r, expected %r" % (path, got, FORMAT))
    if not isinstance(manifest.get("calls"), list):
        raise _error("%s: \"calls\" must be a list" % path)
    cap = Capture()
    cap.torch_version = manifest.get("torch")
    cap.model_name = manifest.get("model")
    cap.calls = [_load_call(shown, path, i, c) for i, c in enumerate(manifest["calls"])]
    return cap


def _load_call(directory, path, i, entry):
    where = "%s: calls[%d]" % (path, i)
    if not isinstance(entry, dict):
        raise _error("%s: must be an object" % where)
    for key in _TEXTS + _INTS + ("dropout_p", "files"):
        if key not in entry:
            raise _error("%s: missing key %r" % (where, key))
    for key in _INTS:
        if not isinstance(entry[key], int) or isinstance(entry[key], bool) or entry[key] < 0:
            raise _error("%s.%s: must be a non-negative integer, got %r" % (where, key, entry[key]))
    for key in _TEXTS:
        if not isinstance(entry[key], str):
            raise _error("%s.%s: must be a string, got %r" % (where, key, entry[key]))
    files = entry["files"]
    if not isinstance(files, dict):
        raise _error("%s.files: must be an object" % where)
    for key in _REQUIRED:
        if key not in files:
            raise _error("%s.files: missing key %r" % (where, key))
    arrays = {key: _load_array(directory, where, key, files[key], _expected(entry, key, files))
              for key in _ARRAYS if key in files}
    _check_b_o(directory, files, arrays)
    return CapturedCall(name=entry["name"], kind=entry["kind"], dtype=entry["dtype"], scale=entry["scale"],
                        mask_kind=entry["mask_kind"], dropout_p=float(entry["dropout_p"]), **arrays)


def _expected(e, key, files):
    """Per dimension: the allowed sizes (a tuple) or None (any), from the manifest's numbers."""
    B, H, Hk, nq, nk, d, dv = (e[k] for k in _INTS)
    return {"q": ((B,), (H,), (nq,), (d,)), "k": ((1, B), (Hk,), (nk,), (d,)), "v": ((1, B), (Hk,), (nk,), (dv,)),
            "output": ((B,), (nq,), None) if e["kind"] == MHA else ((B,), (H,), (nq,), (dv,)),
            "allowed": ((1, B), (1, H), (nq,), (nk,)), "bias": ((1, B), (1, H), (nq,), (nk,)),
            "weights": ((B,), (H,), (nq,), (nk,)), "w_o": (None, (H * dv,)), "b_o": (None,),
            "x": ((B,), (nq,), None), "residual": ((B,), (nq,), None)}[key]


def _shown_expected(spec):
    return "(%s)" % ", ".join("any" if s is None else " or ".join(str(n) for n in sorted(set(s))) for s in spec)


def _load_array(directory, where, key, name, spec):
    if not isinstance(name, str) or not name or os.path.basename(name) != name or name in (".", ".."):
        raise _error("%s.files.%s: must be a plain file name, got %r" % (where, key, name))
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        raise _error("%s: missing (named in manifest.json)" % path)
    try:
        a = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise _error("%s: not a readable .npy file (%s)" % (path, str(e).splitlines()[0] if str(e) else e)) from None
    if a.ndim != len(spec) or any(s is not None and n not in s for n, s in zip(a.shape, spec)):
        raise _error("%s: shape %s disagrees with manifest.json (expected %s)" % (path, tuple(a.shape),
                                                                                  _shown_expected(spec)))
    if (key == "allowed") != (a.dtype == np.bool_):
        raise _error("%s: dtype %s, expected %s" % (path, a.dtype, "bool" if key == "allowed" else "a float type"))
    return a


def _check_b_o(directory, files, arrays):
    w_o, b_o = arrays.get("w_o"), arrays.get("b_o")
    if b_o is not None and (w_o is None or b_o.shape != w_o.shape[:1]):
        raise _error("%s: shape %s disagrees with w_o's %s" % (os.path.join(directory, files["b_o"]),
                                                              tuple(b_o.shape), None if w_o is None else w_o.shape))
