"""attncert.models and attncert.scaled_dot_product_attention: safetensors files round-trip and match bytes
built by hand, malformed files are refused, the loaded GPT-2 / LLaMA models agree with float64 NumPy forwards
written here, attncert.capture records their attention, and the SDPA implementation agrees with a softmax
reference, with torch's SDPA where torch has one, and is untouched by capturing."""
import json
import math
import re
import struct

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import attncert  # noqa: E402
from attncert.models import load_model, read_safetensors, write_safetensors  # noqa: E402

sdpa = attncert.scaled_dot_product_attention
KIND = "attncert.scaled_dot_product_attention"


# ---------------------------------------------------------------------------------------------- safetensors

def raw_file(path, header, data=b"", length=None):
    """A file written byte by byte: 8-byte little-endian header length, the header, the data section."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode("utf-8")
    path.write_bytes(struct.pack("<Q", len(text) if length is None else length) + text + data)
    return path


def bf16_value(bits):
    """The float a bfloat16 bit pattern denotes (its bits are the top half of a float32)."""
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def test_round_trip_every_dtype(tmp_path):
    rng = np.random.default_rng(1)
    tensors = {"f64": rng.standard_normal((2, 3)), "f32": rng.standard_normal((4,)).astype(np.float32),
               "f16": rng.standard_normal((3, 1, 2)).astype(np.float16),
               "bf16": rng.standard_normal((5, 2)).astype(np.float32),
               "i64": rng.integers(-2**62, 2**62, (3,)),
               "i32": rng.integers(-2**31, 2**31 - 1, (2, 2)).astype(np.int32),
               "i16": np.array([-32768, 0, 32767], dtype=np.int16),
               "i8": np.array([[-128, 5], [127, 0]], dtype=np.int8),
               "u8": np.array([0, 200, 255], dtype=np.uint8), "bool": np.array([[True, False, True]]),
               "scalar": np.array(2.5), "empty": np.zeros((0, 4), dtype=np.float32)}
    path = tmp_path / "all.safetensors"
    write_safetensors(path, tensors, metadata={"format": "pt", "note": "ü"}, bf16={"bf16"})
    back, meta = read_safetensors(path, metadata=True)
    assert list(back) == list(tensors) and meta == {"format": "pt", "note": "ü"}
    for name, a in tensors.items():
        b = back[name]
        assert b.shape == a.shape, name
        if name == "bf16":  # rounded to nearest bfloat16, as torch rounds float32 -> bfloat16
            assert b.dtype == np.float32
            expect = torch.from_numpy(a).to(torch.bfloat16).to(torch.float32).numpy()
            assert np.array_equal(b, expect) and not np.array_equal(b, a)
        else:
            assert b.dtype == a.dtype and np.array_equal(b, a), name
    # the bytes, read by hand: header length, JSON header padded with spaces to 8, contiguous data
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    text = blob[8:8 + n].rstrip(b" ")
    assert n % 8 == 0 and text.endswith(b"}") and n - len(text) < 8
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    assert header.pop("__metadata__") == {"format": "pt", "note": "ü"}
    tags = {"f64": "F64", "f32": "F32", "f16": "F16", "bf16": "BF16", "i64": "I64", "i32": "I32", "i16": "I16",
            "i8": "I8", "u8": "U8", "bool": "BOOL", "scalar": "F64", "empty": "F32"}
    assert {k: e["dtype"] for k, e in header.items()} == tags
    data = blob[8 + n:]
    pos = 0
    for name, e in header.items():
        assert e["shape"] == list(tensors[name].shape) and e["data_offsets"][0] == pos
        pos = e["data_offsets"][1]
    assert pos == len(data)
    b0, b1 = header["f32"]["data_offsets"]
    assert data[b0:b1] == struct.pack("<4f", *tensors["f32"].tolist())
    b0, b1 = header["bf16"]["data_offsets"]
    assert [bf16_value(u) for u in struct.unpack("<10H", data[b0:b1])] == back["bf16"].ravel().tolist()


def test_reads_a_file_built_by_hand(tmp_path):
    """Header order differs from data order, no padding, every value computed here from its bytes."""
    f32 = struct.pack("<3f", 1.5, -2.0, 0.1)
    bf = struct.pack("<2H", 0x3FC0, 0xC2F7)
    i64 = struct.pack("<2q", -7, 2**40)
    flags = bytes([1, 0, 1, 1])
    data = i64 + flags + f32 + bf
    o = np.cumsum([0, len(i64), len(flags), len(f32), len(bf)]).tolist()
    header = {"w": {"dtype": "F32", "shape": [3], "data_offsets": [o[2], o[3]]},
              "b": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [o[3], o[4]]},
              "__metadata__": {"k": "v"},
              "ids": {"dtype": "I64", "shape": [2], "data_offsets": [o[0], o[1]]},
              "m": {"dtype": "BOOL", "shape": [2, 2], "data_offsets": [o[1], o[2]]}}
    got, meta = read_safetensors(raw_file(tmp_path / "hand.safetensors", header, data), metadata=True)
    assert list(got) == ["w", "b", "ids", "m"] and meta == {"k": "v"}
    assert got["w"].dtype == np.float32 and got["w"].tolist() == list(struct.unpack("<3f", f32))
    assert got["b"].dtype == np.float32 and got["b"].tolist() == [[bf16_value(0x3FC0), bf16_value(0xC2F7)]]
    assert got["b"][0, 0] == 1.5
    assert got["ids"].tolist() == [-7, 2**40] and got["m"].tolist() == [[True, False], [True, True]]
    assert read_safetensors(raw_file(tmp_path / "none.safetensors", {}), metadata=True) == ({}, {})


def bf16_reference(x):
    """Nearest bfloat16 (ties to the even bit pattern) of float64 values within the finite range, by search
    over every positive finite bfloat16; returns the bit patterns."""
    bits = np.arange(0x7F80, dtype=np.uint32)
    values = (bits << 16).view(np.float32).astype(np.float64)  # increasing with the pattern
    a = np.abs(x)
    i = np.clip(np.searchsorted(values, a), 1, len(values) - 1)
    lo, hi = values[i - 1], values[i]
    up = (hi - a < a - lo) | ((hi - a == a - lo) & (i % 2 == 0))
    out = np.where(up, i, i - 1).astype(np.uint16)
    return out | np.where(np.signbit(x), 0x8000, 0).astype(np.uint16)


def test_bf16_from_float64_is_rounded_once(tmp_path):
    """Values at, just above and just below the midpoints of neighbouring bfloat16 numbers (subnormals
    included): rounding through float32 first would round some of them wrongly."""
    rng = np.random.default_rng(2)
    j = rng.integers(1, 0x7F7E, 3000).astype(np.uint32)
    lo, hi = [(b << 16).view(np.float32).astype(np.float64) for b in (j, j + 1)]
    mid = (lo + hi) / 2
    x = np.concatenate([mid, mid * (1 + 2.0**-40), mid * (1 - 2.0**-40), lo + (hi - lo) * rng.random(3000)])
    x *= np.where(rng.random(x.size) < 0.5, -1.0, 1.0)
    path = tmp_path / "bf.safetensors"
    write_safetensors(path, {"x": x}, bf16={"x"})
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    got = np.frombuffer(blob[8 + n:], dtype="<u2")
    expect = bf16_reference(x)
    assert np.array_equal(got, expect)
    twice = torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.count_nonzero(twice != expect) > 100  # the double rounding this test would catch


CASES = [  # (id, header, data, header length or None, words the message must hold)
    ("short", None, b"\x01\x02\x03", None, ["shorter than the 8-byte"]),
    ("length", {"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\x00", 10**6, ["header length 1000000"]),
    ("json", b"{not json", b"", None, ["not UTF-8 JSON"]),
    ("utf8", b"\xff\xfe\x00\x00", b"", None, ["not UTF-8 JSON"]),
    ("object", [1, 2], b"", None, ["not a JSON object"]),
    ("duplicate", b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],'
                  b'"data_offsets":[0,1]}}', b"\x00", None, ["'a' appears twice"]),
    ("metadata", {"__metadata__": {"k": 1}}, b"", None, ["__metadata__"]),
    ("keys", {"t": {"dtype": "U8", "shape": [1]}}, b"\x00", None, ["'t'", "exactly the keys"]),
    ("dtype", {"t": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}}, b"\x00", None,
     ["'t'", "unknown dtype 'F8_E4M3'"]),
    ("shape-negative", {"t": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}}, b"", None, ["'t'", "shape [-1]"]),
    ("shape-float", {"t": {"dtype": "U8", "shape": [1.0], "data_offsets": [0, 1]}}, b"\x00", None, ["'t'", "shape"]),
    ("shape-type", {"t": {"dtype": "U8", "shape": "1", "data_offsets": [0, 1]}}, b"\x00", None, ["'t'", "shape"]),
    ("offsets-order", {"t": {"dtype": "U8", "shape": [0], "data_offsets": [1, 0]}}, b"\x00", None,
     ["'t'", "data_offsets [1, 0]"]),
    ("offsets-past-end", {"t": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}, b"\x00", None,
     ["'t'", "data_offsets [0, 2]", "<= 1"]),
    ("offsets-type", {"t": {"dtype": "U8", "shape": [1], "data_offsets": [0]}}, b"\x00", None, ["'t'", "data_offsets"]),
    ("size", {"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\x00" * 4, None,
     ["'t'", "hold 4 bytes", "needs 8"]),
    ("overlap", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                 "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\x00" * 8, None,
     ["'a' and 'b' overlap"]),
    ("hole", {"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
              "b": {"dtype": "U8", "shape": [1], "data_offsets": [3, 4]}}, b"\x00" * 4, None,
     ["bytes [1, 3)", "no tensor", "'b'"]),
    ("trailing", {"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\x00" * 3, None,
     ["bytes [1, 3)", "no tensor"]),
    ("bool", {"m": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}, b"\x01\x02", None, ["'m'", "BOOL"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_file_refused(tmp_path, case):
    name, header, data, length, words = case
    path = tmp_path / ("%s.safetensors" % name)
    if header is None:
        path.write_bytes(data)
    else:
        raw_file(path, header, data, length)
    with pytest.raises(ValueError) as e:
        read_safetensors(path)
    text = str(e.value)
    assert "\n" not in text and text.startswith(str(path) + ": ")
    for w in words:
        assert w in text, (w, text)


def test_write_refusals(tmp_path):
    path = tmp_path / "w.safetensors"
    for kwargs, words in [(dict(tensors={"i": np.arange(3)}, bf16={"i"}), "'i' has dtype int64"),
                          (dict(tensors={"a": np.zeros(2)}, bf16={"b"}), "bf16 names 'b'"),
                          (dict(tensors={"u": np.zeros(2, dtype=np.uint16)}), "'u' has dtype uint16"),
                          (dict(tensors={"c": np.zeros(2, dtype=complex)}), "'c' has dtype complex128"),
                          (dict(tensors={"__metadata__": np.zeros(2)}), "'__metadata__'"),
                          (dict(tensors={"l": [1.0, 2.0]}), "'l' is a list"),
                          (dict(tensors={"a": np.zeros(2)}, metadata={"k": 1}), "metadata must be a dict of str")]:
        with pytest.raises(ValueError, match=words.replace("(", r"\(")):
            write_safetensors(path, **kwargs)
        assert not path.exists() and not list(tmp_path.iterdir())
    write_safetensors(path, {"t": torch.tensor([1.0, 3.0], dtype=torch.bfloat16)})
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    assert json.loads(blob[8:8 + n])["t"]["dtype"] == "BF16" and read_safetensors(path)["t"].tolist() == [1.0, 3.0]


# ---------------------------------------------------------------------------------------------- NumPy references

def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b


def rms_norm(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def causal_attention(q, k, v, causal=True):
    """q (B, H, L, hd), k, v (B, H_kv, L, hd); query head h reads key/value head h // (H / H_kv)."""
    B, H, L, hd = q.shape
    group = H // k.shape[1]
    out = np.empty_like(q)
    for h in range(H):
        s = q[:, h] @ np.swapaxes(k[:, h // group], -1, -2) / math.sqrt(hd)
        if causal:
            s = np.where(np.tri(L, dtype=bool), s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        out[:, h] = (p / p.sum(-1, keepdims=True)) @ v[:, h // group]
    return out


def split_heads(x, n):
    B, L, d = x.shape
    return x.reshape(B, L, n, d // n).transpose(0, 2, 1, 3)


def merge_heads(x):
    B, H, L, hd = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, L, H * hd)


def gpt2_reference(w, c, ids, causal=True, erf_gelu=False):
    """Logits and the per-layer (q, k) of GPT-2 in float64 (controls: no causal mask, erf gelu)."""
    w = {n: a.astype(np.float64) for n, a in w.items()}
    d, H = c["d_model"], c["n_head"]
    x = w["wte.weight"][ids] + w["wpe.weight"][:ids.shape[1]]
    qks = []
    for i in range(c["n_layer"]):
        p = "h.%d." % i
        h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (split_heads(qkv[..., j * d:(j + 1) * d], H) for j in range(3))
        qks.append((q, k))
        x = x + merge_heads(causal_attention(q, k, v, causal)) @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        h = h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
        if erf_gelu:
            h = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
        else:
            h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    return x @ w["wte.weight"].T, qks


def rotary(x, theta, interleaved=False):
    """x (B, H, L, hd) rotated by position: pairs (i, i + hd/2) at angle pos * theta^(-2i/hd) (or, as a
    control, the interleaved pairs (2i, 2i + 1))."""
    hd = x.shape[-1]
    out = np.empty_like(x)
    for i in range(hd // 2):
        a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + hd // 2)
        angle = np.arange(x.shape[2]) * theta ** (-2.0 * i / hd)
        cos, sin = np.cos(angle)[:, None], np.sin(angle)[:, None]
        out[..., a:a + 1] = x[..., a:a + 1] * cos - x[..., b:b + 1] * sin
        out[..., b:b + 1] = x[..., b:b + 1] * cos + x[..., a:a + 1] * sin
    return out


def llama_reference(w, c, ids, interleaved=False):
    """Logits and the per-layer (q, k) after the rotary embedding of a LLaMA-style model in float64."""
    w = {n: a.astype(np.float64) for n, a in w.items()}
    eps, theta = c["norm_eps"], c.get("rope_theta", 10000.0)
    x = w["model.embed_tokens.weight"][ids]
    qks = []
    for i in range(c["n_layer"]):
        p = "model.layers.%d." % i
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = rotary(split_heads(h @ w[p + "self_attn.q_proj.weight"].T, c["n_head"]), theta, interleaved)
        k = rotary(split_heads(h @ w[p + "self_attn.k_proj.weight"].T, c["n_kv_head"]), theta, interleaved)
        v = split_heads(h @ w[p + "self_attn.v_proj.weight"].T, c["n_kv_head"])
        qks.append((q, k))
        x = x + merge_heads(causal_attention(q, k, v)) @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    return x @ w.get("lm_head.weight", w["model.embed_tokens.weight"]).T, qks


GPT2 = {"style": "gpt2", "n_layer": 2, "n_head": 4, "d_model": 32, "vocab_size": 50, "n_positions": 16}
LLAMA = {"style": "llama", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "d_model": 32, "vocab_size": 50, "d_ff": 48,
         "norm_eps": 1e-5}


def random_weights(shapes, seed):
    """float32 weights: norm gains near 1, small biases, matrices scaled by 1/sqrt(fan-in) (activations O(1))."""
    rng = np.random.default_rng(seed)
    w = {}
    for name, shape in shapes.items():
        if len(shape) == 1:
            gain = name.endswith("norm.weight") or ("ln_" in name and name.endswith(".weight"))
            w[name] = (1.0 if gain else 0.0) + 0.1 * rng.standard_normal(shape)
        elif "embed" in name or name.startswith("wte") or name.startswith("wpe"):
            w[name] = rng.standard_normal(shape)
        else:
            fan_in = shape[0] if name.startswith("h.") else shape[1]  # Conv1D (in, out), Linear (out, in)
            w[name] = rng.standard_normal(shape) / math.sqrt(fan_in)
    return {n: a.astype(np.float32) for n, a in w.items()}


def gpt2_shapes(c):
    d, V = c["d_model"], c["vocab_size"]
    s = {"wte.weight": (V, d), "wpe.weight": (c["n_positions"], d), "ln_f.weight": (d,), "ln_f.bias": (d,)}
    for i in range(c["n_layer"]):
        p = "h.%d." % i
        s.update({p + "ln_1.weight": (d,), p + "ln_1.bias": (d,), p + "attn.c_attn.weight": (d, 3 * d),
                  p + "attn.c_attn.bias": (3 * d,), p + "attn.c_proj.weight": (d, d), p + "attn.c_proj.bias": (d,),
                  p + "ln_2.weight": (d,), p + "ln_2.bias": (d,), p + "mlp.c_fc.weight": (d, 4 * d),
                  p + "mlp.c_fc.bias": (4 * d,), p + "mlp.c_proj.weight": (4 * d, d), p + "mlp.c_proj.bias": (d,)})
    return s


def llama_shapes(c, lm_head=True):
    d, V, f, hd = c["d_model"], c["vocab_size"], c["d_ff"], c["d_model"] // c["n_head"]
    s = {"model.embed_tokens.weight": (V, d), "model.norm.weight": (d,)}
    if lm_head:
        s["lm_head.weight"] = (V, d)
    for i in range(c["n_layer"]):
        p = "model.layers.%d." % i
        s.update({p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,),
                  p + "self_attn.q_proj.weight": (c["n_head"] * hd, d), p + "self_attn.o_proj.weight": (d, d),
                  p + "self_attn.k_proj.weight": (c["n_kv_head"] * hd, d),
                  p + "self_attn.v_proj.weight": (c["n_kv_head"] * hd, d), p + "mlp.gate_proj.weight": (f, d),
                  p + "mlp.up_proj.weight": (f, d), p + "mlp.down_proj.weight": (d, f)})
    return s


# Tolerance of the float32 models against the float64 references, relative to max(1, max |logit|).  Every
# float32 operation rounds with relative error <= u = 2^-24 ~ 6e-8.  A dot product of n <= 4d = 128 terms is
# off by at most ~n u ~ 8e-6 of the sum of |terms| in the worst case, and by ~sqrt(n) u ~ 7e-7 for rounding
# errors of random sign (the weights are random); two layers chain about a dozen products, norms (1/sigma
# is O(1): weights scaled to keep activations O(1)) and softmaxes, so the expected error is a few 1e-6 of the
# largest logit.  1e-5 leaves margin above that (seen: below 3e-7) and stays below the changes a wrong
# convention makes, which the controls check: no causal mask or interleaved rotary pairs (2i, 2i + 1) move the
# logits by O(1), erf gelu instead of GPT-2's tanh gelu by ~1e-4 of the largest logit (10x the tolerance).
def tolerance(ref):
    return 1e-5 * max(1.0, float(np.abs(ref).max()))


def check_capture(model, ids, names, kv_heads, qks, tol):
    plain = model(ids)
    with attncert.capture(model) as cap:
        captured = model(ids)
    assert torch.equal(plain, captured)
    B, L = ids.shape
    H, hd = model.architecture["n_head"], model.architecture["d_model"] // model.architecture["n_head"]
    assert [c.name for c in cap.calls] == names
    for c, (q, k) in zip(cap.calls, qks):
        assert c.kind == KIND and c.mask_kind == "causal" and c.scale == "1/sqrt(d)" and c.dtype == "float32"
        assert c.q.shape == (B, H, L, hd) and c.k.shape == c.v.shape == (B, kv_heads, L, hd)
        assert c.output.shape == (B, H, L, hd) and c.weights.shape == (B, H, L, L)
        assert np.array_equal(c.allowed, np.tri(L, dtype=bool)[None, None])
        assert np.abs(c.weights.astype(np.float64).sum(-1) - 1).max() < 1e-5
        assert np.all(c.weights[..., ~np.tri(L, dtype=bool)] == 0)
        assert np.abs(c.q - q).max() < tol and np.abs(c.k - k).max() < tol
        v = np.repeat(c.v.astype(np.float64), H // kv_heads, axis=1)
        assert np.abs(c.weights.astype(np.float64) @ v - c.output).max() < 1e-5
    return plain


def test_gpt2_matches_numpy_and_is_captured(tmp_path):
    w = random_weights(gpt2_shapes(GPT2), seed=3)
    path = tmp_path / "gpt2.safetensors"
    write_safetensors(path, w)
    arch = tmp_path / "gpt2.json"
    arch.write_text(json.dumps(GPT2))
    model = load_model(path, arch)
    assert not model.training and all(p.dtype == torch.float32 for p in model.parameters())
    ids = torch.from_numpy(np.random.default_rng(4).integers(0, 50, (2, 9)))
    with torch.no_grad():
        logits = model(ids)
    ref, qks = gpt2_reference(w, GPT2, ids.numpy())
    tol = tolerance(ref)
    assert logits.shape == (2, 9, 50) and np.abs(logits.numpy() - ref).max() < tol
    assert np.abs(logits.numpy() - gpt2_reference(w, GPT2, ids.numpy(), causal=False)[0]).max() > 100 * tol
    assert np.abs(logits.numpy() - gpt2_reference(w, GPT2, ids.numpy(), erf_gelu=True)[0]).max() > 5 * tol
    check_capture(model, ids, ["h.0.attn", "h.1.attn"], 4, qks, tol)
    # the Hugging Face "transformer." prefix and causal-mask buffers: the same model
    prefixed = {"transformer." + n: a for n, a in w.items()}
    prefixed.update({"transformer.h.%d.attn.bias" % i: np.tri(16, dtype=np.uint8)[None, None] for i in range(2)})
    write_safetensors(tmp_path / "hf.safetensors", prefixed)
    assert torch.equal(load_model(tmp_path / "hf.safetensors", GPT2)(ids), logits)
    prefixed["transformer.h.1.attn.bias"] = np.ones((1, 1, 16, 16), dtype=np.uint8)
    write_safetensors(tmp_path / "hf.safetensors", prefixed)
    with pytest.raises(ValueError, match=r"'h.1.attn.bias' is not the causal mask"):
        load_model(tmp_path / "hf.safetensors", GPT2)
    with pytest.raises(ValueError, match=r"input_ids: length 17, expected 1 to 16"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match=r"input_ids: token ids must be in \[0, 50\)"):
        model(torch.full((1, 3), 50, dtype=torch.long))


def test_llama_matches_numpy_and_is_captured(tmp_path):
    w = random_weights(llama_shapes(LLAMA), seed=5)
    path = tmp_path / "llama.safetensors"
    write_safetensors(path, w)
    model = load_model(path, LLAMA)
    ids = torch.from_numpy(np.random.default_rng(6).integers(0, 50, (2, 9)))
    with torch.no_grad():
        logits = model(ids)
    ref, qks = llama_reference(w, LLAMA, ids.numpy())
    tol = tolerance(ref)
    assert logits.shape == (2, 9, 50) and np.abs(logits.numpy() - ref).max() < tol
    assert np.abs(logits.numpy() - llama_reference(w, LLAMA, ids.numpy(), interleaved=True)[0]).max() > 100 * tol
    check_capture(model, ids, ["model.layers.0.self_attn", "model.layers.1.self_attn"], 2, qks, tol)
    # tied lm_head (absent from the file), bfloat16 file -> bfloat16 parameters
    tied = {n: a for n, a in w.items() if n != "lm_head.weight"}
    write_safetensors(tmp_path / "tied.safetensors", tied, bf16=set(tied))
    model = load_model(tmp_path / "tied.safetensors", LLAMA)
    assert model.lm_head is None and all(p.dtype == torch.bfloat16 for p in model.parameters())
    with attncert.capture(model) as cap:
        out = model(ids)
    assert out.dtype == torch.bfloat16 and [c.dtype for c in cap.calls] == ["bfloat16"] * 2
    w16 = read_safetensors(tmp_path / "tied.safetensors")
    ref16 = llama_reference(w16, LLAMA, ids.numpy())[0]
    # bfloat16 rounds every intermediate with u = 2^-9 ~ 2e-3: a dozen chained roundings stay below 3e-2 of the
    # largest logit (seen: 6e-3), against the float64 forward of the same (bfloat16-rounded) weights
    assert np.abs(out.float().numpy() - ref16).max() < 3e-2 * max(1.0, np.abs(ref16).max())


def test_architecture_refused():
    cases = [({**GPT2, "n_embd": 32}, "unknown key 'n_embd'"), ({**GPT2, "d_ff": 8}, "unknown key 'd_ff'"),
             ({k: v for k, v in GPT2.items() if k != "n_positions"}, "missing key 'n_positions'"),
             ({k: v for k, v in LLAMA.items() if k != "d_ff"}, "missing key 'd_ff'"),
             ({**GPT2, "style": "bert"}, "key 'style' must be 'gpt2' or 'llama'"),
             ({**GPT2, "n_head": "4"}, "key 'n_head' must be a positive integer"),
             ({**GPT2, "n_layer": True}, "key 'n_layer' must be a positive integer"),
             ({**GPT2, "n_layer": 0}, "key 'n_layer' must be a positive integer"),
             ({**LLAMA, "rope_theta": -1.0}, "key 'rope_theta' must be a positive finite number"),
             ({**LLAMA, "norm_eps": "1e-6"}, "key 'norm_eps' must be a positive finite number"),
             ({**GPT2, "d_model": 30}, "key 'd_model' (30) is not a multiple of key 'n_head' (4)"),
             ({**LLAMA, "n_kv_head": 3}, "key 'n_head' (4) is not a multiple of key 'n_kv_head' (3)"),
             ({**LLAMA, "d_model": 12, "n_head": 4, "n_kv_head": 4},
              "key 'd_model' / key 'n_head' = 3, the rotary head dimension, must be even")]
    for arch, words in cases:
        with pytest.raises(ValueError, match="^architecture: " + re.escape(words)):
            load_model("never-read.safetensors", arch)


def test_tensors_refused(tmp_path):
    w = random_weights(llama_shapes(LLAMA), seed=7)
    path = tmp_path / "bad.safetensors"

    def refused(tensors, words, **kw):
        write_safetensors(path, tensors, **kw)
        with pytest.raises(ValueError) as e:
            load_model(path, LLAMA)
        assert str(e.value).startswith(str(path) + ": ") and words in str(e.value), str(e.value)

    refused({n: a for n, a in w.items() if n != "model.layers.1.mlp.up_proj.weight"},
            "tensor 'model.layers.1.mlp.up_proj.weight' is missing (expected shape (48, 32))")
    refused({**w, "model.layers.0.self_attn.rotary_emb.inv_freq": np.ones(4, np.float32)},
            "unexpected tensor 'model.layers.0.self_attn.rotary_emb.inv_freq' (shape (4,))")
    refused({**w, "model.layers.0.self_attn.k_proj.weight": np.ones((32, 32), np.float32)},
            "tensor 'model.layers.0.self_attn.k_proj.weight' has shape (32, 32), expected (16, 32)")
    refused({**w, "model.norm.weight": w["model.norm.weight"].astype(np.float64)},
            "tensor 'model.norm.weight' has dtype F64, tensor 'model.embed_tokens.weight' F32")
    refused({**w, "model.norm.weight": np.ones(32, np.int32)}, "tensor 'model.norm.weight' has dtype I32")
    arch = tmp_path / "arch.json"
    arch.write_text("{\"style\": ")
    with pytest.raises(ValueError, match="arch.json: not valid JSON"):
        load_model(path, arch)


# ---------------------------------------------------------------------------------------------- the SDPA

def softmax_reference(q, k, v, mask=None, causal=False, scale=None):
    """float64 NumPy: per query head h, key/value head h // (H / H_kv); mask bool (True = attend) or additive."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    H, Hk = q.shape[-3], k.shape[-3]
    k, v = np.take(k, np.arange(H) // (H // Hk), axis=-3), np.take(v, np.arange(H) // (H // Hk), axis=-3)
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        s = np.where(np.tri(s.shape[-2], s.shape[-1], dtype=bool), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def sdpa_cases():
    g = torch.Generator().manual_seed(8)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    q, k, v = r(2, 3, 5, 8), r(2, 3, 7, 8), r(2, 3, 7, 6)
    keep = torch.rand(2, 1, 5, 7, generator=g) < 0.6
    keep[..., 0] = True
    add = r(5, 7).masked_fill(~keep[0, 0], float("-inf"))
    return [("plain", (q, k, v), {}), ("bool-mask", (q, k, v), dict(attn_mask=keep)),
            ("float-mask", (q, k, v), dict(attn_mask=add)), ("causal-L<S", (q, k, v), dict(is_causal=True)),
            ("causal-L>S", (r(2, 3, 7, 8), r(2, 3, 5, 8), r(2, 3, 5, 6)), dict(is_causal=True)),
            ("scale", (q, k, v), dict(scale=0.3)), ("3-D", (r(4, 5, 8), r(4, 7, 8), r(4, 7, 8)), {}),
            ("gqa", (r(2, 6, 5, 8), r(2, 2, 7, 8), r(2, 2, 7, 6)), dict(enable_gqa=True, is_causal=True)),
            ("5-D", (r(2, 2, 3, 5, 8), r(2, 2, 1, 7, 8), r(2, 2, 1, 7, 4)), dict(enable_gqa=True, attn_mask=keep))]


@pytest.mark.parametrize("case", sdpa_cases(), ids=lambda c: c[0])
def test_sdpa_matches_softmax_reference(case):
    _, (q, k, v), kw = case
    out = sdpa(q, k, v, **kw)
    mask = kw.get("attn_mask")
    ref = softmax_reference(q.numpy(), k.numpy(), v.numpy(), None if mask is None else mask.numpy(),
                            kw.get("is_causal", False), kw.get("scale"))
    assert out.dtype == torch.float64 and out.shape == ref.shape
    assert np.abs(out.numpy() - ref).max() < 1e-12


@pytest.mark.parametrize("case", sdpa_cases(), ids=lambda c: c[0])
def test_sdpa_matches_torch(case):
    if not hasattr(F, "scaled_dot_product_attention"):
        pytest.skip("torch %s has no scaled_dot_product_attention (torch >= 2.0)" % torch.__version__)
    _, (q, k, v), kw = case
    if q.dim() > 4:
        pytest.skip("torch's scaled_dot_product_attention is compared on 3-D and 4-D inputs only")
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    if ("scale" in kw and (major, minor) < (2, 1)) or ("enable_gqa" in kw and (major, minor) < (2, 5)):
        pytest.skip("torch %s's scaled_dot_product_attention lacks %s" % (torch.__version__, sorted(kw)))
    assert (sdpa(q, k, v, **kw) - F.scaled_dot_product_attention(q, k, v, **kw)).abs().max() < 1e-12


def test_gqa_is_repeat_interleave():
    g = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(*s, generator=g) for s in ((2, 6, 5, 8), (2, 2, 5, 8), (2, 2, 5, 4)))
    out = sdpa(q, k, v, is_causal=True, enable_gqa=True)
    assert torch.equal(out, sdpa(q, k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1), is_causal=True))
    tiled = sdpa(q, k.repeat(1, 3, 1, 1), v.repeat(1, 3, 1, 1), is_causal=True)  # the other head order
    assert (out - tiled).abs().max() > 0.1


def test_sdpa_refusals():
    q, k = torch.zeros(1, 4, 3, 8), torch.zeros(1, 2, 5, 8)
    for args, kw, words in [((q, q, q), dict(attn_mask=torch.ones(3, 3, dtype=torch.bool), is_causal=True),
                             "attn_mask and is_causal=True together"),
                            ((q, k, k), {}, "query has 4 heads, key and value 2: give enable_gqa=True"),
                            ((q, torch.zeros(1, 3, 5, 8), torch.zeros(1, 3, 5, 8)), dict(enable_gqa=True),
                             "query has 4 heads, key and value 3: not a multiple"),
                            ((q, q, q), dict(attn_mask=torch.ones(4, 3, dtype=torch.bool)),
                             "attn_mask has shape (4, 3), not broadcastable to (1, 4, 3, 3)"),
                            ((q, q, q), dict(attn_mask=torch.ones(3, 3, dtype=torch.int64)),
                             "attn_mask has dtype int64, expected bool or query's float32"),
                            ((q, q.double(), q), {}, "key has dtype float64, query float32"),
                            ((q, torch.zeros(1, 4, 3, 7), q), {}, "the last dimensions"),
                            ((q, q, torch.zeros(1, 4, 2, 8)), {}, "all but the last dimension must agree"),
                            ((q, torch.zeros(2, 4, 3, 8), torch.zeros(2, 4, 3, 8)), {}, "batch dimensions"),
                            ((q, q, q), dict(dropout_p=1.5), "dropout_p must be in [0, 1]")]:
        with pytest.raises(ValueError) as e:
            sdpa(*args, **kw)
        text = str(e.value)
        assert text.startswith("scaled_dot_product_attention: ") and words in text and "\n" not in text, text
    with pytest.raises(TypeError, match="query must be a torch.Tensor"):
        sdpa(np.zeros((1, 3, 8)), q, q)
    with pytest.raises(TypeError, match="is_causal must be True or False"):
        sdpa(q, q, q, is_causal=1)


class Attend(torch.nn.Module):
    """x (B, L, E) -> SDPA of its heads with the given keywords (mask, scale, dropout)."""

    def __init__(self, heads=2, **kw):
        super().__init__()
        self.qkv, self.heads, self.kw = torch.nn.Linear(16, 48), heads, kw

    def forward(self, x):
        q, k, v = (split_t(t, self.heads) for t in self.qkv(x).split(16, dim=2))
        return sdpa(q, k, v, **self.kw)


def split_t(t, n):
    B, L, E = t.shape
    return t.view(B, L, n, E // n).transpose(1, 2)


class Net(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Attend(**kw), Attend(**kw)])

    def forward(self, x):
        return [b(x) for b in self.blocks]


def test_capture_records_sdpa_and_keeps_outputs(tmp_path):
    torch.manual_seed(10)
    keep = torch.rand(2, 1, 6, 6) < 0.7
    keep[..., 0] = True
    x = torch.randn(2, 6, 16)
    for kw in (dict(attn_mask=keep, scale=0.5), dict(attn_mask=torch.randn(6, 6)), dict(dropout_p=0.3)):
        net = Net(**kw)
        torch.manual_seed(11)
        plain = net(x)
        torch.manual_seed(11)
        with attncert.capture(net) as cap:
            captured = net(x)
        assert all(torch.equal(a, b) for a, b in zip(plain, captured))
        assert [c.name for c in cap.calls] == ["blocks.0", "blocks.1"]
        for c, out in zip(cap.calls, captured):
            assert c.kind == KIND and c.q.shape == (2, 2, 6, 8) and np.array_equal(c.output, out.detach().numpy())
            if "dropout_p" in kw:
                assert c.weights is None and c.dropout_p == 0.3 and c.mask_kind == "none"
                continue
            assert c.weights.shape == (2, 2, 6, 6) and np.abs(c.weights @ c.v - c.output).max() < 1e-5
            if "scale" in kw:
                assert c.scale == "0.5" and c.mask_kind == "explicit" and c.bias is None
                assert np.array_equal(c.allowed, keep.numpy())  # (B, 1, L, S): as broadcast over heads
                assert np.all(c.weights[~np.broadcast_to(c.allowed, c.weights.shape)] == 0)
            else:
                assert c.scale == "1/sqrt(d)" and c.allowed is None
                assert np.array_equal(c.bias, kw["attn_mask"].numpy()[None, None])
    with attncert.capture(net, weights=False) as cap:  # outside the model: named so; weights=False: none
        sdpa(torch.randn(3, 4, 8), torch.randn(3, 4, 8), torch.randn(3, 4, 8))
    (c,) = cap.calls
    assert c.name == "(outside the model)" and c.q.shape == (3, 1, 4, 8) and c.weights is None
    sdpa(torch.randn(3, 4, 8), torch.randn(3, 4, 8), torch.randn(3, 4, 8))
    assert len(cap.calls) == 1  # nothing recorded after the block
    outer_net, inner_net = Net(is_causal=True), Net(is_causal=True)
    with attncert.capture(outer_net) as outer:
        with attncert.capture(inner_net) as inner:
            inner_net(x)
        outer_net(x)
    assert len(inner.calls) == 2 and [c.name for c in outer.calls] == ["blocks.0", "blocks.1"]
    assert all(c.mask_kind == "causal" for c in inner.calls + outer.calls)
    with pytest.raises(RuntimeError, match="boom"):
        with attncert.capture(outer_net) as failed:
            raise RuntimeError("boom")
    outer_net(x)
    assert not failed.calls and not any(m._forward_pre_hooks or m._forward_hooks for m in outer_net.modules())
    outer.save(tmp_path / "run")
    loaded = attncert.load_capture(tmp_path / "run")
    for a, b in zip(outer.calls, loaded.calls):
        assert b.kind == KIND and b.name == a.name and np.array_equal(a.weights, b.weights)
        assert np.array_equal(a.k, b.k) and np.array_equal(a.output, b.output) and b.mask_kind == "causal"
