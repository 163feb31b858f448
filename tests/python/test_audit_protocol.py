"""attncert.audit's protocol beyond the heads: the residual object X + concat_h(A_h V_h) W_O^T + b_O (its residual
stream seen where the layer really adds it, its singular values against 200-bit mpmath, the rank of X against an
exact rational rank), the spec's target contrast (both enclosures against 200-bit mpmath, the outcome following
the margin), criteria registered before the audit (Python and the command line), the sources an audit starts from
(a torch model, safetensors GPT-2 / LLaMA-style models), and the progress lines on standard error."""
import hashlib
import json
import math
import os
import re
import subprocess
from datetime import datetime
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mpmath = pytest.importorskip("mpmath")
sympy = pytest.importorskip("sympy")
nn = torch.nn

import attncert  # noqa: E402
from attncert.models import write_safetensors  # noqa: E402

CLI = os.environ.get("ATTNCERT_CLI")
needs_cli = pytest.mark.skipif(not CLI, reason="ATTNCERT_CLI (the attncert binary) not set")

OUTCOMES = {"rank-kept/within-tolerance", "rank-kept/exceeds-tolerance", "rank-reduced/adequate",
            "rank-reduced/inadequate", "undecided"}
MEETS = {"rank-kept/within-tolerance", "rank-reduced/adequate"}
FAILS = {"rank-kept/exceeds-tolerance", "rank-reduced/inadequate"}
N, E = 6, 32  # tokens and width of the encoders' input
NAMES = ["layers.0.self_attn", "layers.1.self_attn"]


# ---------------------------------------------------------------------------------------------- inputs

def structured_input():
    """(2, N, E) float32.  Batch 0: small integers with rows r0, r0, r1, r2, r0 + r1, r1 - r2 (rank 3, exactly:
    integer sums are exact in float32); batch 1: normal draws with row 1 a copy of row 0.  In both batches rows 0
    and 1 are equal, so under a causal mask the heads' output rows 0 and 1 are equal too (row 1 averages two
    equal value rows) and every residual object has a zero singular value."""
    g = torch.Generator().manual_seed(1)
    r = torch.randint(-3, 4, (3, E), generator=g).float()
    x0 = torch.stack([r[0], r[0], r[1], r[2], r[0] + r[1], r[1] - r[2]])
    x1 = torch.randn(N, E, generator=g)
    x1[1] = x1[0]
    return torch.stack([x0, x1])


def causal_mask(n=N):
    return nn.Transformer.generate_square_subsequent_mask(n)


def encoder(norm_first, batch_first=True, dropout=0.0):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(E, 4, dim_feedforward=64, dropout=dropout, batch_first=batch_first,
                                       norm_first=norm_first)
    return nn.TransformerEncoder(layer, 2)


def run_encoder(model, x, norm_first):
    """Captures model(x) under torch.enable_grad() with a causal mask; also returns, per layer, the tensor the
    layer computes as residual stream + attention output, observed directly: the input of norm1 (post-norm:
    norm1(x + sa(x))) or of norm2 (pre-norm: x + sa(norm1(x)) is what norm2 reads)."""
    seen = []
    hooks = [getattr(layer, "norm2" if norm_first else "norm1").register_forward_pre_hook(
        lambda module, inputs: seen.append(inputs[0].detach().clone())) for layer in model.layers]
    try:
        with torch.enable_grad(), attncert.capture(model) as cap:
            model(x, mask=causal_mask(x.shape[1] if model.layers[0].self_attn.batch_first else x.shape[0]))
    finally:
        for h in hooks:
            h.remove()
    return cap, seen


def bits(a):
    a = np.ascontiguousarray(a)
    assert a.dtype == np.float32
    return a.view(np.uint32)


def one_line(e):
    text = str(e.value)
    assert text and "\n" not in text, text
    return text


def head(d, layer, h, batch=0):
    hs = [x for x in d["layers"][layer]["heads"] if x["head"] == h and x["batch"] == batch]
    assert len(hs) == 1
    return hs[0]


# ---------------------------------------------------------------------------------------------- mpmath (200 bits)

