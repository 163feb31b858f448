"""attncert check rank-heads-tradeoff, proofs/L4 part I (the rows named positions-*: models of 8 rank-one heads per
layer trained with learned positions, concatenated in N + 1 scratch coordinates or added to the content, their MSE on
part H's fixed test set enclosed through the whole model), each number recomputed here without the C++ code:

* the committed weights, parsed from checks/data/rank_heads_positions.inc with regular expressions: 24 models
  (both encodings, N = 4 and 16, 1 and 2 layers, seeds 0, 1, 2) of width D = 10 + N, each with (N + 1) D position
  weights, then layers * 8 * (2 D + D^2) head weights and 8 D readout weights, all finite float32 values, the
  positions zero off their support (content for additive, scratch coordinates for concatenated);
* the formula against the training script: its Model, loaded with the committed weights, gives the NumPy forward
  pass's predictions in float64 (so the order of the weights and the tokens are the ones trained);
* every model's MSE and nearest-key count by a NumPy binary64 forward pass, inside each seed's printed enclosure;
* the best two-layer N = 4 model of each encoding at 30 digits with mpmath, inside its printed enclosure;
* every model in torch float32 on the test set rounded to float32, against the float32 MSE recorded at training;
* the verdict of positions-concatenated-beats-additive and the outcomes printed in the reported rows (the other
  comparisons and the comparison with part H's one-layer models without positions);
* negative controls: the positions dropped, or the largest position weight changed by 1e-5 relative, move the NumPy
  MSE out of its enclosure.
"""
import importlib.util
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from test_rank_heads_trained import (HEX, NUM, SPREAD, WIDTH_RULE, fixed_test_set, forward_numpy, mse_and_right,
                                     mse_mpmath, numpy_results, printed_down, verdict_of, within)

mpmath = pytest.importorskip("mpmath")
mp = mpmath.mp

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "checks" / "data" / "rank_heads_positions.inc"
TRAIN_SCRIPT = ROOT / "experiments" / "rank_heads_train.py"

D = 8
ENCODINGS = {1: "additive", 2: "concatenated"}
SIZES = (4, 16)
LAYERS = (1, 2)
SEEDS = (0, 1, 2)
HEADS = 8

ARRAY = re.compile(r"static const float positions_w(\d+)\[\] = \{(.*?)\};", re.S)
TABLE = re.compile(r"static const trained_positions_model positions_models\[\] = \{(.*?)\};\s*$", re.S)
RECORD = re.compile(r"\{(\d+), (\d+), (\d+), (\d+), (\d+), (\d+), (\d+), ([^,]+), ([^,]+), ([^,]+), positions_w(\d+), (\d+)\},")
INSTANCE = re.compile(r"d=8, N=(\d+), H=8, r=1, layers=(\d+), positions (additive|concatenated) \(width (\d+)\), trained in torch "
                      r"\((\d+) Adam steps, seeds ([\d,]+)\), 200 test inputs \(splitmix64 seed (\d+), (\d+) redrawn\)$")
ENTRY = re.compile(r"seed (\d+): MSE \[\s*" + NUM + r"\s*,\s*" + NUM + r"\s*\], nearest key right on (\d+)/200"
                   r"(?: \((\d+) undecided\))? \(float32 at training " + NUM + ", binary64 " + NUM + ", train loss " + NUM +
                   ", " + NUM + r" s\)$")
OUTCOME = re.compile(r"concatenated <= " + NUM + r"; additive >= " + NUM + "$")
AGAINST = re.compile(r"reported, not claimed; outcome: (additive|concatenated) two layers in \[" + NUM + ", " + NUM +
                     r"\], no positions one layer in \[" + NUM + ", " + NUM + r"\] \(best of the seeds, each end\)$")
REFUTED = re.compile(r"REFUTED on these runs: claimed before training \(concatenated below additive\), the certified enclosures decide "
                     r"the opposite: best additive <= " + NUM + " < " + NUM + r" <= best concatenated \(proofs/L4 part I, Outcome\)$")
PRINT_REL = 1e-4  # five significant digits or more, rounded in the safe direction


# ---------------------------------------------------------------------------------------------------------------
# The committed models


