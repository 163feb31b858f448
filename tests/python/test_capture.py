"""attncert.capture: every attention call of a torch model is recorded (q, k, v per head, mask, weights,
output), the model's results are bit-identical with and without capture, the records reproduce the call
in float64, and save / load_capture round-trip them."""
import json
import math
import os
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import attncert  # noqa: E402
from attncert.capture import CapturedCall  # noqa: E402

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def probabilities(c):
    """softmax(q k^T / sqrt(d) + bias, masked by allowed) of a record, in float64."""
    q, k = c.q.astype(np.float64), c.k.astype(np.float64)
    k = np.repeat(k, c.heads // c.kv_heads, axis=1)
    s = q @ np.swapaxes(k, -1, -2)
    s = s / math.sqrt(c.head_dim) if c.scale == "1/sqrt(d)" else s * float(c.scale)
    if c.bias is not None:
        s = s + c.bias
    if c.allowed is not None:
        s = np.where(c.allowed, s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)


def heads_output(c, p):
    v = np.repeat(c.v.astype(np.float64), c.heads // c.kv_heads, axis=1)
    return p @ v  # (B, H, n_q, d_v)


def mha_output(c, p):
    o = heads_output(c, p)
    B, H, L, dv = o.shape
    o = o.transpose(0, 2, 1, 3).reshape(B, L, H * dv)
    return o @ c.w_o.astype(np.float64).T + (0 if c.b_o is None else c.b_o.astype(np.float64))


def check_reproduces(c, atol=1e-5):
    p = probabilities(c)
    if c.weights is not None:
        np.testing.assert_allclose(c.weights, p, rtol=0, atol=atol)
    out = mha_output(c, p) if c.kind == "torch.nn.MultiheadAttention" else heads_output(c, p)
    np.testing.assert_allclose(c.output, out, rtol=0, atol=atol)


def same_results(a, b):
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same_results(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is None and b is None
    return torch.equal(a, b)


def run_both(model, *inputs, **kwargs):
    """(result without capture, result with capture, the Capture): the model run twice on the same inputs."""
    plain = model(*inputs, **kwargs)
    with attncert.capture(model) as cap:
        captured = model(*inputs, **kwargs)
    assert same_results(plain, captured)
    return plain, captured, cap


def encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2)


def test_encoder_records_both_layers_and_reproduces():
    model = encoder()
    x = torch.randn(2, 10, 32)
    causal = nn.Transformer.generate_square_subsequent_mask(10)
    pad = torch.zeros(2, 10, dtype=torch.bool)
    pad[1, 7:] = True
    with torch.enable_grad():
        _, _, cap = run_both(model, x, mask=causal, src_key_padding_mask=pad)
    assert [c.name for c in cap.calls] == ["layers.0.self_attn", "layers.1.self_attn"]
    expected = np.tril(np.ones((10, 10), dtype=bool))[None, None] & ~pad.numpy()[:, None, None, :]
    for c in cap.calls:
        assert c.kind == "torch.nn.MultiheadAttention" and c.dtype == "float32" and c.scale == "1/sqrt(d)"
        assert c.q.shape == c.k.shape == c.v.shape == (2, 4, 10, 8) and c.q.dtype == np.float32
        assert c.weights.shape == (2, 4, 10, 10) and c.output.shape == (2, 10, 32) and c.x.shape == (2, 10, 32)
        assert c.w_o.shape == (32, 32) and c.b_o.shape == (32,)
        assert c.mask_kind == "explicit" and c.bias is None
        assert np.array_equal(np.broadcast_to(c.allowed, (2, 4, 10, 10)), np.broadcast_to(expected, (2, 4, 10, 10)))
        check_reproduces(c)
    assert np.array_equal(cap.calls[0].x, x.numpy())


def test_mha_sequence_first_bool_mask_need_weights_both_ways():
    torch.manual_seed(1)
    mha = nn.MultiheadAttention(16, 4, dropout=0.0)  # batch_first=False: (L, B, E)
    x = torch.randn(6, 3, 16)
    causal = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)  # True = not allowed
    other = torch.rand(6, 6) < 0.4
    other.fill_diagonal_(False)
    for mask, kind in ((causal, "causal"), (other, "explicit")):
        for need in (True, False):
            _, out, cap = run_both(mha, x, x, x, attn_mask=mask, need_weights=need)
            (c,) = cap.calls
            assert c.mask_kind == kind and c.name == "" and c.bias is None
            assert np.array_equal(c.allowed, ~mask.numpy()[None, None])
            assert c.output.shape == (3, 6, 16) and np.array_equal(c.output, out[0].detach().transpose(0, 1).numpy())
            assert np.array_equal(c.x, x.transpose(0, 1).numpy())
            check_reproduces(c)


def test_float_mask_with_finite_values_gives_bias():
    torch.manual_seed(2)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    add = torch.randn(2 * 2, 5, 5, dtype=torch.float64)
    add[:, 0, 3] = float("-inf")
    _, _, cap = run_both(mha, x, x, x, attn_mask=add)
    (c,) = cap.calls
    assert c.dtype == "float64" and c.q.dtype == np.float64 and c.mask_kind == "explicit"
    assert c.allowed.shape == c.bias.shape == (2, 2, 5, 5) and not c.allowed[:, :, 0, 3].any()
    assert np.array_equal(c.bias[c.allowed], add.reshape(2, 2, 5, 5).numpy()[c.allowed])
    check_reproduces(c, atol=1e-12)


def test_cross_attention_with_kdim_vdim():
    torch.manual_seed(3)
    mha = nn.MultiheadAttention(16, 2, kdim=12, vdim=20, batch_first=True)
    q_in, k_in, v_in = torch.randn(2, 5, 16), torch.randn(2, 7, 12), torch.randn(2, 7, 20)
    _, _, cap = run_both(mha, q_in, k_in, v_in)
    (c,) = cap.calls
    assert c.q.shape == (2, 2, 5, 8) and c.k.shape == (2, 2, 7, 8) and c.v.shape == (2, 2, 7, 8)
    assert c.mask_kind == "none" and c.allowed is None and c.weights.shape == (2, 2, 5, 7)
    check_reproduces(c)


def test_unbatched_input_in_eval_mode():
    torch.manual_seed(4)
    mha = nn.MultiheadAttention(12, 3, batch_first=True).eval()
    x = torch.randn(5, 12)
    pad = torch.tensor([False, False, False, True, True])
    with torch.no_grad():
        _, _, cap = run_both(mha, x, x, x, key_padding_mask=pad)
    (c,) = cap.calls
    assert c.q.shape == (1, 3, 5, 4) and c.output.shape == (1, 5, 12) and c.x.shape == (1, 5, 12)
    assert c.weights.shape == (1, 3, 5, 5) and c.dropout_p == 0.0
    assert np.array_equal(c.allowed, np.broadcast_to(~pad.numpy(), (1, 1, 5, 5)))
    check_reproduces(c)


def test_eval_mode_fast_path_keeps_outputs():
    """Eval, no grad, batch-first self-attention: torch may take its fused path; the record still reproduces."""
    torch.manual_seed(5)
    mha = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = torch.randn(2, 6, 16)
    with torch.no_grad():
        _, _, cap = run_both(mha, x, x, x)
    (c,) = cap.calls
    assert c.weights.shape == (2, 4, 6, 6)
    check_reproduces(c)


def test_projections_are_the_modules_own_bits(monkeypatch):
    """The recorded q, k, v are bit for bit what torch's own F._in_projection_packed call produced."""
    seen = []
    real = F._in_projection_packed

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append([t.detach().clone() for t in out])
        return out

    monkeypatch.setattr(F, "_in_projection_packed", spy)
    torch.manual_seed(11)
    x, y = torch.randn(3, 5, 16), torch.randn(3, 7, 16)
    xt, yt = x.transpose(0, 1), y.transpose(0, 1)
    for batch_first, inputs in ((True, (x, x, x)), (True, (x, y, y)), (False, (xt, yt, y.transpose(0, 1))),
                                (True, (x[0], x[0], x[0]))):
        mha = nn.MultiheadAttention(16, 4, batch_first=batch_first)
        plain = mha(*inputs)
        seen.clear()
        with torch.enable_grad(), attncert.capture(mha) as cap:
            assert same_results(plain, mha(*inputs))
        (c,) = cap.calls
        B = c.batch
        for t, recorded in zip(seen[0], (c.q, c.k, c.v)):  # seen[0]: torch's call, made before the capture's
            assert np.array_equal(t.reshape(t.shape[0], B, 4, 4).permute(1, 2, 0, 3).numpy(), recorded)


def test_train_mode_dropout_keeps_outputs_and_rng():
    torch.manual_seed(6)
    mha = nn.MultiheadAttention(16, 4, dropout=0.5, batch_first=True)
    x = torch.randn(2, 6, 16)
    torch.manual_seed(7)
    plain = mha(x, x, x)
    after_plain = torch.rand(1)
    torch.manual_seed(7)
    with attncert.capture(mha) as cap:
        captured = mha(x, x, x)
    after_captured = torch.rand(1)
    assert same_results(plain, captured) and torch.equal(after_plain, after_captured)
    (c,) = cap.calls
    assert c.weights is None and c.dropout_p == 0.5
    assert np.array_equal(c.output, captured[0].detach().numpy())


def test_bfloat16_is_stored_exactly_as_float32():
    torch.manual_seed(8)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).to(torch.bfloat16)
    x = torch.randn(1, 4, 8).to(torch.bfloat16)
    _, out, cap = run_both(mha, x, x, x)
    (c,) = cap.calls
    assert c.dtype == "bfloat16" and c.q.dtype == np.float32 and c.w_o.dtype == np.float32
    assert np.array_equal(c.output, out[0].detach().float().numpy())


