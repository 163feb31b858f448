"""attncert.models: safetensors files, and GPT-2 / LLaMA-style models whose attention attncert.capture records.

    tensors = read_safetensors("model.safetensors")                  # {name: numpy array}
    write_safetensors("out.safetensors", tensors, metadata={"k": "v"}, bf16={"w"})
    model = load_model("model.safetensors", {"style": "llama", "n_layer": 2, ...})   # or a JSON file's path
    with attncert.capture(model) as cap:
        logits = model(input_ids)        # one call per layer: "h.{i}.attn" (gpt2), "model.layers.{i}.self_attn"

Guarantees.  read_safetensors returns exactly the stored values (BF16 as the float32 of the same value) and
refuses, with a one-line ValueError naming the file and the tensor, every file the format does not allow:
a short file, a header length past the end, a header that is not a UTF-8 JSON object (or repeats a key), an
unknown dtype, a bad shape or data_offsets, a byte size other than prod(shape) * itemsize, overlapping tensors,
data bytes no tensor covers, a BOOL byte other than 0 or 1.  write_safetensors writes a file that
read_safetensors reads back to the same arrays (BF16: the values rounded to nearest bfloat16, ties to even).

load_model builds the model from the file and an architecture (see load_model) and refuses a missing or
unexpected tensor, a wrong shape, mixed float dtypes and a bad architecture key with a ValueError naming it.
Its forward(input_ids) (B, L) returns logits (B, L, vocab_size) computed in the file's float dtype as the
Hugging Face GPT2LMHeadModel / LlamaForCausalLM compute them, except: RoPE's cos and sin are computed in
float64 and rounded to the model's dtype (Hugging Face: float32), and RMSNorm runs in float32 for float16 /
bfloat16 models and in the model's dtype otherwise.  Attention is attncert.scaled_dot_product_attention
(is_causal=True; LLaMA with enable_gqa=True and q, k after the rotary embedding), so a capture of the model
records exactly the q, k, v, probabilities and output the model used.
"""
from __future__ import annotations

import functools
import json
import math
import os
import secrets
import types

import numpy as np

from .capture import scaled_dot_product_attention

__all__ = ["read_safetensors", "write_safetensors", "load_model"]

# safetensors dtype -> NumPy dtype of the stored bytes (little-endian); BF16 is read as its 16 bits
_STORED = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
           "I8": "i1", "U8": "u1", "BOOL": "u1"}
_TAG = {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
        np.dtype(np.int64): "I64", np.dtype(np.int32): "I32", np.dtype(np.int16): "I16", np.dtype(np.int8): "I8",
        np.dtype(np.uint8): "U8", np.dtype(np.bool_): "BOOL"}
_FLOATS = ("F64", "F32", "F16", "BF16")


# ---------------------------------------------------------------------------------------------- safetensors

def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("key %r appears twice" % next(k for k in keys if keys.count(k) > 1))
    return dict(pairs)


