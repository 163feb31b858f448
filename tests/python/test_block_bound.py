"""attncert block-bound and attncert.block_bound: an independent re-check of the report's claims with mpmath
interval arithmetic (the exact model's enclosures contain the exact values, the measured error interval contains
the true error, every bound is above it), the Python entry point on a dict model and on a GPT-2 safetensors file
(cross-checked against attncert.models' torch GPT-2 run in float64), and the refusals of bad input.

The exact model is recomputed with mpmath's interval context (iv, 60 digits) from the exact binary64 value of
every weight and input: each real number of the exact model lies in its mpmath interval, so every comparison
below is rigorous (it could only fail spuriously if a claim held with a margin below 1e-55 relative).
The seed of the random models is printed; ATTNCERT_SEED overrides it."""
import json
import os
import subprocess

import numpy as np
import pytest

mpmath = pytest.importorskip("mpmath")
from mpmath import iv  # noqa: E402

from attncert.blocks import block_bound  # noqa: E402
from attncert.models import load_model, write_safetensors  # noqa: E402

CLI = os.environ.get("ATTNCERT_CLI")
needs_cli = pytest.mark.skipif(not CLI, reason="ATTNCERT_CLI (the attncert binary) not set")

SEED = int(os.environ.get("ATTNCERT_SEED", "20261205"))
STAGES = ("norm-1", "heads", "attention-out", "residual-1", "norm-2", "mlp", "block-out")
APPROX = ("float32", "bfloat16", "linear", "top-k:2", "random-features:8")
BOUNDS = ("bound_article", "bound_direct", "stage_bound")
iv.dps = 60


# ---------------------------------------------------------------------------------------------- random models

