"""attncert.audit on models the test builds and runs: a tiny transformer trained here on associative recall (the
article's section 12 target family), a grouped-query attention module on attncert.scaled_dot_product_attention,
and a GPT-style block through torch's and attncert's scaled_dot_product_attention.  Every number checked is
recomputed independently (float64 or 200-bit mpmath) from the captured tensors or from the modules' own weights."""
import math
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mpmath = pytest.importorskip("mpmath")
nn = torch.nn
F = torch.nn.functional

import attncert  # noqa: E402

OUTCOMES = {"rank-kept/within-tolerance", "rank-kept/exceeds-tolerance", "rank-reduced/adequate",
            "rank-reduced/inadequate", "undecided"}
OBJECTS = ("scores", "attention", "values", "output")
SPEC = {"policies": "numpy"}


# ---------------------------------------------------------------------------------------------- helpers

def heads_of(report_dict, layer):
    return {(h["batch"], h["head"]): h for h in report_dict["layers"][layer]["heads"]}


def softmax_f64(q, k, causal=False):
    """softmax(q k^T / sqrt(d)) in float64 of one head's captured q (n_q, d) and k (n_k, d)."""
    q, k = q.astype(np.float64), k.astype(np.float64)
    s = q @ k.T / math.sqrt(q.shape[1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape, dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def mp_max_row_norm(v):
    """max_j ||v_j||_2 at 200 bits."""
    with mpmath.workprec(200):
        return max(mpmath.sqrt(mpmath.fsum(mpmath.mpf(float(x)) ** 2 for x in row)) for row in v)


def mp_relative_output_error(q, k, v, w, causal):
    """max_i ||((W - A) V)_i||_2 / max_j ||v_j||_2 at 200 bits: W the captured probabilities, A = softmax(q k^T /
    sqrt(d)) (causal: keys j <= i) of the captured q, k."""
    with mpmath.workprec(200):
        c = 1 / mpmath.sqrt(q.shape[1])
        worst = mpmath.mpf(0)
        for i in range(q.shape[0]):
            keys = range(i + 1) if causal else range(k.shape[0])
            s = [c * mpmath.fsum(mpmath.mpf(float(a)) * mpmath.mpf(float(b)) for a, b in zip(q[i], k[j]))
                 for j in keys]
            top = max(s)
            e = [mpmath.exp(x - top) for x in s]
            z = mpmath.fsum(e)
            diff = [mpmath.mpf(float(w[i, j])) - (e[j] / z if j < len(e) else 0) for j in range(k.shape[0])]
            row = [mpmath.fsum(diff[j] * mpmath.mpf(float(v[j, t])) for j in range(k.shape[0])) for t in range(v.shape[1])]
            worst = max(worst, mpmath.sqrt(mpmath.fsum(x ** 2 for x in row)))
        return worst / mp_max_row_norm(v)


def exact_rank(m):
    """The rank of a matrix of binary floats (exact rationals), by Gaussian elimination over the rationals."""
    rows = [[Fraction(float(x)) for x in row] for row in m]
    rank, cols = 0, len(rows[0]) if rows else 0
    for c in range(cols):
        pivot = next((r for r in range(rank, len(rows)) if rows[r][c] != 0), None)
        if pivot is None:
            continue
        rows[rank], rows[pivot] = rows[pivot], rows[rank]
        for r in range(rank + 1, len(rows)):
            f = rows[r][c] / rows[rank][c]
            if f:
                rows[r] = [a - f * b for a, b in zip(rows[r], rows[rank])]
        rank += 1
    return rank


def exact_product(a, b):
    """a b^T of binary floats, exactly (Fractions)."""
    a = [[Fraction(float(x)) for x in row] for row in a]
    b = [[Fraction(float(x)) for x in row] for row in b]
    return [[sum((x * y for x, y in zip(r, s)), Fraction(0)) for s in b] for r in a]


def encloses(interval, x):
    with mpmath.workprec(200):
        return mpmath.mpf(interval["lo"]) <= x <= mpmath.mpf(interval["hi"])


def width(interval):
    with mpmath.workprec(200):
        return mpmath.mpf(interval["hi"]) - mpmath.mpf(interval["lo"])


def check_report_structure(d):
    """The controls passed, every head's outcome is a class of the article with its explanation and is the class
    its own reported numbers imply, every exact rank is an interval inside the shape's bound."""
    assert d["controls"] and all(c["passed"] for c in d["controls"])
    assert d["summary"]["controls_passed"] == d["summary"]["controls"] == len(d["controls"])
    counted = {}
    for layer in d["layers"]:
        assert layer["heads"]
        for h in layer["heads"]:
            assert h["outcome"] in OUTCOMES
            assert isinstance(h["why"], str) and h["why"].strip(), h  # decided or undecided: always explained
            assert h["outcome"] == outcome_from_numbers(h, d["spec"]["allowable_output_error"]), h["why"]
            counted[h["outcome"]] = counted.get(h["outcome"], 0) + 1
            for name in OBJECTS:
                o = h["objects"][name]
                lo, hi = o["exact_rank"]["lo"], o["exact_rank"]["hi"]
                assert 0 <= lo <= hi <= min(o["shape"]), (name, o["exact_rank"], o["shape"])
    assert counted == d["summary"]["outcomes"]


def outcome_from_numbers(h, allowance, fmt="binary32", policy="numpy"):
    """The outcome class the head's own reported numbers imply: rank kept when the numerical rank of the attention
    (the model's format, the first policy) equals its exact rank, reduced when below the exact rank's lower end;
    within the allowance when the relative output error's upper end is at most it, beyond when its lower end
    exceeds it; anything else undecided."""
    att = h["objects"]["attention"]
    (nr,) = [e["rank"] for e in att["numerical_ranks"] if e["format"] == fmt and e["policy"] == policy]
    lo, hi = att["exact_rank"]["lo"], att["exact_rank"]["hi"]
    kept = True if lo == hi == nr else False if nr < lo else None
    err = h["output_error"]
    ok = None
    if err.get("computed"):
        lo_e, hi_e = float(err["relative"]["lo"]), float(err["relative"]["hi"])
        ok = True if hi_e <= allowance else False if lo_e > allowance else None
    if kept is None or ok is None:
        return "undecided"
    return {(True, True): "rank-kept/within-tolerance", (True, False): "rank-kept/exceeds-tolerance",
            (False, True): "rank-reduced/adequate", (False, False): "rank-reduced/inadequate"}[kept, ok]


def comparable(h):
    """A head's audit numbers that depend on q, k, v, mask and scale only (not on the captured weights)."""
    objs = {name: {key: h["objects"][name][key] for key in ("exact_rank", "singular_values", "singular_values_decided",
                                                           "numerical_ranks", "shape", "mask")}
            for name in OBJECTS}
    return h["kv_head"], objs, h["value_scale"]


# ---------------------------------------------------------------------------------------------- 1. associative recall

N_KEYS, N_VALUES, PAIRS = 8, 8, 3
SEQ = 2 * PAIRS + 1  # k1 v1 k2 v2 k3 v3 query-key
EMBED, HEADS, LAYERS = 32, 2, 2
STEPS, BATCH, LR, SEED = 1000, 64, 3e-3, 0


def recall_batch(gen, b):
    """(tokens (b, SEQ), target value (b,), index of the queried pair (b,)): PAIRS distinct keys (tokens
    0..N_KEYS-1), each followed by its value (tokens N_KEYS..), then one of the keys again."""
    keys = torch.argsort(torch.rand(b, N_KEYS, generator=gen), dim=1)[:, :PAIRS]
    vals = torch.randint(0, N_VALUES, (b, PAIRS), generator=gen)
    which = torch.randint(0, PAIRS, (b,), generator=gen)
    x = torch.empty(b, SEQ, dtype=torch.long)
    x[:, 0:2 * PAIRS:2] = keys
    x[:, 1:2 * PAIRS:2] = N_KEYS + vals
    rows = torch.arange(b)
    x[:, -1] = keys[rows, which]
    return x, vals[rows, which], which


class Recall(nn.Module):
    """Token embedding + learned positions, LAYERS x (MultiheadAttention with a residual), a linear readout of
    the last position."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(N_KEYS + N_VALUES, EMBED)
        self.pos = nn.Parameter(torch.randn(SEQ, EMBED))
        self.attn = nn.ModuleList([nn.MultiheadAttention(EMBED, HEADS, batch_first=True) for _ in range(LAYERS)])
        self.out = nn.Linear(EMBED, N_VALUES)

    def forward(self, x):
        h = self.tok(x) + self.pos
        for a in self.attn:
            h = h + a(h, h, h, need_weights=False)[0]
        return self.out(h[:, -1])


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(-1) == y).double().mean().item()


@pytest.fixture(scope="module")
def recall():
    """(untrained copy, trained model, held-out tokens, targets, queried pair): trained with Adam for a fixed number
    of steps on fresh batches; the held-out sequences exclude every sequence seen in training."""
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        model = Recall()
        untrained = Recall()
        untrained.load_state_dict(model.state_dict())
        opt = torch.optim.Adam(model.parameters(), lr=LR)
        gen = torch.Generator().manual_seed(SEED + 1)
        seen = set()
        for _ in range(STEPS):
            x, y, _ = recall_batch(gen, BATCH)
            seen.update(map(tuple, x.tolist()))
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        x, y, which = recall_batch(torch.Generator().manual_seed(SEED + 2), 1000)
        fresh = torch.tensor([tuple(row) not in seen for row in x.tolist()])
        assert fresh.sum() >= 800  # the sequence space (336 * 512 * 3) is much larger than what training saw
        return untrained, model, x[fresh], y[fresh], which[fresh]


def test_recall_model_learns_the_task(recall):
    untrained, model, x, y, _ = recall
    assert accuracy(model, x, y) >= 0.8  # chance: 1 / N_VALUES
    assert accuracy(untrained, x, y) < 0.5  # the skill was learned, not there from the start


def capture_recall(model, x):
    with torch.enable_grad(), attncert.capture(model) as cap:  # grad on: MultiheadAttention takes no fused path
        logits = model(x)
    with torch.no_grad():
        assert torch.equal(logits, model(x))  # capturing changed nothing
    assert [c.name for c in cap.calls] == ["attn.%d" % i for i in range(LAYERS)]
    return cap


def pair_mass(cap, which):
    """Per sequence and head: the mass the query position (last) puts on the queried key-value pair in the last
    layer, from softmax(q k^T / sqrt(d)) computed in float64 from the captured q, k; checked against the model's own
    captured probabilities."""
    c = cap.calls[-1]
    mass = np.zeros((c.batch, c.heads))
    for b in range(c.batch):
        j = 2 * int(which[b])
        for h in range(c.heads):
            a = softmax_f64(c.q[b, h], c.k[b, h])
            np.testing.assert_allclose(c.weights[b, h], a, rtol=0, atol=1e-5)
            mass[b, h] = a[-1, j] + a[-1, j + 1]
    return mass


B_AUDIT = 8


@pytest.fixture(scope="module")
def recall_audit(recall):
    _, model, x, y, which = recall
    cap = capture_recall(model, x[:B_AUDIT])
    return cap, which[:B_AUDIT], attncert.audit(cap, spec=SPEC).to_dict()


def test_recall_audit_is_complete_and_explained(recall_audit):
    cap, _, d = recall_audit
    check_report_structure(d)
    assert len(d["layers"]) == LAYERS
    for li, c in enumerate(cap.calls):
        hs = heads_of(d, li)
        assert sorted(hs) == [(b, h) for b in range(B_AUDIT) for h in range(HEADS)]
        for (b, h), hd in hs.items():
            assert hd["kv_head"] == h
            assert hd["output_error"]["computed"] is True  # weights were captured (dropout 0, weights=True)
            # scores = c Q K^T (c = 1/sqrt(d) != 0) and V: their ranks, computed exactly over the rationals from
            # the captured float32 q, k, v, are what the audit certifies
            want = {"scores": exact_rank(exact_product(c.q[b, h], c.k[b, h])), "values": exact_rank(c.v[b, h])}
            got = {o: hd["objects"][o]["exact_rank"] for o in want}
            assert {o: (e["lo"], e["hi"]) for o, e in got.items()} == {o: (r, r) for o, r in want.items()}, (li, b, h)


def test_recall_value_scale_encloses_the_200_bit_norm(recall_audit):
    cap, _, d = recall_audit
    for li, c in enumerate(cap.calls):
        for (b, h), hd in heads_of(d, li).items():
            exact = mp_max_row_norm(c.v[b, h])
            assert encloses(hd["value_scale"], exact), (li, b, h, hd["value_scale"], exact)
            assert width(hd["value_scale"]) <= mpmath.mpf("1e-15") * exact


def test_recall_query_attends_to_the_queried_pair(recall, recall_audit):
    """What was learned, seen in the last layer: per sequence, a head whose query position (attention recomputed from
    the captured q, k) puts most of its mass on the queried key-value pair, where the untrained copy spreads it.  The
    audit's output object of that head agrees with the retrieved row: its certified largest singular value is at
    least the norm of the query's output row (sigma_1(M) >= ||M_i||_2 for every row i) and at most the Frobenius
    norm of the head output."""
    untrained, _, x, _, _ = recall
    cap, which, d = recall_audit
    mass = pair_mass(cap, which)
    before = pair_mass(capture_recall(untrained, x[:B_AUDIT]), which).max(axis=1).mean()
    # attention spread evenly over the 7 positions would put 2/7 on the pair
    assert mass.max(axis=1).mean() >= 0.7 and before < 0.6, (mass, before)
    c, hd = cap.calls[-1], heads_of(d, LAYERS - 1)
    for b in range(B_AUDIT):
        h = int(mass[b].argmax())
        out = softmax_f64(c.q[b, h], c.k[b, h]) @ c.v[b, h].astype(np.float64)  # the exact head output A V
        slack = 1e-12 * np.linalg.norm(out)  # float64 rounding of a 7 x 7 softmax and a 7 x 16 product
        sv = hd[(b, h)]["objects"]["output"]["singular_values"][0]
        assert float(sv["hi"]) >= np.linalg.norm(out[-1]) - slack
        assert float(sv["lo"]) <= np.linalg.norm(out) + slack


# ------------------------------------------------------------------------------------------- 2. grouped-query attention

class GQA(nn.Module):
    """4 query heads sharing 2 key/value heads, explicit projections, causal attncert.scaled_dot_product_attention."""

    def __init__(self, embed=32, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, embed // heads
        self.q = nn.Linear(embed, heads * self.d)
        self.k = nn.Linear(embed, kv_heads * self.d)
        self.v = nn.Linear(embed, kv_heads * self.d)
        self.o = nn.Linear(heads * self.d, embed)

    def split(self, t, h):
        B, L, _ = t.shape
        return t.reshape(B, L, h, self.d).transpose(1, 2)

    def forward(self, x):
        q = self.split(self.q(x), self.heads)
        k, v = self.split(self.k(x), self.kv_heads), self.split(self.v(x), self.kv_heads)
        y = attncert.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        B, H, L, d = y.shape
        return self.o(y.transpose(1, 2).reshape(B, L, H * d))


def test_gqa_heads_share_their_kv_head():
    with torch.random.fork_rng():
        torch.manual_seed(5)
        model = GQA()
        x = torch.randn(2, 6, 32)
    with torch.no_grad():
        plain = model(x)
        with attncert.capture(model) as cap:
            captured = model(x)
        with attncert.capture(model, weights=False) as cap_nw:
            captured_nw = model(x)
    assert torch.equal(plain, captured) and torch.equal(plain, captured_nw)  # bit-identical
    (c,) = cap.calls
    assert c.kind == "attncert.scaled_dot_product_attention" and c.mask_kind == "causal" and len(cap_nw.calls) == 1
    assert (c.heads, c.kv_heads, c.n_q, c.head_dim) == (4, 2, 6, 8)
    assert cap_nw.calls[0].weights is None
    # the values as the module's own v projection gives them (recomputed outside the capture), and in float64
    with torch.no_grad():
        v_own = model.split(model.v(x), 2).numpy()
    assert np.array_equal(c.v, v_own)
    v64 = x.double().numpy() @ model.v.weight.detach().double().numpy().T + model.v.bias.detach().double().numpy()
    v64 = v64.reshape(2, 6, 2, 8).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(v_own, v64, rtol=0, atol=1e-5)

    d = attncert.audit(cap, spec=SPEC).to_dict()
    check_report_structure(d)
    hs = heads_of(d, 0)
    assert sorted(hs) == [(b, h) for b in range(2) for h in range(4)]
    causal = np.tril(np.ones((6, 6), dtype=bool))
    for (b, h), hd in hs.items():
        g = h // 2  # torch's enable_gqa: query head h uses kv head h // (H / H_kv)
        assert hd["kv_head"] == g
        partner = hs[(b, h ^ 1)]  # the other query head of the same group
        assert hd["value_scale"] == partner["value_scale"]
        assert hd["objects"]["values"] == partner["objects"]["values"]
        assert encloses(hd["value_scale"], mp_max_row_norm(v_own[b, g]))
        # a different kv head has different values: the value scale tells the groups apart
        assert hd["value_scale"] != hs[(b, (h + 2) % 4)]["value_scale"]
        # the weights are the very probabilities the call used: softmax of q_h against k_g, causal
        a = softmax_f64(c.q[b, h], c.k[b, g], causal=True)
        np.testing.assert_allclose(c.weights[b, h], a, rtol=0, atol=1e-6)
        assert np.all(c.weights[b, h][~causal] == 0)
        # the output error of the call's own probabilities against the exact ones, paired with v of kv head g
        rel = mp_relative_output_error(c.q[b, h], c.k[b, g], c.v[b, g], c.weights[b, h], causal=True)
        assert hd["output_error"]["computed"] is True
        assert encloses(hd["output_error"]["relative"], rel), (b, h, hd["output_error"], rel)
        assert rel < 1e-5  # float32 rounding only
        assert hd["outcome"] != "undecided", hd["why"]
        # causal attention on 6 positions: lower triangular, positive diagonal -> rank 6 exactly
        e = hd["objects"]["attention"]["exact_rank"]
        assert e["lo"] == e["hi"] == 6
    # without weights the same numbers, and the error side is open: undecided, with its reason
    d_nw = attncert.audit(cap_nw, spec=SPEC).to_dict()
    for key, hd in heads_of(d_nw, 0).items():
        assert comparable(hd) == comparable(hs[key])
        assert hd["outcome"] == "undecided" and hd["why"].strip()


# ---------------------------------------------------------------------------------------------- 3. GPT-style block

def reference_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """torch 2.x's documented scaled_dot_product_attention (no mask, no dropout, no GQA needed here), written out:
    the stand-in for torch's function where torch has none."""
    assert attn_mask is None and dropout_p == 0.0 and scale is None and not enable_gqa
    L, S = query.shape[-2], key.shape[-2]
    s = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if is_causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, dim=-1) @ value


class GPT(nn.Module):
    """Token and position embeddings, one pre-norm block (explicit Q, K, V projections, causal attention, MLP),
    a readout; `attention` picks the scaled_dot_product_attention it calls."""

    def __init__(self, attention, vocab=16, n=8, embed=32, heads=4):
        super().__init__()
        self.attention, self.heads = attention, heads
        self.tok, self.pos = nn.Embedding(vocab, embed), nn.Parameter(0.5 * torch.randn(n, embed))
        self.ln1, self.ln2, self.ln_f = nn.LayerNorm(embed), nn.LayerNorm(embed), nn.LayerNorm(embed)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(embed, embed) for _ in range(4))
        self.mlp = nn.Sequential(nn.Linear(embed, 2 * embed), nn.GELU(), nn.Linear(2 * embed, embed))
        self.head = nn.Linear(embed, vocab, bias=False)

    def forward(self, ids):
        B, L = ids.shape
        x = self.tok(ids) + self.pos[:L]
        h = self.ln1(x)
        q, k, v = (w(h).reshape(B, L, self.heads, -1).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        fn = attncert.scaled_dot_product_attention if self.attention == "attncert" else F.scaled_dot_product_attention
        y = fn(q, k, v, is_causal=True)
        x = x + self.wo(y.transpose(1, 2).reshape(B, L, -1))
        x = x + self.mlp(self.ln2(x))
        return self.head(self.ln_f(x))


def gpt_run(attention):
    with torch.random.fork_rng():
        torch.manual_seed(11)
        model = GPT(attention)
        ids = torch.randint(0, 16, (2, 8))
    with torch.no_grad():
        plain = model(ids)
        with attncert.capture(model) as cap:
            captured = model(ids)
    assert torch.equal(plain, captured)
    (c,) = cap.calls
    assert c.name == "" and c.mask_kind == "causal" and (c.heads, c.kv_heads, c.n_q, c.head_dim) == (4, 4, 8, 8)
    return cap


@pytest.mark.parametrize("torch_sdpa", ["torch", "reference stand-in"])
def test_gpt_block_same_audit_through_both_sdpas(torch_sdpa, monkeypatch):
    if torch_sdpa == "torch" and not hasattr(F, "scaled_dot_product_attention"):
        pytest.skip("torch %s has no torch.nn.functional.scaled_dot_product_attention (torch >= 2.0)"
                    % torch.__version__)
    if torch_sdpa == "reference stand-in":  # capture's torch-SDPA path, on any torch
        monkeypatch.setattr(F, "scaled_dot_product_attention", reference_sdpa, raising=False)
    cap_t, cap_a = gpt_run("torch"), gpt_run("attncert")
    ct, ca = cap_t.calls[0], cap_a.calls[0]
    assert ct.kind == "scaled_dot_product_attention" and ca.kind == "attncert.scaled_dot_product_attention"
    assert ct.weights is None and ca.weights is not None
    # the same projections of the same input: the same q, k, v bits, so the audits must agree
    for key in ("q", "k", "v"):
        assert np.array_equal(getattr(ct, key), getattr(ca, key)), key
    np.testing.assert_allclose(ct.output, ca.output, rtol=0, atol=1e-5)
    d_t = attncert.audit(cap_t, spec=SPEC).to_dict()
    d_a = attncert.audit(cap_a, spec=SPEC).to_dict()
    check_report_structure(d_t)
    check_report_structure(d_a)
    ht, ha = heads_of(d_t, 0), heads_of(d_a, 0)
    assert sorted(ht) == sorted(ha) == [(b, h) for b in range(2) for h in range(4)]
    for key in ht:
        assert comparable(ht[key]) == comparable(ha[key]), key
        # causal attention (the recorded mask: exactly j <= i) on 8 positions is lower triangular with a positive
        # diagonal (softmax of finite scores; the model's own probabilities show it): its determinant is the product
        # of the diagonal, so its rank is 8 exactly
        b, h = key
        assert np.array_equal(ca.allowed[0, 0], np.tril(np.ones((8, 8), dtype=bool)))
        assert np.all(np.triu(ca.weights[b, h], 1) == 0) and np.all(np.diag(ca.weights[b, h]) > 0)
        e = ha[key]["objects"]["attention"]["exact_rank"]
        assert e["lo"] == e["hi"] == 8
        # the record of torch's SDPA has no probabilities: the error side, hence the outcome, stays open;
        # attncert's records the probabilities it used, so its outcome is decided
        assert ht[key]["outcome"] == "undecided" and ht[key]["output_error"]["computed"] is False
        assert ha[key]["outcome"] != "undecided", ha[key]["why"]
        assert float(ha[key]["output_error"]["relative"]["hi"]) < 1e-5