def mp_head_outputs(call, b):
    """[A_h V_h for every head h] of batch b as lists of mpf rows, A_h the exact softmax of the captured q, k
    (scale 1/sqrt(d), the captured mask); call inside mpmath.workprec(200)."""
    q, k, v = (a[b].astype(np.float64) for a in (call.q, call.k, call.v))
    H, n, d = q.shape
    allowed = None if call.allowed is None else call.allowed[min(b, call.allowed.shape[0] - 1)]
    c = 1 / mpmath.sqrt(d)
    out = []
    for h in range(H):
        g = h // (H // k.shape[0])
        rows = []
        for i in range(n):
            ok = [allowed is None or allowed[min(h, allowed.shape[0] - 1), i, j] for j in range(k.shape[1])]
            s = [c * mpmath.fsum(mpmath.mpf(q[h, i, t]) * mpmath.mpf(k[g, j, t]) for t in range(d)) if ok[j] else None
                 for j in range(k.shape[1])]
            top = max(x for x in s if x is not None)
            e = [mpmath.exp(x - top) if x is not None else mpmath.mpf(0) for x in s]
            z = mpmath.fsum(e)
            rows.append([mpmath.fsum(e[j] / z * mpmath.mpf(v[g, j, t]) for j in range(len(e)))
                         for t in range(v.shape[2])])
        out.append(rows)
    return out


