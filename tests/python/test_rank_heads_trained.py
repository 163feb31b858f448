"""attncert check rank-heads-tradeoff, proofs/L4 part H (the rows named trained-*: attention-only transformers trained
in torch by experiments/rank_heads_train.py, their MSE on a fixed test set enclosed by interval evaluation through the
whole model: binary64 intervals rounded outward, MPFI where those are too wide), each number recomputed here without
the C++ code:

* the committed weights, parsed from checks/data/rank_heads_trained.inc with regular expressions: 54 models
  (N = 4, 16; one head of rank 8, 8 heads of rank 1, 4 heads of rank 2; 1 to 3 layers; seeds 0, 1, 2), each with
  layers H (2 * 9 r + 81) + 72 float32 weights, all finite hexadecimal literals;
* the test set from its specification: SplitMix64 (vectorized in NumPy uint64 from the k-th output being the mix of
  seed + k * 0x9E3779B97F4A7C15, checked against a scalar Python SplitMix64) seeded with 20261205 + N, lattice points
  of radius 4096 in dimension 8 rounded to binary64 as z / sqrt(|z|^2), a query then N keys per input, the target
  the nearest key decided exactly with Fractions of the binary64 values (a tied input is redrawn); for N = 4 it is
  compared bit for bit with the training script's own test_set;
* every model's MSE and nearest-key count by a NumPy binary64 forward pass of the formula in the training script's
  docstring (all tokens attend to the N keys only; softmax with the maximum subtracted), against each seed's
  printed enclosure widened by 1e-10 relative;
* the nine one-layer N = 4 models (three configurations, three seeds) at 40 digits with mpmath, inside the printed
  enclosures (rounded outward, so containment is the test);
* the same models in torch float32 on the test set rounded to float32, against the float32 MSE recorded at
  training time (1e-4 relative);
* the verdicts of trained-full-rank-beats-low-rank and trained-depth-helps-low-rank from the NumPy MSEs (best of
  the seeds), and the N = 16 depth row skipped with its outcome in the note;
* a negative control: one readout weight changed by 1e-6 relative moves the NumPy MSE out of its row's enclosure.
"""
import importlib.util
import re
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from splitmix import splitmix64_block, splitmix64_scalar


mpmath = pytest.importorskip("mpmath")
mp = mpmath.mp

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "checks" / "data" / "rank_heads_trained.inc"
TRAIN_SCRIPT = ROOT / "experiments" / "rank_heads_train.py"

D = 8  # content dimension
WIDTH = D + 1  # tokens carry a query flag
SIZES = (4, 16)
CONFIGS = ((1, 8), (8, 1), (4, 2))  # (H, r): full rank against 8 rank-one and 4 rank-two heads
LAYERS = (1, 2, 3)
SEEDS = (0, 1, 2)
INPUTS = 200
RADIUS = 4096
SEED_BASE = 20261205
WIDEN = 1e-10  # relative: binary64 rounding through these small models is far below this
MARGIN = 1e-9  # relative: a comparison of best MSEs decided by the NumPy values

HEX = re.compile(r"-?0x[0-9a-f]+(?:\.[0-9a-f]*)?p[-+]\d+f")
ARRAY = re.compile(r"static const float trained_w(\d+)\[\] = \{(.*?)\};", re.S)
TABLE = re.compile(r"static const trained_model trained_models\[\] = \{(.*?)\};\s*$", re.S)
RECORD = re.compile(r"\{(\d+), (\d+), (\d+), (\d+), (\d+), (\d+), ([^,]+), ([^,]+), ([^,]+), trained_w(\d+), (\d+)\},")
NUM = r"([-+]?[0-9.]+(?:[eE][-+]?\d+)?)"
INSTANCE = re.compile(r"d=8, N=(\d+), H=(\d+), r=(\d+), layers=(\d+), trained in torch \((\d+) Adam steps, seeds ([\d,]+)\), "
                      r"(\d+) test inputs \(splitmix64 seed (\d+), (\d+) redrawn\)$")
