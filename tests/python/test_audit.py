"""attncert.audit and `attncert audit`: every number of a head agrees with attncert.rank on that head, the value
scale and the output error contain independent 200-bit mpmath computations, every outcome class is reached and
explained, the spec is hashed and recorded first, the controls pass, and the command line gives the Python report."""
import hashlib
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mpmath = pytest.importorskip("mpmath")
nn = torch.nn

import attncert  # noqa: E402
from attncert.capture import Capture, CapturedCall  # noqa: E402

CLI = os.environ.get("ATTNCERT_CLI")
needs_cli = pytest.mark.skipif(not CLI, reason="ATTNCERT_CLI (the attncert binary) not set")

SDPA = "scaled_dot_product_attention"
OUTCOMES = {"rank-kept/within-tolerance", "rank-kept/exceeds-tolerance", "rank-reduced/adequate",
            "rank-reduced/inadequate", "undecided"}
N = 12  # tokens of the encoder's input


# ---------------------------------------------------------------------------------------------- inputs

def encoder_capture(batch=1, n=N, pad=None):
    """A 2-layer nn.TransformerEncoder (d_model 32, 4 heads) run causally on (batch, n, 32), captured."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 2)
    x = torch.randn(batch, n, 32)
    mask = nn.Transformer.generate_square_subsequent_mask(n)
    with torch.enable_grad(), attncert.capture(model) as cap:
        model(x, mask=mask, src_key_padding_mask=pad)
    return cap


@pytest.fixture(scope="module")
def encoder():
    """(capture, report under the default spec)."""
    cap = encoder_capture()
    assert [c.name for c in cap.calls] == ["layers.0.self_attn", "layers.1.self_attn"]
    return cap, attncert.audit(cap)


def f32(a):
    return np.asarray(a, dtype=np.float32)[None, None]


def hand_call(name, q, k, v, weights=None, scale="1/sqrt(d)"):
    """A one-head SDPA record built by hand (float32, no mask)."""
    q, k, v = f32(q), f32(k), f32(v)
    return CapturedCall(name=name, kind=SDPA, dtype="float32", scale=scale, mask_kind="none", q=q, k=k, v=v,
                        output=np.zeros(q.shape[:3] + v.shape[3:], np.float32),
                        weights=None if weights is None else f32(weights))


def hand_capture(calls):
    cap = Capture()
    cap.calls = list(calls)
    return cap


def head(report_dict, layer, h, batch=0):
    hs = [x for x in report_dict["layers"][layer]["heads"] if x["head"] == h and x["batch"] == batch]
    assert len(hs) == 1
    return hs[0]


# ---------------------------------------------------------------------------------------------- mpmath (200 bits)

def mp_attention(q, k, scale, allowed=None):
    """softmax(scale q k^T) over the allowed keys, as mpf rows (call inside mpmath.workprec(200))."""
    n_q, d = q.shape
    c = 1 / mpmath.sqrt(d) if scale == "1/sqrt(d)" else mpmath.mpf(scale)
    A = []
    for i in range(n_q):
        s = [c * mpmath.fsum(mpmath.mpf(float(q[i, t])) * mpmath.mpf(float(k[j, t])) for t in range(d))
             if allowed is None or allowed[i, j] else None for j in range(k.shape[0])]
        top = max(x for x in s if x is not None)
        e = [mpmath.mpf(0) if x is None else mpmath.exp(x - top) for x in s]
        z = mpmath.fsum(e)
        A.append([x / z for x in e])
    return A


def mp_value_scale(v):
    """max_j ||v_j||_2 at 200 bits."""
    with mpmath.workprec(200):
        return max(mpmath.sqrt(mpmath.fsum(mpmath.mpf(float(x)) ** 2 for x in row)) for row in v)


def mp_errors(q, k, v, W, scale, allowed=None):
    """(max_i ||((W - A) V)_i||_2 / max_j ||v_j||_2, max_i ||W_i - A_i||_1, max_j ||v_j||_2) at 200 bits."""
    with mpmath.workprec(200):
        A = mp_attention(q, k, scale, allowed)
        D = [[mpmath.mpf(float(W[i, j])) - A[i][j] for j in range(len(A[i]))] for i in range(len(A))]
        out = max(mpmath.sqrt(mpmath.fsum(mpmath.fsum(D[i][j] * mpmath.mpf(float(v[j, c])) for j in range(len(D[i]))) ** 2
                                          for c in range(v.shape[1]))) for i in range(len(D)))
        l1 = max(mpmath.fsum(abs(x) for x in row) for row in D)
        scale_v = mp_value_scale(v)
        return out / scale_v, l1, scale_v


def mp(text):
    with mpmath.workprec(200):
        return mpmath.mpf(text)


def encloses(interval, x):
    with mpmath.workprec(200):
        return mpmath.mpf(interval["lo"]) <= x <= mpmath.mpf(interval["hi"])


# ---------------------------------------------------------------------------------------------- 1. = attncert.rank

def same_numbers(audit_obj, rank_report, witnesses=True):
    """The audit's object measures the numbers attncert.rank reports for the same matrix."""
    a, r = audit_obj, rank_report
    if witnesses:
        assert a["exact_rank"] == r["exact_rank"]
    assert (a["exact_rank"]["lo"], a["exact_rank"]["hi"]) == (r["exact_rank"]["lo"], r["exact_rank"]["hi"])
    assert a["singular_values"] == r["singular_values"]  # lo/hi decimal strings
    assert a["singular_values_decided"] == r["singular_values_decided"]
    key = lambda m: [(e["format"], e["policy"], e["rank"], e["exact_count"], e["threshold"], e["diverges"]) for e in m]
    assert key(a["numerical_ranks"]) == key(r["numerical"])
    assert a["partial"] is False and r["partial"] is False