def mp_model_head_output(call, b, h):
    """A_model V of head h, batch b: the captured probabilities times the captured values, exactly."""
    H, Hkv = call.q.shape[1], call.k.shape[1]
    W, v = call.weights[b, h].astype(np.float64), call.v[b, h // (H // Hkv)].astype(np.float64)
    return [[mpmath.fsum(mpmath.mpf(W[i, j]) * mpmath.mpf(v[j, t]) for j in range(W.shape[1]))
             for t in range(v.shape[1])] for i in range(W.shape[0])]


def mp_residual(call, b):
    """X + concat_h(A_h V_h) W_O^T + b_O of batch b at 200 bits, from the captured float arrays (exact inputs)."""
    with mpmath.workprec(200):
        heads = mp_head_outputs(call, b)
        concat = mpmath.matrix([[x for o in heads for x in o[i]] for i in range(len(heads[0]))])
        P = concat * mpmath.matrix(call.w_o.astype(np.float64).T.tolist())
        X = call.residual[b].astype(np.float64)
        b_o = np.zeros(X.shape[1]) if call.b_o is None else call.b_o.astype(np.float64)
        return mpmath.matrix([[mpmath.mpf(X[i, j]) + P[i, j] + mpmath.mpf(b_o[j]) for j in range(X.shape[1])]
                              for i in range(X.shape[0])])


def mp_singular_values(M):
    with mpmath.workprec(200):
        return sorted(mpmath.svd_r(M, compute_uv=False), reverse=True)


def mp_distance(a, b):
    return mpmath.sqrt(mpmath.fsum((x - y) ** 2 for x, y in zip(a, b)))


def mp(text):
    with mpmath.workprec(200):
        return mpmath.mpf(text)


def encloses(interval, x):
    with mpmath.workprec(200):
        return mpmath.mpf(interval["lo"]) <= x <= mpmath.mpf(interval["hi"])


def rational_rank(a):
    """The exact rank of a float matrix: its entries converted exactly (Fraction) into sympy rationals."""
    rows = [[sympy.Rational(f.numerator, f.denominator) for f in map(Fraction, map(float, row))] for row in a]
    return int(sympy.Matrix(rows).rank())


# ---------------------------------------------------------------------------------------------- 1. residual

@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_residual_plus_output_is_what_the_layer_adds(norm_first, batch_first):
    x = structured_input()
    model = encoder(norm_first, batch_first)
    cap, seen = run_encoder(model, x if batch_first else x.transpose(0, 1), norm_first)
    assert [c.name for c in cap.calls] == NAMES and len(seen) == 2
    for c, s in zip(cap.calls, seen):
        s = (s if batch_first else s.transpose(0, 1)).numpy()
        assert c.residual is not None and c.residual.shape == c.output.shape == (2, N, E)
        assert np.array_equal(bits(c.residual + c.output), bits(s)), c.name  # float32 sums: torch's bits
    # the first layer's residual stream is the model's input itself (batch-first, as the output)
    assert np.array_equal(bits(cap.calls[0].residual), bits(x.numpy()))


@pytest.fixture(scope="module", params=[False, True], ids=["post-norm", "pre-norm"])
def residual_audit(request):
    cap, _ = run_encoder(encoder(request.param), structured_input(), request.param)
    return cap, attncert.audit(cap, {"objects": ["residual"]}).to_dict()


def test_default_spec_measures_the_residual_object():
    assert "residual" in attncert.default_audit_spec()["objects"]


def test_residual_singular_values_enclose_the_200_bit_ones(residual_audit):
    cap, d = residual_audit
    for li, c in enumerate(cap.calls):
        layer = d["layers"][li]
        assert layer["name"] == c.name and [r["batch"] for r in layer["residual"]] == [0, 1]
        for b, r in enumerate(layer["residual"]):
            assert r["computed"] is True, r
            # the premise of the construction: rows 0 and 1 of X and of every value matrix are equal bit for bit
            assert np.array_equal(c.residual[b, 0], c.residual[b, 1])
            assert np.array_equal(c.v[b, :, 0], c.v[b, :, 1])
            sigma = mp_singular_values(mp_residual(c, b))
            svs = r["singular_values"]
            assert len(svs) == len(sigma) == min(N, E)
            for s, enc in zip(sigma, svs):
                assert encloses(enc, s), (c.name, b, s, enc)
                assert mp(enc["hi"]) - mp(enc["lo"]) <= mp("1e-10") * sigma[0]  # tight, not just sound
            # the exact rank: equal rows 0 and 1 give one zero singular value (200-bit error ~1e-55), the others are
            # O(1); the gap makes the count exact
            assert all(s < mp("1e-40") or s > mp("1e-3") for s in sigma), sigma
            true_rank = sum(1 for s in sigma if s > mp("1e-3"))
            assert true_rank == N - 1
            e = r["exact_rank"]
            assert e["lo"] <= true_rank <= e["hi"]
            assert e["lo"] == true_rank and e["hi"] == min(N, E)  # every nonzero one certified; hi structural
            # numerical rank of the model's own X + output (binary64 sum), numpy's rule with binary32's eps
            m = c.residual[b].astype(np.float64) + c.output[b].astype(np.float64)
            s64 = np.linalg.svd(m, compute_uv=False)
            tol = s64[0] * max(m.shape) * np.finfo(np.float32).eps
            assert not np.any(np.abs(s64 - tol) < 0.5 * tol)  # clear of the threshold
            assert [(n["format"], n["policy"], n["rank"]) for n in r["numerical_ranks"]] == [
                ("binary32", "numpy", int(np.sum(s64 > tol)))]


def test_residual_stream_rank_is_the_exact_rational_rank(residual_audit):
    cap, d = residual_audit
    ranks = {}
    for li, c in enumerate(cap.calls):
        for b, r in enumerate(d["layers"][li]["residual"]):
            ranks[li, b] = rational_rank(c.residual[b])
            assert r["residual_stream_exact_rank"] == ranks[li, b], (li, b)
    assert ranks[0, 0] == 3 and ranks[0, 1] == N - 1  # the construction of the input, seen independently
    # the bypass carries less rank than the object it is added to (3 against 5 on the integer batch)
    assert d["layers"][0]["residual"][0]["exact_rank"]["lo"] > ranks[0, 0]


def test_residual_is_not_known_outside_an_encoder_layer_or_under_dropout():
    torch.manual_seed(2)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(1, 4, 8)
    with torch.enable_grad(), attncert.capture(mha) as cap:
        mha(x, x, x)
    assert cap.calls[0].residual is None
    d = attncert.audit(cap, {"objects": ["residual", "multi_head"]}).to_dict()
    assert d["layers"][0]["multi_head"][0]["computed"] is True  # W_O is there: only X is missing
    (r,) = d["layers"][0]["residual"]
    assert r["computed"] is False and r["batch"] == 0 and "residual stream is not known" in r["why"]
    # a layer whose dropout1 is active (train mode, p > 0) adds a dropped-out output: no residual is recorded
    model = encoder(False, dropout=0.25)
    x = structured_input()
    cap, _ = run_encoder(model, x, False)
    assert [c.residual for c in cap.calls] == [None, None]
    d = attncert.audit(cap, {"objects": ["residual"]}).to_dict()
    assert all(r["computed"] is False and "residual stream" in r["why"]
               for layer in d["layers"] for r in layer["residual"])
    # the same model in eval mode (dropout inactive, still under enable_grad): recorded, and what the layer adds
    model.eval()
    cap, seen = run_encoder(model, x, False)
    for c, s in zip(cap.calls, seen):
        assert c.residual is not None and np.array_equal(bits(c.residual + c.output), bits(s.numpy()))
    # a decoder layer: its self-attention adds to the layer's input, its cross-attention is not recorded as such
    torch.manual_seed(3)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True), 1)
    tgt, memory = torch.randn(1, 5, 16), torch.randn(1, 7, 16)
    with torch.enable_grad(), attncert.capture(dec) as cap:
        dec(tgt, memory, tgt_mask=causal_mask(5))
    calls = {c.name: c for c in cap.calls}
    assert set(calls) == {"layers.0.self_attn", "layers.0.multihead_attn"}
    assert np.array_equal(bits(calls["layers.0.self_attn"].residual), bits(tgt.numpy()))
    assert calls["layers.0.multihead_attn"].residual is None