ENTRY = re.compile(r"seed (\d+): MSE \[\s*" + NUM + r"\s*,\s*" + NUM + r"\s*\], nearest key right on (\d+)/(\d+)"
                   r"(?: \((\d+) undecided\))? \(float32 at training " + NUM + ", binary64 " + NUM + ", train loss " + NUM +
                   ", " + NUM + r" s\)$")
SPREAD = re.compile(r"spread over seeds " + NUM + r" \.\. " + NUM +
                    r"(?:; widest relative width " + NUM + r", (\d+) inputs escalated from binary64 intervals to MPFI)?$")
WIDTH_RULE = re.compile(r"every enclosure of relative width <= " + NUM + "$")
COMPARE = re.compile(r"full rank <= " + NUM + r"; (\d+) heads of rank (\d+) >= " + NUM + "$")
DEPTH = re.compile(r"2-3 layers <= " + NUM + r"; 1 layer >= " + NUM + "$")


# ---------------------------------------------------------------------------------------------------------------
# The committed models


@lru_cache(maxsize=None)
def include_text():
    return INCLUDE.read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def models():
    """{(N, H, r, layers, seed): record} from the include file; a record holds the fields of trained_models[] and the
    weights (float64 copies of the float32 literals) split into per-layer lists of (Wq, Wk, Wv) and Wr."""
    text = include_text()
    arrays = {}
    for idx, body in ARRAY.findall(text):
        tokens = [t.strip() for t in body.split(",") if t.strip()]
        assert all(HEX.fullmatch(t) for t in tokens), [t for t in tokens if not HEX.fullmatch(t)][:5]
        assert int(idx) not in arrays
        arrays[int(idx)] = np.array([float.fromhex(t[:-1]) for t in tokens])
    (table,) = TABLE.findall(text)
    records = RECORD.findall(table)
    assert len(records) == len([line for line in table.splitlines() if line.strip()]), "an unparsed line in trained_models[]"
    out = {}
    for N, H, r, layers, seed, steps, loss, f32, seconds, idx, count in records:
        N, H, r, layers, seed, steps, idx, count = map(int, (N, H, r, layers, seed, steps, idx, count))
        w = arrays[idx]
        m = {"N": N, "H": H, "r": r, "layers": layers, "seed": seed, "steps": steps, "train_loss": float(loss),
             "float32_test_mse": float(f32), "seconds": float(seconds), "index": idx, "count": count, "flat": w}
        if len(w) == count == layers * H * (2 * WIDTH * r + WIDTH * WIDTH) + WIDTH * D:
            m["heads"], m["Wr"] = unflatten(w, H, r, layers)
        key = (N, H, r, layers, seed)
        assert key not in out, key
        out[key] = m
    return out


def unflatten(w, H, r, layers):
    """Per layer, per head Wq (9 x r), Wk (9 x r), Wv (9 x 9), row-major; then Wr (9 x 8)."""
    pos, heads = 0, []

    def take(rows, cols):
        nonlocal pos
        block = w[pos:pos + rows * cols].reshape(rows, cols)
        pos += rows * cols
        return block

    for _ in range(layers):
        heads.append([(take(WIDTH, r), take(WIDTH, r), take(WIDTH, WIDTH)) for _ in range(H)])
    Wr = take(WIDTH, D)
    assert pos == len(w)
    return heads, Wr


# ---------------------------------------------------------------------------------------------------------------
# The test set


def lattice_stream(seed, count):
    """The first `count` lattice points of the stream: 8 outputs per attempt, c = ((x >> 32) mod 8193) - 4096, kept
    when 0 < |c|^2 <= 4096^2.  Returns integer points (count, 8)."""
    kept, have, used = [], 0, 0
    while have < count:
        attempts = int((count - have) / 0.0158 * 1.1) + 64  # vol(unit 8-ball) / 2^8 = pi^4 / 6144 ~ 0.0159
        x = splitmix64_block(seed, used, attempts * D)
        used += attempts * D
        c = ((x >> np.uint64(32)) % np.uint64(2 * RADIUS + 1)).astype(np.int64).reshape(attempts, D) - RADIUS
        n2 = np.einsum("ij,ij->i", c, c)
        ok = (n2 > 0) & (n2 <= RADIUS * RADIUS)
        kept.append(c[ok])
        have += int(ok.sum())
    return np.concatenate(kept)[:count]