@lru_cache(maxsize=None)
def models():
    """{(encoding, N, layers, seed): model} with the positions P ((N + 1) x D), the heads and Wr as float64 arrays."""
    text = INCLUDE.read_text(encoding="utf-8")
    arrays = {}
    for idx, body in ARRAY.findall(text):
        tokens = [t.strip() for t in body.split(",") if t.strip()]
        assert all(HEX.fullmatch(t) for t in tokens), [t for t in tokens if not HEX.fullmatch(t)][:5]
        arrays[int(idx)] = np.array([float.fromhex(t[:-1]) for t in tokens])
    (table,) = TABLE.findall(text)
    records = RECORD.findall(table)
    assert len(records) == len([line for line in table.splitlines() if line.strip()]), "an unparsed line in positions_models[]"
    out = {}
    for enc, N, H, r, layers, seed, steps, loss, f32, seconds, idx, count in records:
        enc, N, H, r, layers, seed, steps, idx, count = map(int, (enc, N, H, r, layers, seed, steps, idx, count))
        w = arrays[idx]
        width = D + 1 + N + 1
        m = {"encoding": ENCODINGS[enc], "N": N, "H": H, "r": r, "layers": layers, "seed": seed, "steps": steps,
             "train_loss": float(loss), "float32_test_mse": float(f32), "seconds": float(seconds), "count": count,
             "flat": w, "width": width}
        assert len(w) == count == (N + 1) * width + layers * H * (2 * width * r + width * width) + width * D, (enc, N, layers, seed)
        pos = 0

        def take(rows, cols):
            nonlocal pos
            block = w[pos:pos + rows * cols].reshape(rows, cols)
            pos += rows * cols
            return block

        m["P"] = take(N + 1, width)
        m["heads"] = [[(take(width, r), take(width, r), take(width, width)) for _ in range(H)] for _ in range(layers)]
        m["Wr"] = take(width, D)
        assert pos == len(w)
        key = (m["encoding"], N, layers, seed)
        assert key not in out, key
        out[key] = m
    return out


def tokens(m, ys, xs, with_positions=True):
    M, N, _ = xs.shape
    X = np.zeros((M, N + 1, m["width"]))
    X[:, :N, :D] = xs
    X[:, N, :D] = ys
    X[:, N, D] = 1.0
    return X + m["P"][None] if with_positions else X


def forward(m, ys, xs, with_positions=True):
    """The formula of the training script's docstring with positions, in binary64 (part H's forward_numpy with the
    first token rows replaced)."""
    X = tokens(m, ys, xs, with_positions)
    N = xs.shape[1]
    for layer in m["heads"]:
        K = X[:, :N]
        update = np.zeros_like(X)
        for Wq, Wk, Wv in layer:
            S = np.einsum("mtr,mkr->mtk", X @ Wq, K @ Wk)
            E = np.exp(S - S.max(axis=2, keepdims=True))
            update += (E / E.sum(axis=2, keepdims=True)) @ (K @ Wv)
        X = X + update
    return X[:, N] @ m["Wr"]


@lru_cache(maxsize=None)
def numpy_mse():
    out = {}
    for key, m in models().items():
        ys, xs, targets, _ = fixed_test_set(m["N"])
        out[key] = mse_and_right(forward(m, ys, xs), ys, xs, targets)
    return out


# ---------------------------------------------------------------------------------------------------------------
# The rows


@pytest.fixture(scope="module")
def claims(rank_heads_claims):
    got = [c for c in rank_heads_claims if c["claim"].startswith("positions-")]
    assert got, "no positions-* rows: the attncert build predates proofs/L4 part I"
    return got


def mse_rows(claims):
    """{(encoding, N, layers): (row, {seed: entry})} of the positions-model-mse rows."""
    out = {}
    for c in claims:
        if c["claim"] != "positions-model-mse":
            continue
        mi = INSTANCE.match(c["instance"])
        assert mi, c["instance"]
        N, layers, enc, width, steps = int(mi.group(1)), int(mi.group(2)), mi.group(3), int(mi.group(4)), int(mi.group(5))
        assert width == D + 2 + N and mi.group(6) == "0,1,2" and int(mi.group(7)) == 20261205 + N and mi.group(8) == "0"
        head, spread = c["computed"].split("; spread over seeds ", 1)
        assert SPREAD.match("spread over seeds " + spread), spread
        assert float(WIDTH_RULE.match(c["expected"]).group(1)) == 1e-6
        entries = {}
        for part in head.split("; "):
            me = ENTRY.match(part)
            assert me, part
            seed, lo, hi, right, undecided, f32, b64, loss, secs = me.groups()
            entries[int(seed)] = {"lo": float(lo), "hi": float(hi), "right": int(right), "undecided": int(undecided or 0),
                                  "float32": float(f32), "binary64": float(b64), "train_loss": float(loss), "steps": steps}
        out[(enc, N, layers)] = (c, entries)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Tests