def test_refuses_bias_kv_and_zero_attn():
    for kw in ({"add_bias_kv": True}, {"add_zero_attn": True}):
        model = nn.Sequential(nn.Linear(8, 8))
        model.add_module("att", nn.MultiheadAttention(8, 2, **kw))
        with pytest.raises(ValueError, match=r"^attncert\.capture: att: .*not supported"):
            with attncert.capture(model):
                pass
        assert "forward" not in model.att.__dict__


def saved(tmp_path, name="cap"):
    model = encoder()
    x = torch.randn(2, 6, 32)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[0, 4:] = True
    with torch.enable_grad():
        _, _, cap = run_both(model, x, src_key_padding_mask=pad)
    path = tmp_path / name
    cap.save(str(path))
    return cap, path


def test_save_load_round_trip(tmp_path):
    cap, path = saved(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["cap"]  # no temporary directory left
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["format"] == "attncert-capture 1" and manifest["model"] == "TransformerEncoder"
    assert manifest["torch"] == torch.__version__ and len(manifest["calls"]) == 2
    entry = manifest["calls"][1]
    assert set(entry) == {"name", "kind", "dtype", "scale", "mask_kind", "batch", "heads", "kv_heads", "n_q", "n_k",
                          "head_dim", "value_dim", "dropout_p", "files"}
    assert (entry["batch"], entry["heads"], entry["n_q"], entry["head_dim"]) == (2, 4, 6, 8)
    assert entry["files"]["q"] == "call001.q.npy" and "bias" not in entry["files"]
    back = attncert.load_capture(str(path))
    assert isinstance(back, attncert.Capture) and back.model_name == "TransformerEncoder"
    assert len(back.calls) == 2
    for a, b in zip(cap.calls, back.calls):
        assert isinstance(b, CapturedCall)
        for key in ("name", "kind", "dtype", "scale", "mask_kind", "dropout_p"):
            assert getattr(a, key) == getattr(b, key)
        for key in ("q", "k", "v", "output", "allowed", "bias", "weights", "w_o", "b_o", "x"):
            x, y = getattr(a, key), getattr(b, key)
            assert (x is None and y is None) or (x.dtype == y.dtype and np.array_equal(x, y)), key


def test_save_refuses_non_empty_directory_and_empty_capture(tmp_path):
    cap, path = saved(tmp_path)
    before = sorted(os.listdir(path))
    with pytest.raises(ValueError, match="exists and is not an empty directory"):
        cap.save(str(path))
    assert sorted(os.listdir(path)) == before and sorted(os.listdir(tmp_path)) == ["cap"]
    (tmp_path / "empty").mkdir()
    cap.save(str(tmp_path / "empty"))  # an empty directory is fine
    assert (tmp_path / "empty" / "manifest.json").is_file()
    _, _, none = run_both(nn.Linear(4, 4), torch.randn(2, 4))
    with pytest.raises(ValueError) as e:
        none.save(str(tmp_path / "nothing"))
    assert str(e.value) == ("attncert.capture: no attention call was captured (the model has no "
                            "torch.nn.MultiheadAttention and calls no scaled_dot_product_attention)")
    assert not (tmp_path / "nothing").exists()


def test_load_errors_name_the_file_or_key(tmp_path):
    _, path = saved(tmp_path)
    with pytest.raises(ValueError, match="no such directory"):
        attncert.load_capture(str(tmp_path / "absent"))
    broken = tmp_path / "broken"
    shutil.copytree(path, broken)
    os.remove(broken / "call000.v.npy")
    with pytest.raises(ValueError, match=r"call000\.v\.npy: missing"):
        attncert.load_capture(str(broken))
    np.save(broken / "call000.v.npy", np.zeros((2, 4, 6, 7), dtype=np.float32))
    with pytest.raises(ValueError, match=r"call000\.v\.npy: shape \(2, 4, 6, 7\) disagrees with manifest.json"):
        attncert.load_capture(str(broken))
    manifest = json.loads((path / "manifest.json").read_text())
    for change, pattern in ((lambda m: m.update(format="other 2"), r"manifest\.json: \"format\" is 'other 2'"),
                            (lambda m: m["calls"][0].pop("n_q"), r"calls\[0\]: missing key 'n_q'"),
                            (lambda m: m["calls"][1]["files"].update(k="../x.npy"), r"files\.k: must be a plain")):
        bad = json.loads(json.dumps(manifest))
        change(bad)
        shutil.rmtree(broken)
        shutil.copytree(path, broken)
        (broken / "manifest.json").write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=pattern):
            attncert.load_capture(str(broken))
    (broken / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"manifest\.json: not valid JSON"):
        attncert.load_capture(str(broken))
    os.remove(broken / "manifest.json")
    with pytest.raises(ValueError, match=r"manifest\.json: missing"):
        attncert.load_capture(str(broken))