def exact_nearest(y, keys):
    """The indices of the keys of largest <x_i, y>, exactly (Fractions of the binary64 values)."""
    fy = [Fraction(float(v)) for v in y]
    dots = [sum((Fraction(float(a)) * b for a, b in zip(k, fy)), Fraction(0)) for k in keys]
    top = max(dots)
    return [i for i, s in enumerate(dots) if s == top]


@lru_cache(maxsize=None)
def fixed_test_set(N):
    """(queries (200, 8), keys (200, N, 8), targets (200,), redrawn) for N keys, from the specification."""
    extra = 0
    while True:
        z = lattice_stream(SEED_BASE + N, (N + 1) * (INPUTS + extra))
        n2 = np.einsum("ij,ij->i", z, z)
        pts = z.astype(np.float64) / np.sqrt(n2.astype(np.float64))[:, None]  # both correctly rounded
        pts = pts.reshape(-1, N + 1, D)
        ys, xs, targets, redrawn = [], [], [], 0
        for p in pts:
            best = exact_nearest(p[0], p[1:])
            if len(best) != 1:
                redrawn += 1
                continue
            ys.append(p[0])
            xs.append(p[1:])
            targets.append(best[0])
            if len(ys) == INPUTS:
                return np.array(ys), np.array(xs), np.array(targets), redrawn
        extra += INPUTS - len(ys) + 4


# ---------------------------------------------------------------------------------------------------------------
# The model's formula, three times


def tokens(ys, xs):
    M, N, _ = xs.shape
    X = np.zeros((M, N + 1, WIDTH))
    X[:, :N, :D] = xs
    X[:, N, :D] = ys
    X[:, N, D] = 1.0
    return X


def forward_numpy(m, ys, xs, Wr=None):
    """X <- X + sum_h softmax((X Wq)(K Wk)^T)(K Wv), K the N key rows; prediction X[N] Wr.  Binary64."""
    X = tokens(ys, xs)
    N = xs.shape[1]
    for layer in m["heads"]:
        K = X[:, :N]
        update = np.zeros_like(X)
        for Wq, Wk, Wv in layer:
            S = np.einsum("mtr,mkr->mtk", X @ Wq, K @ Wk)
            E = np.exp(S - S.max(axis=2, keepdims=True))
            update += (E / E.sum(axis=2, keepdims=True)) @ (K @ Wv)
        X = X + update
    return X[:, N] @ (m["Wr"] if Wr is None else Wr), X[:, N]


def mse_and_right(pred, ys, xs, targets):
    t = xs[np.arange(len(ys)), targets]
    mse = float(((pred - t) ** 2).sum(axis=1).mean())
    right = int((np.einsum("mnd,md->mn", xs, pred).argmax(axis=1) == targets).sum())
    return mse, right


@lru_cache(maxsize=None)
def numpy_results():
    """{model key: (MSE, nearest key right)} for every committed model, in binary64."""
    out = {}
    for key, m in models().items():
        ys, xs, targets, _ = fixed_test_set(m["N"])
        out[key] = mse_and_right(forward_numpy(m, ys, xs)[0], ys, xs, targets)
    return out