def test_include_file_holds_every_model_with_positions_on_their_support():
    got = models()
    assert set(got) == {(e, N, L, s) for e in ENCODINGS.values() for N in SIZES for L in LAYERS for s in SEEDS}
    for (enc, N, L, s), m in got.items():
        assert m["H"] == HEADS and m["r"] == 1 and m["steps"] > 0
        assert np.all(np.isfinite(m["flat"])) and np.all(m["flat"].astype(np.float32).astype(np.float64) == m["flat"])
        support = np.zeros_like(m["P"], dtype=bool)
        if enc == "additive":
            support[:, :D] = True
        else:
            support[:, D + 1:] = True
        assert np.all(m["P"][~support] == 0), (enc, N, L, s)
        assert np.count_nonzero(m["P"][support]) == support.sum(), "a learned position with an exactly zero entry"
        assert np.isfinite(m["train_loss"]) and np.isfinite(m["float32_test_mse"])


def test_the_formula_is_the_training_scripts():
    """Load the committed weights into the training script's Model (positions and all) and compare its float64
    predictions with the NumPy forward pass: the weight order, the tokens and the mask are the trained ones."""
    torch = pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("rank_heads_train", TRAIN_SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for key in (("additive", 4, 2, 0), ("concatenated", 4, 2, 1), ("concatenated", 16, 1, 2)):
        m = models()[key]
        model = script.Model(HEADS, 1, m["layers"], m["encoding"], m["N"])
        with torch.no_grad():
            model.p.copy_(torch.tensor(m["P"]))
            for li, layer in enumerate(m["heads"]):
                for h, (Wq, Wk, Wv) in enumerate(layer):
                    model.q[li, h].copy_(torch.tensor(Wq))
                    model.k[li, h].copy_(torch.tensor(Wk))
                    model.v[li, h].copy_(torch.tensor(Wv))
            model.r.copy_(torch.tensor(m["Wr"]))
        assert np.array_equal(model.flat().astype(np.float64), m["flat"]), key
        ys, xs, _, _ = fixed_test_set(m["N"])
        with torch.no_grad():
            got = model(torch.tensor(ys), torch.tensor(xs)).numpy()
        assert np.allclose(got, forward(m, ys, xs), rtol=0, atol=1e-12), key


def test_rows_cover_every_configuration(claims):
    rows = mse_rows(claims)
    assert sorted(rows) == sorted((e, N, L) for e in ENCODINGS.values() for N in SIZES for L in LAYERS)
    for (enc, N, L), (row, entries) in rows.items():
        assert row["verdict"] == "pass" and sorted(entries) == list(SEEDS)
        for s, e in entries.items():
            m = models()[(enc, N, L, s)]
            assert e["steps"] == m["steps"] and e["undecided"] == 0
            assert printed_down(e["train_loss"], m["train_loss"], PRINT_REL)
            assert printed_down(e["float32"], m["float32_test_mse"], PRINT_REL)
            assert 0 < e["lo"] <= e["hi"] and (e["hi"] - e["lo"]) <= 1e-6 * e["lo"]


def test_numpy_lies_inside_every_enclosure(claims):
    rows = mse_rows(claims)
    for (enc, N, L), (_, entries) in rows.items():
        for s, e in entries.items():
            mse, right = numpy_mse()[(enc, N, L, s)]
            assert within(mse, e["lo"], e["hi"]), (enc, N, L, s, mse, e["lo"], e["hi"])
            assert right == e["right"], (enc, N, L, s)
            assert abs(mse - e["binary64"]) <= PRINT_REL * mse


def test_mpmath_lies_inside_the_enclosures_of_the_claimed_models(claims):
    """The best two-layer N = 4 model of each encoding (the two numbers the claim compares) at 30 digits."""
    rows = mse_rows(claims)
    ys, xs, targets, _ = fixed_test_set(4)
    for enc in ENCODINGS.values():
        _, entries = rows[(enc, 4, 2)]
        best = min(SEEDS, key=lambda s: entries[s]["hi"])
        with mp.workdps(30):
            v = mse_mpmath(models()[(enc, 4, 2, best)], ys, xs, targets)
            assert mp.mpf(entries[best]["lo"]) <= v <= mp.mpf(entries[best]["hi"]), (enc, best, v)


def test_torch_float32_reproduces_the_training_time_estimates():
    torch = pytest.importorskip("torch")
    for key, m in models().items():
        ys, xs, targets, _ = fixed_test_set(m["N"])
        f = lambda a: torch.tensor(np.asarray(a, dtype=np.float32))  # noqa: E731
        X = f(tokens(m, ys.astype(np.float32), xs.astype(np.float32)))
        N = m["N"]
        with torch.no_grad():
            for layer in m["heads"]:
                K = X[:, :N]
                update = torch.zeros_like(X)
                for Wq, Wk, Wv in layer:
                    update = update + torch.softmax((X @ f(Wq)) @ (K @ f(Wk)).transpose(1, 2), dim=2) @ (K @ f(Wv))
                X = X + update
            pred = (X[:, N] @ f(m["Wr"])).numpy().astype(np.float64)
        t = xs[np.arange(len(ys)), targets]
        got = float(((pred - t) ** 2).sum(axis=1).mean())
        assert abs(got - m["float32_test_mse"]) <= 1e-4 * m["float32_test_mse"], (key, got, m["float32_test_mse"])


def best_numpy(enc, N, L):
    return min(numpy_mse()[(enc, N, L, s)][0] for s in SEEDS)


def test_comparisons_are_recomputed(claims):
    got = [c for c in claims if c["claim"] == "positions-concatenated-beats-additive"]
    assert len(got) == 4
    for c in got:
        N, L = map(int, re.match(r"d=8, N=(\d+), H=8, r=1, layers=(\d+), learned positions", c["instance"]).groups())
        cat, add = best_numpy("concatenated", N, L), best_numpy("additive", N, L)
        if (N, L) == (4, 2):
            # the claim fixed before training; a certified refutation is reported as such (skipped, with the numbers)
            mo = OUTCOME.match(c["computed"])
            want = verdict_of(cat, add)
            if want == "fail":
                mr = REFUTED.match(c["note"])
                assert c["verdict"] == "skipped" and mr, c["note"]
                a_up, c_down = float(mr.group(1)), float(mr.group(2))
                assert add <= a_up * (1 + 1e-12) and a_up - add <= 1e-4 * add and a_up < c_down
                assert printed_down(c_down, cat, 1e-4)
            else:
                assert c["verdict"] == want
        else:
            assert c["verdict"] == "skipped"
            mo = OUTCOME.match(c["note"].split("; outcome: ", 1)[1])
        assert mo, c
        assert within(cat, 0, float(mo.group(1))) and float(mo.group(1)) - cat <= 1e-4 * cat, (N, L, cat)
        assert printed_down(float(mo.group(2)), add, 1e-4), (N, L, add)


def test_against_no_positions_is_reported(claims):
    got = [c for c in claims if c["claim"] == "positions-against-no-positions"]
    assert len(got) == 4
    for c in got:
        N = int(re.match(r"d=8, N=(\d+)", c["instance"]).group(1))
        ma = AGAINST.match(c["note"])
        assert ma and c["verdict"] == "skipped", c["note"]
        lo, hi, nlo, nhi = map(float, ma.groups()[1:])
        assert lo <= best_numpy(ma.group(1), N, 2) * (1 + 1e-9) and best_numpy(ma.group(1), N, 2) <= hi * (1 + 1e-9)
        none = min(numpy_results()[(N, 8, 1, 1, s)][0] for s in SEEDS)
        assert nlo <= none * (1 + 1e-9) and none <= nhi * (1 + 1e-9)


def test_negative_controls_leave_the_enclosures(claims):
    rows = mse_rows(claims)
    for key in (("additive", 4, 2, 0), ("concatenated", 4, 2, 0)):
        m = models()[key]
        ys, xs, targets, _ = fixed_test_set(4)
        e = rows[key[:3]][1][key[3]]
        dropped, _ = mse_and_right(forward(m, ys, xs, with_positions=False), ys, xs, targets)
        assert not within(dropped, e["lo"], e["hi"]), key
        moved = dict(m)
        P = m["P"].copy()
        i, j = np.unravel_index(np.argmax(np.abs(P)), P.shape)
        P[i, j] *= 1 + 1e-5  # the printed enclosures are rounded to 10 digits (relative width ~3e-9)
        moved["P"] = P
        mse, _ = mse_and_right(forward(moved, ys, xs), ys, xs, targets)
        assert not within(mse, e["lo"], e["hi"]), key


def test_part_h_forward_is_the_positions_forward_without_positions():
    """The two NumPy passes agree where they should: a part-H model padded with zero positions."""
    from test_rank_heads_trained import models as plain_models
    m = plain_models()[(4, 8, 1, 2, 0)]
    ys, xs, _, _ = fixed_test_set(4)
    padded = {"P": np.zeros((5, D + 1)), "width": D + 1, "heads": m["heads"], "Wr": m["Wr"]}
    assert np.array_equal(forward(padded, ys, xs), forward_numpy(m, ys, xs)[0])