def f32(a):
    """a rounded to float32, held as float64 (as a trained model's weights are)."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def random_model(seed, n=6, E=8, H=2, F=16, L=2, norm="layernorm", activation="gelu_tanh", biases=True):
    """(model dict in attncert.block_bound's form, x): weights N(0, 1/E), gamma 1 + 0.1 N, betas and biases
    small, x N(0, 1); every value a float32 number."""
    rng = np.random.default_rng(seed)
    sd = 1 / np.sqrt(E)
    blocks = []
    for _ in range(L):
        w = {"norm1_gamma": f32(1 + 0.1 * rng.standard_normal(E)), "norm2_gamma": f32(1 + 0.1 * rng.standard_normal(E))}
        for name, shape in (("w_q", (E, E)), ("w_k", (E, E)), ("w_v", (E, E)), ("w_o", (E, E)), ("w1", (E, F)),
                            ("w2", (F, E))):
            w[name] = f32(sd * rng.standard_normal(shape))
        if norm == "layernorm":
            w["norm1_beta"], w["norm2_beta"] = f32(0.1 * rng.standard_normal(E)), f32(0.1 * rng.standard_normal(E))
        if biases:
            for name, size in (("b_q", E), ("b_k", E), ("b_v", E), ("b_o", E), ("b1", F), ("b2", E)):
                w[name] = f32(0.02 * rng.standard_normal(size))
        blocks.append(w)
    model = {"heads": H, "norm": norm, "activation": activation, "eps": 1e-5, "blocks": blocks,
             "description": "test_block_bound seed %d" % seed}
    return model, f32(rng.standard_normal((n, E)))


def write_model_dir(root, model, x):
    """The model directory `attncert block-bound --model` reads, written here (not by attncert.blocks)."""
    os.makedirs(root, exist_ok=True)
    meta = {k: model[k] for k in ("heads", "norm", "activation", "eps", "description")}
    meta["blocks"] = len(model["blocks"])
    with open(os.path.join(root, "model.json"), "w") as f:
        json.dump(meta, f)
    np.save(os.path.join(root, "x.npy"), x)
    for b, w in enumerate(model["blocks"]):
        for name, a in w.items():
            np.save(os.path.join(root, "block%d.%s.npy" % (b, name)), a)


def run_cli(*args):
    return subprocess.run([CLI, "block-bound"] + [str(a) for a in args], capture_output=True, text=True)


# -------------------------------------------------------------- the exact model, in intervals

def ivm(a):
    """A float64 array as a list of lists of point intervals (the exact binary64 values)."""
    a = np.atleast_2d(np.asarray(a, dtype=np.float64))
    return [[iv.mpf(float(v)) for v in row] for row in a]


def iv_affine(X, W, b):
    W = ivm(W)
    b = [iv.mpf(0)] * len(W[0]) if b is None else [iv.mpf(float(v)) for v in b]
    return [[b[j] + iv.fsum(row[k] * W[k][j] for k in range(len(row))) for j in range(len(W[0]))] for row in X]


def iv_norm(X, gamma, beta, rms, eps):
    out = []
    for row in X:
        E = len(row)
        mean = iv.mpf(0) if rms else iv.fsum(row) / E
        c = [t - mean for t in row]
        s = iv.sqrt(iv.fsum(abs(t) * abs(t) for t in c) / E + iv.mpf(eps))
        out.append([iv.mpf(float(gamma[k])) * c[k] / s + (0 if beta is None else iv.mpf(float(beta[k])))
                    for k in range(E)])
    return out


def iv_attention(Q, K, V, heads):
    """Causal multi-head attention, scale 1/sqrt(d_head), heads as consecutive column groups."""
    n, E = len(Q), len(Q[0])
    dh = E // heads
    c = 1 / iv.sqrt(iv.mpf(dh))
    out = [[None] * E for _ in range(n)]
    for h in range(heads):
        cols = range(h * dh, (h + 1) * dh)
        for i in range(n):
            w = [iv.exp(c * iv.fsum(Q[i][l] * K[j][l] for l in cols)) for j in range(i + 1)]
            total = iv.fsum(w)
            for l in cols:
                out[i][l] = iv.fsum(w[j] * V[j][l] for j in range(i + 1)) / total
    return out


def iv_activation(t, name):
    if name == "relu":
        return (t + abs(t)) / 2  # max(t, 0), enclosed also when the interval straddles 0
    if name == "silu":
        return t / (1 + iv.exp(-t))
    k = iv.sqrt(2 / iv.pi)
    y = k * (t + iv.mpf("0.044715") * t ** 3)
    tanh = 1 - 2 / (iv.exp(2 * y) + 1)
    return t * (1 + tanh) / 2


def exact_stages(model, x):
    """[block][stage] -> interval matrix of the exact model's stage output (module docstring)."""
    rms = model["norm"] == "rmsnorm"
    X = ivm(x)
    stages = []
    for w in model["blocks"]:
        s = {}
        h = s["norm-1"] = iv_norm(X, w["norm1_gamma"], w.get("norm1_beta"), rms, model["eps"])
        q, k, v = (iv_affine(h, w["w_" + t], w.get("b_" + t)) for t in "qkv")
        s["heads"] = iv_attention(q, k, v, model["heads"])
        s["attention-out"] = iv_affine(s["heads"], w["w_o"], w.get("b_o"))
        s["residual-1"] = [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(X, s["attention-out"])]
        g = s["norm-2"] = iv_norm(s["residual-1"], w["norm2_gamma"], w.get("norm2_beta"), rms, model["eps"])
        z = [[iv_activation(t, model["activation"]) for t in row] for row in iv_affine(g, w["w1"], w.get("b1"))]
        s["mlp"] = iv_affine(z, w["w2"], w.get("b2"))
        X = s["block-out"] = [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(s["residual-1"], s["mlp"])]
        stages.append(s)
    return stages


def iv_max_row_distance(A, X):
    """An interval holding max_i ||A_i - X_i||_2, A binary64 (numpy), X interval rows."""
    norms = [iv.sqrt(iv.fsum(abs(iv.mpf(float(a)) - t) ** 2 for a, t in zip(ra, rx))) for ra, rx in zip(A, X)]
    return iv.mpf([max(t.a for t in norms), max(t.b for t in norms)])


# ---------------------------------------------- float64 sketches of the approximate model's steps

def np_norm(x, gamma, beta, rms, eps):
    c = x if rms else x - x.mean(axis=1, keepdims=True)
    y = gamma * c / np.sqrt((c * c).mean(axis=1, keepdims=True) + eps)
    return y if beta is None else y + beta


def np_activation(z, name):
    if name == "relu":
        return np.maximum(z, 0)
    if name == "silu":
        return z / (1 + np.exp(-z))
    return 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))


def np_affine(x, w, b):
    return x @ w + (0 if b is None else b)