def mse_mpmath(m, ys, xs, targets):
    """The MSE at the working precision of mpmath: every weight and input is exact; after the last layer only the
    query's row is read, so that layer is evaluated for the query alone.  A model with learned positions (part I:
    m["P"], m["width"]) adds them to the first token rows."""
    cols = lambda W: [[mp.mpf(float(v)) for v in W[:, j]] for j in range(W.shape[1])]  # noqa: E731
    heads = [[(cols(Wq), cols(Wk), cols(Wv)) for Wq, Wk, Wv in layer] for layer in m["heads"]]
    Wr = cols(m["Wr"])
    N, width = xs.shape[1], m.get("width", WIDTH)
    P = m.get("P")
    total = mp.zero
    for y, keys, t in zip(ys, xs, targets):
        rows = [[mp.mpf(float(v)) for v in k] + [mp.zero] * (width - D) for k in keys] + \
               [[mp.mpf(float(v)) for v in y] + [mp.one] + [mp.zero] * (width - D - 1)]
        if P is not None:
            rows = [[v + mp.mpf(float(p)) for v, p in zip(row, prow)] for row, prow in zip(rows, P)]
        for li, layer in enumerate(heads):
            which = [N] if li + 1 == len(heads) else list(range(N + 1))
            K = rows[:N]
            new = {i: list(rows[i]) for i in which}
            for Wq, Wk, Wv in layer:
                kk = [[mp.fdot(k, c) for c in Wk] for k in K]
                for i in which:
                    q = [mp.fdot(rows[i], c) for c in Wq]
                    s = [mp.fdot(q, k) for k in kk]
                    top = max(s)
                    e = [mp.exp(v - top) for v in s]
                    tot = mp.fsum(e)
                    a = [v / tot for v in e]
                    ctx = [mp.fdot(a, [k[j] for k in K]) for j in range(width)]
                    for j in range(width):
                        new[i][j] += mp.fdot(ctx, Wv[j])
            for i in which:
                rows[i] = new[i]
        pred = [mp.fdot(rows[N], c) for c in Wr]
        total += mp.fsum((p - mp.mpf(float(v))) ** 2 for p, v in zip(pred, keys[t]))
    return total / len(ys)


def mse_torch_float32(torch, m, ys, xs, targets):
    """The model in torch float32 on the inputs rounded to float32; the error against the binary64 targets."""
    f = lambda a: torch.tensor(np.asarray(a, dtype=np.float32))  # noqa: E731  (weights are float32 exactly)
    y, x = f(ys), f(xs)
    B, N, _ = x.shape
    X = torch.cat([torch.cat([x, torch.zeros(B, N, 1)], dim=2), torch.cat([y, torch.ones(B, 1)], dim=1)[:, None, :]], dim=1)
    with torch.no_grad():
        for layer in m["heads"]:
            K = X[:, :N]
            update = torch.zeros_like(X)
            for Wq, Wk, Wv in layer:
                A = torch.softmax((X @ f(Wq)) @ (K @ f(Wk)).transpose(1, 2), dim=2)
                update = update + A @ (K @ f(Wv))
            X = X + update
        pred = (X[:, N] @ f(m["Wr"])).numpy().astype(np.float64)
    t = xs[np.arange(len(ys)), targets]
    return float(((pred - t) ** 2).sum(axis=1).mean())


# ---------------------------------------------------------------------------------------------------------------
# Parsing the rows


@pytest.fixture(scope="module")
def claims(rank_heads_claims):
    got = [c for c in rank_heads_claims if c["claim"].startswith("trained-")]
    assert got, "no trained-* rows: the attncert build predates checks/rank_heads_trained.cpp"
    return got


def mse_rows(claims):
    """{(N, H, r, layers): (instance fields, {seed: entry fields}, spread)} of the trained-model-mse rows."""
    out = {}
    for c in claims:
        if c["claim"] != "trained-model-mse":
            continue
        mi = INSTANCE.match(c["instance"])
        assert mi, c["instance"]
        N, H, r, layers, steps = map(int, mi.groups()[:5])
        inst = {"steps": steps, "seeds": mi.group(6), "inputs": int(mi.group(7)), "stream": int(mi.group(8)),
                "redrawn": int(mi.group(9)), "row": c}
        head, spread = c["computed"].split("; spread over seeds ", 1)
        ms = SPREAD.match("spread over seeds " + spread)
        assert ms, spread
        mw = WIDTH_RULE.match(c["expected"])
        assert mw, c["expected"]
        inst["width_rule"] = float(mw.group(1))
        inst["widest"] = None if ms.group(3) is None else float(ms.group(3))
        entries = {}
        for part in head.split("; "):
            me = ENTRY.match(part)
            assert me, part
            seed, lo, hi, right, of, undecided, f32, b64, loss, secs = me.groups()
            entries[int(seed)] = {"lo": float(lo), "hi": float(hi), "lo_text": lo, "hi_text": hi, "right": int(right),
                                  "of": int(of), "undecided": int(undecided or 0), "float32": float(f32),
                                  "binary64": float(b64), "train_loss": float(loss), "seconds": float(secs)}
        assert (N, H, r, layers) not in out
        out[(N, H, r, layers)] = (inst, entries, (float(ms.group(1)), float(ms.group(2))))
    return out