def test_self_attention_called_outside_its_layer_has_no_residual():
    """The residual is the input of the layer run that adds the call's output to it: a call of the layer's
    self_attn made after the layer ran (nothing is added to the layer's old input) has none."""
    torch.manual_seed(6)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
    x1, x2 = torch.randn(1, 3, 8), torch.randn(1, 3, 8)
    with torch.enable_grad(), attncert.capture(layer) as cap:
        layer(x1)
        layer.self_attn(x2, x2, x2)
    assert [c.name for c in cap.calls] == ["self_attn", "self_attn"]
    assert np.array_equal(bits(cap.calls[0].residual), bits(x1.numpy()))
    assert cap.calls[1].residual is None, "the second call got the residual of the earlier layer run"


# ---------------------------------------------------------------------------------------------- 2. target contrast

@pytest.fixture(scope="module")
def contrast_capture():
    """A post-norm encoder on normal inputs (2, N, E) with the head outputs A_h V_h (exact softmax) and
    A_model V (the captured probabilities) in mpmath at 200 bits, {(layer, batch, head): rows}."""
    torch.manual_seed(4)
    x = torch.randn(2, N, E)
    cap, _ = run_encoder(encoder(False), x, False)
    exact, model = {}, {}
    with mpmath.workprec(200):
        for li, c in enumerate(cap.calls):
            for b in range(2):
                for h, rows in enumerate(mp_head_outputs(c, b)):
                    exact[li, b, h] = rows
                    model[li, b, h] = mp_model_head_output(c, b, h)
    return cap, exact, model


def contrast_spec(between, pair, margin):
    return {"objects": ["attention"], "allowable_output_error": 0.5,
            "target_contrast": {between: list(pair), "margin": margin}}


def mp_contrasts(between, pair, outputs):
    """{(layer, batch, head): contrast} at 200 bits: ||O_i - O_j||_2 of every batch (tokens), or
    max_r ||O^{b1}_r - O^{b2}_r||_2 on the heads of batch b1 (batches)."""
    with mpmath.workprec(200):
        out = {}
        for (li, b, h), rows in outputs.items():
            if between == "tokens":
                out[li, b, h] = mp_distance(rows[pair[0]], rows[pair[1]])
            elif b == pair[0]:
                out[li, b, h] = max(mp_distance(r, s) for r, s in zip(rows, outputs[li, pair[1], h]))
        return out


@pytest.mark.parametrize("between,pair", [("tokens", (4, 1)), ("batches", (1, 0))])
def test_target_contrast_encloses_the_200_bit_distances(contrast_capture, between, pair):
    cap, exact, model = contrast_capture
    want_exact, want_model = mp_contrasts(between, pair, exact), mp_contrasts(between, pair, model)
    d = attncert.audit(cap, contrast_spec(between, pair, 0.5)).to_dict()
    assert d["spec"]["target_contrast"][between] == list(pair) and d["spec"]["target_contrast"]["margin"] == 0.5
    carriers = 0
    for li in range(2):
        for h in d["layers"][li]["heads"]:
            carries = between == "tokens" or h["batch"] == pair[0]  # batches: only the first named input's heads
            assert ("target_contrast" in h) == carries, (li, h["batch"], h["head"])
            if not carries:
                continue
            carriers += 1
            tc, key = h["target_contrast"], (li, h["batch"], h["head"])
            assert tc["margin"] == 0.5
            assert encloses(tc["exact"], want_exact[key]), (key, tc, want_exact[key])
            assert encloses(tc["model"], want_model[key]), (key, tc, want_model[key])
            assert mp(tc["exact"]["hi"]) - mp(tc["exact"]["lo"]) <= mp("1e-12") * want_exact[key]
            assert mp(tc["model"]["hi"]) - mp(tc["model"]["lo"]) <= mp("1e-12") * want_model[key]
    assert carriers == (16 if between == "tokens" else 8)