def np_top_k(q, k, v, K):
    """Causal softmax over the K largest scores of each row (ties: lower key first), in float64."""
    n, d = q.shape
    S = q @ k.T / np.sqrt(d)
    out = np.zeros((n, v.shape[1]))
    for i in range(n):
        keep = sorted(range(i + 1), key=lambda j: (-S[i, j], j))[:K]
        p = np.exp(S[i, keep] - S[i, keep].max())
        out[i] = (p / p.sum()) @ v[keep]
    return out


def np_linear(q, k, v):
    """Causal linear attention with elu + 1 features (Katharopoulos et al.), in float64."""
    phi = lambda x: np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))
    K = phi(q) @ phi(k).T
    out = np.zeros((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        out[i] = (K[i, : i + 1] / K[i, : i + 1].sum()) @ v[: i + 1]
    return out


# ------------------------------------------------------------------ (1) the claims, re-checked

VARIANTS = [("layernorm", "gelu_tanh", 2, True), ("rmsnorm", "silu", 1, False), ("layernorm", "relu", 1, True)]


@needs_cli
@pytest.mark.parametrize("norm,activation,blocks,biases", VARIANTS, ids=["layernorm-gelu", "rmsnorm-silu", "relu"])
def test_claims_against_mpmath(tmp_path, norm, activation, blocks, biases):
    seed = SEED + VARIANTS.index((norm, activation, blocks, biases))
    print("test_claims_against_mpmath: seed %d (ATTNCERT_SEED=%d)" % (seed, SEED))
    model, x = random_model(seed, L=blocks, norm=norm, activation=activation, biases=biases)
    write_model_dir(tmp_path / "model", model, x)
    dump = tmp_path / "dump"
    out = tmp_path / "report.json"
    p = run_cli("--model", tmp_path / "model", "--approx", ",".join(APPROX), "--dump", dump, "--format", "json",
                "--out", out)
    assert p.returncode == 0, p.stderr
    report = json.loads(out.read_text())
    st = report["settings"]
    assert (st["tokens"], st["width"], st["heads"], st["mlp_width"], st["depth"]) == (6, 8, 2, 16, blocks)
    assert (st["norm"], st["activation"], st["eps"]) == (norm, activation, 1e-5)
    assert [a["approximation"] for a in report["approximations"]] == list(APPROX)

    def load(name):
        return np.load(dump / (name + ".npy"))

    exact = exact_stages(model, x)
    rms = norm == "rmsnorm"
    # the exact model's enclosures: a few ulps wide, and containing the exact values
    for b in range(blocks):
        for s in STAGES:
            mid, rad = load("exact.b%d.%s.mid" % (b, s)), load("exact.b%d.%s.rad" % (b, s))
            assert mid.shape == rad.shape == (6, 8)
            assert np.all(rad >= 0) and np.all(rad <= 4 * np.spacing(np.abs(mid))), (b, s)
            for i in range(6):
                for k in range(8):
                    m, r, t = iv.mpf(float(mid[i, k])), iv.mpf(float(rad[i, k])), exact[b][s][i][k]
                    assert (m - r <= t) is True and (t <= m + r) is True, \
                        "seed %d: exact.b%d.%s[%d,%d] = %s outside [%r - %r, %r + %r]" % (
                            seed, b, s, i, k, t, mid[i, k], rad[i, k], mid[i, k], rad[i, k])

    for ap in report["approximations"]:
        name = ap["approximation"]
        rows = ap["stages"]
        assert [(r["block"], r["stage"]) for r in rows] == [(b + 1, s) for b in range(blocks) for s in STAGES]
        xin = x
        for b, w in enumerate(model["blocks"]):
            mids = {s: load("%s.b%d.%s.mid" % (name, b, s)) for s in STAGES}
            # the dumped approximate trajectory is the approximate model: each stage from the previous one
            heads = [load("%s.b%d.h%d.out" % (name, b, h)) for h in range(2)]
            assert np.array_equal(mids["heads"], np.hstack(heads)), (name, b)
            close = dict(rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(mids["norm-1"], np_norm(xin, w["norm1_gamma"], w.get("norm1_beta"), rms, 1e-5),
                                       **close)
            np.testing.assert_allclose(mids["attention-out"], np_affine(mids["heads"], w["w_o"], w.get("b_o")), **close)
            assert np.array_equal(mids["residual-1"], xin + mids["attention-out"]), (name, b)
            np.testing.assert_allclose(mids["norm-2"], np_norm(mids["residual-1"], w["norm2_gamma"],
                                                               w.get("norm2_beta"), rms, 1e-5), **close)
            z = np_activation(np_affine(mids["norm-2"], w["w1"], w.get("b1")), activation)
            np.testing.assert_allclose(mids["mlp"], np_affine(z, w["w2"], w.get("b2")), **close)
            assert np.array_equal(mids["block-out"], mids["residual-1"] + mids["mlp"]), (name, b)
            if name in ("top-k:2", "linear"):  # the kernel is what its name says
                q, k, v = (np_affine(mids["norm-1"], w["w_" + t], w.get("b_" + t)) for t in "qkv")
                for h in range(2):
                    c = slice(4 * h, 4 * h + 4)
                    ref = np_top_k(q[:, c], k[:, c], v[:, c], 2) if name == "top-k:2" else np_linear(q[:, c], k[:, c], v[:, c])
                    np.testing.assert_allclose(heads[h], ref, rtol=1e-10, atol=1e-12)
            # the claims
            for s in STAGES:
                row = rows[b * len(STAGES) + STAGES.index(s)]
                true = iv_max_row_distance(mids[s], exact[b][s])
                where = "seed %d, %s, block %d, %s: true error %s" % (seed, name, b + 1, s, true)
                assert 0 <= row["measured_lo"] <= row["measured_hi"], where
                assert (iv.mpf(row["measured_lo"]) <= true) is True, "%s < measured_lo %r" % (where, row["measured_lo"])
                assert (true <= iv.mpf(row["measured_hi"])) is True, "%s > measured_hi %r" % (where, row["measured_hi"])
                for key in BOUNDS:
                    if row[key] is not None:
                        assert (true <= iv.mpf(row[key])) is True, "%s > %s %r" % (where, key, row[key])
                # the enclosure of the measured error is tight (the exact model is enclosed to a few ulps)
                assert row["measured_hi"] - row["measured_lo"] <= 1e-6 * row["measured_hi"] + 1e-14, where
            xin = mids["block-out"]


# ------------------------------------------------------------------ (2) the Python entry point

@needs_cli
def test_dict_model_matches_the_command_line(tmp_path):
    model, x = random_model(SEED + 10, L=2)
    report = block_bound(model, x=x, approx=["float32", "top-k:2"], depth=1, seed=7, target_ratio=100)
    st = report["settings"]
    assert report["tool"] == "attncert" and report["model"] == model["description"]
    assert (st["tokens"], st["width"], st["heads"], st["mlp_width"], st["depth"]) == (6, 8, 2, 16, 1)
    assert (st["norm"], st["activation"], st["eps"], st["seed"], st["target_ratio"]) == \
        ("layernorm", "gelu_tanh", 1e-5, 7, 100.0)
    assert [a["approximation"] for a in report["approximations"]] == ["float32", "top-k:2"]
    # the same numbers as the command line on a directory written by this test
    write_model_dir(tmp_path / "model", model, x)
    p = run_cli("--model", tmp_path / "model", "--approx", "float32,top-k:2", "--depth", 1, "--seed", 7,
                "--target-ratio", 100, "--format", "json", "--out", tmp_path / "r.json")
    assert p.returncode == 0, p.stderr
    direct = json.loads((tmp_path / "r.json").read_text())
    assert report["approximations"] == direct["approximations"]
    assert report["settings"] == direct["settings"]
    # and with the default approximations, a comma-separated text too
    assert [a["approximation"] for a in block_bound(model, x=x, depth=1)["approximations"]] == \
        ["float32", "bfloat16", "top-k:32", "random-features:64"]
    assert [a["approximation"] for a in block_bound(model, x=x, approx="bfloat16", depth=1)["approximations"]] == \
        ["bfloat16"]


GPT2_ARCH = {"style": "gpt2", "n_layer": 2, "n_head": 2, "d_model": 8, "vocab_size": 11, "n_positions": 16}
IDS = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]


def tiny_gpt2(path, seed):
    rng = np.random.default_rng(seed)
    E, V, P = 8, 11, 16

    def t(*shape, sd=0.3, mean=0.0):
        return (mean + sd * rng.standard_normal(shape)).astype(np.float32)

    tensors = {"wte.weight": t(V, E, sd=1.0), "wpe.weight": t(P, E, sd=0.5)}
    for i in range(2):
        p = "h.%d." % i
        tensors.update({p + "ln_1.weight": t(E, sd=0.1, mean=1), p + "ln_1.bias": t(E, sd=0.1),
                        p + "attn.c_attn.weight": t(E, 3 * E), p + "attn.c_attn.bias": t(3 * E, sd=0.05),
                        p + "attn.c_proj.weight": t(E, E), p + "attn.c_proj.bias": t(E, sd=0.05),
                        p + "ln_2.weight": t(E, sd=0.1, mean=1), p + "ln_2.bias": t(E, sd=0.1),
                        p + "mlp.c_fc.weight": t(E, 4 * E), p + "mlp.c_fc.bias": t(4 * E, sd=0.05),
                        p + "mlp.c_proj.weight": t(4 * E, E, sd=0.2), p + "mlp.c_proj.bias": t(E, sd=0.05)})
    tensors.update({"ln_f.weight": t(E, sd=0.1, mean=1), "ln_f.bias": t(E, sd=0.1)})
    write_safetensors(path, tensors)


@needs_cli
def test_gpt2_safetensors(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "gpt2.safetensors"
    tiny_gpt2(path, SEED + 20)
    arch_file = tmp_path / "arch.json"
    arch_file.write_text(json.dumps(GPT2_ARCH))
    report = block_bound(str(path), architecture=str(arch_file), ids=IDS, approx=("float32", "top-k:2"))
    st = report["settings"]
    assert (st["tokens"], st["width"], st["heads"], st["mlp_width"], st["depth"]) == (len(IDS), 8, 2, 32, 2)
    assert (st["norm"], st["activation"], st["eps"]) == ("layernorm", "gelu_tanh", 1e-5)
    for ap in report["approximations"]:
        assert len(ap["stages"]) == 2 * len(STAGES)
        for row in ap["stages"]:
            for key in BOUNDS:
                assert row[key] is None or row[key] >= row["measured_lo"], (ap["approximation"], row)
    # the exact model block-bound ran is the GPT-2 of the file: "scale" (max_i ||x_i||_2, upper end, of the exact
    # model) at each block's output against attncert.models' torch GPT-2 run in float64
    model = load_model(str(path), GPT2_ARCH).double()
    outs = []
    handles = [blk.register_forward_hook(lambda mod, inp, out: outs.append(out.detach())) for blk in model.h]
    with torch.no_grad():
        model(torch.tensor([IDS], dtype=torch.int64))
    for hnd in handles:
        hnd.remove()
    want = [float(o[0].norm(dim=-1).max()) for o in outs]
    for ap in report["approximations"]:
        got = [r["scale"] for r in ap["stages"] if r["stage"] == "block-out"]
        np.testing.assert_allclose(got, want, rtol=1e-12)
    # a 'transformer.'-prefixed file (as Hugging Face saves GPT2LMHeadModel) gives the same report
    from attncert.models import read_safetensors
    prefixed = tmp_path / "prefixed.safetensors"
    write_safetensors(prefixed, {"transformer." + n: a for n, a in read_safetensors(path).items()})
    again = block_bound(str(prefixed), architecture=GPT2_ARCH, ids=np.array([IDS]), approx=("float32", "top-k:2"))
    assert again["approximations"] == report["approximations"]


# ---------------------------------------------------------------------------------------------- (3) bad input

@needs_cli
def test_bad_model_directory_one_line(tmp_path):
    model, x = random_model(SEED + 30, L=1)
    model["blocks"][0]["w_q"] = model["blocks"][0]["w_q"][:, :7]
    write_model_dir(tmp_path / "model", model, x)
    out = tmp_path / "r.json"
    p = run_cli("--model", tmp_path / "model", "--format", "json", "--out", out)
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncert: ") and "w_q" in lines[0], p.stderr
    assert p.stdout == "" and not out.exists()
    # the same model through Python: the command line's line as a ValueError
    with pytest.raises(ValueError, match=r"^attncert: .*w_q") as e:
        block_bound(model, x=x)
    assert "\n" not in str(e.value)


@needs_cli
def test_bad_input_in_python(tmp_path, monkeypatch):
    model, x = random_model(SEED + 40, L=1)
    bad = x.copy()
    bad[2, 3] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        block_bound(model, x=bad)
    bad[2, 3] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        block_bound(model, x=bad)
    with pytest.raises(ValueError, match="2-D"):
        block_bound(model, x=x[0])
    inf_weight = {**model, "blocks": [dict(model["blocks"][0], w1=np.full((8, 16), np.inf))]}
    with pytest.raises(ValueError, match="w1"):
        block_bound(inf_weight, x=x)
    with pytest.raises(ValueError, match="unknown array"):
        block_bound({**model, "blocks": [dict(model["blocks"][0], w_qq=np.eye(8))]}, x=x)
    with pytest.raises(ValueError, match="approximation"):
        block_bound(model, x=x, approx="top-k")  # the command line's refusal: top-k needs K
    llama = {"style": "llama", "n_layer": 1, "n_head": 2, "d_model": 8, "vocab_size": 11, "d_ff": 16}
    with pytest.raises(ValueError, match="rotary embeddings and SwiGLU") as e:
        block_bound(str(tmp_path / "missing.safetensors"), architecture=llama, ids=[1, 2])
    assert "\n" not in str(e.value)
    path = tmp_path / "gpt2.safetensors"
    tiny_gpt2(path, SEED + 41)
    with pytest.raises(ValueError, match="ids"):
        block_bound(str(path), architecture=GPT2_ARCH, ids=[1, 11])  # 11 is past the vocabulary
    with pytest.raises(ValueError, match="n_positions"):
        block_bound(str(path), architecture=GPT2_ARCH, ids=[1] * 17)
    monkeypatch.setenv("ATTNCERT_CLI", str(tmp_path / "no-such-binary"))
    with pytest.raises(RuntimeError, match="ATTNCERT_CLI"):
        block_bound(model, x=x)


@needs_cli
def test_timeout():
    model, x = random_model(SEED + 50, L=1)
    with pytest.raises(TimeoutError, match="time limit"):
        block_bound(model, x=x, timeout=1e-9)  # --max-seconds 1e-9: past before the first block


# ------------------------------------------------------------------ the README's numbers


@needs_cli
def test_readme_numbers():
    """Every number the README's block-bound section quotes for the default run is what the default run prints
    (the README states each one rounded as here)."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md"), encoding="utf-8") as f:
        readme = " ".join(f.read().split())
    p = run_cli("--approx", "float32,bfloat16,top-k:32,random-features:64,linear", "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = {(a["approximation"], s["block"], s["stage"]): s for a in json.loads(p.stdout)["approximations"]
            for s in a["stages"]}

    def g(x, digits):  # x to `digits` significant digits, as the README writes it
        return "%.*g" % (digits, x)

    def sci(x, digits):  # 1.05·10³ form
        m, e = ("%.*e" % (digits - 1, x)).split("e")
        sup = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
        return m + "·10" + str(int(e)).translate(sup)

    out = lambda ap, b: rows[(ap, b, "block-out")]
    expect = [
        "**%s×** (float32)" % g(out("float32", 1)["ratio_direct"], 3),
        "**%.1f×** (bfloat16)" % out("bfloat16", 1)["ratio_direct"],
        "(%se-7 and %se-2)" % (g(out("float32", 1)["measured_lo"] * 1e7, 3), g(out("bfloat16", 1)["measured_lo"] * 1e2, 3)),
        "the article's within %s× and %s×" % (g(out("float32", 1)["ratio_article"], 2), g(out("bfloat16", 1)["ratio_article"], 2)),
        "%s× (float32) and %s× (bfloat16) the measured error" % (sci(out("float32", 2)["ratio_direct"], 3),
                                                                 sci(out("bfloat16", 2)["ratio_direct"], 2)),
        "at block 4 %s× (float32) or +∞" % sci(out("float32", 4)["ratio_direct"], 2),
        "top-k:32 (measured error %s at block 1) and random-features:64 (%s)" % (
            g(out("top-k:32", 1)["measured_lo"], 3), g(out("random-features:64", 1)["measured_lo"], 3)),
        "direct bounds are %s× and %s× at block 1" % (g(out("top-k:32", 1)["ratio_direct"], 2),
                                                      g(out("random-features:64", 1)["ratio_direct"], 2)),
        "measured %s, direct bound %s× at block 1" % (g(out("linear", 1)["measured_lo"], 3), g(out("linear", 1)["ratio_direct"], 2)),
    ]
    for text in expect:
        assert text in readme, text
    assert out("bfloat16", 4)["bound_direct"] is None  # +∞
    for ap in ("float32", "bfloat16"):  # the restarted stage bounds at every block output
        assert all(out(ap, b)["ratio_stage"] <= 1.5 for b in range(1, 5)), ap