class Block(nn.Module):
    """A GPT-style block: fused qkv projection, F.scaled_dot_product_attention, output projection."""

    def __init__(self, embed=16, heads=2, **sdpa_kwargs):
        super().__init__()
        self.qkv, self.proj, self.heads, self.sdpa_kwargs = nn.Linear(embed, 3 * embed), nn.Linear(embed, embed), \
            heads, sdpa_kwargs

    def forward(self, x):
        B, L, E = x.shape
        q, k, v = [t.reshape(B, L, self.heads, E // self.heads).transpose(1, 2) for t in self.qkv(x).split(E, dim=2)]
        y = F.scaled_dot_product_attention(q, k, v, **self.sdpa_kwargs)
        return self.proj(y.transpose(1, 2).reshape(B, L, E))


class GPT(nn.Module):
    def __init__(self, **sdpa_kwargs):
        super().__init__()
        self.blocks = nn.ModuleList([Block(**sdpa_kwargs), Block(**sdpa_kwargs)])

    def forward(self, x):
        for b in self.blocks:
            x = x + b(x)
        return x


def check_gpt():
    torch.manual_seed(9)
    model = GPT(is_causal=True)
    _, _, cap = run_both(model, torch.randn(2, 7, 16))
    assert [c.name for c in cap.calls] == ["blocks.0", "blocks.1"]
    for c in cap.calls:
        assert c.kind == "scaled_dot_product_attention" and c.mask_kind == "causal" and c.scale == "1/sqrt(d)"
        assert c.q.shape == (2, 2, 7, 8) and c.output.shape == (2, 2, 7, 8) and c.dropout_p == 0.0
        assert c.weights is None and c.w_o is None and c.x is None and c.bias is None
        assert np.array_equal(c.allowed, np.tril(np.ones((7, 7), dtype=bool))[None, None])
        check_reproduces(c)
    torch.manual_seed(10)
    mask = torch.rand(2, 1, 7, 7) < 0.6
    mask[..., 0] = True
    model = GPT(attn_mask=mask, scale=0.25)
    _, _, cap = run_both(model, torch.randn(2, 7, 16))
    for c in cap.calls:
        assert c.mask_kind == "explicit" and c.scale == "0.25" and np.array_equal(c.allowed, mask.numpy())
        check_reproduces(c)
    assert "forward" not in model.blocks[0].__dict__ and not model.blocks[0]._forward_pre_hooks
    assert not model._forward_hooks


def test_sdpa_gpt_style():
    if not HAS_SDPA:
        pytest.skip("torch %s has no scaled_dot_product_attention (torch >= 2.0)" % torch.__version__)
    check_gpt()


def documented_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """torch 2.x's documented semantics of scaled_dot_product_attention (no dropout), in torch."""
    L, S = query.size(-2), key.size(-2)
    bias = torch.zeros(L, S, dtype=query.dtype)
    if is_causal:
        bias.masked_fill_(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        bias = bias.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else bias + attn_mask
    s = query @ key.transpose(-2, -1) * (1 / math.sqrt(query.size(-1)) if scale is None else scale)
    return torch.softmax(s + bias, dim=-1) @ value


def test_sdpa_path_with_the_documented_function(monkeypatch):
    """The SDPA recording, run on any torch: F.scaled_dot_product_attention is the documented semantics."""
    monkeypatch.setattr(F, "scaled_dot_product_attention", documented_sdpa, raising=False)
    check_gpt()
    assert F.scaled_dot_product_attention is documented_sdpa
    q = torch.randn(3, 4, 8)  # 3-D: one head; called outside any module of the model
    with attncert.capture(nn.Linear(2, 2)) as cap:
        F.scaled_dot_product_attention(q, q, q)
    (c,) = cap.calls
    assert c.name == "(outside the model)" and c.q.shape == (3, 1, 4, 8) and c.mask_kind == "none"


def test_exception_in_block_removes_patches():
    model = encoder()
    mha = model.layers[1].self_attn
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    with pytest.raises(RuntimeError, match="boom"):
        with attncert.capture(model):
            assert "forward" in mha.__dict__
            raise RuntimeError("boom")
    assert "forward" not in mha.__dict__
    with pytest.raises(Exception):
        with attncert.capture(model):
            model(torch.randn(2, 5, 31))  # wrong embedding size: torch raises inside the model
    assert "forward" not in mha.__dict__ and not any(m._forward_pre_hooks for m in model.modules())
    assert getattr(F, "scaled_dot_product_attention", None) is sdpa