@pytest.mark.parametrize("between,pair", [("tokens", (4, 1)), ("batches", (1, 0))])
def test_outcomes_follow_the_margin(contrast_capture, between, pair):
    cap, _, model = contrast_capture
    want = mp_contrasts(between, pair, model)
    base = attncert.audit(cap, {"objects": ["attention"], "allowable_output_error": 0.5}).to_dict()
    assert all(h["outcome"] in MEETS for layer in base["layers"] for h in layer["heads"])  # the error is within
    first = (0, pair[0] if between == "batches" else 0, 0)  # layer 0, the first carrying batch, head 0
    reference = float(want[first])
    for factor in (0.9, 1.1):
        margin = factor * reference
        d = attncert.audit(cap, contrast_spec(between, pair, margin)).to_dict()
        met = set()
        for li in range(2):
            for h in d["layers"][li]["heads"]:
                if between == "batches" and h["batch"] != pair[0]:  # no contrast: the outcome without one
                    assert h["outcome"] == head(base, li, h["head"], h["batch"])["outcome"]
                    continue
                c = want[li, h["batch"], h["head"]]
                assert abs(c - margin) > mp("1e-9") * margin  # clear of the margin: decided
                expect = MEETS if c >= margin else FAILS
                assert h["outcome"] in expect, (li, h["batch"], h["head"], c, margin, h["why"])
                assert ("%s %d, %d) of the model lies in" % (between, *pair)) in h["why"]
                assert (" at least the margin " if c >= margin else " below the margin ") in h["why"]
                if c >= margin:
                    met.add((li, h["batch"], h["head"]))
        assert (first in met) == (factor < 1)  # the reference head itself flips


def test_target_contrast_spec_errors_are_one_line(contrast_capture):
    cap, _, _ = contrast_capture
    call = r": call 'layers\.0\.self_attn'"
    for tc, pattern in (({"tokens": [0, N], "margin": 1}, r"target_contrast\.tokens \[0, 6\]" + call),
                        ({"batches": [0, 2], "margin": 1}, r"target_contrast\.batches \[0, 2\]" + call),
                        ({"tokens": [2, 2], "margin": 1}, "target_contrast.tokens must name two different"),
                        ({"batches": [1, 1], "margin": 1}, "target_contrast.batches must name two different"),
                        ({"tokens": [0, 1], "margin": 1, "rows": [0, 1]}, "unknown key 'rows'"),
                        ({"tokens": [0, 1]}, "margin"),
                        ({"tokens": [0, 1], "margin": -1}, "margin"),
                        ({"tokens": [0, 1], "batches": [0, 1], "margin": 1}, "both tokens and batches")):
        with pytest.raises(ValueError, match=pattern) as e:
            attncert.audit(cap, {"target_contrast": tc})
        assert "target_contrast" in one_line(e)


# ---------------------------------------------------------------------------------------------- 3. registration

def small_capture():
    torch.manual_seed(5)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(1, 5, 8)
    with torch.enable_grad(), attncert.capture(mha) as cap:
        mha(x, x, x)
    return cap


SPEC_TEXT = '{"allowable_output_error": 0.01, "fixed_at": "2026-01-02T03:04:05Z"}\n'


def test_registered_criteria_refuse_a_spec_changed_after_the_fact(tmp_path):
    cap = small_capture()
    spec = tmp_path / "spec.json"
    spec.write_bytes(SPEC_TEXT.encode("utf-8"))
    sha = hashlib.sha256(SPEC_TEXT.encode("utf-8")).hexdigest()
    report = attncert.audit(cap, spec, registered=sha)
    d = report.to_dict()
    assert d["spec_sha256"] == sha and d["spec"]["fixed_at"] == "2026-01-02T03:04:05Z"
    report.write(tmp_path / "registered")
    earlier = tmp_path / "registered" / "report.json"
    assert attncert.audit(cap, str(spec), registered=str(earlier)).to_dict() == d  # a report registers its spec
    edited = tmp_path / "edited.json"
    edited.write_text(SPEC_TEXT.replace("0.01", "0.02"))
    same_text_as_dict = json.loads(SPEC_TEXT)  # the same criteria, but another text: another hash
    for source, registered in ((edited, sha), (edited, str(earlier)), (same_text_as_dict, sha)):
        with pytest.raises(ValueError, match="changed after they were fixed") as e:
            attncert.audit(cap, source, registered=registered)
        text = one_line(e)
        assert sha in text
        if source is edited:
            assert hashlib.sha256(edited.read_bytes()).hexdigest() in text
    # the criteria are checked before the model runs
    torch.manual_seed(5)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    ran = []
    mha.register_forward_pre_hook(lambda m, i: ran.append(1))
    with pytest.raises(ValueError, match="changed after they were fixed"):
        attncert.audit(mha, torch.randn(1, 5, 8), torch.randn(1, 5, 8), torch.randn(1, 5, 8), spec=edited,
                       registered=sha)
    assert ran == []


