"""`attncert certify` on the shipped nearest_neighbour_model_mse claims (proofs/L4 parts H and I,
proofs/claims/L4-trained-*.json): each claim's weights are exactly the committed model's (the fractions of its float32
weights), and the certificate's enclosure of the MSE on the fixed test set contains the NumPy binary64 value (to its
rounding) and the mpmath value at 30 digits, both computed here from the test set's specification (part H's module)."""
import glob
import json
import os
import subprocess
from fractions import Fraction

import numpy as np
import pytest

from test_rank_heads_positions import forward, models as positions_models
from test_rank_heads_trained import D, fixed_test_set, models as plain_models, mse_mpmath

mpmath = pytest.importorskip("mpmath")
mp = mpmath.mp

CLI = os.environ.get("ATTNCERT_CLI")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KIND = "nearest_neighbour_model_mse"


def shipped():
    out = []
    for f in sorted(glob.glob(os.path.join(ROOT, "proofs", "claims", "L4-*.json"))):
        with open(f) as fh:
            c = json.load(fh)
        if c["quantity"]["kind"] == KIND:
            out.append((f, c))
    return out


def unpack(q):
    """The claim's model as the forward's dict: positions P (zeros without), the heads, Wr; all exact float64."""
    m = q["model"]
    N, width, H, r = q["keys"], m["width"], m["heads"], m["rank"]
    w = np.array([float(Fraction(x)) for x in m["weights"]])
    assert all(Fraction(float(Fraction(x))) == Fraction(x) for x in m["weights"])  # every weight exactly a binary64
    pos = 0

    def take(rows, cols):
        nonlocal pos
        block = w[pos:pos + rows * cols].reshape(rows, cols)
        pos += rows * cols
        return block

    P = take(N + 1, width) if m["encoding"] != "none" else np.zeros((N + 1, width))
    heads = [[(take(width, r), take(width, r), take(width, width)) for _ in range(H)] for _ in range(m["layers"])]
    Wr = take(width, D)
    assert pos == len(w)
    return {"P": P, "heads": heads, "Wr": Wr, "width": width, "flat": w}


def committed(q):
    """The committed models with this configuration (the claim must be one of them, weight for weight)."""
    m = q["model"]
    if m["encoding"] == "none":
        return [x for x in plain_models().values() if (x["N"], x["H"], x["r"], x["layers"]) == (q["keys"], m["heads"], m["rank"], m["layers"])]
    return [x for (enc, N, L, _), x in positions_models().items() if (enc, N, L) == (m["encoding"], q["keys"], m["layers"])]


def same_weights(x, model):
    """Block by block: the positions (if the committed model has them), every head's Wq, Wk, Wv, and Wr."""
    if "P" in x and not np.array_equal(x["P"], model["P"]):
        return False
    if len(x["heads"]) != len(model["heads"]) or not np.array_equal(x["Wr"], model["Wr"]):
        return False
    return all(len(la) == len(lb) and all(np.array_equal(a, b) for ha, hb in zip(la, lb) for a, b in zip(ha, hb))
               for la, lb in zip(x["heads"], model["heads"]))