def test_every_head_agrees_with_rank_on_the_same_head(encoder):
    cap, report = encoder
    d = report.to_dict()
    causal = np.tril(np.ones((N, N), dtype=bool))
    formats = "binary32,binary64"  # the call's dtype (float32) and binary64: the default spec's formats
    for li, c in enumerate(cap.calls):
        assert c.dtype == "float32" and c.scale == "1/sqrt(d)" and c.q.shape == (1, 4, N, 8)
        assert np.array_equal(c.allowed[0, 0], causal)
        for h in range(4):
            hd = head(d, li, h)
            assert hd["kv_head"] == h
            q, k, v = (a[0, h].astype(np.float64) for a in (c.q, c.k, c.v))
            for obj in ("scores", "attention", "output"):
                r = attncert.rank(q=q, k=k, v=v if obj == "output" else None, object=obj,
                                  mask=None if obj == "scores" else c.allowed[0, 0], formats=formats, policies="numpy")
                assert [(e["format"], e["policy"]) for e in hd["objects"][obj]["numerical_ranks"]] == [
                    ("binary32", "numpy"), ("binary64", "numpy")]
                same_numbers(hd["objects"][obj], r.report)
                assert hd["objects"][obj]["shape"] == [N, N if obj != "output" else 8]
            r = attncert.rank(scores=v, object="scores", formats=formats, policies="numpy")
            same_numbers(hd["objects"]["values"], r.report)
            # the structure the numbers must show: scores and output of rank d = 8, causal attention full rank
            ranks = {o: (x["exact_rank"]["lo"], x["exact_rank"]["hi"]) for o, x in hd["objects"].items()}
            assert ranks == {"scores": (8, 8), "attention": (N, N), "values": (8, 8), "output": (8, 8)}
    # what a user types, `--mask causal`, gives the same numbers (the audit passes the captured matrix)
    c = cap.calls[1]
    q, k, v = (a[0, 3].astype(np.float64) for a in (c.q, c.k, c.v))
    for obj in ("attention", "output"):
        r = attncert.rank(q=q, k=k, v=v if obj == "output" else None, object=obj, mask="causal", formats=formats,
                          policies="numpy")
        same_numbers(head(d, 1, 3)["objects"][obj], r.report, witnesses=False)


def test_batch_and_padding_mask_pick_the_right_slice():
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 3:] = True  # batch 1: keys 3.. padded
    cap = encoder_capture(batch=2, n=6, pad=pad)
    d = attncert.audit(cap, policies="numpy").to_dict()
    c = cap.calls[0]
    assert c.allowed.shape == (2, 1, 6, 6)
    for b in (0, 1):
        allowed = c.allowed[b, 0]
        assert np.array_equal(allowed, np.tril(np.ones((6, 6), dtype=bool)) & ~pad[b].numpy()[None, :])
        q, k, v = (a[b, 2].astype(np.float64) for a in (c.q, c.k, c.v))
        for obj in ("attention", "output"):
            r = attncert.rank(q=q, k=k, v=v if obj == "output" else None, object=obj, mask=allowed,
                              formats="binary32,binary64", policies="numpy")
            same_numbers(head(d, 0, 2, batch=b)["objects"][obj], r.report)
    # batch 0's causal attention is full rank; batch 1's has three zero columns (keys 3.. padded) and its first
    # three rows are lower triangular with a positive diagonal: rank 3 exactly, which the interval must contain
    assert head(d, 0, 2, batch=0)["objects"]["attention"]["exact_rank"]["lo"] == 6
    e = head(d, 0, 2, batch=1)["objects"]["attention"]["exact_rank"]
    assert e["lo"] == 3 <= e["hi"]