def reference_timestamp(t):
    """An independent reading of YYYY-MM-DDTHH:MM:SSZ: the exact shape and a real calendar time."""
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", t):
        return False
    try:
        datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return False
    return True


def check_fixed_at(cap, good, bad):
    for t in good:
        assert reference_timestamp(t)
        d = attncert.audit(cap, {"objects": ["values"], "fixed_at": t}).to_dict()
        assert d["spec"]["fixed_at"] == t and json.loads(d["spec_text"])["fixed_at"] == t
    for t in bad:
        assert not reference_timestamp(t)
        with pytest.raises(ValueError, match="fixed_at") as e:
            attncert.audit(cap, {"fixed_at": t})
        one_line(e)


def test_fixed_at_is_a_utc_time():
    check_fixed_at(small_capture(),
                   good=["2026-01-02T03:04:05Z", "2024-02-29T23:59:59Z", "1999-12-31T00:00:00Z"],
                   bad=["2026-01-02 03:04:05", "2026-01-02T03:04:05", "2026-1-02T03:04:05Z", "2026-13-01T00:00:00Z",
                        "2026-00-10T00:00:00Z", "2026-01-02T24:00:00Z", "2026-01-02T03:04:05+00:00", "yesterday"])
    assert attncert.audit(small_capture(), {"objects": ["values"], "fixed_at": ""}).to_dict()["spec"]["fixed_at"] == ""


def test_fixed_at_refuses_days_the_month_does_not_have():
    check_fixed_at(small_capture(), good=["2000-02-29T12:00:00Z"],
                   bad=["2026-02-30T00:00:00Z", "2025-02-29T00:00:00Z", "2026-04-31T12:00:00Z", "1900-02-29T00:00:00Z"])


def run_cli(args, cwd):
    return subprocess.run([CLI] + args, capture_output=True, text=True, cwd=str(cwd), timeout=120)