def _count(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _read(path):
    """(tensors, dtype tags, metadata) of a safetensors file, every rule of the format checked."""
    shown = os.fspath(path)
    with open(shown, "rb") as f:
        buf = bytearray(os.fstat(f.fileno()).st_size)
        got = f.readinto(buf)
    del buf[got:]
    if len(buf) < 8:
        raise ValueError("%s: %d bytes, shorter than the 8-byte header length of a safetensors file"
                         % (shown, len(buf)))
    n = int.from_bytes(bytes(buf[:8]), "little")
    if n > len(buf) - 8:
        raise ValueError("%s: header length %d is larger than the %d bytes after it" % (shown, n, len(buf) - 8))
    try:
        header = json.loads(bytes(buf[8:8 + n]).decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError("%s: header is not UTF-8 JSON (%s)" % (shown, e)) from None
    if not isinstance(header, dict):
        raise ValueError("%s: header is not a JSON object" % shown)
    metadata = header.pop("__metadata__", None)
    if metadata is not None and (not isinstance(metadata, dict)
                                 or not all(isinstance(v, str) for v in metadata.values())):
        raise ValueError("%s: \"__metadata__\" must be an object of strings" % shown)
    start, size = 8 + n, len(buf) - 8 - n
    spans = []
    for name, e in header.items():
        where = "%s: tensor %r" % (shown, name)
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise ValueError("%s: must be an object with exactly the keys dtype, shape, data_offsets" % where)
        dtype, shape, offsets = e["dtype"], e["shape"], e["data_offsets"]
        if dtype not in _STORED:
            raise ValueError("%s: unknown dtype %r (expected one of %s)" % (where, dtype, ", ".join(_STORED)))
        if not isinstance(shape, list) or not all(_count(s) for s in shape):
            raise ValueError("%s: shape %r is not a list of non-negative integers" % (where, shape))
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_count(o) for o in offsets)
                and offsets[0] <= offsets[1] <= size):
            raise ValueError("%s: data_offsets %r is not [begin, end] with begin <= end <= %d (the data section's "
                             "size)" % (where, offsets, size))
        need = math.prod(shape) * np.dtype(_STORED[dtype]).itemsize
        if offsets[1] - offsets[0] != need:
            raise ValueError("%s: data_offsets %r hold %d bytes, shape %s of %s needs %d"
                             % (where, offsets, offsets[1] - offsets[0], shape, dtype, need))
        spans.append((offsets[0], offsets[1], name))
    pos, last = 0, None
    for begin, end, name in sorted(spans):
        if begin < pos:
            raise ValueError("%s: tensors %r and %r overlap (bytes [%d, %d) and [%d, %d) of the data section)"
                             % (shown, last[2], name, last[0], last[1], begin, end))
        if begin > pos:
            raise ValueError("%s: bytes [%d, %d) of the data section belong to no tensor (before tensor %r)"
                             % (shown, pos, begin, name))
        pos, last = end, (begin, end, name)
    if pos != size:
        raise ValueError("%s: bytes [%d, %d) of the data section belong to no tensor (at its end)"
                         % (shown, pos, size))
    tensors, dtypes = {}, {}
    for name, e in header.items():
        stored = np.dtype(_STORED[e["dtype"]])
        count = math.prod(e["shape"])
        a = np.frombuffer(buf, dtype=stored, count=count, offset=start + e["data_offsets"][0]) if count \
            else np.zeros(0, dtype=stored)
        if e["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] == "BOOL":
            if np.any(a > 1):
                raise ValueError("%s: tensor %r: BOOL holds a byte other than 0 or 1" % (shown, name))
            a = a.view(np.bool_)
        elif not a.dtype.isnative:
            a = a.astype(a.dtype.newbyteorder("="))
        elif not a.flags.aligned:
            a = a.copy()
        tensors[name], dtypes[name] = a.reshape(e["shape"]), e["dtype"]
    return tensors, dtypes, metadata


def read_safetensors(path, metadata=False):
    """The tensors of the safetensors file `path` as {name: NumPy array}, in the header's order, with exactly the
    stored values: F64/F32/F16/I64/I32/I16/I8/U8 as those NumPy dtypes, BOOL as bool, BF16 as float32 (exact).
    With metadata=True: (tensors, the header's "__metadata__" dict, {} when absent).  Every format rule is
    checked (module docstring); ValueError names the file and the tensor."""
    tensors, _, meta = _read(path)
    return (tensors, dict(meta or {})) if metadata else tensors


def _bf16_bits(a):
    """The bfloat16 bit patterns (uint16) nearest the values of float array `a` (ties to even, overflow to
    inf, NaN stays NaN).  float64 is first rounded to float32 by rounding to odd, which makes the second
    rounding exact (float32 carries 16 > 2 more bits than bfloat16 at every exponent)."""
    if a.dtype == np.float64:
        with np.errstate(over="ignore", invalid="ignore"):
            r = a.astype(np.float32)
            back = r.astype(np.float64)
            inexact = np.isfinite(a) & (back != a)
            outward = inexact & (np.abs(back) > np.abs(a))
        bits = np.array(r, copy=True).view(np.uint32)
        bits[outward] -= 1  # one step toward zero (sign-magnitude): the truncation
        bits[inexact] |= 1  # sticky bit: round to odd
        f = bits.view(np.float32)
    else:
        f = a.astype(np.float32)  # float16 / float32: exact
    u = np.ascontiguousarray(f).view(np.uint32).astype(np.uint64)
    out = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    out[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def _as_array(name, t):
    """(NumPy array, forced BF16) of a value given to write_safetensors."""
    if type(t).__module__.startswith("torch") and hasattr(t, "detach"):
        t = t.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            return t.float().numpy(), True
        return t.numpy(), False
    if not isinstance(t, np.ndarray):
        raise ValueError("write_safetensors: tensor %r is a %s, not a NumPy array or torch tensor"
                         % (name, type(t).__name__))
    return t, False


def write_safetensors(path, tensors, metadata=None, bf16=()):
    """Write `tensors` ({name: NumPy array or torch tensor}) to the safetensors file `path`, in the given
    order, replacing it atomically.  Stored dtype: from the array's dtype (float64 F64, float32 F32, float16
    F16, int64/32/16/8 I64/I32/I16/I8, uint8 U8, bool BOOL; a torch bfloat16 tensor BF16), and BF16 for every
    name in the set `bf16` (a float array, rounded to nearest bfloat16, ties to even).  metadata: a
    {str: str} dict stored as "__metadata__".  The header is padded with spaces to a multiple of 8 bytes.
    ValueError names the tensor or key that cannot be written."""
    if not isinstance(tensors, dict):
        raise ValueError("write_safetensors: tensors must be a dict {name: array}, got %s" % type(tensors).__name__)
    if metadata is not None and (not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise ValueError("write_safetensors: metadata must be a dict of str to str")
    unknown = [n for n in bf16 if n not in tensors]
    if unknown:
        raise ValueError("write_safetensors: bf16 names %r, which is not in tensors" % (unknown[0],))
    bf16 = set(bf16)
    header = {} if metadata is None else {"__metadata__": dict(metadata)}
    chunks, offset = [], 0
    for name, t in tensors.items():
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise ValueError("write_safetensors: tensor name %r is not a non-empty string other than "
                             "'__metadata__'" % (name,))
        a, forced = _as_array(name, t)
        if not a.dtype.isnative:
            a = a.astype(a.dtype.newbyteorder("="))
        if forced or name in bf16:
            if a.dtype.kind != "f" or a.dtype not in _TAG:
                raise ValueError("write_safetensors: tensor %r has dtype %s; BF16 is written from float16, "
                                 "float32 or float64" % (name, a.dtype))
            tag, data = "BF16", _bf16_bits(a).astype("<u2").tobytes()
        else:
            tag = _TAG.get(a.dtype)
            if tag is None:
                raise ValueError("write_safetensors: tensor %r has dtype %s, which safetensors does not store "
                                 "here (float64/32/16, int64/32/16/8, uint8, bool)" % (name, a.dtype))
            data = np.ascontiguousarray(a).astype(_STORED[tag]).tobytes()
        header[name] = {"dtype": tag, "shape": [int(s) for s in a.shape], "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    shown = os.fspath(path)
    tmp = "%s.tmp-%d-%s" % (shown, os.getpid(), secrets.token_hex(4))
    try:
        with open(tmp, "wb") as f:
            f.write(len(text).to_bytes(8, "little"))
            f.write(text)
            for c in chunks:
                f.write(c)
        os.replace(tmp, shown)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


# ---------------------------------------------------------------------------------------------- architecture

_KEYS = {  # key: (kind, default); default None = required
    "common": {"style": ("text", None), "n_layer": ("count", None), "n_head": ("count", None),
               "d_model": ("count", None), "vocab_size": ("count", None)},
    "gpt2": {"n_positions": ("count", None), "norm_eps": ("positive", 1e-5)},
    "llama": {"n_kv_head": ("count", "n_head"), "d_ff": ("count", None), "rope_theta": ("positive", 10000.0),
              "norm_eps": ("positive", 1e-6)},
}


def _architecture(architecture):
    """The architecture dict checked, defaults filled in."""
    if isinstance(architecture, (str, os.PathLike)):
        where = os.fspath(architecture)
        try:
            with open(where, encoding="utf-8") as f:
                arch = json.load(f, object_pairs_hook=_no_duplicates)
        except (UnicodeDecodeError, ValueError) as e:
            raise ValueError("%s: not valid JSON (%s)" % (where, e)) from None
    elif isinstance(architecture, dict):
        where, arch = "architecture", architecture
    else:
        raise ValueError("architecture: must be a dict or the path of a JSON file, got %s"
                         % type(architecture).__name__)
    if not isinstance(arch, dict):
        raise ValueError("%s: must be a JSON object" % where)
    style = arch.get("style")
    if style not in ("gpt2", "llama"):
        raise ValueError("%s: key 'style' must be 'gpt2' or 'llama', got %r" % (where, style))
    keys = dict(_KEYS["common"], **_KEYS[style])
    for k in arch:
        if k not in keys:
            raise ValueError("%s: unknown key %r for style %r (keys: %s)" % (where, k, style, ", ".join(keys)))
    cfg = {}
    for k, (kind, default) in keys.items():
        if k not in arch:
            if default is None:
                raise ValueError("%s: missing key %r" % (where, k))
            cfg[k] = cfg[default] if isinstance(default, str) else default
            continue
        x = arch[k]
        if kind == "count" and (not isinstance(x, int) or isinstance(x, bool) or x < 1):
            raise ValueError("%s: key %r must be a positive integer, got %r" % (where, k, x))
        if kind == "positive":
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x < math.inf:
                raise ValueError("%s: key %r must be a positive finite number, got %r" % (where, k, x))
            x = float(x)
        cfg[k] = x
    if cfg["d_model"] % cfg["n_head"]:
        raise ValueError("%s: key 'd_model' (%d) is not a multiple of key 'n_head' (%d)"
                         % (where, cfg["d_model"], cfg["n_head"]))
    if style == "llama":
        if cfg["n_head"] % cfg["n_kv_head"]:
            raise ValueError("%s: key 'n_head' (%d) is not a multiple of key 'n_kv_head' (%d)"
                             % (where, cfg["n_head"], cfg["n_kv_head"]))
        if (cfg["d_model"] // cfg["n_head"]) % 2:
            raise ValueError("%s: key 'd_model' / key 'n_head' = %d, the rotary head dimension, must be even"
                             % (where, cfg["d_model"] // cfg["n_head"]))
    return cfg


def _gpt2_shapes(c):
    d, V, P = c["d_model"], c["vocab_size"], c["n_positions"]
    shapes = {"wte.weight": (V, d), "wpe.weight": (P, d)}
    for i in range(c["n_layer"]):
        h = "h.%d." % i
        shapes.update({h + "ln_1.weight": (d,), h + "ln_1.bias": (d,), h + "attn.c_attn.weight": (d, 3 * d),
                       h + "attn.c_attn.bias": (3 * d,), h + "attn.c_proj.weight": (d, d), h + "attn.c_proj.bias": (d,),
                       h + "ln_2.weight": (d,), h + "ln_2.bias": (d,), h + "mlp.c_fc.weight": (d, 4 * d),
                       h + "mlp.c_fc.bias": (4 * d,), h + "mlp.c_proj.weight": (4 * d, d), h + "mlp.c_proj.bias": (d,)})
    shapes.update({"ln_f.weight": (d,), "ln_f.bias": (d,)})
    optional = {"lm_head.weight": (V, d)}
    for i in range(c["n_layer"]):  # Hugging Face's causal-mask buffers, when saved: checked, not used
        optional.update({"h.%d.attn.bias" % i: (1, 1, P, P), "h.%d.attn.masked_bias" % i: ()})
    return shapes, optional


def _llama_shapes(c):
    d, V, f = c["d_model"], c["vocab_size"], c["d_ff"]
    hd = d // c["n_head"]
    q, kv = c["n_head"] * hd, c["n_kv_head"] * hd
    shapes = {"model.embed_tokens.weight": (V, d)}
    for i in range(c["n_layer"]):
        p = "model.layers.%d." % i
        shapes.update({p + "input_layernorm.weight": (d,), p + "self_attn.q_proj.weight": (q, d),
                       p + "self_attn.k_proj.weight": (kv, d), p + "self_attn.v_proj.weight": (kv, d),
                       p + "self_attn.o_proj.weight": (d, q), p + "post_attention_layernorm.weight": (d,),
                       p + "mlp.gate_proj.weight": (f, d), p + "mlp.up_proj.weight": (f, d),
                       p + "mlp.down_proj.weight": (d, f)})
    shapes["model.norm.weight"] = (d,)
    return shapes, {"lm_head.weight": (V, d)}


def _checked_tensors(shown, cfg):
    """{name: array} of the file's model parameters (prefix stripped, buffers checked and dropped), the float
    dtype tag they share."""
    tensors, dtypes, _ = _read(shown)
    if cfg["style"] == "gpt2" and any(n.startswith("transformer.") for n in tensors):
        renamed = {}
        for n in tensors:
            if n != "lm_head.weight" and not n.startswith("transformer."):
                raise ValueError("%s: tensor %r lacks the prefix 'transformer.' that other tensors have" % (shown, n))
            renamed[n] = n[len("transformer."):] if n.startswith("transformer.") else n
        tensors = {renamed[n]: a for n, a in tensors.items()}
        dtypes = {renamed[n]: t for n, t in dtypes.items()}
    shapes, optional = (_gpt2_shapes if cfg["style"] == "gpt2" else _llama_shapes)(cfg)
    for name, shape in shapes.items():
        if name not in tensors:
            raise ValueError("%s: tensor %r is missing (expected shape %s)" % (shown, name, shape))
    for name, a in tensors.items():
        shape = shapes.get(name, optional.get(name))
        if shape is None:
            raise ValueError("%s: unexpected tensor %r (shape %s) for a %s model with these dimensions"
                             % (shown, name, tuple(a.shape), cfg["style"]))
        if tuple(a.shape) != shape:
            raise ValueError("%s: tensor %r has shape %s, expected %s" % (shown, name, tuple(a.shape), shape))
    for i in range(cfg["n_layer"]):
        mask = tensors.pop("h.%d.attn.bias" % i, None)
        tensors.pop("h.%d.attn.masked_bias" % i, None)
        if mask is not None and not np.array_equal(mask[0, 0] != 0, np.tri(mask.shape[-1], dtype=bool)):
            raise ValueError("%s: tensor 'h.%d.attn.bias' is not the causal mask (lower triangle of ones)"
                             % (shown, i))
    first = None
    for name in tensors:
        if dtypes[name] not in _FLOATS:
            raise ValueError("%s: tensor %r has dtype %s, expected a float dtype (%s)"
                             % (shown, name, dtypes[name], ", ".join(_FLOATS)))
        if first is not None and dtypes[name] != dtypes[first]:
            raise ValueError("%s: tensor %r has dtype %s, tensor %r %s (one float dtype expected)"
                             % (shown, name, dtypes[name], first, dtypes[first]))
        if first is None:
            first = name
    return tensors, dtypes[first]


# ---------------------------------------------------------------------------------------------- torch modules

@functools.lru_cache(maxsize=None)
def _nn():
    """The module classes (built on first use: importing attncert.models does not import torch)."""
    import torch

    nn, F = torch.nn, torch.nn.functional

    def param(t):
        return nn.Parameter(t, requires_grad=False)

    class Linear(nn.Module):
        """y = x W^T (nn.Linear's layout, no bias)."""

        def __init__(self, weight):
            super().__init__()
            self.weight = param(weight)

        def forward(self, x):
            return F.linear(x, self.weight)

    class Conv1D(nn.Module):
        """y = x W + b (GPT-2's Conv1D layout, computed as Hugging Face computes it)."""

        def __init__(self, weight, bias):
            super().__init__()
            self.weight, self.bias = param(weight), param(bias)

        def forward(self, x):
            y = torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight)
            return y.view(x.shape[:-1] + (self.weight.shape[1],))

    class Embedding(nn.Module):
        def __init__(self, weight):
            super().__init__()
            self.weight = param(weight)

        def forward(self, ids):
            return F.embedding(ids, self.weight)

    class LayerNorm(nn.Module):
        def __init__(self, weight, bias, eps):
            super().__init__()
            self.weight, self.bias, self.eps = param(weight), param(bias), eps

        def forward(self, x):
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)

    class RMSNorm(nn.Module):
        """weight * x / sqrt(mean(x^2) + eps), in float32 for 16-bit x, else in x's dtype."""

        def __init__(self, weight, eps):
            super().__init__()
            self.weight, self.eps = param(weight), eps

        def forward(self, x):
            h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.weight * h.to(x.dtype)

    def gelu_tanh(x):  # GPT-2's gelu (Hugging Face's "gelu_new")
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    def heads(t, n):
        B, L, _ = t.shape
        return t.view(B, L, n, t.shape[-1] // n).transpose(1, 2)

    def merge(t):
        B, H, L, d = t.shape
        return t.transpose(1, 2).reshape(B, L, H * d)

    def check_ids(ids, vocab, limit=None):
        if not isinstance(ids, torch.Tensor) or ids.dtype != torch.int64 or ids.dim() != 2:
            raise ValueError("input_ids: must be a LongTensor (B, L), got %s" % (
                "%s of shape %s" % (ids.dtype, tuple(ids.shape)) if isinstance(ids, torch.Tensor)
                else type(ids).__name__))
        if ids.shape[1] < 1 or (limit is not None and ids.shape[1] > limit):
            raise ValueError("input_ids: length %d, expected 1 to %s" % (ids.shape[1], limit or "any"))
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
            raise ValueError("input_ids: token ids must be in [0, %d), got [%d, %d]"
                             % (vocab, int(ids.min()), int(ids.max())))

    class GPT2Attention(nn.Module):
        def __init__(self, t, p, n_head):
            super().__init__()
            self.c_attn = Conv1D(t[p + "c_attn.weight"], t[p + "c_attn.bias"])
            self.c_proj = Conv1D(t[p + "c_proj.weight"], t[p + "c_proj.bias"])
            self.n_head = n_head

        def forward(self, x):
            q, k, v = (heads(u, self.n_head) for u in self.c_attn(x).split(x.shape[-1], dim=2))
            return self.c_proj(merge(scaled_dot_product_attention(q, k, v, is_causal=True)))

    class GPT2MLP(nn.Module):
        def __init__(self, t, p):
            super().__init__()
            self.c_fc = Conv1D(t[p + "c_fc.weight"], t[p + "c_fc.bias"])
            self.c_proj = Conv1D(t[p + "c_proj.weight"], t[p + "c_proj.bias"])

        def forward(self, x):
            return self.c_proj(gelu_tanh(self.c_fc(x)))

    class GPT2Block(nn.Module):
        def __init__(self, t, p, c):
            super().__init__()
            self.ln_1 = LayerNorm(t[p + "ln_1.weight"], t[p + "ln_1.bias"], c["norm_eps"])
            self.attn = GPT2Attention(t, p + "attn.", c["n_head"])
            self.ln_2 = LayerNorm(t[p + "ln_2.weight"], t[p + "ln_2.bias"], c["norm_eps"])
            self.mlp = GPT2MLP(t, p + "mlp.")

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT2(nn.Module):
        """A GPT-2 language model: forward(input_ids (B, L)) -> logits (B, L, vocab_size)."""

        def __init__(self, t, c):
            super().__init__()
            self.architecture = dict(c)
            self.wte, self.wpe = Embedding(t["wte.weight"]), Embedding(t["wpe.weight"])
            self.h = nn.ModuleList([GPT2Block(t, "h.%d." % i, c) for i in range(c["n_layer"])])
            self.ln_f = LayerNorm(t["ln_f.weight"], t["ln_f.bias"], c["norm_eps"])
            self.lm_head = Linear(t["lm_head.weight"]) if "lm_head.weight" in t else None

        def forward(self, input_ids):
            check_ids(input_ids, self.architecture["vocab_size"], self.architecture["n_positions"])
            pos = torch.arange(input_ids.shape[1], device=input_ids.device)
            x = self.wte(input_ids) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            x = self.ln_f(x)
            return self.lm_head(x) if self.lm_head is not None else F.linear(x, self.wte.weight)

    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    class LlamaAttention(nn.Module):
        def __init__(self, t, p, c):
            super().__init__()
            for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
                setattr(self, n, Linear(t[p + n + ".weight"]))
            self.n_head, self.n_kv_head = c["n_head"], c["n_kv_head"]

        def forward(self, x, cos, sin):
            q, k = heads(self.q_proj(x), self.n_head), heads(self.k_proj(x), self.n_kv_head)
            v = heads(self.v_proj(x), self.n_kv_head)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            return self.o_proj(merge(scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)))

    class LlamaMLP(nn.Module):
        def __init__(self, t, p):
            super().__init__()
            for n in ("gate_proj", "up_proj", "down_proj"):
                setattr(self, n, Linear(t[p + n + ".weight"]))

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class LlamaLayer(nn.Module):
        def __init__(self, t, p, c):
            super().__init__()
            self.input_layernorm = RMSNorm(t[p + "input_layernorm.weight"], c["norm_eps"])
            self.self_attn = LlamaAttention(t, p + "self_attn.", c)
            self.post_attention_layernorm = RMSNorm(t[p + "post_attention_layernorm.weight"], c["norm_eps"])
            self.mlp = LlamaMLP(t, p + "mlp.")

        def forward(self, x, cos, sin):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            return x + self.mlp(self.post_attention_layernorm(x))

    class LlamaBody(nn.Module):
        def __init__(self, t, c):
            super().__init__()
            self.embed_tokens = Embedding(t["model.embed_tokens.weight"])
            self.layers = nn.ModuleList([LlamaLayer(t, "model.layers.%d." % i, c) for i in range(c["n_layer"])])
            self.norm = RMSNorm(t["model.norm.weight"], c["norm_eps"])

    class Llama(nn.Module):
        """A LLaMA-style language model: forward(input_ids (B, L)) -> logits (B, L, vocab_size)."""

        def __init__(self, t, c):
            super().__init__()
            self.architecture = dict(c)
            self.model = LlamaBody(t, c)
            self.lm_head = Linear(t["lm_head.weight"]) if "lm_head.weight" in t else None

        def rotary(self, n, device):
            """(cos, sin) (n, head_dim) of positions 0..n-1, computed in float64, rounded to the model's dtype."""
            hd = self.architecture["d_model"] // self.architecture["n_head"]
            inv_freq = self.architecture["rope_theta"] ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
            angles = torch.outer(torch.arange(n, dtype=torch.float64), inv_freq)
            angles = torch.cat((angles, angles), dim=-1)
            dtype = self.model.norm.weight.dtype
            return angles.cos().to(dtype=dtype, device=device), angles.sin().to(dtype=dtype, device=device)

        def forward(self, input_ids):
            check_ids(input_ids, self.architecture["vocab_size"])
            cos, sin = self.rotary(input_ids.shape[1], input_ids.device)
            x = self.model.embed_tokens(input_ids)
            for layer in self.model.layers:
                x = layer(x, cos, sin)
            x = self.model.norm(x)
            head = self.lm_head.weight if self.lm_head is not None else self.model.embed_tokens.weight
            return F.linear(x, head)

    return types.SimpleNamespace(GPT2=GPT2, Llama=Llama)


def load_model(safetensors_path, architecture):
    """The model stored in `safetensors_path` as a torch.nn.Module in eval mode, parameters in the file's float
    dtype (not requiring grad); forward(input_ids: LongTensor (B, L)) -> logits (B, L, vocab_size).

    architecture: a dict or the path of a JSON file holding one:
      {"style": "gpt2" | "llama", "n_layer", "n_head", "d_model", "vocab_size": positive ints, and
       gpt2:  "n_positions": int, "norm_eps" (default 1e-5);
       llama: "n_kv_head" (default n_head), "d_ff": int, "rope_theta" (default 10000.0), "norm_eps" (1e-6)}.
    Tensor names and layouts are Hugging Face's.  GPT-2: wte, wpe, h.{i}.ln_1, h.{i}.attn.c_attn / c_proj
    (Conv1D: y = x W + b), h.{i}.ln_2, h.{i}.mlp.c_fc / c_proj, ln_f, all optionally prefixed "transformer.";
    gelu is the tanh approximation; optional h.{i}.attn.bias / masked_bias (Hugging Face's causal-mask
    buffers) are checked to be the causal mask and dropped.  LLaMA: model.embed_tokens,
    model.layers.{i}.input_layernorm, .self_attn.{q,k,v,o}_proj (nn.Linear layout, no bias), .post_attention_
    layernorm, .mlp.{gate,up,down}_proj, model.norm; RMSNorm, rotary embedding (rotate_half: pairs (i, i +
    head_dim/2), inv_freq = rope_theta^(-2i/head_dim)) on q and k, SwiGLU MLP.  lm_head.weight is optional in
    both (tied to the token embedding when missing).  The attention modules "h.{i}.attn" /
    "model.layers.{i}.self_attn" call attncert.scaled_dot_product_attention (causal), so attncert.capture
    records one call per layer under those names.  ValueError (one line, naming the file, tensor or key): a
    bad architecture key (unknown, missing, wrong type), a tensor missing, unexpected or of the wrong shape
    (both shapes given), tensors of more than one dtype or not of a float dtype, any malformed file."""
    cfg = _architecture(architecture)
    shown = os.fspath(safetensors_path)
    arrays, tag = _checked_tensors(shown, cfg)
    import torch

    dtype = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[tag]
    tensors = {n: torch.from_numpy(np.ascontiguousarray(a)).to(dtype) for n, a in arrays.items()}
    classes = _nn()
    model = (classes.GPT2 if cfg["style"] == "gpt2" else classes.Llama)(tensors, cfg)
    return model.eval()