def within(value, lo, hi, rel=WIDEN):
    return lo - rel * abs(lo) <= value <= hi + rel * abs(hi)


def printed_down(text_value, value, rel):
    """A value printed rounded down to a few significant digits: 0 <= value - printed <= rel * value."""
    return 0 <= value - text_value <= rel * abs(value)


def verdict_of(below, above):
    """pass when below < above by more than MARGIN (relative), fail when above < below by as much, else undecided."""
    gap = MARGIN * max(abs(below), abs(above))
    return "pass" if above - below > gap else "fail" if below - above > gap else "undecided"


# ---------------------------------------------------------------------------------------------------------------
# Tests


def test_include_file_holds_every_model():
    text = include_text()
    assert text.rstrip().endswith("};") and TABLE.search(text), "the include file is incomplete"
    got = models()
    want = {(N, H, r, L, s) for N in SIZES for H, r in CONFIGS for L in LAYERS for s in SEEDS}
    assert set(got) == want and len(got) == 54
    assert len({m["index"] for m in got.values()}) == 54
    assert len({m["steps"] for m in got.values()}) == 1 and next(iter(got.values()))["steps"] > 0
    for key, m in got.items():
        N, H, r, L, _ = key
        assert m["count"] == len(m["flat"]) == L * H * (2 * WIDTH * r + WIDTH * WIDTH) + WIDTH * D, key
        assert np.all(np.isfinite(m["flat"])), key
        assert np.all(m["flat"].astype(np.float32).astype(np.float64) == m["flat"]), key  # float32 values exactly
        assert np.isfinite(m["train_loss"]) and np.isfinite(m["float32_test_mse"]) and m["seconds"] >= 0, key
        assert len(m["heads"]) == L and all(len(layer) == H for layer in m["heads"]) and m["Wr"].shape == (WIDTH, D)


def test_splitmix64_block_matches_the_scalar_generator():
    assert splitmix64_scalar(0, 1) == [0xE220A8397B1DCDAF]  # the published first output of SplitMix64(0)
    for N in SIZES:
        seed = SEED_BASE + N
        assert [int(v) for v in splitmix64_block(seed, 0, 50)] == splitmix64_scalar(seed, 50)
        assert [int(v) for v in splitmix64_block(seed, 1234, 7)] == splitmix64_scalar(seed, 1241)[1234:]


def test_test_set_follows_its_specification():
    for N in SIZES:
        ys, xs, targets, _ = fixed_test_set(N)
        assert ys.shape == (INPUTS, D) and xs.shape == (INPUTS, N, D) and targets.shape == (INPUTS,)
        pts = np.concatenate([ys[:, None, :], xs], axis=1).reshape(-1, D)
        assert np.all(np.abs(np.linalg.norm(pts, axis=1) - 1) < 1e-15)
        # the first point by hand: the first accepted attempt of 8 scalar outputs
        out = splitmix64_scalar(SEED_BASE + N, 8 * 400)
        for a in range(400):
            z = [((v >> 32) % (2 * RADIUS + 1)) - RADIUS for v in out[8 * a:8 * a + 8]]
            n2 = sum(c * c for c in z)
            if 0 < n2 <= RADIUS * RADIUS:
                break
        else:
            pytest.fail("no lattice point in the first 400 attempts")
        assert ys[0].tolist() == [c / np.sqrt(np.float64(n2)) for c in z]
        # the targets are the float64 argmax too (no near tie decided otherwise)
        assert np.array_equal(np.einsum("mnd,md->mn", xs, ys).argmax(axis=1), targets)