def test_grouped_query_heads_share_their_key_value_head():
    rng = np.random.default_rng(3)
    q = rng.integers(-3, 4, (1, 4, 3, 2)).astype(np.float32)
    k = rng.integers(-3, 4, (1, 2, 3, 2)).astype(np.float32)
    v = rng.integers(-3, 4, (1, 2, 3, 2)).astype(np.float32)
    call = CapturedCall(name="gqa", kind=SDPA, dtype="float32", scale="1/sqrt(d)", mask_kind="none", q=q, k=k, v=v,
                        output=np.zeros((1, 4, 3, 2), np.float32))
    d = attncert.audit(hand_capture([call]), policies="numpy").to_dict()
    for h in range(4):
        hd = head(d, 0, h)
        assert hd["kv_head"] == h // 2  # torch's enable_gqa: repeat_interleave
        r = attncert.rank(q=q[0, h].astype(np.float64), k=k[0, h // 2].astype(np.float64),
                          v=v[0, h // 2].astype(np.float64), object="output", formats="binary32,binary64",
                          policies="numpy")
        same_numbers(hd["objects"]["output"], r.report)
        assert encloses(hd["value_scale"], mp_value_scale(v[0, h // 2]))


# ---------------------------------------------------------------------------------------------- 2, 3. mpmath

def test_value_scale_encloses_the_200_bit_norm(encoder):
    cap, report = encoder
    d = report.to_dict()
    for li, c in enumerate(cap.calls):
        for h in range(4):
            vs = head(d, li, h)["value_scale"]
            exact = mp_value_scale(c.v[0, h])
            assert encloses(vs, exact), (li, h, vs, exact)
            assert mp(vs["hi"]) - mp(vs["lo"]) <= mp("1e-15") * exact


def test_output_error_encloses_the_200_bit_error(encoder):
    cap, report = encoder
    d = report.to_dict()
    for li, c in enumerate(cap.calls):
        for h in range(4):
            hd = head(d, li, h)
            oe = hd["output_error"]
            assert oe["computed"] is True and oe["allowance_relative"] == 0.01
            rel, l1, scale_v = mp_errors(c.q[0, h], c.k[0, h], c.v[0, h], c.weights[0, h], c.scale, c.allowed[0, 0])
            assert encloses(oe["relative"], rel), (li, h, oe, rel)
            assert mp(oe["relative"]["hi"]) - mp(oe["relative"]["lo"]) <= mp("1e-13")
            assert rel < mp("1e-6")  # float32 probabilities: the model's weights are accurate
            assert l1 <= mp(oe["attention_l1_hi"]) <= l1 * (1 + mp("1e-6")) + mp("1e-15")
            assert l1 * scale_v <= mp(oe["bound_hi"])  # the article's §11 bound is an upper bound
            assert mp(oe["relative"]["hi"]) <= mp(oe["attention_l1_hi"])
            assert hd["outcome"] == "rank-kept/within-tolerance"


def test_output_error_agrees_with_the_oracle_on_the_same_head(encoder):
    """The audit's output error against attncert.attention (the oracle, `attncert oracle`) on the same head: the
    oracle's correctly rounded binary64 A V is within half an ulp per entry of the exact one, so the error of
    the model's A_model V measured against it lies in the audit's enclosure widened by that half ulp."""
    cap, report = encoder
    d = report.to_dict()
    for li, c in enumerate(cap.calls):
        q, k, v, w = (x.astype(np.float64) for x in (c.q, c.k, c.v, c.weights))
        exact = attncert.attention(q, k, v, causal="top-left", target="float64")  # the encoder's mask is causal
        for h in range(4):
            oe = head(d, li, h)["output_error"]
            with mpmath.workprec(200):
                model = [[mpmath.fsum(mpmath.mpf(w[0, h, i, j]) * mpmath.mpf(v[0, h, j, m]) for j in range(N))
                          for m in range(v.shape[3])] for i in range(N)]
                err = max(mpmath.sqrt(mpmath.fsum((model[i][m] - mpmath.mpf(exact[0, h, i, m])) ** 2
                                                  for m in range(v.shape[3]))) for i in range(N))
                scale = max(mpmath.sqrt(mpmath.fsum(mpmath.mpf(x) ** 2 for x in v[0, h, j])) for j in range(N))
                half_ulps = mpmath.sqrt(v.shape[3]) * mpmath.mpf(2) ** -53 * max(abs(float(x)) for x in exact[0, h].flat)
                rel, slack = err / scale, half_ulps / scale
            assert mp(oe["relative"]["lo"]) - slack <= rel <= mp(oe["relative"]["hi"]) + slack, (li, h, oe, rel)


def float32_rank(q, k, scale):
    """numpy.linalg.matrix_rank of the attention formed in float32 (no mask)."""
    q, k = q.astype(np.float32), k.astype(np.float32)
    c = np.float32(1 / np.sqrt(q.shape[1])) if scale == "1/sqrt(d)" else np.float32(float(scale))
    s = (q @ k.T) * c
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return int(np.linalg.matrix_rank(e / e.sum(axis=1, keepdims=True)))


def exact_rank_2x2(q, k, scale):
    with mpmath.workprec(200):
        A = mp_attention(q, k, scale)
        det = A[0][0] * A[1][1] - A[0][1] * A[1][0]
        assert abs(det) > mpmath.mpf("1e-40")  # far above 200 bits' error: the exact rank is 2
    return 2


TWO = ([[1.0], [-1.0]], [[1.0], [-1.0]], [[1.0], [2.0]])  # q, k, v of the two-token case
GOOD = ([[1.5, 0.0], [0.0, 1.5]], [[1.5, 0.0], [0.0, 1.5]], [[1.0, 2.0], [-1.0, 0.5]])  # well conditioned


def rounded_attention(q, k, scale):
    with mpmath.workprec(200):
        return np.array([[float(x) for x in row] for row in mp_attention(np.array(q), np.array(k), scale)],
                        dtype=np.float32)


def outcome_cases():
    two_w = rounded_attention(TWO[0], TWO[1], "1e-9")
    assert np.array_equal(two_w, np.full((2, 2), 0.5, np.float32))  # the true attention rounded to float32
    good_w = rounded_attention(GOOD[0], GOOD[1], "1/sqrt(d)")
    return [hand_call("a", *TWO, weights=two_w, scale="1e-9"),
            hand_call("b", *TWO, weights=[[1.0, 0.0], [0.0, 1.0]], scale="1e-9"),
            hand_call("c", *GOOD, weights=good_w),
            hand_call("d", *GOOD, weights=good_w[::-1]),
            hand_call("e", *GOOD)]


@pytest.mark.parametrize("allowance", [1e-3, 0.5])
def test_outcomes_follow_independent_ranks_and_errors(allowance):
    calls = outcome_cases()
    report = attncert.audit(hand_capture(calls), {"allowable_output_error": allowance})
    d = report.to_dict()
    seen = {}
    for li, c in enumerate(calls):
        q, k, v = c.q[0, 0], c.k[0, 0], c.v[0, 0]
        hd = head(d, li, 0)
        exact, r32 = exact_rank_2x2(q, k, c.scale), float32_rank(q, k, c.scale)
        assert r32 == (1 if c.name in "ab" else 2)  # two-token at 1e-9: both rows 0.5 in binary32
        att = hd["objects"]["attention"]
        assert (att["exact_rank"]["lo"], att["exact_rank"]["hi"]) == (exact, exact)
        assert [e["rank"] for e in att["numerical_ranks"] if e["format"] == "binary32"] == [r32]
        kept = r32 == exact
        rk = "rank %s (%d in binary32 under numpy, exact %d)" % ("kept" if kept else "reduced", r32, exact)
        why = hd["why"]
        if c.weights is None:
            assert hd["outcome"] == "undecided"
            assert hd["output_error"]["computed"] is False and "weights" in hd["output_error"]["why"]
            assert why.startswith("rank kept") and "weights were not captured" in why
        else:
            rel, _, _ = mp_errors(q, k, v, c.weights[0, 0], c.scale)
            oe = hd["output_error"]["relative"]
            assert encloses(oe, rel), (c.name, oe, rel)
            assert abs(rel - allowance) > mp("1e-6")  # clear of the allowance: the outcome is decided
            within = rel <= allowance
            expected = ("rank-kept/" + ("within-tolerance" if within else "exceeds-tolerance") if kept else
                        "rank-reduced/" + ("adequate" if within else "inadequate"))
            assert hd["outcome"] == expected, (c.name, why)
            assert why == "%s; the output error relative to max|v_j| lies in [%s, %s], %s the allowance %r" % (
                rk, oe["lo"], oe["hi"], "within" if within else "above", allowance)
        seen[c.name] = hd["outcome"]
    assert report.outcomes() == {(n, 0, 0): o for n, o in seen.items()}
    assert d["summary"]["outcomes"] == {o: list(seen.values()).count(o) for o in set(seen.values())}
    if allowance == 1e-3:  # every class once
        assert seen == {"a": "rank-reduced/adequate", "b": "rank-reduced/inadequate",
                        "c": "rank-kept/within-tolerance", "d": "rank-kept/exceeds-tolerance", "e": "undecided"}
    else:  # b's error (1/4) is now allowed
        assert seen["b"] == "rank-reduced/adequate"
    md = report.markdown()
    for o in set(seen.values()):
        assert o in md


def test_zero_values_give_a_number_not_nan():
    call = hand_call("zero", [[1.0], [2.0]], [[1.0], [0.5]], [[0.0], [0.0]],
                     weights=rounded_attention([[1.0], [2.0]], [[1.0], [0.5]], "1/sqrt(d)"))
    oe = head(attncert.audit(hand_capture([call])).to_dict(), 0, 0)["output_error"]["relative"]
    lo, hi = float(oe["lo"]), float(oe["hi"])  # all value rows zero: (W - A)V = 0 exactly, whatever W
    assert lo == 0 and hi == 0


# ---------------------------------------------------------------------------------------------- 4. spec

def test_default_spec_is_recorded_and_hashed_first(encoder):
    _, report = encoder
    d = report.to_dict()
    assert d["spec_is_default"] is True
    assert json.loads(d["spec_text"]) == attncert.default_audit_spec()
    assert d["spec_sha256"] == hashlib.sha256(d["spec_text"].encode("utf-8")).hexdigest() == report.spec_sha256
    keys = list(d)
    assert keys.index("spec") < keys.index("spec_text") < keys.index("spec_sha256") < keys.index("controls") \
        < keys.index("layers")
    md = report.markdown()
    assert d["spec_sha256"] in md and "(the default spec" in md and d["spec_text"] in md
    assert md.index(d["spec_sha256"]) < md.index("Negative controls") < md.index("layers.0.self_attn")
    assert repr(report).startswith("AuditReport(spec_sha256=%s" % d["spec_sha256"][:12])


def test_spec_errors_name_the_problem(encoder):
    cap, _ = encoder
    with pytest.raises(ValueError, match="unknown key 'colour'"):
        attncert.audit(cap, {"allowable_output_error": 1e-3, "colour": "red"})
    for bad in ({"allowable_output_error": "big"}, {"objects": "attention"}, {"max_seconds": True}):
        with pytest.raises(ValueError, match="wrong type"):
            attncert.audit(cap, bad)
    for bad, pattern in (({"objects": ["attention", "keys"]}, "unknown object 'keys'"),
                         ({"allowable_output_error": -1}, "allowable_output_error"),
                         ({"objects": []}, "objects"), ({"policies": "nope"}, "nope"), ([1], "dict or the path")):
        with pytest.raises(ValueError, match=pattern):
            attncert.audit(cap, bad)


def test_spec_text_is_hashed_as_written(encoder, tmp_path):
    cap, _ = encoder
    texts = ['{"allowable_output_error": 0.001}\n', '{"allowable_output_error":  0.001}\n',
             '{\n  "allowable_output_error": 0.001\n}']
    reports = []
    for i, text in enumerate(texts):
        path = tmp_path / ("spec%d.json" % i)
        path.write_bytes(text.encode("utf-8"))
        r = attncert.audit(cap, str(path))
        d = r.to_dict()
        assert d["spec_text"] == text and d["spec_is_default"] is False
        assert d["spec_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert d["spec"]["allowable_output_error"] == 0.001
        reports.append(d)
    assert len({d["spec_sha256"] for d in reports}) == 3  # whitespace alone changes the hash
    assert reports[0]["layers"] == reports[1]["layers"] == reports[2]["layers"]  # not the results


def test_keywords_are_spec_keys_merged_before_hashing(encoder, tmp_path):
    cap, _ = encoder
    r = attncert.audit(cap, {"allowable_output_error": 1e-3}, formats="binary64,binary16", policies="numpy,matlab",
                       max_seconds=100)
    d = r.to_dict()
    assert json.loads(d["spec_text"]) == {"allowable_output_error": 1e-3, "formats": "binary64,binary16",
                                          "policies": "numpy,matlab", "max_seconds": 100}
    assert d["spec_sha256"] == hashlib.sha256(d["spec_text"].encode("utf-8")).hexdigest()
    assert (d["spec"]["formats"], d["spec"]["policies"], d["spec"]["max_seconds"]) == ("binary64,binary16",
                                                                                      "numpy,matlab", 100)
    # and they are used: the numerical ranks are measured in those formats under those policies
    att = head(d, 0, 0)["objects"]["attention"]
    assert [(e["format"], e["policy"]) for e in att["numerical_ranks"]] == [
        ("binary64", "numpy"), ("binary64", "matlab"), ("binary16", "numpy"), ("binary16", "matlab")]
    # no binary32 measurement: rank kept or reduced in the model's format is not decided
    assert head(d, 0, 0)["outcome"] == "undecided" and "binary32" in head(d, 0, 0)["why"]
    path = tmp_path / "spec.json"
    path.write_text('{"allowable_output_error": 0.5}')
    d = attncert.audit(cap, path, policies="matlab").to_dict()  # a path, and a keyword merged into it
    assert json.loads(d["spec_text"]) == {"allowable_output_error": 0.5, "policies": "matlab"}


def test_spec_file_with_crlf_is_hashed_as_its_bytes(encoder, tmp_path):
    cap, _ = encoder
    path = tmp_path / "crlf.json"
    path.write_bytes(b'{\r\n  "allowable_output_error": 0.001\r\n}\r\n')
    d = attncert.audit(cap, str(path)).to_dict()
    assert d["spec_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_integer_spec_key_refuses_a_fraction(encoder):
    cap, _ = encoder
    with pytest.raises(ValueError, match="max_precision"):
        attncert.audit(cap, {"max_precision": 300.7})


# ---------------------------------------------------------------------------------------------- 5. controls

def test_negative_controls_pass_first(encoder):
    _, report = encoder
    d = report.to_dict()
    controls = d["controls"]
    assert [(c["name"], c["object"], c["expected"]) for c in controls] == [
        ("two-token", "attention", 2), ("identical-values", "output", 1), ("causal", "attention", 5)]
    for c in controls:
        assert c["passed"] is True and c["exact_rank"] == {"lo": c["expected"], "hi": c["expected"]}
    assert (d["summary"]["controls"], d["summary"]["controls_passed"]) == (3, 3)
    # under other formats and policies too (they are the model's thresholds)
    cap, _ = encoder
    other = attncert.audit(cap, formats="binary16,mpfr256", policies="matlab").to_dict()["controls"]
    assert [(c["passed"], c["exact_rank"]["lo"], c["exact_rank"]["hi"]) for c in other] == [
        (True, 2, 2), (True, 1, 1), (True, 5, 5)]


# ---------------------------------------------------------------------------------------------- 6. the CLI

def run_cli(args, cwd):
    return subprocess.run([CLI] + args, capture_output=True, text=True, cwd=str(cwd), timeout=120)


def without_command(d):
    return {k: v for k, v in d.items() if k != "command"}


def body(md):
    """The Markdown report after its command line."""
    lines = md.split("\n")
    assert lines[0] == "# attncert audit" and lines[2].startswith("`")
    return "\n".join(lines[3:])


@needs_cli
@pytest.mark.parametrize("which", ["encoder", "hand"])
def test_cli_gives_the_python_report(which, encoder, tmp_path):
    cap = encoder[0] if which == "encoder" else hand_capture(outcome_cases())
    spec = {"allowable_output_error": 1e-3, "policies": "numpy,absolute:1e-6"}
    report = attncert.audit(cap, spec)
    cap.save(str(tmp_path / "cap"))
    (tmp_path / "spec.json").write_text(report.to_dict()["spec_text"])
    p = run_cli(["audit", "cap", "--spec", "spec.json"], tmp_path)
    assert p.returncode == 0, p.stderr
    cli = json.loads(p.stdout)
    assert cli["command"] == "attncert audit cap --spec spec.json"
    assert without_command(cli) == without_command(report.to_dict())
    assert without_command(attncert.audit(str(tmp_path / "cap"), spec).to_dict()) == without_command(cli)
    p = run_cli(["audit", "cap", "--spec", "spec.json", "--format", "md", "--out", "audit.md"], tmp_path)
    assert p.returncode == 0 and p.stdout == "", p.stderr
    md = (tmp_path / "audit.md").read_text()
    assert report.spec_sha256 in md and body(md) == body(report.markdown())
    for o in set(report.outcomes().values()):
        assert o in md
    if which == "hand":
        assert set(report.outcomes().values()) == OUTCOMES
    else:  # no spec: the default, said so, as Python's
        p = run_cli(["audit", "cap"], tmp_path)
        assert p.returncode == 0, p.stderr
        assert without_command(json.loads(p.stdout)) == without_command(encoder[1].to_dict())
        assert json.loads(p.stdout)["spec_is_default"] is True


@needs_cli
def test_cli_refuses_bad_input_with_one_line(encoder, tmp_path):
    cap, _ = encoder
    cap.save(str(tmp_path / "cap"))
    shutil.copytree(tmp_path / "cap", tmp_path / "broken")
    os.remove(tmp_path / "broken" / "call001.k.npy")
    (tmp_path / "bad.json").write_text('{"allowable_output_error": 0.001, "colour": "red"}')
    for args, named in ((["absent"], "absent"), (["broken"], "call001.k.npy"),
                        (["cap", "--spec", "bad.json"], "unknown key 'colour'"),
                        (["cap", "--max-seconds", "-1"], "--max-seconds"), (["cap", "--format", "pdf"], "pdf")):
        for out in ([], ["--out", "report.json"]):
            p = run_cli(["audit"] + args + out, tmp_path)
            assert p.returncode == 2, (args, p.stderr)
            assert p.stdout == ""
            lines = p.stderr.strip("\r").splitlines()
            assert len(lines) == 1 and lines[0].startswith("attncert: ") and named in lines[0], p.stderr
            assert not (tmp_path / "report.json").exists()


@needs_cli
def test_cli_max_seconds_bounds_the_run_not_the_criteria(encoder, tmp_path):
    cap, report = encoder
    cap.save(str(tmp_path / "cap"))
    p = run_cli(["audit", "cap", "--max-seconds", "0.001"], tmp_path)
    assert p.returncode == 3, p.stderr  # PARTIAL
    d = json.loads(p.stdout)
    assert d["partial"] is True and d["spec_sha256"] == report.spec_sha256  # the criteria unchanged
    assert d["notes"] == ["budget of this run: --max-seconds 0.001 (not one of the criteria)"]
    notes = [n for layer in d["layers"] for n in layer["notes"]]
    assert any("not computed (past max_seconds)" in n for n in notes), notes


# ---------------------------------------------------------------------------------------------- 7, 8.

def test_python_errors(tmp_path):
    torch.manual_seed(0)
    model = nn.Linear(4, 4)
    with attncert.capture(model) as cap:
        model(torch.randn(2, 4))
    assert cap.calls == []
    with pytest.raises(ValueError, match="no attention call"):
        attncert.audit(cap)
    good = hand_capture([hand_call("c", *GOOD)])
    with pytest.raises(TypeError, match="client: must be a dask.distributed Client"):
        attncert.audit(good, client=object())
    with pytest.raises(ValueError, match="source: "):
        attncert.audit(42)
    with pytest.raises(ValueError, match="a capture takes no inputs"):
        attncert.audit(good, {}, {})
    with pytest.raises(ValueError, match="inputs: attncert.audit.model, .inputs."):
        attncert.audit(nn.MultiheadAttention(4, 2))
    with pytest.raises(ValueError, match="no attention call was captured"):
        attncert.audit(model, torch.randn(2, 4))
    good.save(str(tmp_path / "cap"))
    os.remove(tmp_path / "cap" / "call000.v.npy")
    with pytest.raises(ValueError, match=r"call000\.v\.npy: missing"):
        attncert.audit(str(tmp_path / "cap"))
    with pytest.raises(ValueError, match="no such directory"):
        attncert.audit(str(tmp_path / "absent"))


def test_write_gives_json_and_markdown(encoder, tmp_path):
    _, report = encoder
    out = tmp_path / "a" / "b"
    report.write(str(out))
    assert sorted(os.listdir(out)) == ["report.html", "report.json", "report.md"]
    with open(out / "report.json", encoding="utf-8") as f:
        assert json.load(f) == report.to_dict()
    assert (out / "report.md").read_text(encoding="utf-8") == report.markdown()
    assert (out / "report.html").read_text(encoding="utf-8") == report.html()
    report.write(out)  # again, over the first (a PathLike too)
    assert sorted(os.listdir(out)) == ["report.html", "report.json", "report.md"]


# ---------------------------------------------------------------------------------------------- doubts

def test_report_without_audited_heads_has_empty_outcomes():
    call = hand_call("biased", [[1.0], [2.0]], [[1.0], [0.5]], [[1.0], [2.0]])
    call.bias, call.mask_kind = np.array([[[[0.5, 0.0], [0.0, 0.0]]]]), "explicit"
    report = attncert.audit(hand_capture([call]))
    d = report.to_dict()
    assert d["layers"][0]["heads"] == [] and "bias" in d["layers"][0]["notes"][0]
    assert d["summary"]["outcomes"] == {}
    assert repr(report).startswith("AuditReport(")


def test_budget_gives_a_partial_report():
    rng = np.random.default_rng(0)
    n = 64  # one head takes ~0.2 s here, well above the budget
    q, k, v = (rng.standard_normal((n, n)) for _ in range(3))
    call = hand_call("big", q, k, v, weights=np.full((n, n), 1.0 / n))
    d = attncert.audit(hand_capture([call, call]), max_seconds=0.02).to_dict()
    assert d["partial"] is True
    notes = [n for layer in d["layers"] for n in layer["notes"]]
    assert any("not computed (past max_seconds)" in n for n in notes), notes


# ---------------------------------------------------------------------------------------------- 9. multi-head object

def _mp_multi_head(call, b):
    """concat_h(A_h V_h) W_O^T of batch b in mpmath at 200 bits, from the captured float arrays (exact inputs)."""
    mpmath.mp.prec = 200
    q, k, v, w = call.q[b].astype(np.float64), call.k[b].astype(np.float64), call.v[b].astype(np.float64), call.w_o
    H, n, d = q.shape
    allowed = None if call.allowed is None else call.allowed[min(b, call.allowed.shape[0] - 1)]
    c = 1 / mpmath.sqrt(d)
    cols = []
    for h in range(H):
        g = h // (H // k.shape[0])
        rows = []
        for i in range(n):
            ok = [allowed is None or allowed[min(h, allowed.shape[0] - 1), i, j] for j in range(k.shape[1])]
            s = [c * mpmath.fsum(mpmath.mpf(q[h, i, t]) * mpmath.mpf(k[g, j, t]) for t in range(d)) if ok[j] else None
                 for j in range(k.shape[1])]
            m = max(x for x in s if x is not None)
            e = [mpmath.exp(x - m) if x is not None else mpmath.mpf(0) for x in s]
            z = mpmath.fsum(e)
            rows.append([mpmath.fsum(e[j] / z * mpmath.mpf(v[g, j, t]) for j in range(len(e))) for t in range(v.shape[2])])
        cols.append(rows)
    concat = mpmath.matrix([[x for h in range(H) for x in cols[h][i]] for i in range(n)])
    return concat * mpmath.matrix(w.astype(np.float64).T.tolist())


def test_multi_head_object_encloses_the_exact_singular_values_and_bounds_its_rank():
    torch.manual_seed(7)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(1, 6, 8)
    causal = torch.triu(torch.ones(6, 6, dtype=torch.bool), 1)
    with torch.enable_grad(), attncert.capture(mha) as cap:
        mha(x, x, x, attn_mask=causal)
    d = attncert.audit(cap, spec={"objects": ["multi_head"]}).to_dict()
    m = d["layers"][0]["multi_head"][0]
    assert m["computed"] is True
    P = _mp_multi_head(cap.calls[0], 0)
    sigma = sorted(mpmath.svd_r(P, compute_uv=False), reverse=True)
    assert len(m["singular_values"]) == len(sigma)
    for s, enc in zip(sigma, m["singular_values"]):
        assert mpmath.mpf(enc["lo"]) <= s <= mpmath.mpf(enc["hi"]), (s, enc)
    assert m["exact_rank"]["lo"] == m["exact_rank"]["hi"] == 6  # min(n_q, E, H d_v, rank W_O) = 6, all certified
    assert [e["policy"] for e in m["numerical_ranks"]] == ["numpy"]
    # the heads' objects were not asked for: their outcome says so
    h = d["layers"][0]["heads"][0]
    assert h["objects"] == {} and h["outcome"] == "undecided" and "attention" in h["why"]
    # W_O of rank 1: the structural bound uses its exact rank
    with torch.no_grad():
        mha.out_proj.weight.copy_(torch.outer(torch.arange(1.0, 9.0), torch.ones(8) / 4))
    with torch.enable_grad(), attncert.capture(mha) as cap1:
        mha(x, x, x, attn_mask=causal)
    m1 = attncert.audit(cap1, spec={"objects": ["multi_head"]}).to_dict()["layers"][0]["multi_head"][0]
    assert m1["exact_rank"]["hi"] == 1 and "rank W_O" in m1["exact_rank"]["hi_witness"]
    assert m1["exact_rank"]["lo"] <= 1


def test_multi_head_object_needs_w_o():
    call = hand_call("no-w_o", [[1.0], [2.0]], [[1.0], [0.5]], [[1.0], [3.0]])
    d = attncert.audit(hand_capture([call])).to_dict()
    m = d["layers"][0]["multi_head"][0]
    assert m["computed"] is False and "W_O was not captured" in m["why"]