@pytest.mark.skipif(not CLI, reason="ATTNCERT_CLI (the attncert binary) not set")
def test_model_certificates_hold_numpy_and_mpmath(tmp_path):
    claims = shipped()
    assert len(claims) >= 4
    for path, c in claims:
        q = c["quantity"]
        model = unpack(q)
        matches = [x for x in committed(q) if same_weights(x, model)]
        assert len(matches) == 1, (path, "the claim's weights are not exactly one committed model's")
        out = tmp_path / (os.path.basename(path) + ".cert.json")
        run = subprocess.run([CLI, "certify", path, "--certificate", str(out)], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        with open(out) as fh:
            cert = json.load(fh)
        with open(os.path.join(ROOT, "proofs", "certificates", os.path.basename(path)[:-5] + ".cert.json")) as fh:
            assert json.load(fh) == cert, "the shipped certificate differs from certify's: regenerate it"
        lo, hi = (Fraction(x) for x in cert["nearest_neighbour_model"]["mse"])
        ys, xs, targets, redrawn = fixed_test_set(q["keys"])
        assert cert["nearest_neighbour_model"]["redrawn"] == redrawn
        pred = forward(model, ys, xs)
        t = xs[np.arange(len(ys)), targets]
        mse = float(((pred - t) ** 2).sum(axis=1).mean())
        assert float(lo) - 1e-12 <= mse <= float(hi) + 1e-12, (path, mse, float(lo), float(hi))
        with mp.workdps(30):
            v = mse_mpmath(model if q["model"]["encoding"] != "none" else {k: model[k] for k in ("heads", "Wr")}, ys, xs, targets)
            assert mp.mpf(lo.numerator) / lo.denominator <= v <= mp.mpf(hi.numerator) / hi.denominator, (path, v, lo, hi)
        value = Fraction(str(c["value"]))
        holds = (hi <= value) if c["relation"] == "<=" else (lo >= value)
        assert holds, (path, "the claim's value is not on the certified side of the enclosure")


@pytest.mark.skipif(not CLI, reason="ATTNCERT_CLI (the attncert binary) not set")
def test_a_changed_weight_leaves_the_enclosure(tmp_path):
    """Negative control: the full-rank claim with one weight changed by 2^-20 certifies a different enclosure that does
    not contain the original model's value."""
    ((path, c),) = [(p, c) for p, c in shipped() if c["quantity"]["model"]["encoding"] == "none" and c["quantity"]["model"]["rank"] == 8]
    q = c["quantity"]
    w = [Fraction(x) for x in q["model"]["weights"]]
    w[5] += Fraction(1, 2 ** 20)
    changed = json.loads(json.dumps(c))
    changed["quantity"]["model"]["weights"] = [str(x) for x in w]
    changed["relation"], changed["value"] = "<=", "1"
    p = tmp_path / "changed.json"
    p.write_text(json.dumps(changed))
    out = tmp_path / "changed.cert.json"
    run = subprocess.run([CLI, "certify", str(p), "--certificate", str(out)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    lo, hi = (Fraction(x) for x in json.load(open(out))["nearest_neighbour_model"]["mse"])
    ys, xs, targets, _ = fixed_test_set(q["keys"])
    pred = forward(unpack(q), ys, xs)
    t = xs[np.arange(len(ys)), targets]
    original = float(((pred - t) ** 2).sum(axis=1).mean())
    assert not (float(lo) <= original <= float(hi)), (original, float(lo), float(hi))


@pytest.mark.skipif(not CLI, reason="ATTNCERT_CLI (the attncert binary) not set")
def test_malformed_model_claims_exit_2(tmp_path):
    ((path, c),) = [(p, c) for p, c in shipped() if c["quantity"]["model"]["encoding"] == "none" and c["quantity"]["model"]["rank"] == 8]

    def run(edit):
        bad = json.loads(json.dumps(c))
        edit(bad)
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(bad))
        r = subprocess.run([CLI, "certify", str(p)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stdout + r.stderr
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, r.stderr
        return lines[0]

    assert "/quantity/model/weights" in run(lambda b: b["quantity"]["model"]["weights"].pop())
    assert "/quantity/model/weights/3" in run(lambda b: b["quantity"]["model"]["weights"].__setitem__(3, "0.1"))  # not a binary64
    assert "/quantity/model/width" in run(lambda b: b["quantity"]["model"].__setitem__("width", 10))
    assert "/quantity/model/encoding" in run(lambda b: b["quantity"]["model"].__setitem__("encoding", "rotary"))
    assert "/quantity/keys" in run(lambda b: b["quantity"].__setitem__("keys", 17))
    assert "/relation" in run(lambda b: b.__setitem__("relation", "="))


@pytest.mark.skipif(not CLI, reason="ATTNCERT_CLI (the attncert binary) not set")
def test_weights_from_a_float32_npy_file_give_the_same_certificate(tmp_path):
    """The claim's weights saved as a float32 .npy (a 1 x n matrix) certify the same enclosure as the inline fractions."""
    ((path, c),) = [(p, c) for p, c in shipped() if c["quantity"]["model"]["encoding"] == "none" and c["quantity"]["model"]["rank"] == 8]
    w = np.array([float(Fraction(x)) for x in c["quantity"]["model"]["weights"]], dtype=np.float32)
    assert all(Fraction(float(v)) == Fraction(x) for v, x in zip(w, c["quantity"]["model"]["weights"]))  # float32 exactly
    np.save(tmp_path / "w.npy", w.reshape(1, -1))
    from_file = json.loads(json.dumps(c))
    from_file["quantity"]["model"]["weights"] = "w.npy"
    (tmp_path / "c.json").write_text(json.dumps(from_file))
    run = subprocess.run([CLI, "certify", str(tmp_path / "c.json"), "--certificate", str(tmp_path / "c.cert.json")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    with open(os.path.join(ROOT, "proofs", "certificates", os.path.basename(path)[:-5] + ".cert.json")) as fh:
        shipped_cert = json.load(fh)
    got = json.loads((tmp_path / "c.cert.json").read_text())
    assert got["nearest_neighbour_model"] == shipped_cert["nearest_neighbour_model"]
    assert got["claim"]["model"]["weights"] == shipped_cert["claim"]["model"]["weights"]