def test_test_set_agrees_with_the_training_script():
    """The training script's test_set (imported by path; it needs torch) gives the same bits for N = 4."""
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("rank_heads_train", TRAIN_SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    N = 4
    assert script.test_seed(N) == SEED_BASE + N
    sy, sx = script.test_set(N, script.test_seed(N))
    ys, xs, targets, redrawn = fixed_test_set(N)
    assert redrawn == 0  # the script does not redraw ties
    assert np.array_equal(sy, ys) and np.array_equal(sx, xs)
    assert np.array_equal(np.einsum("mnd,md->mn", sx, sy).argmax(axis=1), targets)


def test_rows_cover_every_configuration(claims):
    rows = mse_rows(claims)
    assert sorted(rows) == sorted((N, H, r, L) for N in SIZES for H, r in CONFIGS for L in LAYERS)
    steps = next(iter(models().values()))["steps"]
    for (N, H, r, L), (inst, entries, _) in rows.items():
        assert inst["row"]["verdict"] == "pass", inst["row"]
        assert inst["steps"] == steps and inst["seeds"] == "0,1,2" and sorted(entries) == list(SEEDS)
        assert inst["inputs"] == INPUTS and inst["stream"] == SEED_BASE + N
        assert inst["redrawn"] == fixed_test_set(N)[3], (N, inst["redrawn"], fixed_test_set(N)[3])
        # a passing row's enclosures are as narrow as claimed; the printed ones (9 digits, outward) are wider
        assert inst["width_rule"] <= 1e-6 and (inst["widest"] is None or 0 <= inst["widest"] <= inst["width_rule"]), inst
        for seed, e in entries.items():
            m = models()[(N, H, r, L, seed)]
            assert e["of"] == INPUTS and 0 < e["lo"] <= e["hi"]
            # the record's numbers, printed rounded down to 5 (3 for the seconds) significant digits
            assert printed_down(e["float32"], m["float32_test_mse"], 1e-4), (N, H, r, L, seed)
            assert printed_down(e["train_loss"], m["train_loss"], 1e-4), (N, H, r, L, seed)
            assert printed_down(e["seconds"], m["seconds"], 1e-2), (N, H, r, L, seed)


def test_numpy_mse_lies_in_every_enclosure(claims):
    rows = mse_rows(claims)
    mine = numpy_results()
    checked = 0
    for (N, H, r, L), (_, entries, (spread_lo, spread_hi)) in rows.items():
        for seed, e in entries.items():
            mse, right = mine[(N, H, r, L, seed)]
            assert within(mse, e["lo"], e["hi"]), ((N, H, r, L, seed), e["lo"], mse, e["hi"])
            # the row's approximate binary64 MSE, printed rounded down to 5 digits
            assert -1e-12 <= mse - e["binary64"] <= 1e-4 * mse, ((N, H, r, L, seed), mse, e["binary64"])
            if e["undecided"] == 0:
                assert right == e["right"], ((N, H, r, L, seed), right, e["right"])
            else:
                assert e["right"] <= right <= e["right"] + e["undecided"]
            checked += 1
        vals = [mine[(N, H, r, L, s)][0] for s in SEEDS]
        assert spread_lo * (1 - WIDEN) <= min(vals) and max(vals) <= spread_hi * (1 + WIDEN), ((N, H, r, L), vals)
    assert checked == 54


def test_mpmath_mse_lies_in_the_one_layer_enclosures(claims):
    rows = mse_rows(claims)
    ys, xs, targets, _ = fixed_test_set(4)
    checked = 0
    with mp.workdps(40):
        for H, r in CONFIGS:
            _, entries, _ = rows[(4, H, r, 1)]
            for seed in SEEDS:
                e = entries[seed]
                want = mse_mpmath(models()[(4, H, r, 1, seed)], ys, xs, targets)
                assert mp.mpf(e["lo_text"]) <= want <= mp.mpf(e["hi_text"]), ((H, r, seed), e["lo_text"], want, e["hi_text"])
                assert abs(want - numpy_results()[(4, H, r, 1, seed)][0]) <= 1e-12 * want
                checked += 1
    assert checked == 9


def test_torch_float32_reproduces_the_training_estimate(claims):
    torch = pytest.importorskip("torch")
    rows = mse_rows(claims)
    ys, xs, targets, _ = fixed_test_set(4)
    bad = []
    for H, r in CONFIGS:
        _, entries, _ = rows[(4, H, r, 1)]
        for seed in SEEDS:
            m = models()[(4, H, r, 1, seed)]
            mine = mse_torch_float32(torch, m, ys, xs, targets)
            recorded, printed = m["float32_test_mse"], entries[seed]["float32"]
            # the include file's full value, and the row's 5 digits rounded down
            # (printed <= recorded <= printed / (1 - 1e-4)): both within 1e-4 relative of this recomputation
            near_record = abs(mine - recorded) <= 1e-4 * recorded
            near_print = printed * (1 - 1e-4) <= mine <= printed / (1 - 1e-4) * (1 + 1e-4)
            if not (near_record and near_print):
                bad.append(((H, r, seed), mine, recorded, printed))
    assert not bad, bad


def test_comparisons_reach_the_rows_verdicts(claims):
    mine = {k: v[0] for k, v in numpy_results().items()}
    best = lambda N, H, r, layers: min(mine[(N, H, r, L, s)] for L in layers for s in SEEDS)  # noqa: E731
    full_rank = [c for c in claims if c["claim"] == "trained-full-rank-beats-low-rank"]
    assert len(full_rank) == 4
    seen = set()
    for c in full_rank:
        N = int(re.match(r"d=8, N=(\d+), layers=1, seeds 0-2, 200 test inputs$", c["instance"]).group(1))
        m = COMPARE.match(c["computed"])
        assert m, c["computed"]
        f_up, H, r, l_down = float(m.group(1)), int(m.group(2)), int(m.group(3)), float(m.group(4))
        f, low = best(N, 1, 8, (1,)), best(N, H, r, (1,))
        assert f <= f_up * (1 + WIDEN) and low >= l_down * (1 - WIDEN), (c["instance"], f, f_up, low, l_down)
        assert c["verdict"] == verdict_of(f, low), (c["instance"], c["verdict"], f, low)
        seen.add((N, H, r))
    assert seen == {(N, H, r) for N in SIZES for H, r in CONFIGS[1:]}
    depth = {int(re.match(r"d=8, N=(\d+), H=8, r=1, layers=2-3 against 1", c["instance"]).group(1)): c
             for c in claims if c["claim"] == "trained-depth-helps-low-rank"}
    assert sorted(depth) == list(SIZES)
    for N, c in depth.items():
        deeper, one = best(N, 8, 1, (2, 3)), best(N, 8, 1, (1,))
        text = c["computed"] if N == 4 else c["note"].split("outcome: ", 1)[1]
        m = DEPTH.match(text)
        assert m, text
        assert deeper <= float(m.group(1)) * (1 + WIDEN) and one >= float(m.group(2)) * (1 - WIDEN), (N, deeper, one, text)
        if N == 4:
            assert c["verdict"] == verdict_of(deeper, one), (c["verdict"], deeper, one)
        else:
            assert c["verdict"] == "skipped" and "not claimed at N = 16" in c["note"]


def test_negative_control_a_changed_readout_weight_leaves_the_enclosure(claims):
    """Test 3 can fail: the readout weight of the one-layer full-rank N = 4 seed-0 model with the largest first-order
    effect on the MSE, multiplied by 1 + 1e-6, moves the NumPy MSE out of the row's enclosure."""
    rows = mse_rows(claims)
    key = (4, 1, 8, 1, 0)
    m = models()[key]
    e = rows[key[:4]][1][0]
    ys, xs, targets, _ = fixed_test_set(4)
    pred, q = forward_numpy(m, ys, xs)
    t = xs[np.arange(INPUTS), targets]
    grad = 2 / INPUTS * q.T @ (pred - t)  # d MSE / d Wr
    i, j = np.unravel_index(np.argmax(np.abs(grad * m["Wr"])), m["Wr"].shape)
    Wr = m["Wr"].copy()
    Wr[i, j] *= 1 + 1e-6
    before = mse_and_right(pred, ys, xs, targets)[0]
    after = mse_and_right(forward_numpy(m, ys, xs, Wr)[0], ys, xs, targets)[0]
    assert within(before, e["lo"], e["hi"])
    assert not within(after, e["lo"], e["hi"]), (e["lo"], before, after, e["hi"])
    assert abs((after - before) - grad[i, j] * m["Wr"][i, j] * 1e-6) <= 1e-3 * abs(after - before)