@needs_cli
def test_cli_registered(residual_audit, tmp_path):
    cap, _ = residual_audit  # an encoder capture: its residual stream goes through the saved capture too
    cap.save(str(tmp_path / "cap"))
    spec_text = '{"objects": ["attention", "residual"], "fixed_at": "2026-01-02T03:04:05Z"}\n'
    (tmp_path / "spec.json").write_text(spec_text)
    (tmp_path / "edited.json").write_text(spec_text.replace("03:04:05", "03:04:06"))
    sha = hashlib.sha256(spec_text.encode("utf-8")).hexdigest()
    python = attncert.audit(cap, str(tmp_path / "spec.json"), registered=sha)
    python.write(str(tmp_path / "earlier"))
    for registered in (sha, "earlier/report.json"):
        p = run_cli(["audit", "cap", "--spec", "edited.json", "--registered", registered, "--out", "out.json"],
                    tmp_path)
        assert p.returncode == 2 and p.stdout == "", p.stderr
        lines = p.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("attncert: "), p.stderr
        assert "changed after they were fixed" in lines[0] and sha in lines[0]
        assert not (tmp_path / "out.json").exists()
        p = run_cli(["audit", "cap", "--spec", "spec.json", "--registered", registered, "--out", "out.json"], tmp_path)
        assert p.returncode == 0 and p.stdout == "" and p.stderr == "", p.stderr
        cli = json.loads((tmp_path / "out.json").read_text())
        assert cli["spec_sha256"] == sha and cli["spec"]["fixed_at"] == "2026-01-02T03:04:05Z"
        assert {k: v for k, v in cli.items() if k != "command"} == {
            k: v for k, v in python.to_dict().items() if k != "command"}
        os.remove(tmp_path / "out.json")
    (tmp_path / "late.json").write_text('{"fixed_at": "2026-01-02T03:04"}')
    p = run_cli(["audit", "cap", "--spec", "late.json", "--out", "out.json"], tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and "fixed_at" in p.stderr
    assert not (tmp_path / "out.json").exists()


# ---------------------------------------------------------------------------------------------- 4. sources

def test_a_model_is_captured_as_by_hand(tmp_path):
    x, mask = structured_input(), causal_mask()
    spec = {"objects": ["attention", "multi_head", "residual"], "allowable_output_error": 1e-3}
    direct = attncert.audit(encoder(False), x, mask, spec=spec).to_dict()
    model = encoder(False)
    with torch.enable_grad(), attncert.capture(model) as cap:
        model(x, mask)
    by_hand = attncert.audit(cap, spec).to_dict()
    assert direct["spec_sha256"] == by_hand["spec_sha256"]
    assert [layer["name"] for layer in direct["layers"]] == NAMES
    assert direct["layers"] == by_hand["layers"] and direct == by_hand
    assert all(r["computed"] for layer in direct["layers"] for r in layer["residual"])  # captured with grad
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    assert attncert.audit(encoder(False), x, mask, spec=tmp_path / "spec.json").to_dict()["layers"] == direct["layers"]


GPT2 = {"style": "gpt2", "n_layer": 2, "n_head": 4, "d_model": 16, "vocab_size": 20, "n_positions": 8}
LLAMA = {"style": "llama", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "d_model": 16, "vocab_size": 20, "d_ff": 24}


def gpt2_weights(c, rng):
    d, w = c["d_model"], {}
    mats = {"wte.weight": (c["vocab_size"], d), "wpe.weight": (c["n_positions"], d)}
    vecs = {"ln_f.weight": d, "ln_f.bias": d}
    for i in range(c["n_layer"]):
        p = "h.%d." % i
        mats.update({p + "attn.c_attn.weight": (d, 3 * d), p + "attn.c_proj.weight": (d, d),
                     p + "mlp.c_fc.weight": (d, 4 * d), p + "mlp.c_proj.weight": (4 * d, d)})
        vecs.update({p + n: s for n, s in (("ln_1.weight", d), ("ln_1.bias", d), ("attn.c_attn.bias", 3 * d),
                                           ("attn.c_proj.bias", d), ("ln_2.weight", d), ("ln_2.bias", d),
                                           ("mlp.c_fc.bias", 4 * d), ("mlp.c_proj.bias", d))})
    for n, s in mats.items():  # Conv1D (in, out): scaled by 1/sqrt(in)
        w[n] = rng.standard_normal(s) / (1 if n[0] == "w" else math.sqrt(s[0]))
    for n, s in vecs.items():
        w[n] = (1.0 if n.endswith("weight") else 0.0) + 0.1 * rng.standard_normal(s)
    return {n: a.astype(np.float32) for n, a in w.items()}


def llama_weights(c, rng):
    d, f, hd = c["d_model"], c["d_ff"], c["d_model"] // c["n_head"]
    mats = {"model.embed_tokens.weight": (c["vocab_size"], d)}
    vecs = {"model.norm.weight": d}
    for i in range(c["n_layer"]):
        p = "model.layers.%d." % i
        mats.update({p + "self_attn.q_proj.weight": (c["n_head"] * hd, d),
                     p + "self_attn.k_proj.weight": (c["n_kv_head"] * hd, d),
                     p + "self_attn.v_proj.weight": (c["n_kv_head"] * hd, d), p + "self_attn.o_proj.weight": (d, d),
                     p + "mlp.gate_proj.weight": (f, d), p + "mlp.up_proj.weight": (f, d),
                     p + "mlp.down_proj.weight": (d, f)})
        vecs.update({p + "input_layernorm.weight": d, p + "post_attention_layernorm.weight": d})
    w = {n: rng.standard_normal(s) / (1 if "embed" in n else math.sqrt(s[1])) for n, s in mats.items()}
    w.update({n: 1.0 + 0.1 * rng.standard_normal(s) for n, s in vecs.items()})
    return {n: a.astype(np.float32) for n, a in w.items()}


@pytest.mark.parametrize("arch,weights,name", [(GPT2, gpt2_weights, "h.%d.attn"),
                                               (LLAMA, llama_weights, "model.layers.%d.self_attn")],
                         ids=["gpt2", "llama"])
def test_safetensors_models_are_audited_per_layer(arch, weights, name, tmp_path):
    path = tmp_path / "model.safetensors"
    write_safetensors(path, weights(arch, np.random.default_rng(8)))
    (tmp_path / "arch.json").write_text(json.dumps(arch))
    ids = torch.from_numpy(np.random.default_rng(9).integers(0, arch["vocab_size"], (2, 6)))
    report = attncert.audit(str(path), ids, architecture=str(tmp_path / "arch.json"), spec={"objects": [
        "attention", "values", "multi_head", "residual"]})
    d = report.to_dict()
    H, Hkv = arch["n_head"], arch.get("n_kv_head", arch["n_head"])
    assert [layer["name"] for layer in d["layers"]] == [name % i for i in range(arch["n_layer"])]
    # the same calls a capture by hand records (load_model runs attncert.scaled_dot_product_attention)
    model = attncert.models.load_model(path, arch)
    with attncert.capture(model) as cap:
        model(ids)
    assert [c.name for c in cap.calls] == [layer["name"] for layer in d["layers"]]
    for layer, c in zip(d["layers"], cap.calls):
        assert layer["kind"] == "attncert.scaled_dot_product_attention" and layer["mask_kind"] == "causal"
        assert layer["shape"]["heads"] == H and layer["shape"]["kv_heads"] == Hkv
        for key in ("multi_head", "residual"):
            assert [(m["batch"], m["computed"]) for m in layer[key]] == [(0, False), (1, False)]
            assert all("W_O was not captured" in m["why"] for m in layer[key])
        assert sorted((h["batch"], h["head"]) for h in layer["heads"]) == [(b, h) for b in range(2) for h in range(H)]
        for h in layer["heads"]:
            # decided: the probabilities were captured and causal attention keeps its full rank in float32
            assert h["outcome"] in OUTCOMES - {"undecided"} and h["why"]
            assert h["output_error"]["computed"] is True  # attncert's SDPA records the probabilities it used
            g = h["head"] // (H // Hkv)
            assert h["kv_head"] == g
            with mpmath.workprec(200):
                scale = max(mpmath.sqrt(mpmath.fsum(mpmath.mpf(float(t)) ** 2 for t in row))
                            for row in c.v[h["batch"], g])
            assert encloses(h["value_scale"], scale)
        if Hkv < H:  # heads sharing a kv head report one value scale; the kv heads' scales differ
            for b in range(2):
                scales = [head(d, d["layers"].index(layer), hh, b)["value_scale"] for hh in range(H)]
                groups = [[scales[hh] for hh in range(H) if hh // (H // Hkv) == g] for g in range(Hkv)]
                assert all(s == grp[0] for grp in groups for s in grp)
                assert len({json.dumps(grp[0]) for grp in groups}) == Hkv


def test_source_errors_are_one_line(tmp_path):
    path = tmp_path / "model.safetensors"
    write_safetensors(path, gpt2_weights(GPT2, np.random.default_rng(8)))
    ids = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="architecture") as e:
        attncert.audit(str(path), ids)
    one_line(e)
    with pytest.raises(ValueError, match="inputs") as e:
        attncert.audit(str(path), architecture=GPT2)
    one_line(e)
    with pytest.raises(ValueError, match="inputs") as e:
        attncert.audit(attncert.models.load_model(path, GPT2))
    one_line(e)
    cap = small_capture()
    cap.save(str(tmp_path / "cap"))
    for source in (cap, str(tmp_path / "cap")):
        with pytest.raises(ValueError, match="a capture takes no inputs") as e:
            attncert.audit(source, ids, spec={})
        one_line(e)


# ---------------------------------------------------------------------------------------------- 5. progress

def test_progress_lines_go_to_standard_error(residual_audit, capfd):
    cap, _ = residual_audit
    spec = {"objects": ["values", "residual"]}
    capfd.readouterr()
    quiet = attncert.audit(cap, spec, progress=False).to_dict()
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    loud = attncert.audit(cap, spec, progress=True).to_dict()
    out, err = capfd.readouterr()
    assert out == "" and "attncert.audit:" in err
    for c in cap.calls:
        for b in range(2):
            for h in range(4):
                assert "attncert.audit: %s batch %d head %d" % (c.name, b, h) in err
            assert "attncert.audit: %s batch %d residual" % (c.name, b) in err
    assert loud == quiet  # the lines change nothing in the report
    attncert.audit(cap, spec)  # the default: only when standard error is a terminal (here it is not)
    assert capfd.readouterr() == ("", "")
